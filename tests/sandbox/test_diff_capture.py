"""Capturing a child's diff: bounded memory for patch bombs (threats.md B3.20), always the
latest work (follow-ups after a collection, failed collections, gc after a crash), and a child
opened on another child's worktree (delegation).

Diff collection runs on the host with the same code for every backend; the parametrization
proves it against each backend's workspace (docker's worktree belongs to another uid).
"""

from __future__ import annotations

import base64
import os
import subprocess
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from sbx_support import TEST_LIMITS, OpenSandbox, backends, sh

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import HostConfig
from sandbox.errors import DiffTooLarge, SandboxConfigError
from sandbox.factory import open_sandbox
from sandbox.gc import gc

BIG = 24 << 20  # bytes of text the child writes; the patch is a little larger
MEMORY_BOUND = 8 << 20  # what the parent may allocate to refuse or stream it


def _big_text() -> bytes:
    raw = base64.encodebytes(os.urandom(BIG * 3 // 4))
    return raw[:BIG]


def _peak_allocation(call: Callable[[], object]) -> int:
    """Bytes the parent allocated at the peak of ``call`` (whatever it raises)."""
    tracemalloc.start()
    try:
        call()
    except DiffTooLarge:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _abandon(sb: BaseSandbox) -> None:
    """What a crashed owner leaves: the meta on disk says nobody owns the sandbox."""
    meta = sb.state.read_meta()
    sb.state.write_meta(meta.model_copy(update={"owner_pid": None}))


# -- B3.20 patch bombs ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_patch_over_byte_cap_refused_without_reading_it_all(open_sb: OpenSandbox,
                                                            state_root: Path) -> None:
    """Found in review: the whole ``git diff`` output was read into memory before the
    ``max_diff_bytes`` check (600 MB of child data took 1.5 GB RSS). The patch is now streamed
    and git killed as soon as the cap is passed: the parent's allocations stay near the cap."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"max_diff_bytes": 1 << 20}))
    sb.files.write_bytes("big.txt", _big_text())
    peak = _peak_allocation(sb.collect_diff)
    with pytest.raises(DiffTooLarge):
        sb.collect_diff()
    assert peak < MEMORY_BOUND, f"{peak} bytes allocated to refuse a {BIG}-byte diff"
    results = state_root / "results" / sb.id
    assert not results.exists() or not list(results.iterdir())  # nothing persisted


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_gc_streams_an_uncapped_diff_to_disk(open_sb: OpenSandbox, state_root: Path) -> None:
    """gc keeps whatever a crashed child made (no cap), and so held all of it in memory; it
    now streams the patch to ``results/<id>/diff.patch``."""
    sb = open_sb()
    sb.files.write_bytes("big.txt", _big_text())
    _abandon(sb)
    reports = []
    peak = _peak_allocation(lambda: reports.append(gc(state_root)))
    [entry] = [e for e in reports[0].by_action("cleaned") if e.sandbox_id == sb.id]
    assert peak < MEMORY_BOUND, f"{peak} bytes allocated to persist a {BIG}-byte diff"
    assert entry.patch_path is not None and entry.patch_path.stat().st_size > BIG
    assert b"+++ b/big.txt" in entry.patch_path.read_bytes()[:4096]
    assert not list(entry.patch_path.parent.glob(".*.tmp"))


# -- always the latest work -------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_teardown_captures_work_done_after_collect(open_sb: OpenSandbox) -> None:
    """Found in review: teardown skipped its collection when an earlier diff existed, so a
    retained child that got a follow-up after ``collect_diff`` lost that later work."""
    sb = open_sb()
    sb.files.write_text("one.txt", "first turn\n")
    assert [c.path for c in sb.collect_diff().changed] == ["one.txt"]
    sh(sb, "echo second > two.txt", effect=lambda fs: fs.write_text("two.txt", "second\n")
       ).check()
    sb.files.write_text("three.txt", "third\n")
    report = sb.teardown()
    assert report.patch_path is not None
    patch = report.patch_path.read_bytes()
    for name in (b"one.txt", b"two.txt", b"three.txt"):
        assert b"+++ b/" + name in patch


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_failed_collect_leaves_no_stale_diff(open_sb: OpenSandbox, state_root: Path) -> None:
    """A collection that fails must not leave the earlier diff standing in for the latest:
    teardown then collects again and, failing too, keeps the worktree for gc, which captures
    the latest work. Without clearing, teardown removed the worktree with the old diff."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"max_diff_bytes": 4096}))
    sb.files.write_text("small.txt", "small\n")
    sb.collect_diff()
    sb.files.write_text("big.txt", "x" * 20000)
    with pytest.raises(DiffTooLarge):
        sb.collect_diff()
    with pytest.raises(DiffTooLarge):
        sb.teardown()
    assert (sb.root / "big.txt").is_file()  # kept
    [entry] = [e for e in gc(state_root).by_action("cleaned") if e.sandbox_id == sb.id]
    assert entry.patch_path is not None
    patch = entry.patch_path.read_bytes()
    assert b"+++ b/big.txt" in patch and b"+++ b/small.txt" in patch


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_gc_recaptures_work_done_after_the_last_collect(open_sb: OpenSandbox,
                                                        state_root: Path) -> None:
    """A crash after a follow-up: the stored diff is older than the worktree. The meta marks
    it stale on the first change after a collection, so gc captures again."""
    sb = open_sb()
    sb.files.write_text("one.txt", "first\n")
    sb.collect_diff()
    sh(sb, "echo later > later.txt", effect=lambda fs: fs.write_text("later.txt", "later\n")
       ).check()
    _abandon(sb)
    [entry] = [e for e in gc(state_root).by_action("cleaned") if e.sandbox_id == sb.id]
    assert entry.patch_path is not None and b"+++ b/later.txt" in entry.patch_path.read_bytes()


# -- delegation: a sandbox on another sandbox's worktree ---------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_sandbox_on_another_sandboxs_worktree(open_sb: OpenSandbox) -> None:
    """Found in review (docker, corral as root): a delegated child is opened on its parent's
    worktree, which the docker backend gave to uid 1000; git's discovery refused it
    ("detected dubious ownership"). corral now allows exactly its own worktrees, for the
    discovery command only."""
    parent = open_sb()
    sh(parent, "echo parent > parent.txt",
       effect=lambda fs: fs.write_text("parent.txt", "parent\n")).check()
    child = open_sb(SandboxMode.WORKTREE, repo_path=parent.root)
    assert child.files.read_text("parent.txt") == "parent\n"  # the parent's current state
    sh(child, "echo child > child.txt", effect=lambda fs: fs.write_text("child.txt", "child\n")
       ).check()
    diff = child.collect_diff()
    assert [c.path for c in diff.changed] == ["child.txt"]
    assert diff.base_commit is not None
    sub = parent.root / "src"
    nested = open_sb(SandboxMode.READ_ONLY, repo_path=sub)  # from a subdirectory too
    assert nested.root == parent.root


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository away")
def test_foreign_owned_repository_still_refused(repo: Path, state_root: Path) -> None:
    """The exception is for corral's own worktrees only: another user's checkout is refused
    as git refuses it (its owner could have prepared its configuration)."""
    subprocess.run(["chown", "-R", "4321:4321", str(repo)], check=True)
    with pytest.raises(SandboxConfigError) as raised:
        open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE, state_root=state_root)
    assert raised.value.code == "not_a_repository"
    assert "dubious ownership" in raised.value.message
