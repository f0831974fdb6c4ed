"""Find what must stay out of a snapshot or a diff: nested repositories, ``.git``
aliases and special files (threats B1.5, B1.6, B2.12); optionally record an
lstat manifest of the whole tree.

The walk uses directory file descriptors and never follows a symlink, never
opens a file, and never descends into the top-level ``.git`` or (for the
exclusions) into anything it excludes, so a child cannot make it hang (FIFOs)
or wander outside.

The manifest (``scan_tree(root, manifest=True)``) maps every path under
``root`` but the top-level ``.git`` to its :data:`Stat` (type and permission
bits, size, mtime and ctime in nanoseconds, inode, owner, device number):
ignored files, nested repositories' contents (not their ``.git``) and special
files included, which is everything a snapshot leaves out. Comparing two
manifests (:mod:`sandbox.workspaces.changes`) finds what a child changed that git's diff
cannot show. ctime cannot be set from user space, so a child that rewrites a
file and restores its size and mtime still changes it; the inode catches a
file replaced by another (rename swaps). A directory the walk cannot read (a
child's ``chmod 000`` when corral is not root) is reported as ``unreadable``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.names import is_git_alias
from sandbox.results import ExcludedPath, ExcludedReason

__all__ = ["MAX_DEPTH", "Manifest", "ScanResult", "Stat", "kind_of", "scan_tree"]

#: Directories deeper than this are left out whole (keeps the walk's recursion bounded).
MAX_DEPTH = 128
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: (st_mode, size, mtime_ns, ctime_ns, inode, uid, gid, rdev) of one entry.
Stat = tuple[int, int, int, int, int, int, int, int]
#: Relative ``/``-separated path -> its :data:`Stat`.
Manifest = dict[str, Stat]


@dataclass
class ScanResult:
    """Paths (relative, ``/``-separated) to leave out, with the reason for each."""

    excluded: list[ExcludedPath] = field(default_factory=list)
    #: Nested repositories' ``.git`` entries (for read-only mounts over existing ones).
    nested_git: list[str] = field(default_factory=list)
    #: Whether a ``.gitattributes`` file was seen outside the excluded paths.
    attributes: bool = False
    #: The lstat manifest, when asked for.
    manifest: Manifest | None = None
    #: Directories the walk could not read (excluded or not): their contents are unknown.
    unreadable: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        """Just the excluded paths."""
        return [entry.path for entry in self.excluded]


def kind_of(mode: int) -> str:
    """``file``, ``symlink``, ``directory``, ``fifo``, ``socket``, ``device`` or ``unknown``."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "unknown"


def scan_tree(root: Path, *, manifest: bool = False) -> ScanResult:
    """Walk ``root`` and report every entry a snapshot or diff must not include.

    A directory holding an entry named exactly ``.git`` (directory or file) is a
    nested repository: the whole directory is excluded. Any other ``.git``
    alias (``.GIT``, ``git~1``...) is excluded by itself, as is every FIFO,
    socket and device node, and every directory the walk cannot read.
    With ``manifest``, also record every entry's :data:`Stat`.
    """
    result = ScanResult(manifest={} if manifest else None)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        _walk(root_fd, "", result, excluded=False)
    finally:
        os.close(root_fd)
    result.excluded.sort(key=lambda entry: entry.path)
    result.nested_git.sort()
    return result


def _may_alias(name: str) -> bool:
    """Cheap pre-check of :func:`sandbox.names.is_git_alias`: an ASCII name can fold to
    ``.git`` or ``git~1`` only if it contains ``git`` in some case (ignorable code points
    and case folds that matter are outside ASCII)."""
    return not name.isascii() or "git" in name.lower()


def _stat(info: os.stat_result) -> Stat:
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino,
            info.st_uid, info.st_gid, info.st_rdev)


def _exclude(result: ScanResult, excluded: bool, path: str, reason: ExcludedReason,
             detail: str) -> None:
    if not excluded:  # inside an excluded directory, its own entry covers everything
        result.excluded.append(ExcludedPath(path=path, reason=reason, detail=detail))


def _mode(entry: os.DirEntry[str], path: str, manifest: Manifest | None) -> int | None:
    """The entry's type and mode bits (``None`` if it vanished); lstat only when needed."""
    try:
        if manifest is not None:
            info = entry.stat(follow_symlinks=False)
            manifest[path] = _stat(info)
            return info.st_mode
        if entry.is_dir(follow_symlinks=False):
            return stat.S_IFDIR
        if entry.is_file(follow_symlinks=False):
            return stat.S_IFREG
        if entry.is_symlink():
            return stat.S_IFLNK
        return entry.stat(follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def _walk(dir_fd: int, prefix: str, result: ScanResult, *, excluded: bool,
          depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        _exclude(result, excluded, prefix.rstrip("/"), "too_deep",
                 f"nested more than {MAX_DEPTH} directories deep")
        return
    with os.scandir(dir_fd) as listing:
        entries = list(listing)
    manifest = result.manifest
    if prefix and any(entry.name == ".git" for entry in entries):
        _exclude(result, excluded, prefix.rstrip("/"), "nested_repository",
                 "directory contains its own .git")
        if not excluded:
            result.nested_git.append(f"{prefix}.git")
        if manifest is None:
            return
        excluded = True  # still recorded in the manifest, never in a diff
    for entry in entries:
        if not prefix and entry.name == ".git":
            continue
        path = f"{prefix}{entry.name}"
        mode = _mode(entry, path, manifest)
        if mode is None or entry.name == ".git":
            continue  # gone, or a nested repository's own git dir (recorded, never walked)
        inner = excluded
        if _may_alias(entry.name) and is_git_alias(entry.name):
            _exclude(result, excluded, path, "protected_name", "an alias of .git")
            if manifest is None:
                continue
            inner = True
        elif entry.name == ".gitattributes" and not excluded:
            result.attributes = True
        if stat.S_ISDIR(mode):
            _descend(dir_fd, entry.name, path, result, excluded=inner, depth=depth)
        elif not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            _exclude(result, inner, path, "special_file", kind_of(mode))


def _descend(dir_fd: int, name: str, path: str, result: ScanResult, *, excluded: bool,
             depth: int) -> None:
    try:
        child_fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return  # gone or replaced since it was listed
    except PermissionError:
        _unreadable(result, excluded, path)
        return
    try:
        _walk(child_fd, f"{path}/", result, excluded=excluded, depth=depth + 1)
    except PermissionError:
        _unreadable(result, excluded, path)
    finally:
        os.close(child_fd)


def _unreadable(result: ScanResult, excluded: bool, path: str) -> None:
    result.unreadable.append(path)
    _exclude(result, excluded, path, "unreadable", "the directory cannot be read")
