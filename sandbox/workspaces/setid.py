"""Clearing the setuid and setgid bits a child left in its writable workspace.

corral runs as the user (as root in CI), and so may the child: as root on
bubblewrap, and on docker with ``allow_root_user``. ``cp /bin/sh x; chmod 4755
x`` in workspace-write mode would leave a setuid-root shell in the user's
checkout. Inside the sandbox such a file is inert (bubblewrap binds are
``nosuid``, and ``no-new-privileges`` holds on both backends); on the host it
is not. git never records these bits, so clearing them loses nothing a diff
carries.

:func:`clear_setid` runs once the child's processes are stopped (the freeze
before every diff), at teardown, and in gc. It walks with directory file
descriptors and ``O_NOFOLLOW`` (never through a symlink, never into the
workspace's own ``.git``), holds a bounded number of descriptors however deep
the child nests directories (it climbs back through ``..`` and checks that it
reached the same directory), and changes a file only through an ``O_PATH``
descriptor of the very entry it examined. Directories keep a setgid bit (group
inheritance, not a privilege).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxError

__all__ = ["clear_setid", "clear_setid_paths", "find_setid"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_SETID = stat.S_ISUID | stat.S_ISGID
#: Directory descriptors kept open at once; deeper levels are reopened through ``..``.
_OPEN_LEVELS = 32
#: What the walk does with a setid regular file; whether it counts.
_Act = Callable[[int, str], bool]


@dataclass
class _Level:
    fd: int | None
    ident: tuple[int, int]
    prefix: str
    subdirs: list[str]


def _failed(root: Path, what: str, exc: OSError) -> SandboxError:
    return SandboxError(
        f"could not clear setuid/setgid bits under {root}: {what} ({exc.strerror or exc})",
        code="setid_sweep_failed", operation="clear_setid", context={"root": root},
        hint="inspect the workspace for setuid files (find . -perm /6000) before running them",
    )


def _clear(dir_fd: int, name: str) -> bool:
    """Clear the bits of one entry if it is a setuid/setgid regular file; whether it was."""
    try:
        fd = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not info.st_mode & _SETID:
            return False
        # An O_PATH descriptor cannot fchmod; its /proc link names exactly this inode.
        Path(f"/proc/self/fd/{fd}").chmod(stat.S_IMODE(info.st_mode) & ~_SETID)
        return True
    finally:
        os.close(fd)


def _scan(fd: int, prefix: str, cleared: list[str], act: _Act) -> list[str]:
    """Clear (or find) the files of one directory; return its subdirectories, reversed."""
    subdirs: list[str] = []
    with os.scandir(fd) as listing:
        for entry in listing:
            if not prefix and entry.name == ".git":
                continue  # the parent's git dir or the worktree's pointer: never the child's
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                elif (entry.is_file(follow_symlinks=False)
                      and entry.stat(follow_symlinks=False).st_mode & _SETID
                      and act(fd, entry.name)):
                    cleared.append(f"{prefix}{entry.name}")
            except FileNotFoundError:
                continue
    subdirs.sort(reverse=True)
    return subdirs


def _ident(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def clear_setid(root: Path) -> list[str]:
    """Clear setuid/setgid on every regular file under ``root``; the paths cleared, sorted.

    A missing ``root`` (already removed) clears nothing. Raises
    :class:`SandboxError` (``setid_sweep_failed``) when a file or directory
    cannot be examined or changed: a sweep that may have missed a file is
    never reported as done.
    """
    return _sweep(root, _clear)


def find_setid(root: Path) -> list[str]:
    """The setuid/setgid regular files under ``root`` (as :func:`clear_setid` walks), sorted;
    nothing is changed (an overlay's upper layer, whose files are cleared through the
    merged view with :func:`clear_setid_paths`)."""
    return _sweep(root, _is_setid)


def clear_setid_paths(root: Path, paths: Iterable[str]) -> list[str]:
    """Clear setuid/setgid on the regular files ``paths`` (relative) under ``root``.

    Each path is reached from ``root`` one directory at a time with ``O_NOFOLLOW``;
    a path that is gone, or no longer a setid regular file, is skipped. Returns
    the paths cleared, sorted; raises as :func:`clear_setid` does.
    """
    cleared: list[str] = []
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise _failed(root, "cannot open the workspace", exc) from exc
    try:
        for path in paths:
            *parents, name = path.split("/")
            fd = root_fd
            try:
                for part in parents:
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    if fd != root_fd:
                        os.close(fd)
                    fd = inner
                if _clear(fd, name):
                    cleared.append(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise _failed(root, f"at {path}", exc) from exc
            finally:
                if fd != root_fd:
                    os.close(fd)
    finally:
        os.close(root_fd)
    return sorted(cleared)


def _is_setid(dir_fd: int, name: str) -> bool:
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    return stat.S_ISREG(info.st_mode) and bool(info.st_mode & _SETID)


def _sweep(root: Path, act: _Act) -> list[str]:
    cleared: list[str] = []
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        return cleared
    except OSError as exc:
        raise _failed(root, "cannot open the workspace", exc) from exc
    stack = [_Level(root_fd, _ident(root_fd), "", [])]
    try:
        stack[0].subdirs = _scan(root_fd, "", cleared, act)
        while stack:
            top = stack[-1]
            if top.fd is None:  # pragma: no cover - the top level is always open
                raise RuntimeError("setid sweep lost its directory")
            if not top.subdirs:
                stack.pop()
                if stack and stack[-1].fd is None:
                    parent = os.open("..", _DIR_FLAGS, dir_fd=top.fd)
                    stack[-1].fd = parent
                    if _ident(parent) != stack[-1].ident:
                        raise _failed(root, f"{stack[-1].prefix or '.'} moved during the sweep",
                                      OSError("directory changed"))
                os.close(top.fd)
                top.fd = None
                continue
            name = top.subdirs.pop()
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=top.fd)
            except FileNotFoundError:
                continue
            level = _Level(fd, _ident(fd), f"{top.prefix}{name}/", [])
            stack.append(level)
            if len(stack) > _OPEN_LEVELS:
                far = stack[-_OPEN_LEVELS - 1]
                if far.fd is not None:
                    os.close(far.fd)
                    far.fd = None
            level.subdirs = _scan(fd, level.prefix, cleared, act)
    except SandboxError:
        raise
    except OSError as exc:
        where = stack[-1].prefix if stack else ""
        raise _failed(root, f"at {where or '.'}", exc) from exc
    finally:
        for level in stack:
            if level.fd is not None:
                os.close(level.fd)
    return sorted(cleared)
