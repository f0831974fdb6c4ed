"""An overlay child's diff, at the cost of what it changed (not of the repository).

A plain worktree's diff refreshes a full index against the whole tree. An overlay
workspace knows what its child touched: its upper layer
(:func:`sandbox.workspaces.upper.scan_upper`). So, after the same freeze and the
same private-git check:

1. the upper layer gives the *changed roots* and what a diff leaves out (nested
   repositories, ``.git`` aliases, special files), reported exactly as a walk of
   the whole merged tree would report them;
2. a root below a submodule (gitlink) of the snapshot becomes the submodule
   itself, whose contents git never stages; the snapshot's entries at or below
   every root are read from its trees (``cat-file --batch``) into a small index;
3. that index is brought up to date from the merged view by git itself:
   ``update-index --add --replace`` for the files and symlinks the child left
   (tracked ones, and untracked ones ``check-ignore`` does not ignore: git's own
   ignore rules, ``.gitignore`` files the child wrote included) and
   ``--force-remove`` for tracked paths that are gone; git hashes each file with
   the attributes of its path and the index blob beside it, as ``add`` does; new
   objects go to the child's private store only;
4. the snapshot's root tree with every changed root replaced by that index's
   entries is written (:func:`sandbox.workspaces.trees.replace_subtrees`: only the
   directories on the way), and ``git diff-tree -r -M`` between the two trees gives
   the same ``--raw``, ``--numstat`` and patch bytes ``diff-index --cached`` gives
   over a full index of the same content (:mod:`sandbox.workspaces.diffcore`).

Every git command runs hardened (:mod:`sandbox.gitsafe`) with the child's private
git directory, never the parent's configuration.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import BinaryIO

from sandbox.gitsafe import run_git, stream_git
from sandbox.names import is_under
from sandbox.state import SandboxState
from sandbox.workspaces.diffcore import Compare, Prepared, RawEntry, finish, gitlink_restore
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.privategit import (
    reading_env,
    seed_index_blobs,
    verify_private_git,
    writing_env,
)
from sandbox.workspaces.trees import TREE_MODE, Entry, TreeReader, replace_subtrees, store_trees
from sandbox.workspaces.upper import scan_upper

__all__ = ["prepare_overlay"]

_GITLINK = "160000"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPERATION = "collect_diff"



def _nul(paths: Iterable[str]) -> bytes:
    return b"".join(path.encode("utf-8", "surrogateescape") + b"\0" for path in paths)


def _expand(reader: TreeReader, base_tree: str,
            roots: list[str]) -> tuple[list[str], dict[str, Entry]]:
    """The roots as git can stage them, and the snapshot's entries at or below them.

    A root below a non-tree entry of the snapshot (a submodule whose empty
    directory the child wrote into) becomes that entry.
    """
    adjusted: list[str] = []
    tracked: dict[str, Entry] = {}
    for root in roots:
        parts = root.split("/")
        tree: str | None = base_tree
        for depth, part in enumerate(parts):
            entry = reader.tree(tree).get(part) if tree is not None else None
            if entry is None:
                break  # new: the snapshot has nothing here
            path = "/".join(parts[:depth + 1])
            if entry[0] == TREE_MODE:
                if depth == len(parts) - 1:
                    tracked.update(reader.files(entry[1], f"{path}/"))
                tree = entry[1]
                continue
            tracked[path] = entry
            root = path  # noqa: PLW2901 - the root moves up to the non-tree entry
            break
        adjusted.append(root)
    adjusted.sort()
    kept: list[str] = []
    for root in adjusted:  # sorted: a root's descendants follow it
        if not kept or not is_under(root, {kept[-1]}):
            kept.append(root)
    return kept, tracked


def _lstat(root_fd: int, path: str) -> os.stat_result | None:
    """``lstat`` of ``path`` below ``root_fd`` without following any symlink on the way."""
    *parents, name = path.split("/")
    fd = root_fd
    try:
        for part in parents:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = inner
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink on the way: nothing is there
            return None
        raise
    finally:
        if fd != root_fd:
            os.close(fd)


def _removed(merged: Path, tracked: dict[str, Entry], present: Collection[str],
             keep: Collection[str]) -> list[str]:
    """Tracked paths that are gone from the merged view (a file turned into a directory
    counts; a submodule's directory does not)."""
    gone: list[str] = []
    root_fd = os.open(merged, _DIR_FLAGS)
    try:
        for path, (mode, _) in sorted(tracked.items()):
            if path in present or is_under(path, keep):
                continue
            info = _lstat(root_fd, path)
            if info is None or (stat.S_ISDIR(info.st_mode) and mode != _GITLINK):
                gone.append(path)
    finally:
        os.close(root_fd)
    return gone


def _index_entries(git_dir: Path, merged: Path, env: dict[str, str]) -> dict[str, Entry]:
    listing = run_git(["ls-files", "-s", "-z"], git_dir=git_dir, work_tree=merged, env=env,
                      operation=_OPERATION).stdout
    entries: dict[str, Entry] = {}
    for record in listing.split(b"\0"):
        if record:
            header, path = record.split(b"\t", 1)
            mode, oid, _stage = header.decode().split(" ")
            entries[path.decode("utf-8", "surrogateescape")] = (mode, oid)
    return entries


def prepare_overlay(ws: Workspace, state: SandboxState, setid: Collection[str]) -> Prepared:
    """Stage what an overlay child changed and list it (see the module docstring)."""
    layers, git_dir, base = ws.overlay, ws.private_git, ws.base_commit
    if layers is None or git_dir is None or base is None:  # pragma: no cover - by construction
        raise ValueError("not an overlay workspace")
    verify_private_git(git_dir, ws.git_files)
    upper = scan_upper(layers.upper, layers.lower)
    excluded = set(upper.excluded_paths)
    merged = layers.merged
    index = state.dir / "collect.index"
    index.unlink(missing_ok=True)
    read_env, write_env = reading_env(git_dir, index), writing_env(git_dir, index)

    def git(args: list[str], *, env: dict[str, str] = read_env, data: bytes | None = None,
            check: bool = True) -> bytes:
        done = run_git(args, git_dir=git_dir, work_tree=merged, env=env, input_bytes=data,
                       check=check, operation=_OPERATION)
        if not check and done.returncode not in (0, 1):
            run_git(args, git_dir=git_dir, work_tree=merged, env=env, input_bytes=data,
                    operation=_OPERATION)  # raises with git's own message
        return done.stdout

    def stream(argv: list[str], sink: BinaryIO, limit: int | None) -> int | None:
        return stream_git(argv, git_dir=git_dir, env=read_env, sink=sink, limit=limit,
                          operation=_OPERATION)

    def rebuild() -> str:
        tree, trees = replace_subtrees(reader, base_tree, roots,
                                       _index_entries(git_dir, merged, read_env))
        store_trees(git_dir=git_dir, env=writing_env(git_dir), trees=trees)
        return tree

    with TreeReader(git_dir=git_dir, env=reading_env(git_dir, None)) as reader:
        base_tree = reader.commit_tree(base)
        roots, tracked = _expand(reader, base_tree,
                                 [r for r in upper.roots if not is_under(r, excluded)])
        submodules = {path for path, (mode, _) in tracked.items() if mode == _GITLINK}
        present = [p for p in upper.present
                   if not is_under(p, excluded) and not is_under(p, submodules - {p})]
        new_tree = base_tree
        if roots:
            git(["update-index", "-z", "--index-info"], data=b"".join(
                f"{mode} {oid}\t".encode() + path.encode("utf-8", "surrogateescape") + b"\0"
                for path, (mode, oid) in tracked.items()))
            if tracked:
                seed_index_blobs(git_dir=git_dir, work_tree=merged, private_git=git_dir,
                                 index=index, attributes=ws.attributes or upper.attributes)
            untracked = [p for p in present if p not in tracked]
            ignored: set[str] = set()
            if untracked:
                answer = git(["check-ignore", "--stdin", "-z"], data=_nul(untracked), check=False)
                ignored = {p.decode("utf-8", "surrogateescape")
                           for p in answer.split(b"\0") if p}
            gone = _removed(merged, tracked, set(present), excluded)
            if gone:
                git(["update-index", "-z", "--force-remove", "--stdin"], env=write_env,
                    data=_nul(gone))
            staged = [p for p in present if p not in ignored]
            if staged:
                git(["update-index", "-z", "--add", "--replace", "--stdin"], env=write_env,
                    data=_nul(staged))
            new_tree = rebuild()

        def restore(gitlinks: list[RawEntry]) -> Compare:
            git(["update-index", "-z", "--index-info"], data=gitlink_restore(gitlinks))
            return Compare(head=("diff-tree", "-r"), tail=(base_tree, rebuild()))

        return finish(
            sandbox_id=state.id, base=base,
            compare=Compare(head=("diff-tree", "-r"), tail=(base_tree, new_tree)),
            run=git, stream=stream, restore=restore,
            excluded=upper.excluded, setid=setid,
        )
