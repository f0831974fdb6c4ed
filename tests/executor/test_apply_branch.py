"""``corral apply RUN --branch NAME`` (issue 19): "the run's diff as a commit on a new branch
from the run's base (author and message say which run), without touching the working tree
or index". Driven through the real CLI; the checkout is hashed before and after."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from apply_support import corral as apply_corral
from apply_support import record_patch
from click.testing import CliRunner
from exec_support import agent_file, git, tree_digest

from executor.cli import cli
from executor.ledger import RunRecord, RunStatus, ledger_dir, new_run_id, write_run
from executor.ledger.records import running_owner
from tests.timescale import scaled


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def entry(*args: str) -> tuple[int, str, str]:
    """The ``corral`` command itself (errors rendered by its entry point)."""
    done = subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True,
                          text=True, timeout=scaled(60), check=False)
    return done.returncode, done.stdout, done.stderr


def _run(repo: Path, tmp_path: Path, turns: list[dict[str, Any]]) -> dict[str, Any]:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump(turns))
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "w", "--backend", "host", "--json", "--script",
                            str(script), "go: add notes")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path,
                                                                "content": content}}]}


def _state(repo: Path) -> tuple[str, str, str]:
    """The working tree (every file, .git excluded), the index's bytes, and every ref."""
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    return tree_digest(repo, exclude=".git"), index, git(repo, "show-ref", "--head")


def test_a_branch_holds_the_diff_and_the_checkout_is_byte_identical(
        repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    # Your own work in progress, staged and not: none of it may move.
    (repo / "README.md").write_text("# Project\n\nmine, staged\n")
    git(repo, "add", "README.md")
    (repo / "src" / "app.py").write_text("def main():\n    return 2  # mine\n")
    (repo / "scratch.txt").write_text("untracked\n")
    ran = _run(repo, tmp_path, [_write("docs/notes.md", "# Notes\n"), {"text": "done"}])
    run_id, head = ran["run_id"], git(repo, "rev-parse", "HEAD").strip()
    before = _state(repo)

    code, _, err = corral("apply", run_id, "--root", str(repo), "--branch", "corral/notes")
    assert code == 0, err
    assert "made branch corral/notes" in err and "working tree and index are unchanged" in err
    after = _state(repo)
    assert after[:2] == before[:2]  # the working tree and the index, byte for byte
    refs = dict(line.split()[::-1] for line in after[2].splitlines())
    assert {k: v for k, v in refs.items() if k != "refs/heads/corral/notes"} == dict(
        line.split()[::-1] for line in before[2].splitlines())
    assert git(repo, "rev-parse", "corral/notes~1").strip() == head  # from HEAD
    assert git(repo, "diff", "--name-only", "corral/notes~1", "corral/notes").split() == [
        "docs/notes.md"]
    assert git(repo, "show", "corral/notes:docs/notes.md") == "# Notes\n"
    log = git(repo, "log", "-1", "--format=%an <%ae>%n%B", "corral/notes")
    assert log.startswith("w (corral) <corral@localhost>\ngo: add notes\n")
    assert f"Made by corral run {run_id} (agent w)." in log

    # An existing branch is never moved; a bad name is refused; nothing changes either way.
    for name, code_word in (("corral/notes", "already exists"), ("bad..name", "not a valid"),
                            ("-x", "not a valid")):
        code, _, err = entry("apply", run_id, "--root", str(repo), f"--branch={name}")
        assert code == 4 and code_word in err, (name, err)
        assert _state(repo) == after


def test_a_diff_over_uncommitted_changes_is_refused_and_no_branch_is_made(
        repo: Path, tmp_path: Path) -> None:
    """A run that edited a file you had changed but not committed: its diff does not apply
    to HEAD; said so, with the way out, and nothing is created."""
    agent_file(repo, "w", "tools: [write_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    (repo / "README.md").write_text("# Project\n\nmine\n")
    ran = _run(repo, tmp_path, [_write("README.md", "# Project\n\nmine, and the child's\n"),
                                {"text": "done"}])
    before = _state(repo)
    code, _, err = entry("apply", ran["run_id"], "--root", str(repo), "--branch", "b")
    assert code == 4, err
    assert "does not apply to HEAD" in err and f"corral apply {ran['run_id']}" in err
    assert _state(repo) == before
    assert git(repo, "branch", "--list", "b") == ""


def test_branch_takes_no_checkout_options(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    ran = _run(repo, tmp_path, [_write("n.txt", "n\n"), {"text": "done"}])
    code, _, err = entry("apply", ran["run_id"], "--root", str(repo), "--branch", "b",
                         "--3way")
    assert code == 2 and "--branch takes no" in err


LINK_PATCH = (b"diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n"
              b"@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n")
NOTE_PATCH = b"diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n" \
             b"@@ -0,0 +1 @@\n+n\n"


def _branch_refused(capsys: pytest.CaptureFixture[str], repo: Path, run_id: str,
                    said: str) -> None:
    before = _state(repo)
    code, out = apply_corral(capsys, "apply", run_id, "--root", str(repo), "--branch", "b")
    assert code != 0 and said in out, (code, out)
    assert _state(repo) == before and git(repo, "branch", "--list", "b") == ""


def test_a_diff_apply_would_refuse_is_no_branch_either(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A symlink to /etc/passwd (what `corral apply` refuses without --allow-symlinks) is
    not committed on a branch that someone checks out later."""
    run_id = record_patch(repo, LINK_PATCH)
    _branch_refused(capsys, repo, run_id, "not safe to keep as a branch")


def test_a_running_run_an_empty_one_and_a_tampered_one_make_no_branch(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run still running (its diff is not final), one that changed nothing, and one whose
    diff.patch no longer has the digest its record states: each refused with its reason."""
    running = new_run_id()
    write_run(ledger_dir(repo), RunRecord(
        run_id=running, agent="a", agent_format="ngn", agent_source="a.md",
        contract_digest="d", prompt="p", backend="host", mode="worktree",
        status=RunStatus.RUNNING, owner=running_owner(), diff=NOTE_PATCH.decode()), [],
        patch=NOTE_PATCH)
    _branch_refused(capsys, repo, running, "is still running")
    _branch_refused(capsys, repo, record_patch(repo, b""), "changed nothing")
    tampered = record_patch(repo, NOTE_PATCH)
    (ledger_dir(repo) / tampered / "diff.patch").write_bytes(NOTE_PATCH.replace(b"+n", b"+m"))
    _branch_refused(capsys, repo, tampered, "not the one the run wrote")
