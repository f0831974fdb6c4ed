"""What a child changed in an overlay workspace, read from its upper layer alone.

Everything the child wrote is in the upper layer: new and changed files (a
``chmod`` or ``touch`` copies a file up too), whiteouts (character devices 0/0)
where it deleted something of the snapshot, and opaque directories
(``trusted.overlay.opaque``) where it replaced a directory. The snapshot
(the lower layer) holds nothing a diff leaves out: no nested repository, ``.git``
alias or special file (the snapshot excluded them). So one walk of the upper
layer, which costs what the child wrote and not what the repository holds, gives:

- the *changed roots*: every path whose state may differ from the snapshot, none
  inside another: a file, symlink or whiteout in a directory the snapshot has, or
  a whole directory that is new, opaque, or replaces a non-directory;
- the files and symlinks present under those roots (what staging may add);
- the paths a diff leaves out, with the same reasons and in the same form as
  :func:`sandbox.workspaces.scan.scan_tree` gives for the merged tree
  (``nested_repository``, ``protected_name``, ``special_file``, ``too_deep``,
  ``unreadable``), so an overlay workspace and a plain worktree report the same.

The walk follows :mod:`sandbox.workspaces.scan`: directory file descriptors,
``O_NOFOLLOW``, never a symlink followed, never a file opened (a FIFO cannot hang
it), and a bounded depth. The lower layer is opened alongside, the same way, only
to tell a copied-up directory from a new one. An upper entry decides nothing by
itself: a root only nominates a path, and staging reads the merged view
(:mod:`sandbox.workspaces.diffupper`), so an entry misread here can cost time,
never a wrong diff. Only the overlay's own xattr namespace is read (``trusted.``
when corral mounts as root): a child can set ``user.overlay.opaque`` on its own
files, but never a ``trusted.overlay.*`` name (overlayfs escapes it).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.names import is_git_alias
from sandbox.results import ExcludedPath, ExcludedReason
from sandbox.workspaces.scan import MAX_DEPTH, kind_of

__all__ = ["OPAQUE_XATTR", "UpperScan", "is_whiteout", "scan_upper"]

#: Marks a directory of the upper layer that hides the lower one (root-mounted overlays).
OPAQUE_XATTR = "trusted.overlay.opaque"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPAQUE_VALUES = (b"y", b"x")


@dataclass
class UpperScan:
    """One walk of an upper layer (paths relative, ``/``-separated, sorted)."""

    #: Paths whose merged state may differ from the snapshot, none inside another.
    roots: list[str] = field(default_factory=list)
    #: Files and symlinks of the upper layer (outside excluded paths).
    present: list[str] = field(default_factory=list)
    #: What a diff leaves out (as :func:`sandbox.workspaces.scan.scan_tree` reports it).
    excluded: list[ExcludedPath] = field(default_factory=list)
    #: Whether a ``.gitattributes`` file was written.
    attributes: bool = False
    #: Entries of the upper layer seen (its size, for reports).
    entries: int = 0

    @property
    def excluded_paths(self) -> list[str]:
        """Just the excluded paths."""
        return [entry.path for entry in self.excluded]


def is_whiteout(info: os.stat_result) -> bool:
    """Whether an upper-layer entry is a whiteout (a character device 0/0)."""
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _opaque(fd: int) -> bool:
    try:
        return os.getxattr(fd, OPAQUE_XATTR) in _OPAQUE_VALUES
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return False
        raise


def _open_lower(lower_fd: int | None, name: str) -> int | None:
    """The lower layer's directory ``name``, or ``None`` when it has none there."""
    if lower_fd is None:
        return None
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=lower_fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink in the snapshot: not a directory
            return None
        raise


class _Walk:
    def __init__(self) -> None:
        self.scan = UpperScan()

    def exclude(self, path: str, reason: ExcludedReason, detail: str) -> None:
        self.scan.excluded.append(ExcludedPath(path=path, reason=reason, detail=detail))

    def walk(self, upper_fd: int, lower_fd: int | None, prefix: str, *, whole: bool,
             depth: int) -> None:
        """One directory: ``whole`` when its parent (or itself) is already a root."""
        if depth > MAX_DEPTH:
            self.exclude(prefix.rstrip("/"), "too_deep",
                         f"nested more than {MAX_DEPTH} directories deep")
            return
        with os.scandir(upper_fd) as listing:
            entries = []
            for entry in listing:
                try:
                    entries.append((entry.name, entry.stat(follow_symlinks=False)))
                except FileNotFoundError:
                    continue
        self.scan.entries += len(entries)
        visible = [(name, info) for name, info in entries if not is_whiteout(info)]
        if prefix and any(name == ".git" for name, _ in visible):
            self.exclude(prefix.rstrip("/"), "nested_repository",
                         "directory contains its own .git")
            return
        for name, info in entries:
            if not prefix and name == ".git":
                continue
            path = f"{prefix}{name}"
            if is_whiteout(info):
                if not whole:
                    self.scan.roots.append(path)
                continue
            if is_git_alias(name):
                self.exclude(path, "protected_name", "an alias of .git")
                continue
            if name == ".gitattributes":
                self.scan.attributes = True
            mode = info.st_mode
            if stat.S_ISDIR(mode):
                self.directory(upper_fd, lower_fd, name, path, whole=whole, depth=depth)
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                self.scan.present.append(path)
                if not whole:
                    self.scan.roots.append(path)
            else:
                self.exclude(path, "special_file", kind_of(mode))

    def directory(self, upper_fd: int, lower_fd: int | None, name: str, path: str, *,
                  whole: bool, depth: int) -> None:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=upper_fd)
        except (FileNotFoundError, NotADirectoryError):
            return
        except PermissionError:
            self.exclude(path, "unreadable", "the directory cannot be read")
            return
        lower_child: int | None = None
        try:
            if not whole and not _opaque(child):
                lower_child = _open_lower(lower_fd, name)
            if not whole and lower_child is None:
                self.scan.roots.append(path)  # new, opaque, or replacing a non-directory
            try:
                self.walk(child, lower_child, f"{path}/", whole=whole or lower_child is None,
                          depth=depth + 1)
            except PermissionError:
                self.exclude(path, "unreadable", "the directory cannot be read")
        finally:
            os.close(child)
            if lower_child is not None:
                os.close(lower_child)


def scan_upper(upper: Path, lower: Path) -> UpperScan:
    """Walk the upper layer ``upper`` of an overlay over ``lower`` (module docstring)."""
    walk = _Walk()
    upper_fd = os.open(upper, _DIR_FLAGS)
    try:
        lower_fd = os.open(lower, _DIR_FLAGS)
        try:
            walk.walk(upper_fd, lower_fd, "", whole=False, depth=0)
        finally:
            os.close(lower_fd)
    finally:
        os.close(upper_fd)
    scan = walk.scan
    scan.roots.sort()
    scan.present.sort()
    scan.excluded.sort(key=lambda entry: entry.path)
    return scan
