"""Find what must stay out of a snapshot or a diff: nested repositories, ``.git``
aliases and special files (threats B1.5, B1.6, B2.12); optionally record an
lstat manifest of the whole tree.

The walk (:mod:`sandbox.workspaces.walk`) uses directory file descriptors and
never follows a symlink, never opens a file, and never descends into the
top-level ``.git`` or (for the exclusions) into anything it excludes, so a
child cannot make it hang (FIFOs) or wander outside.

Before a diff, the same walk also clears setuid/setgid bits
(``scan_tree(root, manifest=True, clear_setid=True)``): one pass, one ``lstat``
per entry, for the sweep (:mod:`sandbox.workspaces.setid`), the exclusions and
the manifest the stat cache reads (:mod:`sandbox.workspaces.statcache`). The
sweep's part reaches everywhere the sweep alone does (a nested repository's
``.git``, an alias, deeper than :data:`MAX_DEPTH`), and fails as it does.

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
from typing import NamedTuple

from sandbox.names import is_git_alias
from sandbox.results import ExcludedPath, ExcludedReason
from sandbox.workspaces.setid import (
    SETID_BITS,
    clear_entry,
    sweep_entries,
    sweep_failed,
    sweep_refused,
)
from sandbox.workspaces.walk import DIR_FLAGS, listing, walk

__all__ = ["MAX_DEPTH", "Manifest", "ScanResult", "Stat", "kind_of", "scan_tree"]

#: Directories deeper than this are left out whole (keeps the walk's recursion bounded).
MAX_DEPTH = 128

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
    #: The files whose setuid/setgid bits the walk cleared (with ``clear_setid``), sorted.
    setid_cleared: list[str] = field(default_factory=list)

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


def scan_tree(root: Path, *, manifest: bool = False, clear_setid: bool = False) -> ScanResult:
    """Walk ``root`` and report every entry a snapshot or diff must not include.

    A directory holding an entry named exactly ``.git`` (directory or file) is a
    nested repository: the whole directory is excluded. Any other ``.git``
    alias (``.GIT``, ``git~1``...) is excluded by itself, as is every FIFO,
    socket and device node, and every directory the walk cannot read.
    With ``manifest``, also record every entry's :data:`Stat`.

    With ``clear_setid`` (the child stopped), the same walk clears setuid/setgid
    bits everywhere :func:`sandbox.workspaces.setid.clear_setid` would, and the
    manifest records the cleared files as they are after; any entry or directory
    it cannot examine raises :class:`SandboxError` (``setid_sweep_failed``).
    """
    result = ScanResult(manifest={} if manifest else None)
    try:
        root_fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        if not clear_setid or isinstance(exc, FileNotFoundError):
            raise
        raise sweep_failed(root)("", exc) from exc
    scan = _Scan(root, result, sweep=clear_setid)
    if clear_setid:
        walk(root_fd, scan.visit, _TOP, refused=scan.refused, failed=sweep_failed(root))
    else:  # every level stays open (a scan stops at MAX_DEPTH): it never climbs back
        walk(root_fd, scan.visit, _TOP, refused=scan.refused, open_levels=MAX_DEPTH + 2)
    result.excluded.sort(key=lambda entry: entry.path)
    result.nested_git.sort()
    result.setid_cleared.sort()
    return result


def _may_alias(name: str) -> bool:
    """Cheap pre-check of :func:`sandbox.names.is_git_alias`: an ASCII name can fold to
    ``.git`` or ``git~1`` only if it contains ``git`` in some case (ignorable code points
    and case folds that matter are outside ASCII)."""
    return not name.isascii() or "git" in name.lower()


def _exclude(result: ScanResult, excluded: bool, path: str, reason: ExcludedReason,
             detail: str) -> None:
    if not excluded:  # inside an excluded directory, its own entry covers everything
        result.excluded.append(ExcludedPath(path=path, reason=reason, detail=detail))


def _unreadable(result: ScanResult, excluded: bool, path: str) -> None:
    result.unreadable.append(path)
    _exclude(result, excluded, path, "unreadable", "the directory cannot be read")


class _Where(NamedTuple):
    """Where a directory is: inside an excluded one, how deep, and whether the scan sees
    it (``False``: inside a nested repository's ``.git``, an unrecorded alias, or deeper
    than :data:`MAX_DEPTH`; only the sweep goes there)."""

    excluded: bool
    depth: int
    seen: bool


_TOP = _Where(excluded=False, depth=0, seen=True)
_SWEPT = _Where(excluded=True, depth=0, seen=False)
_IFMT = 0o170000
_IFREG = stat.S_IFREG
_IFDIR = stat.S_IFDIR
#: Entry types a snapshot or diff carries: regular files and symlinks (and directories).
_PLAIN = frozenset({stat.S_IFREG, stat.S_IFLNK})


class _Scan:
    """The visit of each directory (:func:`sandbox.workspaces.walk.walk`)."""

    def __init__(self, root: Path, result: ScanResult, *, sweep: bool) -> None:
        self.root = root
        self.result = result
        self.sweep = sweep

    def refused(self, path: str, where: _Where, exc: OSError) -> None:
        if self.sweep:
            sweep_refused(self.root, path, exc)
        elif isinstance(exc, PermissionError):
            _unreadable(self.result, where.excluded, path)
        elif not isinstance(exc, NotADirectoryError):  # gone or replaced since it was listed
            raise exc

    def visit(self, fd: int, prefix: str, where: _Where) -> list[tuple[str, _Where]]:
        excluded, depth, seen = where
        if seen and depth > MAX_DEPTH:
            _exclude(self.result, excluded, prefix[:-1], "too_deep",
                     f"nested more than {MAX_DEPTH} directories deep")
            if not self.sweep:
                return []
            seen = False
        try:
            entries = listing(fd, prefix)
            if not seen:
                return self.swept(fd, prefix, entries)
            return self.entries(fd, prefix, entries, excluded, depth)
        except PermissionError:
            if self.sweep or not prefix:
                raise
            _unreadable(self.result, excluded, prefix[:-1])
            return []

    def swept(self, fd: int, prefix: str,
              entries: list[os.DirEntry[str]]) -> list[tuple[str, _Where]]:
        """Only the sweep's part (what the scan does not see)."""
        return [(name, _SWEPT)
                for name in sweep_entries(fd, prefix, entries, self.result.setid_cleared)]

    def entries(self, fd: int, prefix: str, entries: list[os.DirEntry[str]], excluded: bool,
                depth: int) -> list[tuple[str, _Where]]:
        """Scan (and sweep) the entries of a directory the scan sees."""
        result = self.result
        manifest = result.manifest
        sweep = self.sweep
        if prefix and any(entry.name == ".git" for entry in entries):
            _exclude(result, excluded, prefix[:-1], "nested_repository",
                     "directory contains its own .git")
            if not excluded:
                result.nested_git.append(f"{prefix}.git")
            if manifest is None:
                return self.swept(fd, prefix, entries) if sweep else []
            excluded = True  # still recorded in the manifest, never in a diff
        lstat = manifest is not None or sweep
        cleared = result.setid_cleared
        subdirs: list[tuple[str, _Where]] = []
        deeper = depth + 1
        for entry in entries:
            name = entry.name
            path = prefix + name
            try:
                if lstat:
                    info = entry.stat(follow_symlinks=False)
                    mode = info.st_mode
                    if (sweep and mode & SETID_BITS and mode & _IFMT == _IFREG
                            and clear_entry(fd, name)):
                        cleared.append(path)
                        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        mode = info.st_mode
                    if manifest is not None:
                        manifest[path] = (mode, info.st_size, info.st_mtime_ns,
                                          info.st_ctime_ns, info.st_ino, info.st_uid,
                                          info.st_gid, info.st_rdev)
                elif entry.is_dir(follow_symlinks=False):
                    mode = stat.S_IFDIR
                elif entry.is_file(follow_symlinks=False):
                    mode = stat.S_IFREG
                elif entry.is_symlink():
                    mode = stat.S_IFLNK
                else:
                    mode = entry.stat(follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue  # gone
            kind = mode & _IFMT
            if name == ".git":  # a nested repository's own git dir: recorded, never scanned
                if sweep and kind == _IFDIR:
                    subdirs.append((name, _SWEPT))
                continue
            inner = excluded
            if _may_alias(name) and is_git_alias(name):
                _exclude(result, excluded, path, "protected_name", "an alias of .git")
                if manifest is None:
                    if sweep and kind == _IFDIR:
                        subdirs.append((name, _SWEPT))
                    continue
                inner = True
            elif name == ".gitattributes" and not excluded:
                result.attributes = True
            if kind == _IFDIR:
                subdirs.append((name, _Where(inner, deeper, True)))
            elif kind not in _PLAIN:
                _exclude(result, inner, path, "special_file", kind_of(mode))
        return subdirs

