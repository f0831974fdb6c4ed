"""Shared snapshots: made once per state, leased, kept idle after their last lease; fallbacks.

A fanout acquires one snapshot of the parent's current state and opens every child
on it: each child is an overlay over the snapshot's single checkout (or, where
overlays cannot be mounted, a worktree checked out from it, chosen automatically
and reported). These tests hold the lifecycle to what gc and a crash need: the same
state is reused, every lease is counted, the last one leaves the snapshot idle for
the next run on the same state, the parent's ``.git`` is never written, and gc drops
what dead holders left. Reuse, eviction and gc's age limit: ``test_snapshot_reuse.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_support import (
    TEST_LIMITS,
    backend_config,
    diff_facts,
    diffs_by_kind,
    git,
    held_snapshots,
    idle_snapshots,
    make_repo,
    overlay_backends,
    sh,
)
from test_parent_git_untouched import assert_untouched, git_manifest, packed_and_loose_repo

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import HostConfig
from sandbox.errors import OverlayUnavailable, SandboxConfigError, SandboxStateError
from sandbox.factory import WorkspaceRequest, open_sandbox
from sandbox.gc import gc
from sandbox.workspaces.overlay import OverlayLayers, mount_overlay, overlay_mounts, unmount
from sandbox.workspaces.snapshot import (
    SNAPSHOTS,
    SnapshotRef,
    acquire_snapshot,
    release_snapshot,
)

HOST = overlay_backends(only=("host",))


def _snapshots(state_root: Path) -> list[str]:
    base = state_root / SNAPSHOTS
    return sorted(p.name for p in base.iterdir() if p.name != ".lock") if base.is_dir() else []


def _open(repo: Path, state_root: Path, ref: SnapshotRef,
          workspace: WorkspaceRequest = "auto") -> BaseSandbox:
    return open_sandbox(HostConfig(limits=TEST_LIMITS), repo=repo, mode=SandboxMode.WORKTREE,
                        state_root=state_root, snapshot=ref, workspace=workspace)


@pytest.mark.parametrize("backend", HOST, indirect=True)
def test_same_state_reuses_one_snapshot_and_checkout(backend: str, tmp_path: Path) -> None:
    """The same state gives the same snapshot (no second checkout); a new state a new one."""
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("untracked\n")
    state_root = tmp_path / "state"
    first = acquire_snapshot(repo, state_root=state_root)
    second = acquire_snapshot(repo, state_root=state_root)
    assert (second.id, second.commit, second.reused) == (first.id, first.commit, True)
    assert not first.reused
    a, b = _open(repo, state_root, first), _open(repo, state_root, second)
    checkouts = list((first.path / "checkouts").iterdir())
    assert len([c for c in checkouts if c.is_dir()]) == 1
    (repo / "notes.txt").write_text("changed\n")
    third = acquire_snapshot(repo, state_root=state_root)
    assert third.id != first.id and not third.reused
    for held in (a, b):
        held.teardown()
    for ref in (first, second, third):
        release_snapshot(ref)
    assert held_snapshots(state_root) == []
    assert idle_snapshots(state_root) == sorted({first.id, third.id})


@pytest.mark.parametrize("backend", HOST, indirect=True)
def test_snapshot_stays_idle_after_its_last_lease(backend: str, tmp_path: Path) -> None:
    """Every lease is counted; the last one leaves the snapshot idle (kept for reuse), and
    a ref to a snapshot gc removed opens nothing."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    ref = acquire_snapshot(repo, state_root=state_root)
    one, two = _open(repo, state_root, ref), _open(repo, state_root, ref)
    release_snapshot(ref)
    release_snapshot(ref)  # again: nothing
    assert held_snapshots(state_root) == [ref.id]
    assert "snapshot:" not in " ".join(one.teardown().removed)
    assert held_snapshots(state_root) == [ref.id]
    assert "snapshot:" not in " ".join(two.teardown().removed)
    assert held_snapshots(state_root) == [] and idle_snapshots(state_root) == [ref.id]
    assert not overlay_mounts(state_root)
    again = acquire_snapshot(repo, state_root=state_root)
    assert (again.id, again.reused) == (ref.id, True)
    release_snapshot(again)
    assert {(e.sandbox_id, e.action) for e in gc(state_root, snapshot_max_idle=0).entries} \
        == {(ref.id, "cleaned")}
    assert _snapshots(state_root) == []
    with pytest.raises(SandboxStateError) as raised:
        _open(repo, state_root, ref)
    assert "no longer exists" in raised.value.message
    assert not list((state_root / "sandboxes").iterdir())
    assert not list((state_root / "worktrees").iterdir())


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_siblings_start_alike_and_never_see_each_other(backend: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("parent's uncommitted state\n")
    state_root = tmp_path / "state"
    config = backend_config(backend, TEST_LIMITS)
    ref = acquire_snapshot(repo, state_root=state_root)
    children = [open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                             state_root=state_root, snapshot=ref) for _ in range(3)]
    release_snapshot(ref)
    try:
        for i, child in enumerate(children):
            assert child.workspace_kind == "overlay"
            assert child.files.read_text("README.md") == "parent's uncommitted state\n"
            sh(child, f"echo child{i} > README.md && echo {i} > only-{i}.txt").check()
        for i, child in enumerate(children):
            diff = child.collect_diff()
            assert sorted(c.path for c in diff.changed) == ["README.md", f"only-{i}.txt"]
            assert f"+child{i}".encode() in diff.patch
            assert not child.files.exists(f"only-{(i + 1) % 3}.txt")
        layers = children[0].workspace.overlay
        assert layers is not None
        assert (layers.lower / "README.md").read_text() == "parent's uncommitted state\n"
    finally:
        for child in children:
            child.teardown()
    assert held_snapshots(state_root) == [] and idle_snapshots(state_root) == [ref.id]
    assert (repo / "README.md").read_text() == "parent's uncommitted state\n"


