"""A hostile child of one run against the next run on the same state.

An idle snapshot is reused by the next run on the same state: its checkout is the
lower layer of that run's overlay, its store holds the objects that run's git
reads. A child that could write any of it would choose what the next run (of any
agent, on any backend) starts from, and that run's diff would hide it. The child
of run 1 tries everything it can reach: its workspace (the merged view), the
host paths of the checkout, its git dir and the store, the ``.git`` pointer, git
itself; after its teardown the snapshot must be byte for byte what it was, and
run 2 must start from the parent's state.
"""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from sbx_support import TEST_LIMITS, backend_config, make_repo, overlay_backends, sh

from policies.contract import SandboxMode
from sandbox.factory import open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot

#: Bookkeeping that changes with every lease, not what a run starts from.
_BOOKKEEPING = {"leases", "used"}


def _manifest(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under a snapshot (not its leases): type and mode bits, owner, size,
    mtime and ctime, and the content of files and links."""
    found: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in _BOOKKEEPING:
            continue
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            content: object = hashlib.sha256(path.read_bytes()).hexdigest()
        elif stat.S_ISLNK(info.st_mode):
            content = str(path.readlink())
        else:
            content = None
        found[str(rel)] = (info.st_mode, info.st_uid, info.st_gid, info.st_size,
                           info.st_mtime_ns, info.st_ctime_ns, content)
    return found


def _attack(workspace: Path, lower: Path, git_dir: Path, store: Path) -> str:
    """Every way the child could reach the snapshot, each one echoing if it worked."""
    steps = [
        # Through the merged view: copy-up must keep every write in the upper layer.
        "echo pwned > README.md", "chmod 777 src", "rm -f docs/guide.md", "mkdir -p new/dir",
        "echo pwned >> src/app.py", "ln -sf /etc/passwd data.bin",
        "mv src moved-src", "touch -d 2001-01-01 tools/build.sh",
        # The host paths of the shared checkout, its git dir and the store.
        f"echo pwned > {lower}/README.md", f"rm {lower}/src/app.py",
        f"mkdir {lower}/planted", f"echo pwned > {git_dir}/HEAD",
        f"echo pwned > {git_dir}/index", f"mkdir -p {git_dir}/hooks",
        f"echo '#!/bin/sh' > {git_dir}/hooks/post-checkout",
        f"echo pwned > {store}/planted", f"ln {lower}/README.md hard-link",
        # The .git pointer, and git itself on the workspace.
        "echo 'gitdir: /tmp/evil' > .git", "rm -f .git",
        "git update-index --really-refresh", "git add -A", "git config core.hooksPath /tmp",
        "git gc --prune=now", "git checkout -- .",
        # Overlay metadata: a forged opaque marker or redirect on a directory.
        "setfattr -n trusted.overlay.opaque -v y docs",
        "setfattr -n trusted.overlay.redirect -v /src docs",
    ]
    return "; ".join(f"({step}) >/dev/null 2>&1 && echo 'DID: {step}'" for step in steps)


@pytest.mark.parametrize("backend", overlay_backends(only=("bubblewrap", "docker")),
                         indirect=True)
def test_a_child_of_run_one_cannot_change_what_run_two_starts_from(
        backend: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("the parent's untracked state\n")
    (repo / "README.md").write_text("the parent's unstaged state\n")
    parent_files = {rel: (repo / rel).read_bytes()
                    for rel in ("README.md", "notes.txt", "src/app.py", "docs/guide.md")}
    state_root = tmp_path / "state"
    config = backend_config(backend, TEST_LIMITS)
    first = acquire_snapshot(repo, state_root=state_root)
    run_one = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                           state_root=state_root, snapshot=first)
    release_snapshot(first)
    try:
        layers = run_one.workspace.overlay
        git_dir = run_one.workspace.child_git
        assert layers is not None and git_dir is not None
        before = _manifest(first.path)
        done = sh(run_one, _attack(run_one.root, layers.lower, git_dir, first.store))
        did = [line for line in done.stdout.decode().splitlines() if line.startswith("DID")]
        # What worked was inside the workspace, and only there.
        assert not [line for line in did if str(state_root) in line or ".git" in line], did
        assert "README.md" in {c.path for c in run_one.collect_diff().changed}
    finally:
        run_one.teardown()
    assert _manifest(first.path) == before

    second = acquire_snapshot(repo, state_root=state_root)
    run_two = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                           state_root=state_root, snapshot=second)
    release_snapshot(second)
    try:
        assert (second.id, second.reused, run_two.workspace_kind) == (first.id, True,
                                                                       "overlay")
        for rel, data in parent_files.items():
            assert run_two.files.read_bytes(rel) == data, rel
        assert not run_two.files.exists("planted") and not run_two.files.exists("new")
        listed = sh(run_two, "git status --porcelain && git log --format=%H -1").stdout
        assert listed.decode().split() == [second.commit]
        assert run_two.collect_diff().is_empty
    finally:
        run_two.teardown()
    assert _manifest(first.path) == before
