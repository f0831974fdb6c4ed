"""A fresh checkout's index has no "racily clean" entry (:mod:`sandbox.workspaces.racy`), so the
child's ``git status`` (which cannot write its read-only index back) hashes nothing it did not
change; and git still sees every change the child makes, in the checkout's own second too.

Before: every entry of a worktree child's index was racy (the checkout and its index written
in the same second), and each ``git status`` in the child re-read and hashed every file
(2-4x a warm index at 10k files: ``scripts/bench_git_status.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, child_git_dir, make_repo, sh

from sandbox.workspaces.racy import settle_racy
from tests.backends import git

NS = 1_000_000_000
TARGET = "src/app.py"


def _mtimes(index: Path, work_tree: Path) -> dict[str, int]:
    """Path -> the mtime (ns) ``index`` records."""
    out = subprocess.run(["git", "--git-dir", str(work_tree / ".git"), "ls-files", "--debug"],
                         cwd=work_tree, env={**os.environ, "GIT_INDEX_FILE": str(index)},
                         check=True, capture_output=True, text=True).stdout
    found: dict[str, int] = {}
    path = ""
    for line in out.splitlines():
        if not line.startswith(" "):
            path = line
        elif match := re.match(r"\s+mtime: (\d+):(\d+)", line):
            found[path] = int(match[1]) * NS + int(match[2])
    return found


def _racy(index: Path, work_tree: Path) -> set[str]:
    fence = index.stat().st_mtime_ns // NS
    return {path for path, mtime in _mtimes(index, work_tree).items() if mtime // NS >= fence}


def _status(tree: Path) -> str:
    """``git status --porcelain`` that may not write the index (as in the sandbox)."""
    return subprocess.run(["git", "--no-optional-locks", "status", "--porcelain"], cwd=tree,
                          check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("backend", backends(only=("host", "bubblewrap", "docker"),
                                             fake=False, overlay=True), indirect=True)
def test_a_fresh_child_index_has_no_racy_entry(open_sb: OpenSandbox) -> None:
    sb = open_sb()
    index = child_git_dir(sb) / "index"
    recorded = _mtimes(index, sb.root)
    assert set(recorded) >= {TARGET, "README.md", "data.bin"}
    assert _racy(index, sb.root) == set()
    baseline = sb.workspace.baseline_index
    if baseline is not None:  # the host's diff base: the same stat data, none racy either
        assert _racy(baseline, sb.root) == set()
    # The stat data is the files' own: nothing for git to refresh, and the child sees a clean
    # checkout.
    for rel, mtime in recorded.items():
        assert os.lstat(sb.root / rel).st_mtime_ns == mtime
    assert sh(sb, "git status --porcelain").check().stdout == b""
    assert sb.collect_diff().changed == ()


@pytest.mark.parametrize("backend", backends(only=("host", "bubblewrap"), fake=False,
                                             overlay=True), indirect=True)
def test_an_edit_in_the_checkouts_second_is_seen_by_the_childs_git(open_sb: OpenSandbox
                                                                   ) -> None:
    """The attack on the re-dating: an in-place edit of the same size in the very second the
    checkout was made (git's racy rule was what caught it; now the recorded mtime is a second
    earlier than any edit's). The child's own git and the diff both see it.

    The edit is made from the host, through the same mount the child sees, the moment the
    sandbox is open: a command in the child first costs a sandbox exec, and on a busy machine
    that alone outlasts the second, so no attempt would land in it."""
    for _attempt in range(20):
        sb = open_sb()
        index = child_git_dir(sb) / "index"
        before = os.lstat(sb.root / TARGET)
        with (sb.root / TARGET).open("r+b") as handle:  # in place: same inode, same size
            handle.write(b"X")
        after = os.lstat(sb.root / TARGET)
        assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
        if after.st_mtime_ns // NS == index.stat().st_mtime_ns // NS:
            break  # edited in the index's own second: the case racy-git exists for
        sb.teardown(discard=True)
    else:
        pytest.fail("the child never edited the file in its index's second")
    assert sh(sb, "git status --porcelain").check().stdout.decode() == f" M {TARGET}\n"
    diff = sb.collect_diff()
    assert [c.path for c in diff.changed] == [TARGET]


def _fresh_checkout(tmp_path: Path) -> Path:
    """A clone written just now: its index and files in the same second (racy)."""
    origin = make_repo(tmp_path / "origin")
    git(tmp_path, "clone", "-q", str(origin), str(tmp_path / "tree"))
    tree = tmp_path / "tree"
    git(tree, "read-tree", "--reset", "-u", "HEAD")  # every entry as written now
    # Dated in its oldest entry's second (as a checkout faster than a second leaves it):
    # every entry racily clean, wherever the clock's second fell.
    index = tree / ".git" / "index"
    oldest = min(_mtimes(index, tree).values()) // NS * NS
    os.utime(index, ns=(oldest, oldest))
    return tree


def test_settle_racy_re_dates_only_files_as_git_recorded_them(tmp_path: Path) -> None:
    tree = _fresh_checkout(tmp_path)
    index = tree / ".git" / "index"
    before = _mtimes(index, tree)
    racy = _racy(index, tree)
    assert racy == set(before)
    # A file changed after git recorded it (same size, in place): not as recorded, so left
    # alone, and git must still see it.
    changed = tree / TARGET
    changed.write_bytes(b"X" + changed.read_bytes()[1:])
    assert _status(tree) == f" M {TARGET}\n"
    settled = settle_racy(index, tree)
    after = _mtimes(index, tree)
    assert settled == len(racy) - 1
    assert _racy(index, tree) <= {TARGET}  # rewritten now: only the changed one may be racy
    for rel in racy - {TARGET}:
        assert after[rel] == before[rel] - NS == os.lstat(tree / rel).st_mtime_ns
    assert after[TARGET] == before[TARGET]
    assert _status(tree) == f" M {TARGET}\n"
    git(tree, "fsck", "--no-progress", "--cache")  # the rewritten index's checksum holds


def test_settle_racy_leaves_an_index_it_does_not_read(tmp_path: Path) -> None:
    tree = _fresh_checkout(tmp_path)
    index = tree / ".git" / "index"
    git(tree, "update-index", "--index-version", "4")
    data = index.read_bytes()
    mtimes = {rel: os.lstat(tree / rel).st_mtime_ns for rel in _mtimes(index, tree)}
    assert settle_racy(index, tree) == 0
    assert index.read_bytes() == data
    assert {rel: os.lstat(tree / rel).st_mtime_ns for rel in mtimes} == mtimes
