"""``corral run / runs / show / diff`` through the CLI, with scripted replays (no model key)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file

from executor.cli import cli
from executor.ledger import ledger_dir

RUN_KEYS = {"run_id", "agent", "status", "final_text", "diff", "changed_files", "denied_calls"}


def script(tmp_path: Path, turns: list[dict[str, object]]) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(turns))
    return path


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


WRITE_TURNS: list[dict[str, object]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "n\n"}},
                    {"name": "Shell", "arguments": {"command": "id"}}]},
    {"text": "wrote n.txt"},
]


def test_run_json_runs_show_and_diff(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [read_file, write_file]")
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "w", "--backend", "host", "--json",
                            "--script", str(script(tmp_path, WRITE_TURNS)), "write a note")
    assert code == 4, err  # completed, with a denied call (the exit codes of docs/errors.md)
    assert "isolates changes, not processes" in err  # the host backend says so
    data = json.loads(out)
    assert set(data) >= RUN_KEYS
    assert data["status"] == "completed" and data["final_text"] == "wrote n.txt"
    assert data["denied_calls"] == [{"tool": "Shell",
                                     "reason": "tool 'Shell' is not available to this agent"}]
    assert [f["path"] for f in data["changed_files"]] == ["n.txt"]
    run_id = data["run_id"]
    assert not (repo / "n.txt").exists()

    code, out, _ = corral("runs", "--root", str(repo))
    assert run_id in out and "completed" in out
    code, out, _ = corral("show", run_id[:15], "--root", str(repo), "--json")
    record = json.loads(out)
    assert record["transcript"][2]["tool_calls"][0]["name"] == "write_file"
    assert [a["decision"] for a in record["audit"]] == ["allowed", "denied"]
    code, out, _ = corral("show", run_id, "--root", str(repo))
    assert "write_file" in out and "-> denied" in out
    code, patch, _ = corral("diff", run_id, "--root", str(repo))
    assert code == 0 and patch.startswith("diff --git a/n.txt b/n.txt")
    applied = subprocess.run(["git", "apply", "--check", "-"], input=patch, text=True,
                             cwd=repo, capture_output=True, check=False)
    assert applied.returncode == 0, applied.stderr


def test_run_with_approval_policy(repo: Path, tmp_path: Path) -> None:
    ngn = repo / ".ngn/config.json"
    ngn.parent.mkdir(parents=True, exist_ok=True)
    agent_file(repo, "careful", "tools: [shell, read_file]")
    zuno = repo / ".zuno/zuno.json"
    zuno.parent.mkdir(parents=True, exist_ok=True)
    zuno.write_text(json.dumps({"agents": {"asker": {"permission": {"rules": {"shell": "ask"}}}}}))
    turns = script(tmp_path, [{"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]},
                              {"text": "done"}])
    base = ["run", "--root", str(repo), "--trust-project", "--no-personal", "--agent", "asker",
            "--backend", "host", "--json", "--script", str(turns)]
    data = json.loads(corral(*base, "go")[1])
    assert data["denied_calls"][0]["reason"].endswith("this run has no approver")
    data = json.loads(corral(*base, "--approve", "always-for=shell", "go")[1])
    assert data["denied_calls"] == []
    data = json.loads(corral(*base, "--approve", "never", "go")[1])
    assert "was not approved" in data["denied_calls"][0]["reason"]


@pytest.mark.parametrize(("args", "message"), [
    (["--agent", "nope"], "no agent named 'nope'"),
    (["--agent", "w", "--model", "x", "--script", "s.yaml"], "exclusive"),
    (["--agent", "w", "--approve", "sometimes"], "--approve"),
])
def test_run_user_errors_fail_before_side_effects(repo: Path, args: list[str],
                                                  message: str) -> None:
    agent_file(repo, "w", "tools: [read_file]")
    result = CliRunner().invoke(cli, ["run", "--root", str(repo), "--trust-project",
                                      "--no-personal", "--backend", "host", *args, "go"])
    assert result.exit_code != 0
    assert message in (result.output + str(result.exception))
    assert not ledger_dir(repo).exists()  # nothing recorded


def test_foreign_model_needs_an_override(repo: Path) -> None:
    path = repo / ".claude/agents/c.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: c\ndescription: d\nmodel: sonnet\n---\nx\n")
    result = CliRunner().invoke(cli, ["run", "--root", str(repo), "--trust-project",
                                      "--no-personal", "--backend", "host", "--agent", "c", "go"])
    assert result.exit_code != 0
    assert "sonnet" in str(result.exception)
