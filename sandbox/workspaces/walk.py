"""The one walk of a workspace's tree that every check before a diff shares.

A tree the child wrote is walked once, with directory file descriptors: each
directory is opened ``O_NOFOLLOW`` relative to its parent's descriptor (never
through a symlink, never by a path the child could swap), listed once
(:func:`listing`, which leaves out the workspace's own top-level ``.git``), and
handed to a *visit* that examines its entries (one ``lstat`` each, cached on
the ``os.DirEntry``) and says which subdirectories to enter. The visits are
the checks: the setuid/setgid sweep (:mod:`sandbox.workspaces.setid`), and the
scan for special files, nested repositories and ``.git`` aliases with its
lstat manifest (:mod:`sandbox.workspaces.scan`), which the stat cache
(:mod:`sandbox.workspaces.statcache`) reads; before a diff they run together,
in one pass.

The walk holds a bounded number of descriptors however deep the child nests
directories (``open_levels``): deeper levels are closed, and reopened through
``..`` when the walk climbs back, after checking that it reached the same
directory (device and inode).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["DIR_FLAGS", "OPEN_LEVELS", "Failed", "Moved", "Refused", "Visit", "listing", "walk"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Directory descriptors kept open at once by default; deeper levels are reopened via ``..``.
OPEN_LEVELS = 32

C = TypeVar("C")

#: Examine one directory: ``(descriptor, prefix, context)`` -> the subdirectories to enter
#: (names, in any order) with their contexts. The prefix is ``""`` at the top, else
#: ``"a/b/"``.
Visit = Callable[[int, str, C], list[tuple[str, C]]]
#: A subdirectory that cannot be opened (one that is gone is skipped without asking):
#: ``(its path, its context, the error)``; raise to stop the walk, return to skip it.
Refused = Callable[[str, C, OSError], None]


class Moved(OSError):
    """A directory the walk climbed back to through ``..`` is not the one it left."""

    def __init__(self, where: str) -> None:
        super().__init__(f"{where or '.'} moved during the walk")
        #: The directory's path (``""``: the top).
        self.where = where


#: Turn an error met at a directory (its prefix, ``""`` at the top) into the one to raise.
Failed = Callable[[str, OSError], BaseException]


def listing(fd: int, prefix: str) -> list[os.DirEntry[str]]:
    """The entries of the directory ``fd``; at the top (``prefix`` empty) without ``.git``."""
    with os.scandir(fd) as entries:
        if prefix:
            return list(entries)
        # The parent's git dir or the worktree's pointer: never the child's.
        return [entry for entry in entries if entry.name != ".git"]


@dataclass
class _Level(Generic[C]):
    fd: int | None
    ident: tuple[int, int]
    prefix: str
    subdirs: list[tuple[str, C]]


def _ident(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def walk(root_fd: int, visit: Visit[C], context: C, *, refused: Refused[C],
         failed: Failed | None = None, open_levels: int = OPEN_LEVELS) -> None:
    """Visit the directory ``root_fd`` (the walk owns and closes it) with ``context``, then
    every subdirectory a visit asks for, depth first, in name order.

    Raises what a visit or ``refused`` raises; an ``OSError`` (a visit's, one reopening a
    directory on the way back, :class:`Moved`) goes through ``failed`` when it is given.
    """
    stack: list[_Level[C]] = [_Level(root_fd, (0, 0), "", [])]
    try:
        stack[0].ident = _ident(root_fd)
        stack[0].subdirs = _sorted(visit(root_fd, "", context))
        while stack:
            top = stack[-1]
            if top.fd is None:  # pragma: no cover - the top level is always open
                raise RuntimeError("the walk lost its directory")
            if not top.subdirs:
                stack.pop()
                try:
                    if stack and stack[-1].fd is None:
                        parent = os.open("..", DIR_FLAGS, dir_fd=top.fd)
                        stack[-1].fd = parent
                        if _ident(parent) != stack[-1].ident:
                            raise Moved(stack[-1].prefix)
                finally:
                    os.close(top.fd)
                    top.fd = None
                continue
            name, inner = top.subdirs.pop()
            path = f"{top.prefix}{name}"
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=top.fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                refused(path, inner, exc)
                continue
            level: _Level[C] = _Level(fd, _ident(fd), f"{path}/", [])
            stack.append(level)
            if len(stack) > open_levels:
                far = stack[-open_levels - 1]
                if far.fd is not None:
                    os.close(far.fd)
                    far.fd = None
            level.subdirs = _sorted(visit(fd, level.prefix, inner))
    except OSError as exc:
        if failed is None:
            raise
        raise failed(stack[-1].prefix if stack else "", exc) from exc
    finally:
        for level in stack:
            if level.fd is not None:
                os.close(level.fd)


def _sorted(subdirs: list[tuple[str, C]]) -> list[tuple[str, C]]:
    """Reversed name order: popping from the end enters them in name order."""
    subdirs.sort(key=_name, reverse=True)
    return subdirs


def _name(item: tuple[str, object]) -> str:
    return item[0]

