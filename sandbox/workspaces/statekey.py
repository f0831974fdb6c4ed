"""The key of a shared snapshot: a digest of exactly the state it holds, found cheaply.

A snapshot (:mod:`sandbox.workspaces.snapshot`) is named by a digest of what
decides its content: the staged tree, the parent commit, the repository's paths
and the data-only git settings and ignore rules its checkout is made with. Two
acquisitions of the same state get the same key, so the second leases the
snapshot the first made; any other state gets another key.

The tree is known once the parent's work tree is staged into a private index,
before anything is committed: an index of version 2 (no entry with extended
flags, so no intent-to-add or skip-worktree entry) is fully described by its
entries' mode, object id, stage and path, which ``git ls-files -s`` lists, and
those entries make exactly one tree. Keying by that listing spares a reused
snapshot the ``write-tree`` (which, seeing only corral's own store, rewrites
every tree of the repository) and the commit. An index of another version is
keyed by the commit itself, as before (slower, never wrong). Cheaper still, and
tried first: the staged index's own checksum (:func:`index_key`), an alias
recorded for a snapshot whenever an index with those very bytes was found to
hold its state (the listing of a second run on an unchanged tree is the same
file, byte for byte).

Finding what to leave out of the staging (nested repositories, ``.git`` aliases,
special files) walks the whole tree. The walk can be skipped when the exclusions
the previous snapshot of the repository was staged with still hold
(:func:`exclusions_hold`): a new exclusion that git would stage (a nested
repository, an alias) changes the listing, so the key matches no snapshot and
the caller walks the tree after all; a new special file git leaves out by
itself; an exclusion that no longer holds (a nested repository's ``.git``
removed) is found here, before staging.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from sandbox.gitsafe import run_git
from sandbox.results import ExcludedPath
from sandbox.workspaces.privategit import reading_env
from sandbox.workspaces.repo import RepoInfo

__all__ = ["commit_key", "exclusions_hold", "index_key", "listing_key"]

_INDEX_V2 = b"DIRC\x00\x00\x00\x02"


def _key(parts: Sequence[bytes], repo: RepoInfo, private_git: Path) -> str:
    """The digest of ``parts``, the repository's paths and parent commit, and the private git
    dir's data-only settings and ignore rules (its checkout is made with them)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
        h.update(b"\0")
    h.update(f"{repo.top}\0{repo.common_dir}\0{repo.head or ''}\0".encode())
    for name in ("config", "info/exclude"):
        try:
            h.update((private_git / name).read_bytes())
        except OSError:
            h.update(b"\1missing")
        h.update(b"\0")
    return f"snap-{h.hexdigest()[:20]}"


def listing_key(repo: RepoInfo, private_git: Path, index: Path) -> str | None:
    """The key of the state staged in ``index`` (see the module docstring), or ``None`` when
    the index is not of version 2 (:func:`commit_key` then)."""
    with index.open("rb") as handle:
        if handle.read(len(_INDEX_V2)) != _INDEX_V2:
            return None
    listing = run_git(["ls-files", "-s", "-z"], git_dir=repo.git_dir,
                      env=reading_env(private_git, index), operation="snapshot").stdout
    return _key((b"corral-listing-v1", listing), repo, private_git)


def index_key(repo: RepoInfo, private_git: Path, index: Path) -> str | None:
    """A key of the staged ``index`` by its bytes: git's own checksum of the file (its
    trailer, over every entry, flags and stat data included), or ``None`` (no commit yet,
    or a checksum git skipped). Byte-identical staged indexes hold the same state, so a
    snapshot this key was recorded for (an alias of its state key) is that state; the
    same state staged with other stat data gets another key and finds it by
    :func:`listing_key`."""
    if repo.head is None:
        return None
    size = len(repo.head) // 2
    with index.open("rb") as handle:
        handle.seek(-size, os.SEEK_END)
        trailer = handle.read(size)
    if len(trailer) != size or not any(trailer):
        return None
    return _key((b"corral-index-v1", trailer), repo, private_git)


def commit_key(repo: RepoInfo, private_git: Path, commit: str) -> str:
    """The key of a state by its snapshot commit (fixed identity and date)."""
    return _key((b"corral-commit-v1", commit.encode()), repo, private_git)


def _holds(top: Path, entry: ExcludedPath) -> bool:
    """Whether ``entry`` would be excluded again, for the same reason (no link on the way
    is followed, as the walk follows none)."""
    parts = entry.path.split("/")
    place = top
    try:
        for part in parts[:-1]:
            place = place / part
            if not stat.S_ISDIR(place.lstat().st_mode):
                return False
        target = place / parts[-1]
        mode = target.lstat().st_mode
        if entry.reason == "nested_repository":
            return stat.S_ISDIR(mode) and os.path.lexists(target / ".git")
        if entry.reason == "special_file":
            return not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode))
        return entry.reason == "protected_name"
    except OSError:
        return False


def exclusions_hold(top: Path, excluded: Sequence[ExcludedPath]) -> bool:
    """Whether every exclusion of an earlier walk of ``top`` still holds (an unreadable or
    too deep directory: never assumed, the tree is walked again)."""
    return all(_holds(top, entry) for entry in excluded)