@pytest.mark.parametrize("backend", overlay_backends(only=("host", "bubblewrap")),
                         indirect=True)
def test_parent_git_untouched_by_a_shared_snapshot(backend: str, tmp_path: Path) -> None:
    """Acquiring, checking out, overlay diffs (blobs the parent's store already has) and the
    removal of the snapshot write nothing in the parent's ``.git``, not even an mtime."""
    repo = packed_and_loose_repo(tmp_path / "parent")
    before = git_manifest(repo / ".git")
    script = ("printf 'packed content\\n' > copy.txt && printf 'second version\\n' > edited.txt"
              " && printf 'deep, never changed\\n' > sub/deep/unchanged.txt")
    diffs = diffs_by_kind(backend_config(backend, TEST_LIMITS), repo, tmp_path / "state",
                          script)
    assert diff_facts(diffs["overlay"]) == diff_facts(diffs["worktree"])
    assert_untouched(before, git_manifest(repo / ".git"))


def test_fallback_when_the_state_dir_cannot_carry_an_overlay(tmp_path: Path) -> None:
    """A state dir whose path a mount option cannot carry: a worktree, and the reason."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state,with:comma"
    ref = acquire_snapshot(repo, state_root=state_root)
    try:
        sb = _open(repo, state_root, ref)
        assert sb.workspace_kind == "worktree"
        assert "',:'" in (sb.workspace_fallback or "")
        sh(sb, "echo x > x.txt").check()
        assert [c.path for c in sb.collect_diff().changed] == ["x.txt"]
        sb.teardown()
        with pytest.raises(OverlayUnavailable):
            _open(repo, state_root, ref, workspace="overlay")
    finally:
        release_snapshot(ref)
    assert held_snapshots(state_root) == [] and not list((state_root / "sandboxes").iterdir())


@pytest.fixture
def overlay_fs(tmp_path: Path) -> Iterator[Path]:
    """A directory on an overlayfs (which the kernel refuses as an upper layer)."""
    layers = OverlayLayers(lower=tmp_path / "l", upper=tmp_path / "u", work=tmp_path / "w",
                           merged=tmp_path / "fs")
    for path in (layers.lower, layers.upper, layers.work, layers.merged):
        path.mkdir()
    mount_overlay(layers)
    try:
        yield layers.merged
    finally:
        unmount(layers.merged)


@pytest.mark.parametrize("backend", HOST, indirect=True)
def test_fallback_when_the_kernel_refuses_the_mount(backend: str, tmp_path: Path,
                                                   overlay_fs: Path) -> None:
    """The mount itself fails (an upper layer on overlayfs): the child still runs, in a
    worktree from the same snapshot, with the kernel's reason; forced, it is an error."""
    repo = make_repo(tmp_path / "repo")
    state_root = overlay_fs / "state"
    ref = acquire_snapshot(repo, state_root=state_root)
    try:
        sb = _open(repo, state_root, ref)
        assert sb.workspace_kind == "worktree"
        assert "mounting the overlay failed" in (sb.workspace_fallback or "")
        meta = sb.state.read_meta()
        assert meta.workspace_kind == "worktree" and meta.overlay_upper is None
        assert not overlay_mounts(state_root)
        sh(sb, "echo x > x.txt").check()
        sb.teardown()
        with pytest.raises(OverlayUnavailable) as raised:
            _open(repo, state_root, ref, workspace="overlay")
        assert "mounting the overlay failed" in raised.value.message
    finally:
        release_snapshot(ref)
    assert not list((state_root / "sandboxes").iterdir())
    assert not list((state_root / "worktrees").iterdir())


