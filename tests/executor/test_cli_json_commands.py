"""``--json`` on ``apply``, ``diff`` and ``discard``: the shapes the MCP tools return, errors as
the one error object, the exit codes unchanged (real git, real runs on the host backend)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exec_support import agent_file, call, git, script

from executor.cli import cli, main


def corral(*args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    try:
        data = json.loads(result.stdout)
    except json.JSONDecodeError:
        data = result.stdout
    return result.exit_code, data, result.stderr


def _run(repo: Path, tmp_path: Path, name: str, path: str, content: str) -> str:
    turns = script(tmp_path, name, call("write_file", path=path, content=content),
                   {"text": "done"})
    code, data, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                             "--agent", "w", "--backend", "host", "--json", "--script",
                             turns, "write")
    assert code == 0, err
    return str(data["run_id"])


def test_diff_apply_and_discard_print_json(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [read_file, write_file]")
    first = _run(repo, tmp_path, "one", "n.txt", "n\x1b[31m\n")
    root = ("--root", str(repo))

    code, diff, _ = corral("diff", first, *root, "--json")
    assert code == 0
    assert diff["run_id"] == first and diff["empty"] is False and diff["state"] == "pending"
    assert diff["diff"].startswith("diff --git a/n.txt b/n.txt")
    assert "\x1b" in diff["diff"] and "diff_base64" not in diff  # UTF-8: the text is exact
    assert [f["path"] for f in diff["changed_files"]] == ["n.txt"]
    raw = CliRunner().invoke(cli, ["diff", first, *root, "--json"]).stdout
    assert raw.isascii() and "\\u001b" in raw  # a control character never reaches a terminal

    code, checked, _ = corral("apply", first, *root, "--check", "--json")
    assert code == 0
    assert checked["status"] == "checked" and checked["applied"] is False
    assert [f["path"] for f in checked["files"]] == ["n.txt"]
    assert not (repo / "n.txt").exists()
    code, applied, err = corral("apply", first, *root, "--json")
    assert code == 0 and err == ""  # no text beside the JSON
    assert applied["status"] == "applied" and applied["state"] == "applied"
    assert (repo / "n.txt").read_text() == "n\x1b[31m\n"
    code, again, _ = corral("apply", first, *root, "--json")
    assert code == 0 and again["status"] == "already_applied"

    second = _run(repo, tmp_path, "two", "m.txt", "m\n")
    code, branched, _ = corral("apply", second, *root, "--branch", "from-json", "--json")
    assert code == 0 and branched["branch"] == "from-json"
    assert git(repo, "rev-parse", "from-json").strip() == branched["commit"]
    code, discarded, _ = corral("discard", second, *root, "--json")
    assert code == 0
    assert discarded == {"run_id": second, "state": "discarded", "already_discarded": False,
                         "changed_files": 1}
    code, twice, _ = corral("discard", second, *root, "--json")
    assert code == 0 and twice["already_discarded"] is True


def test_a_diff_that_is_not_utf8_carries_its_exact_bytes(repo: Path, tmp_path: Path) -> None:
    """The JSON text of a binary-ish diff replaces bytes; ``diff_base64`` is exact."""
    agent_file(repo, "w", "tools: [read_file, write_file, shell]")
    turns = script(tmp_path, "bytes", call("shell", command="printf 'a\\377b\\n' > raw.txt"),
                   {"text": "done"})
    code, data, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                             "--agent", "w", "--backend", "host", "--json", "--script",
                             turns, "write")
    assert code == 0, err
    run_id = data["run_id"]
    code, diff, _ = corral("diff", run_id, "--root", str(repo), "--json")
    exact = CliRunner().invoke(cli, ["diff", run_id, "--root", str(repo)]).stdout_bytes
    assert code == 0 and b"a\xffb" in exact
    assert base64.b64decode(diff["diff_base64"]) == exact
    assert "\ufffd" in diff["diff"]


def test_errors_are_the_one_json_error_object(repo: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Through the real entry point (its one error renderer): a user error is exit 2 and
    one ``{"error": ...}`` object on stdout, for each command."""
    for args in (["apply", "nope"], ["diff", "nope"], ["discard", "nope"],
                 ["apply", "f-nope"]):
        code: object = 0
        try:
            main([*args, "--root", str(repo), "--json"])
        except SystemExit as exc:
            code = exc.code
        data = json.loads(capsys.readouterr().out)
        assert code == 2, (args, data)
        assert set(data) == {"error"} and data["error"]["exit_code"] == 2, data


def test_a_fanouts_diffs_and_discard_print_json(repo: Path, tmp_path: Path) -> None:
    """A fanout id: every child's diff with its index, agent and check; a discard names the
    children it discarded."""
    agent_file(repo, "w", "tools: [read_file, write_file]")
    one = script(tmp_path, "one", call("write_file", path="a.txt", content="a\n"),
                 {"text": "a"})
    two = script(tmp_path, "two", call("write_file", path="b.txt", content="b\n"),
                 {"text": "b"})
    code, data, err = corral("fanout", "--root", str(repo), "--trust-project", "--no-personal",
                             "--agent", "w", "--backend", "host", "--script", one,
                             "--script", two, "--json", "write")
    assert code == 0, err
    fanout_id = data["fanout_id"]
    root = ("--root", str(repo))
    code, diffs, _ = corral("diff", fanout_id, *root, "--json")
    assert code == 0 and diffs["fanout_id"] == fanout_id
    assert [(c["index"], c["agent"], c["changed_files"][0]["path"]) for c in
            diffs["children"]] == [(1, "w", "a.txt"), (2, "w", "b.txt")]
    code, second, _ = corral("diff", fanout_id, *root, "--pick", "2", "--json")
    assert code == 0 and (second["fanout_id"], second["pick"]) == (fanout_id, 2)
    assert second["run_id"] == diffs["children"][1]["run_id"]
    code, discarded, _ = corral("discard", fanout_id, *root, "--json")
    assert code == 0
    assert discarded == {"fanout_id": fanout_id,
                         "discarded": [c["run_id"] for c in diffs["children"]]}
