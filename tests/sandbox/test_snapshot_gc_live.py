"""``gc`` while overlay children run: their shared snapshot and their mounts stay whole.

A fanout acquires one snapshot, opens its children on it and drops its own lease: from
then on only the children's leases (one per sandbox) keep the snapshot's checkout, the
lower layer of every child's overlay, alive. A ``corral gc`` run meanwhile (from another
terminal, or by another corral) must see those leases and those sandboxes as alive: if it
removed the checkout, or unmounted a live child's overlay, the children would lose files
under their feet and their diffs would be wrong or fail. A directory that still exists at
the mountpoint proves nothing; every file is read back and every diff checked.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from sbx_support import (
    TEST_LIMITS,
    backend_config,
    git,
    held_snapshots,
    idle_snapshots,
    make_repo,
    overlay_backends,
    sh,
)

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.factory import open_sandbox
from sandbox.gc import gc
from sandbox.results import ExecResult
from sandbox.workspaces.overlay import is_mountpoint
from sandbox.workspaces.snapshot import SNAPSHOTS, acquire_snapshot, release_snapshot
from tests.procs import wait_for
from tests.timescale import scaled

#: Prints ``<sha256> <path>`` of every file of the workspace, sorted (not ``.git``, not the
#: waiter's flags).
_SUMS = ("import hashlib, os\n"
         "out = []\n"
         "for top, dirs, files in os.walk('.'):\n"
         "    if top == '.': dirs[:] = [d for d in dirs if d != '.git']\n"
         "    for name in files:\n"
         "        path = os.path.join(top, name)[2:]\n"
         "        if path not in ('.git', '.waiting', '.go') and not os.path.islink(path):\n"
         "            out.append((path, hashlib.sha256(open(path, 'rb').read()).hexdigest()))\n"
         "for path, digest in sorted(out): print(digest, path)\n")


def _sums(root: Path) -> str:
    """What :data:`_SUMS` prints, computed on the host."""
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if (path.is_file() and not path.is_symlink() and rel.split("/")[0] != ".git"
                and rel not in (".waiting", ".go")):
            out.append((rel, hashlib.sha256(path.read_bytes()).hexdigest()))
    return "".join(f"{digest} {rel}\n" for rel, digest in sorted(out))


def _tree_digest(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_gc_leaves_the_snapshot_and_mounts_of_running_overlay_children_whole(
        backend: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for i in range(20):
        (repo / "many" / f"f{i}.txt").parent.mkdir(exist_ok=True)
        (repo / "many" / f"f{i}.txt").write_text(f"file {i}\n" * 50)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    state_root = tmp_path / "state"
    config = backend_config(backend, TEST_LIMITS)
    ref = acquire_snapshot(repo, state_root=state_root)
    children: list[BaseSandbox] = []
    results: list[ExecResult] = []
    thread: threading.Thread | None = None
    try:
        for _ in range(2):
            children.append(open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                                         state_root=state_root, snapshot=ref))
        release_snapshot(ref)  # as a fanout does: only the children hold it now
        for i, child in enumerate(children):
            assert child.workspace_kind == "overlay"
            sh(child, f"echo child{i} >> README.md && rm docs/guide.md && "
                      f"echo new > new-{i}.txt").check()
        first = children[0]
        layers = first.workspace.overlay
        assert layers is not None
        lower_before = _tree_digest(layers.lower)
        expected = _sums(first.root)
        # A command that is running while gc runs, and reads every file once gc is done.
        waiter = (f"touch .waiting && until [ -e .go ]; do sleep 0.01; done && "
                  f"rm .waiting .go && python3 -c \"{_SUMS}\"")
        thread = threading.Thread(target=lambda: results.append(
            first.exec(["sh", "-c", waiter], timeout=scaled(60))))
        thread.start()
        assert wait_for(lambda: first.files.exists(".waiting"), timeout=scaled(30))

        report = gc(state_root)

        assert all(is_mountpoint(child.root) for child in children)  # nothing detached
        assert (state_root / SNAPSHOTS / ref.id / "snapshot.json").is_file()
        assert _tree_digest(layers.lower) == lower_before  # the shared checkout is intact
        first.files.write_text(".go", "")
        thread.join(scaled(60))
        assert results and results[0].exit_code == 0, results
        assert results[0].stdout.decode() == expected  # the child reads every file, unchanged
        assert _sums(first.root) == expected  # and so does the host, through the mount
        for i, child in enumerate(children):
            diff = child.collect_diff()
            assert {(c.path, c.status) for c in diff.changed} == {
                ("README.md", "modified"), ("docs/guide.md", "deleted"),
                (f"new-{i}.txt", "added")}
            assert f"+child{i}".encode() in diff.patch and not diff.excluded
        actions = {(e.sandbox_id, e.action) for e in report.entries}
        assert {(c.id, "in_use") for c in children} | {(ref.id, "in_use")} <= actions, actions
        assert not report.by_action("cleaned") and not report.by_action("orphan_removed")
    finally:
        for child in children:
            child.stop_processes()
        if thread is not None:
            thread.join(scaled(60))
        for child in children:
            child.teardown(discard=True)
        release_snapshot(ref)
    assert held_snapshots(state_root) == [] and idle_snapshots(state_root) == [ref.id]