_AS_USER = """
import sys
from pathlib import Path
from policies.contract import SandboxMode
from sandbox.config import HostConfig
from sandbox.base import BaseSandbox
from sandbox.factory import WorkspaceRequest, open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot
repo, state = Path(sys.argv[1]), Path(sys.argv[2])
ref = acquire_snapshot(repo, state_root=state)
sb = open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE, state_root=state,
                  snapshot=ref)
release_snapshot(ref)
sb.exec(["sh", "-c", "echo mine > mine.txt"]).check()
print(sb.workspace_kind, "|", sb.workspace_fallback)
print(",".join(c.path for c in sb.collect_diff().changed))
sb.teardown()
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to switch to an unprivileged user (setpriv)")
def test_a_normal_user_gets_worktrees_and_the_reason() -> None:
    """A normal user's overlay would exist only in a user namespace the host-side file API
    and diff cannot see: corral says so and gives plain worktrees (same diffs)."""
    top = Path(tempfile.mkdtemp(prefix="corral-user-"))
    try:
        top.chmod(0o755)
        repo = make_repo(top / "repo")
        subprocess.run(["chown", "-R", "65534:65534", str(top)], check=True)
        root = Path(__file__).resolve().parents[2]
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-c", _AS_USER, str(repo), str(top / "state")],
            capture_output=True, text=True, check=False, cwd=root,
            env={"PATH": os.environ["PATH"], "HOME": str(top), "PYTHONPATH": str(root)})
        assert done.returncode == 0, done.stderr
        kind, reason, changed = done.stdout.replace("|", "\n").split("\n")[:3]
        assert kind.strip() == "worktree"
        assert "need root" in reason and "user namespace" in reason
        assert changed == "mine.txt"
    finally:
        shutil.rmtree(top)


@pytest.mark.skipif(os.geteuid() != 0, reason="mixing owners needs root")
@pytest.mark.parametrize("backend", overlay_backends(only=("docker",)), indirect=True)
def test_docker_and_bubblewrap_children_share_one_snapshot(backend: str, tmp_path: Path) -> None:
    """As root, docker children work as uid 1000 and bubblewrap children as root: one
    snapshot, one checkout per owner, every child an overlay."""
    from tests.backends import require_backend

    require_backend("bubblewrap")
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    ref = acquire_snapshot(repo, state_root=state_root)
    children = [open_sandbox(backend_config(name, TEST_LIMITS), repo=repo,
                             mode=SandboxMode.WORKTREE, state_root=state_root, snapshot=ref)
                for name in ("docker", "bubblewrap")]
    release_snapshot(ref)
    try:
        owners = sorted(p.name for p in (ref.path / "checkouts").iterdir() if p.is_dir())
        assert owners == ["0-0", "1000-1000"]
        for child in children:
            assert child.workspace_kind == "overlay"
            sh(child, "id -u > who.txt").check()
        whos = [child.files.read_text("who.txt").strip() for child in children]
        assert whos == ["1000", "0"]
        for child in children:
            assert [c.path for c in child.collect_diff().changed] == ["who.txt"]
    finally:
        for child in children:
            child.teardown()
    assert held_snapshots(state_root) == []


_HOLD = """
import os, signal, sys
from pathlib import Path
from sandbox.workspaces.snapshot import acquire_snapshot
ref = acquire_snapshot(Path(sys.argv[1]), state_root=Path(sys.argv[2]))
print(ref.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("backend", HOST, indirect=True)
def test_gc_drops_the_leases_of_holders_that_died(backend: str, tmp_path: Path) -> None:
    """A process that dies holding a snapshot leaves a lease gc drops (the snapshot is idle
    then, and goes once unused for gc's limit), one that dies making a snapshot a half-made
    one gc removes; a snapshot a live process holds stays."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    done = subprocess.run([sys.executable, "-c", _HOLD, str(repo), str(state_root)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == -9, done.stderr
    dead = done.stdout.strip()
    half_made = state_root / SNAPSHOTS / ".new-crashed"
    half_made.mkdir()
    (half_made / "owner.json").write_text("{}")
    (repo / "live.txt").write_text("a different state\n")
    live = acquire_snapshot(repo, state_root=state_root)
    try:
        report = gc(state_root)
        actions = {(e.sandbox_id, e.action) for e in report.entries}
        assert {(".new-crashed", "cleaned"), (live.id, "in_use")} <= actions
        assert dead not in {e.sandbox_id for e in report.entries}  # idle: kept for reuse
        assert held_snapshots(state_root) == [live.id]
        assert idle_snapshots(state_root) == [dead]
        report = gc(state_root, snapshot_max_idle=0)
        actions = {(e.sandbox_id, e.action) for e in report.entries}
        assert {(dead, "cleaned"), (live.id, "in_use")} <= actions
        assert _snapshots(state_root) == [live.id]
    finally:
        release_snapshot(live)
    assert held_snapshots(state_root) == []


_ABANDON = """
import os, signal, sys
from pathlib import Path
from policies.contract import SandboxMode
from sandbox.config import HostConfig
from sandbox.base import BaseSandbox
from sandbox.factory import WorkspaceRequest, open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot
repo, state = Path(sys.argv[1]), Path(sys.argv[2])
ref = acquire_snapshot(repo, state_root=state)
sb = open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE, state_root=state,
                  snapshot=ref, workspace="overlay")
