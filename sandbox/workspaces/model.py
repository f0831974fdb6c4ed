"""What a child's workspace is: its root, its mode, its kind, its diff base, and its mounts.

Kinds (:data:`WorkspaceKind`): ``checkout`` (the parent's checkout itself:
read-only and workspace-write modes), ``worktree`` (a checkout of its own, worktree
mode) and ``overlay`` (worktree mode as a copy-on-write layer over a shared
snapshot checkout, :mod:`sandbox.workspaces.overlay`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from policies.contract import SandboxMode
from sandbox.names import CHILD_READ_ONLY
from sandbox.results import ExcludedPath
from sandbox.workspaces.changes import TreeRecord
from sandbox.workspaces.overlay import OverlayLayers
from sandbox.workspaces.privategit import object_dirs
from sandbox.workspaces.repo import RepoInfo
from sandbox.workspaces.scratch import ScratchLayer
from sandbox.workspaces.setid import clear_setid, clear_setid_paths, find_setid

__all__ = ["Mount", "Workspace", "WorkspaceKind"]

WorkspaceKind = Literal["checkout", "worktree", "overlay"]


@dataclass(frozen=True)
class Mount:
    """One host path made visible inside a sandbox: at ``path``, from ``source`` (by default
    the same path)."""

    path: Path
    writable: bool
    source: Path | None = None

    @property
    def origin(self) -> Path:
        """The host path bound."""
        return self.source or self.path


@dataclass
class Workspace:
    """Where one child works, and what corral needs to compute its diff later."""

    repo: RepoInfo
    mode: SandboxMode
    root: Path
    base_commit: str | None = None
    baseline_index: Path | None = None
    worktree: Path | None = None
    #: The child's private git directory (worktree and workspace-write modes).
    private_git: Path | None = None
    #: Its tracked files as created (see :func:`sandbox.workspaces.privategit.verify_private_git`).
    git_files: dict[str, str] = field(default_factory=dict)
    snapshot_excluded: tuple[ExcludedPath, ...] = ()
    nested_git: tuple[str, ...] = ()
    #: The tree as the child found it (workspace-write; see :mod:`sandbox.workspaces.changes`).
    record: TreeRecord | None = None
    kind: WorkspaceKind = "checkout"
    #: Why a worktree was made where an overlay was asked for (``None``: it was not).
    fallback: str | None = None
    #: The shared snapshot this workspace starts from (:mod:`sandbox.workspaces.snapshot`).
    snapshot_id: str | None = None
    #: The overlay's layers (``overlay`` kind).
    overlay: OverlayLayers | None = None
    #: The git directory the child's ``.git`` names, when it is not :attr:`private_git`
    #: (an overlay's shared checkout has its own).
    child_git: Path | None = None
    #: More object directories the child's git reads (a shared snapshot's store).
    shared_objects: tuple[Path, ...] = ()
    #: Whether the snapshot holds ``.gitattributes`` files (overlay diffs seed blobs then).
    attributes: bool = False
    #: More paths (inside the sandbox) where the workspace is mounted too, with the same
    #: sub-mounts: an environment's setup path, so absolute paths its setup wrote hold.
    aliases: tuple[Path, ...] = ()
    #: Read-only binds from elsewhere (an environment's carried paths and layer entries).
    extra_mounts: tuple[Mount, ...] = ()
    #: A read-only checkout's throwaway layer (review commands,
    #: :mod:`sandbox.workspaces.scratch`): commands write it, never the checkout.
    scratch: ScratchLayer | None = None

    @property
    def writable(self) -> bool:
        """Whether the child may write the workspace."""
        return self.mode is not SandboxMode.READ_ONLY

    @property
    def files_root(self) -> Path:
        """Where the host-side file API reads: a throwaway layer's merged view (what the
        child's commands wrote included), else the root."""
        return self.scratch.merged if self.scratch is not None else self.root

    @property
    def read_only_config(self) -> tuple[str, ...]:
        """The agent and editor configuration the child may not write
        (:data:`sandbox.names.CHILD_READ_ONLY`): in workspace-write only, where the child
        writes the user's checkout itself (elsewhere its writes reach the checkout only as
        a diff a person merges, whose review flags name them)."""
        if self.mode is SandboxMode.WORKSPACE_WRITE and self.kind == "checkout":
            return CHILD_READ_ONLY
        return ()

    def protected_config(self) -> dict[str, Path]:
        """Each read-only configuration path as the tree has it now (relative path ->
        the host path to bind read-only): an existing one at its own path; one that is a
        symlink at the directory or file it leads to, when that is inside the workspace
        (a link to outside leads where the child cannot write anyway). Missing ones are
        not here: :mod:`sandbox.workspaces.held` moves what a command creates there out
        of the checkout."""
        found: dict[str, Path] = {}
        root = self.root.resolve()
        for rel in self.read_only_config:
            path = self.root / rel
            if not os.path.lexists(path):
                continue
            if not path.is_symlink():
                found[rel] = path
                continue
            target = path.resolve()
            if target != root and target.is_relative_to(root) and target.exists():
                inside = target.relative_to(root)
                found[inside.as_posix()] = self.root / inside
        return found

    def sweep_setid(self) -> list[str]:
        """Clear setuid/setgid bits the child left (:mod:`sandbox.workspaces.setid`); the
        paths cleared. An overlay's files are found in its upper layer and cleared through
        the merged view; nothing else of the snapshot can hold such a bit. (Before a diff,
        :func:`sandbox.workspaces.diff.sweep_for_diff` sweeps in the diff's own walk.)"""
        if self.overlay is not None:
            return clear_setid_paths(self.overlay.merged, find_setid(self.overlay.upper))
        return clear_setid(self.root)

    def mounts(self) -> list[Mount]:
        """Bind mounts, parents before children (a later mount shadows an earlier one).

        The workspace is writable only when the mode allows; its ``.git`` (pointer
        or directory), nested repositories' ``.git``, and every git directory the
        child's own git needs (a worktree's private git dir and the parent's
        object stores; otherwise the parent's git and common dirs) are read-only, and
        so is the agent and editor configuration of a workspace-write checkout
        (:meth:`protected_config`). A read-only checkout with a throwaway layer is its
        merged view, writable, at the checkout's path; its ``.git`` is still the real one,
        read-only.
        """
        mounts = [Mount(self.root, self.writable)]
        if self.scratch is not None:  # commands write the throwaway layer, seen at the root
            mounts = [Mount(self.root, True, self.scratch.merged)]
        dot_git = self.root / ".git"
        if os.path.lexists(dot_git):
            mounts.append(Mount(dot_git, False))
        mounts += [Mount(self.root / nested, False) for nested in self.nested_git]
        mounts += [Mount(path, False) for path in self.protected_config().values()]
        if self.worktree is not None and self.private_git is not None:
            git_paths = [self.child_git or self.private_git, *self.shared_objects,
                         *object_dirs(self.repo.common_dir)]
        else:
            git_paths = [self.repo.git_dir, self.repo.common_dir]
        for git_path in git_paths:
            if not any(git_path.is_relative_to(m.path) and not m.writable for m in mounts):
                mounts.append(Mount(git_path, False))
        for alias in self.aliases:
            mounts += [Mount(alias / m.path.relative_to(self.root), m.writable, m.origin)
                       for m in list(mounts) if m.path.is_relative_to(self.root)]
        mounts += self.extra_mounts
        unique = {mount.path: mount for mount in mounts}
        return sorted(unique.values(), key=lambda mount: len(mount.path.parts))

