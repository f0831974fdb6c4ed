"""Making a child's workspace in its mode, from a snapshot of the parent's current state.

Modes:

- ``read-only``: the parent's checkout itself, nothing writable, no snapshot;
- ``workspace-write``: the parent's checkout, writable; its git directories
  (and any nested repository's ``.git``) read-only; the snapshot
  (:mod:`sandbox.workspaces.snapshot`) is the diff base, and an lstat manifest
  of the whole tree finds what git's diff cannot show
  (:mod:`sandbox.workspaces.changes`);
- ``worktree``: a fresh checkout of the snapshot under the state root
  (:mod:`sandbox.workspaces.worktree`). The parent's checkout is untouched.

A worktree-mode child opened on a shared snapshot (:mod:`sandbox.workspaces.snapshot`)
gets an overlay over the snapshot's checkout (:func:`overlay_workspace`), or, where
overlays cannot be used, a worktree checked out from the snapshot commit
(:func:`worktree_from_snapshot`); either way nothing is snapshotted again.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from policies.contract import SandboxMode
from sandbox.gitsafe import check_repository_config
from sandbox.state import SandboxState
from sandbox.workspaces.changes import RECORD_FILE, TreeRecord
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.overlay import OverlayLayers, mount_overlay
from sandbox.workspaces.privategit import create_private_git, read_tracked, set_head
from sandbox.workspaces.repo import RepoInfo
from sandbox.workspaces.snapshot import Checkout, SnapshotRef
from sandbox.workspaces.staging import take_snapshot
from sandbox.workspaces.worktree import checkout_worktree

__all__ = ["create_workspace", "overlay_layers", "overlay_workspace", "worktree_from_snapshot"]


def create_workspace(
    repo: RepoInfo, mode: SandboxMode, state: SandboxState, *, chown: tuple[int, int] | None = None
) -> Workspace:
    """Make the child's workspace in ``mode`` (see the module docstring).

    ``chown`` gives a fresh worktree to another uid (the docker user) and
    refreshes the private index afterwards.
    """
    if mode is SandboxMode.READ_ONLY:
        return Workspace(repo=repo, mode=mode, root=repo.top)
    check_repository_config(repo.git_dir)  # the snapshot runs git with the parent's config
    private_git = state.private_git
    create_private_git(private_git, parent_git_dir=repo.git_dir, common_dir=repo.common_dir)
    in_place = mode is SandboxMode.WORKSPACE_WRITE
    snap = take_snapshot(repo, state.dir, private_git, manifest=in_place)
    commit, index, scan = snap.commit, snap.index, snap.scan
    baseline = state.dir / "baseline.index"
    workspace = Workspace(repo=repo, mode=mode, root=repo.top, base_commit=commit,
                          baseline_index=baseline, private_git=private_git,
                          git_files=read_tracked(private_git),
                          snapshot_excluded=tuple(scan.excluded))
    if in_place:  # the child writes the checkout: remember all of it, git's view or not
        shutil.copyfile(index, baseline)
        workspace.nested_git = tuple(scan.nested_git)
        workspace.record = TreeRecord.of(scan)
        workspace.record.save(state.dir / RECORD_FILE)
        return workspace
    checkout_worktree(commit, private_git=private_git, worktree=state.worktree,
                      baseline=baseline, chown=chown)
    workspace.root = workspace.worktree = state.worktree
    workspace.kind = "worktree"
    return workspace


def worktree_from_snapshot(ref: SnapshotRef, state: SandboxState, *,
                           chown: tuple[int, int] | None = None,
                           fallback: str | None = None) -> Workspace:
    """A plain worktree checked out from a shared snapshot (the overlay's fallback).

    Its private git dir borrows the snapshot's store; nothing is snapshotted again.
    """
    private_git = state.private_git
    create_private_git(private_git, parent_git_dir=ref.repo.git_dir,
                       common_dir=ref.repo.common_dir, shared=[ref.store])
    set_head(private_git, ref.commit)
    baseline = state.dir / "baseline.index"
    checkout_worktree(ref.commit, private_git=private_git, worktree=state.worktree,
                      baseline=baseline, chown=chown)
    return Workspace(repo=ref.repo, mode=SandboxMode.WORKTREE, root=state.worktree,
                     base_commit=ref.commit, baseline_index=baseline, worktree=state.worktree,
                     private_git=private_git, git_files=read_tracked(private_git),
                     snapshot_excluded=ref.excluded, kind="worktree", fallback=fallback,
                     snapshot_id=ref.id, shared_objects=(ref.store,), attributes=ref.attributes)


def overlay_layers(checkout: Checkout, state: SandboxState,
                   below: tuple[Path, ...] = ()) -> OverlayLayers:
    """Where a child's overlay over ``checkout`` (and ``below`` it: an environment's layer)
    lives (nothing is made)."""
    return OverlayLayers(lower=checkout.tree, upper=state.dir / "overlay" / "upper",
                         work=state.dir / "overlay" / "work", merged=state.worktree,
                         below=below)


def overlay_workspace(ref: SnapshotRef, state: SandboxState, checkout: Checkout,
                      layers: OverlayLayers) -> Workspace:
    """Mount a child's overlay over the snapshot ``checkout`` (record ``layers`` first).

    The upper layer's root takes the checkout root's owner and mode (the merged
    root shows them); the mountpoint itself is ``0000``, so nothing can use it
    while the overlay is not mounted. Raises :class:`sandbox.errors.OverlayUnavailable`
    when the kernel refuses the mount.
    """
    private_git = state.private_git
    create_private_git(private_git, parent_git_dir=ref.repo.git_dir,
                       common_dir=ref.repo.common_dir, shared=[ref.store])
    set_head(private_git, ref.commit)
    lower = checkout.tree.stat()
    layers.upper.parent.mkdir(mode=0o700, exist_ok=True)
    layers.upper.mkdir(mode=0o700)
    os.chown(layers.upper, lower.st_uid, lower.st_gid)
    layers.upper.chmod(stat.S_IMODE(lower.st_mode))
    layers.work.mkdir(mode=0o700)
    layers.merged.mkdir(mode=0o700)
    layers.merged.chmod(0)
    mount_overlay(layers)
    return Workspace(repo=ref.repo, mode=SandboxMode.WORKTREE, root=layers.merged,
                     base_commit=ref.commit, worktree=layers.merged, private_git=private_git,
                     git_files=read_tracked(private_git), snapshot_excluded=ref.excluded,
                     kind="overlay", snapshot_id=ref.id, overlay=layers,
                     child_git=checkout.git_dir, shared_objects=(ref.store,),
                     attributes=ref.attributes)
