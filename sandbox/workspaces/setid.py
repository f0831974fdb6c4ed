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
descriptors and ``O_NOFOLLOW`` (:mod:`sandbox.workspaces.walk`: never through a
symlink, never into the workspace's own ``.git``, a bounded number of
descriptors however deep the child nests directories), and changes a file only
through an ``O_PATH`` descriptor of the very entry it examined. Directories
keep a setgid bit (group inheritance, not a privilege).

Before a diff of a worktree or of the user's checkout, the sweep is one visit
of the same walk as the diff's scan (:func:`sandbox.workspaces.scan.scan_tree`
with ``clear_setid``): :func:`sweep_entries` and :func:`clear_entry` are what
both use, and :func:`sweep_failed` is how both fail.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from sandbox.errors import SandboxError
from sandbox.workspaces.walk import DIR_FLAGS, Failed, Moved, listing, walk

__all__ = ["SETID_BITS", "clear_entry", "clear_setid", "clear_setid_paths", "find_setid",
           "sweep_entries", "sweep_failed", "sweep_refused"]

_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
SETID_BITS = stat.S_ISUID | stat.S_ISGID
#: What the walk does with a setid regular file; whether it counts.
_Act = Callable[[int, str], bool]


def _failed(root: Path, what: str, exc: OSError) -> SandboxError:
    return SandboxError(
        f"could not clear setuid/setgid bits under {root}: {what} ({exc.strerror or exc})",
        code="setid_sweep_failed", operation="clear_setid", context={"root": root},
        hint="inspect the workspace for setuid files (find . -perm /6000) before running them",
    )


def sweep_failed(root: Path) -> Failed:
    """How a sweep of ``root`` fails (the walk's ``failed``): a sweep that may have missed a
    file is never reported as done."""
    def failed(where: str, exc: OSError) -> BaseException:
        if isinstance(exc, Moved):
            return _failed(root, f"{exc.where or '.'} moved during the sweep",
                           OSError("directory changed"))
        return _failed(root, f"at {where or '.'}", exc)
    return failed


def sweep_refused(root: Path, path: str, exc: OSError) -> None:
    """A directory the sweep cannot open (one that is gone is skipped before this)."""
    raise _failed(root, f"at {path}", exc)


def clear_entry(dir_fd: int, name: str) -> bool:
    """Clear the bits of one entry if it is a setuid/setgid regular file; whether it was."""
    try:
        fd = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not info.st_mode & SETID_BITS:
            return False
        # An O_PATH descriptor cannot fchmod; its /proc link names exactly this inode.
        Path(f"/proc/self/fd/{fd}").chmod(stat.S_IMODE(info.st_mode) & ~SETID_BITS)
        return True
    finally:
        os.close(fd)


def sweep_entries(fd: int, prefix: str, entries: list[os.DirEntry[str]], cleared: list[str],
                  act: _Act = clear_entry) -> list[str]:
    """Clear (or find, with another ``act``) the setid files among one directory's
    ``entries``; return its subdirectories."""
    subdirs: list[str] = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            elif (entry.is_file(follow_symlinks=False)
                  and entry.stat(follow_symlinks=False).st_mode & SETID_BITS
                  and act(fd, entry.name)):
                cleared.append(f"{prefix}{entry.name}")
        except FileNotFoundError:
            continue
    return subdirs


def clear_setid(root: Path) -> list[str]:
    """Clear setuid/setgid on every regular file under ``root``; the paths cleared, sorted.

    A missing ``root`` (already removed) clears nothing. Raises
    :class:`SandboxError` (``setid_sweep_failed``) when a file or directory
    cannot be examined or changed: a sweep that may have missed a file is
    never reported as done.
    """
    return _sweep(root, clear_entry)


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
        root_fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise _failed(root, "cannot open the workspace", exc) from exc
    try:
        for path in paths:
            *parents, name = path.split("/")
            fd = root_fd
            try:
                for part in parents:
                    inner = os.open(part, DIR_FLAGS, dir_fd=fd)
                    if fd != root_fd:
                        os.close(fd)
                    fd = inner
                if clear_entry(fd, name):
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
    return stat.S_ISREG(info.st_mode) and bool(info.st_mode & SETID_BITS)


def _sweep(root: Path, act: _Act) -> list[str]:
    cleared: list[str] = []
    try:
        root_fd = os.open(root, DIR_FLAGS)
    except FileNotFoundError:
        return cleared
    except OSError as exc:
        raise _failed(root, "cannot open the workspace", exc) from exc

    def visit(fd: int, prefix: str, context: None) -> list[tuple[str, None]]:
        return [(name, context)
                for name in sweep_entries(fd, prefix, listing(fd, prefix), cleared, act)]

    def refused(path: str, context: None, exc: OSError) -> None:
        del context
        sweep_refused(root, path, exc)

    walk(root_fd, visit, None, refused=refused, failed=sweep_failed(root))
    return sorted(cleared)
