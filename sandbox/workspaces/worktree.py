"""Worktree mode: a fresh checkout of the snapshot, outside the parent's working tree.

The checkout lives under the state root (``worktrees/<id>``, outside the
working tree and the git dir, so never in ``git status`` or ``git worktree
list``), populated by a hardened ``read-tree -u`` (no hooks, no filters); its
``.git`` points at the child's private git directory. The parent's checkout is
untouched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sandbox.gitsafe import git_env, run_git
from sandbox.workspaces.racy import settle_racy

__all__ = ["checkout_worktree", "chown_tree", "remove_tree"]


def checkout_worktree(commit: str, *, private_git: Path, worktree: Path, baseline: Path,
                      chown: tuple[int, int] | None = None) -> None:
    """Check ``commit`` out into a new ``worktree`` whose ``.git`` points at ``private_git``.

    ``baseline`` becomes the index with the checkout's stat data (the diff base), none
    of its entries racily clean (:func:`sandbox.workspaces.racy.settle_racy`); ``chown``
    gives the checkout to another uid (the docker user) and refreshes that index first.
    """
    worktree.mkdir(mode=0o700)  # the owner only (chowned to the container user below)
    (worktree / ".git").write_text(f"gitdir: {private_git}\n")
    env = git_env(index_file=baseline)
    run_git(["read-tree", "--reset", "-u", commit], git_dir=private_git, work_tree=worktree,
            env=env, operation="create_worktree")
    _make_gitlink_dirs(private_git, worktree, env)
    if chown is not None:
        chown_tree(worktree, *chown)
        run_git(["update-index", "-q", "--refresh"], git_dir=private_git, work_tree=worktree,
                env=env, check=False, operation="create_worktree")
    # No entry racily clean: the child's git, which cannot write its index back, would hash
    # every file checked out in the index's second on each `git status` (racy.py).
    settle_racy(baseline, worktree)
    shutil.copyfile(baseline, private_git / "index")  # the child's own `git status` starts clean


def _make_gitlink_dirs(common_dir: Path, worktree: Path, env: dict[str, str]) -> None:
    """Empty directories for submodules, as ``git checkout`` makes them (read-tree does not)."""
    listing = run_git(["ls-files", "-s", "-z"], git_dir=common_dir, work_tree=worktree,
                      env=env, operation="create_worktree").stdout
    for entry in listing.split(b"\0"):
        if entry.startswith(b"160000 "):
            rel = entry.split(b"\t", 1)[1].decode("utf-8", "surrogateescape")
            (worktree / rel).mkdir(parents=True, exist_ok=True)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give every entry under ``root`` (not the ``.git`` pointer) to ``uid:gid``."""
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            if base == root and name == ".git":
                continue
            os.lchown(base / name, uid, gid)


def _force_remove(function: object, path: str, excinfo: object) -> None:
    del function, excinfo
    target = Path(path)
    target.parent.chmod(0o700)  # a child may have made its own directories unreadable
    if target.is_dir() and not target.is_symlink():
        target.chmod(0o700)
        shutil.rmtree(target)
    else:
        target.unlink()


def remove_tree(path: Path) -> None:
    """Remove a directory tree the child wrote (never following its symlinks)."""
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=_force_remove)
