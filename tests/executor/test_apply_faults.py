"""Fault injection: a failure at any step of `corral apply` leaves the checkout byte-identical.

A real run (host backend) changes a checkout that has everything an apply can hurt:
uncommitted and staged edits, ignored files next to and under the paths it writes, refs,
renames, deletions that empty a directory, a file that becomes a directory and one that
replaces a directory, a mode change and new nested directories. The test first records the
named steps of a successful apply, and of the restore that follows a failure right after
git wrote; then for EACH step it resets the checkout, makes exactly that step fail (and, for
the restore steps, the write before it too), and compares a digest of every byte of the
checkout: working tree, ignored files, index, refs and the rest of .git.
"""

from __future__ import annotations

import errno
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from apply_support import call, checkout_digest, corral
from exec_support import Runner, agent_file, git

from executor.apply import ApplyFailed, ApplyOptions, apply_run
from executor.apply import steps as merge_steps
from executor.ledger import RunRecord, ledger_dir
from tests.timescale import scaled

NOTES = "".join(f"line {n}\n" for n in range(1, 13))
CHILD = ("echo more >> README.md && sed -i 's/^line 9$/line 9 (child)/' notes.txt && "
         "mv old/name.txt old/renamed.txt && rm -r gone && echo now-a-file > gone && "
         "rm swap && mkdir swap && echo inside > swap/inner.txt && chmod +x tool.sh && "
         "mkdir -p new/deep && echo new > new/deep/file.txt && echo 'x = 2' >> src/app.py")


class Faults:
    """Fails the steps whose positions are in ``fail_at`` (once each), records every name."""

    def __init__(self, fail_at: set[int]) -> None:
        self.fail_at = fail_at
        self.names: list[str] = []

    def __call__(self, name: str) -> None:
        position = len(self.names)
        self.names.append(name)
        if position in self.fail_at:
            raise OSError(errno.EIO, f"injected fault at step {position} ({name})")


def _scenario(run: Runner, repo: Path, *, three_way: bool) -> RunRecord:
    (repo / ".gitignore").write_text("*.pyc\ncache/\n")
    for rel, text in {"notes.txt": NOTES, "old/name.txt": "name\n", "tool.sh": "echo hi\n",
                      "swap": "a file\n", "gone/only.txt": "only\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "scenario")
    git(repo, "tag", "v1")
    git(repo, "branch", "feature")
    (repo / "notes.txt").write_text(NOTES.replace("line 1\n", "line 1 (uncommitted)\n"))
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "src" / "app.pyc").write_bytes(b"\x00ignored next to a changed file")
    (repo / "cache").mkdir()
    (repo / "cache" / "blob.bin").write_bytes(b"\x01ignored")
    agent_file(repo, "a", "tools: [shell]")
    record = run("a", [call("shell", command=CHILD), {"text": "ok"}])
    assert len(record.changed_files) >= 8, record.changed_files
    if three_way:  # the user edits inside the child's hunk: only a merge can apply it
        (repo / "notes.txt").write_text(
            (repo / "notes.txt").read_text().replace("line 7\n", "line 7 (later)\n"))
    return record


