"""Glob matching and a symlink-free directory walk for the confined file API."""

from __future__ import annotations

import os
import re
from collections.abc import Generator

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
    """Compile a glob (``*``, ``?``, ``[...]``, ``**/``) into an anchored regex over ``/`` paths."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i) and i + 2 == len(pattern):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\").replace("/", "") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")
