"""Glob matching (corral's one dialect, :mod:`policies.globs`) and a symlink-free directory
walk for the confined file API."""

from __future__ import annotations

import os
import re
from collections.abc import Generator

from policies import globs
from sandbox.errors import PathDenied
from sandbox.names import is_git_alias
from sandbox.workspaces.scan import MAX_DEPTH

__all__ = ["glob_regex", "walk_names"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def walk_names(dir_fd: int, prefix: str = "", depth: int = 0) -> Generator[str, None, None]:
    """Relative paths under a directory fd, depth first; never follows symlinks."""
    if depth > MAX_DEPTH:
        return
    with os.scandir(dir_fd) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        if is_git_alias(entry.name):
            continue
        rel = f"{prefix}{entry.name}"
        yield rel
        if entry.is_dir(follow_symlinks=False):
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                yield from walk_names(child, f"{rel}/", depth + 1)
            finally:
                os.close(child)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The anchored regex of a glob over ``/`` paths, in the dialect permission rules read
    (:mod:`policies.globs`: ``*``, ``?``, ``[...]``, ``**``, ``**/``); a glob it cannot
    read (an unterminated ``[``) is :class:`~sandbox.errors.PathDenied` (``path_invalid``),
    never taken some other way."""
    try:
        return globs.glob_regex(pattern, path=True)
    except globs.GlobError as exc:
        raise PathDenied(f"invalid glob: {exc.message}", code="path_invalid", path=pattern,
                         hint=exc.hint) from None