@pytest.mark.parametrize("backend", ["host"], indirect=True)
@pytest.mark.parametrize("three_way", [False, True], ids=["plain", "3way"])
def test_a_failure_at_any_step_leaves_the_checkout_byte_identical(
    run: Runner, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, three_way: bool,
) -> None:
    record = _scenario(run, repo, three_way=three_way)
    template = tmp_path / "template"
    shutil.copytree(repo, template, symlinks=True)
    expected = checkout_digest(repo)
    options = ApplyOptions(three_way=three_way)

    def attempt(fail_at: set[int]) -> Faults:
        shutil.rmtree(repo)
        shutil.copytree(template, repo, symlinks=True)
        faults = Faults(fail_at)
        monkeypatch.setattr(merge_steps, "fault_hook", faults)
        try:
            if fail_at:
                with pytest.raises(ApplyFailed):
                    apply_run(repo, ledger_dir(repo), record.run_id, options,
                              confirm=lambda plan: True)
                assert checkout_digest(repo) == expected, faults.names
            else:
                _, _, result = apply_run(repo, ledger_dir(repo), record.run_id, options,
                                         confirm=lambda plan: True)
                assert result.status == "applied"
                assert result.merged == (["notes.txt"] if three_way else [])
                assert checkout_digest(repo) != expected
        finally:
            monkeypatch.setattr(merge_steps, "fault_hook", None)
        return faults

    steps = attempt(set()).names
    for name in ("git apply --3way" if three_way else "git apply", "precheck", "fingerprint",
                 "backup notes.txt", "backup manifest", "applied", "manifest applied"):
        assert name in steps, steps
    written = steps.index("applied")
    restore = attempt({written}).names[written + 1:]
    assert {"restore clear gone", "restore dir gone", "restore file notes.txt",
            "verify restored"} <= set(restore), restore

    for position in range(len(steps)):
        attempt({position})
    for offset in range(len(restore)):
        attempt({written, written + 1 + offset})


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_real_partial_write_is_undone(
    run: Runner, repo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What git apply did when it died halfway: the files it rewrites are deleted first."""
    record = _scenario(run, repo, three_way=False)
    expected = checkout_digest(repo)

    def half_written(name: str) -> None:
        if name == "git apply":
            for rel in ("README.md", "notes.txt", "src/app.py"):
                (repo / rel).unlink()
            shutil.rmtree(repo / "gone")
            raise OSError(errno.EIO, "unable to write file 'gone': Directory not empty")

    monkeypatch.setattr(merge_steps, "fault_hook", half_written)
    with pytest.raises(ApplyFailed, match="restored from the backup and verified"):
        apply_run(repo, ledger_dir(repo), record.run_id, ApplyOptions(),
                  confirm=lambda plan: True)
    assert checkout_digest(repo) == expected


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_an_apply_killed_halfway_blocks_new_ones_until_recovered(
    run: Runner, repo: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A crash (SIGKILL right after git wrote) cannot restore anything in-process: the
    backup on disk says the apply never finished, and `--recover` puts it back."""
    record = _scenario(run, repo, three_way=False)
    expected = checkout_digest(repo)
    script = (
        "import os, signal\n"
        "from executor.apply import steps as merge_steps\n"
        "from executor.cli import main\n"
        "def crash(name):\n"
        "    if name == 'applied':\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "merge_steps.fault_hook = crash\n"
        f"main(['apply', '--yes', {record.run_id!r}, '--root', {str(repo)!r}])\n")
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False,
                            timeout=scaled(60))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (repo / "swap" / "inner.txt").exists()  # half-way: git had written
    code, output = corral(capsys, "apply", "--yes", record.run_id, "--root", str(repo))
    assert code == 4 and "did not finish" in output, output
    assert f"corral apply --recover {record.run_id}" in output
    code, output = corral(capsys, "apply", "--recover", record.run_id, "--root", str(repo))
    assert code == 0, output
    assert checkout_digest(repo) == expected
    code, output = corral(capsys, "apply", "--yes", record.run_id, "--root", str(repo))
    assert code == 0 and "applied" in output, output


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_an_interrupt_after_git_wrote_restores_then_propagates(
    run: Runner, repo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = _scenario(run, repo, three_way=False)
    expected = checkout_digest(repo)

    def interrupt(name: str) -> None:
        if name == "applied":
            raise KeyboardInterrupt

    monkeypatch.setattr(merge_steps, "fault_hook", interrupt)
    with pytest.raises(KeyboardInterrupt):
        apply_run(repo, ledger_dir(repo), record.run_id, ApplyOptions(),
                  confirm=lambda plan: True)
    assert checkout_digest(repo) == expected
    assert not list((ledger_dir(repo) / record.run_id / "apply-backup").glob("*/manifest.json"))