sb.exec(["sh", "-c", "echo abandoned > abandoned.txt && rm README.md"]).check()
print(sb.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _abandon(repo: Path, state_root: Path) -> str:
    done = subprocess.run([sys.executable, "-c", _ABANDON, str(repo), str(state_root)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == -9, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("backend", HOST, indirect=True)
@pytest.mark.parametrize("mounted", ["yes", "no", "gone"],
                         ids=["still-mounted", "after-a-reboot", "killed-mid-teardown"])
def test_gc_captures_an_abandoned_overlay(backend: str, tmp_path: Path, mounted: str) -> None:
    """A killed owner leaves its overlay mounted (or, after a reboot, not; or, killed in its
    teardown between the unmount and the state's removal, without its mount point): gc
    mounts it if needed, captures the diff from the upper layer, unmounts, removes the
    layers and drops its lease (the snapshot stays idle, for reuse)."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    sandbox_id = _abandon(repo, state_root)
    merged = state_root / "worktrees" / sandbox_id
    assert overlay_mounts(state_root) == [merged]
    if mounted != "yes":
        unmount(merged)
    if mounted == "gone":
        merged.rmdir()
    [entry] = [e for e in gc(state_root).entries if e.sandbox_id == sandbox_id]
    assert entry.action == "cleaned" and entry.patch_path is not None
    patch = entry.patch_path.read_bytes()
    assert b"+abandoned" in patch and b"deleted file mode 100644" in patch
    assert not overlay_mounts(state_root) and not merged.exists()
    assert held_snapshots(state_root) == []
    assert git(repo, "status", "--porcelain").stdout == ""


@pytest.mark.parametrize("backend", HOST, indirect=True)
def test_gc_keeps_an_overlay_it_cannot_mount(backend: str, tmp_path: Path) -> None:
    """Without its snapshot's checkout the upper layer cannot be diffed: gc keeps it (and
    says why) unless forced; it never removes an uncaptured diff silently."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    sandbox_id = _abandon(repo, state_root)
    merged = state_root / "worktrees" / sandbox_id
    unmount(merged)
    meta = (state_root / "sandboxes" / sandbox_id / "meta.json").read_text()
    lower = Path(next(line.split('"')[3] for line in meta.splitlines()
                      if '"overlay_lower"' in line))
    shutil.rmtree(lower)
    [kept] = [e for e in gc(state_root).entries if e.sandbox_id == sandbox_id]
    assert kept.action == "kept" and "overlay_unavailable" in kept.detail
    assert (state_root / "sandboxes" / sandbox_id / "overlay" / "upper" / "abandoned.txt").exists()
    [forced] = [e for e in gc(state_root, force=True).entries if e.sandbox_id == sandbox_id]
    assert forced.action == "cleaned" and "without its latest diff" in forced.detail
    assert not (state_root / "sandboxes" / sandbox_id).exists()
    assert held_snapshots(state_root) == [] and not overlay_mounts(state_root)


@pytest.mark.parametrize("backend", HOST, indirect=True)
def test_a_snapshot_of_another_repository_is_refused(backend: str, tmp_path: Path) -> None:
    """A snapshot opens children of its own repository and state dir only; anything else is a
    user error before anything is created."""
    repo, other = make_repo(tmp_path / "repo"), make_repo(tmp_path / "other")
    state_root = tmp_path / "state"
    ref = acquire_snapshot(repo, state_root=state_root)
    try:
        with pytest.raises(SandboxConfigError) as raised:
            _open(other, state_root, ref)
        assert raised.value.code == "snapshot_mismatch" and raised.value.exit_code == 2
        with pytest.raises(SandboxConfigError):
            open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE,
                         state_root=tmp_path / "elsewhere", snapshot=ref)
        assert not (state_root / "sandboxes").exists() or not list(
            (state_root / "sandboxes").iterdir())
    finally:
        release_snapshot(ref)


def _ignored_nested_repo(path: Path) -> Path:
    """A repository whose ignored ``.venv/`` holds a nested repository with a commit (an
    editable install), plus an ignored file and an untracked file that is not ignored."""
    repo = make_repo(path)
    (repo / ".gitignore").write_text(".venv/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore .venv")
    pkg = repo / ".venv" / "src" / "pkg"
    pkg.mkdir(parents=True)
    git(pkg, "init", "-q", "-b", "main")
    (pkg / "setup.py").write_text("print('vendored')\n")
    git(pkg, "add", "-A")
    git(pkg, "commit", "-qm", "vendored")
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (repo / "notes.txt").write_text("untracked, not ignored\n")
    return repo


@pytest.mark.parametrize("how", ["worktree", "snapshot"])
def test_an_ignored_nested_repository_never_stops_a_run(how: str, tmp_path: Path) -> None:
    """Before: staging handed git the nested repository's path (an exclusion pathspec), git
    refused it as ignored, and no child could run in such a repository at all."""
    repo = _ignored_nested_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    ref = acquire_snapshot(repo, state_root=state_root) if how == "snapshot" else None
    try:
        sb = (_open(repo, state_root, ref) if ref is not None else
              open_sandbox(HostConfig(limits=TEST_LIMITS), repo=repo,
                           mode=SandboxMode.WORKTREE, state_root=state_root))
        try:
            assert sb.files.read_text("notes.txt") == "untracked, not ignored\n"
            assert not sb.files.exists(".venv")
            # The child makes an ignored nested repository of its own: its diff is still
            # collected, without it.
            sh(sb, "echo changed > notes.txt && mkdir -p .venv/x && cd .venv/x && "
                   "git init -q && echo y > y && git add y").check()
            assert [(c.path, c.status) for c in sb.collect_diff().changed] == [
                ("notes.txt", "modified")]
        finally:
            sb.teardown()
    finally:
        if ref is not None:
            release_snapshot(ref)
    assert (repo / "notes.txt").read_text() == "untracked, not ignored\n"
    assert held_snapshots(state_root) == []
