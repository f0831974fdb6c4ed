"""Find what must stay out of a snapshot or a diff: nested repositories, ``.git``
aliases and special files (threats B1.5, B1.6, B2.12).

The walk uses directory file descriptors and never follows a symlink, never
opens a file, and never descends into the top-level ``.git`` or into anything
it excludes, so a child cannot make it hang (FIFOs) or wander outside.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.names import is_git_alias
from sandbox.results import ExcludedPath

__all__ = ["MAX_DEPTH", "ScanResult", "scan_tree"]

#: Directories deeper than this are left out whole (keeps the walk's recursion bounded).
MAX_DEPTH = 128
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class ScanResult:
    """Paths (relative, ``/``-separated) to leave out, with the reason for each."""

    excluded: list[ExcludedPath] = field(default_factory=list)
    #: Nested repositories' ``.git`` entries (for read-only mounts over existing ones).
    nested_git: list[str] = field(default_factory=list)
    #: Whether a ``.gitattributes`` file was seen outside the excluded paths.
    attributes: bool = False

    @property
    def paths(self) -> list[str]:
        """Just the excluded paths."""
        return [entry.path for entry in self.excluded]


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "unknown"


def scan_tree(root: Path) -> ScanResult:
    """Walk ``root`` and report every entry a snapshot or diff must not include.

    A directory holding an entry named exactly ``.git`` (directory or file) is a
    nested repository: the whole directory is excluded. Any other ``.git``
    alias (``.GIT``, ``git~1``...) is excluded by itself, as is every FIFO,
    socket and device node.
    """
    result = ScanResult()
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        _walk(root_fd, "", result)
    finally:
        os.close(root_fd)
    result.excluded.sort(key=lambda entry: entry.path)
    result.nested_git.sort()
    return result


def _walk(dir_fd: int, prefix: str, result: ScanResult, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        result.excluded.append(
            ExcludedPath(path=prefix.rstrip("/"), reason="too_deep",
                         detail=f"nested more than {MAX_DEPTH} directories deep")
        )
        return
    with os.scandir(dir_fd) as listing:
        entries = list(listing)
    if prefix and any(entry.name == ".git" for entry in entries):
        result.excluded.append(
            ExcludedPath(path=prefix.rstrip("/"), reason="nested_repository",
                         detail="directory contains its own .git")
        )
        result.nested_git.append(f"{prefix}.git")
        return
    for entry in entries:
        path = f"{prefix}{entry.name}"
        if not prefix and entry.name == ".git":
            continue
        if is_git_alias(entry.name):
            result.excluded.append(
                ExcludedPath(path=path, reason="protected_name", detail="an alias of .git")
            )
            continue
        if entry.name == ".gitattributes":
            result.attributes = True
        try:
            if entry.is_dir(follow_symlinks=False):
                child_fd = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
                try:
                    _walk(child_fd, f"{path}/", result, depth + 1)
                finally:
                    os.close(child_fd)
            elif not (entry.is_file(follow_symlinks=False) or entry.is_symlink()):
                mode = entry.stat(follow_symlinks=False).st_mode
                result.excluded.append(
                    ExcludedPath(path=path, reason="special_file", detail=_kind(mode))
                )
        except (FileNotFoundError, NotADirectoryError):
            continue
