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
"""

from __future__ import annotations

import shutil

from policies.contract import SandboxMode
from sandbox.gitsafe import check_repository_config
from sandbox.state import SandboxState
from sandbox.workspaces.changes import RECORD_FILE, TreeRecord
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.privategit import create_private_git, read_tracked
from sandbox.workspaces.repo import RepoInfo
from sandbox.workspaces.snapshot import take_snapshot
from sandbox.workspaces.worktree import checkout_worktree

__all__ = ["create_workspace"]


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
    commit, index, scan = take_snapshot(repo, state, private_git, manifest=in_place)
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
    return workspace
