"""Overlay mounts: a child's copy-on-write workspace over a shared, read-only snapshot checkout.

One overlayfs per child: ``lowerdir`` is the snapshot's checkout (shared by every
child of that snapshot and never written: overlayfs does not write a lower layer),
``upperdir`` and ``workdir`` live in the child's private state dir, and the merged
view is mounted at the child's workspace path (``worktrees/<id>``), where the
host-side file API, corral's git and every backend (a bubblewrap bind, a docker bind
mount) see it. What the child changed is exactly what its upper layer holds
(:mod:`sandbox.workspaces.upper`).

The mount is made on the host with ``mount(2)`` and needs ``CAP_SYS_ADMIN``:
corral running as root (CI runs so). Its options are fixed: ``nosuid,nodev``;
``redirect_dir=nofollow``, ``metacopy=off``, ``index=off``, ``xino=off``, so
the upper layer holds only whole files, whiteouts (character devices 0/0) and
opaque directories (``trusted.overlay.opaque``), never a redirect or a
metadata-only copy (renaming a directory that came from the snapshot fails with
``EXDEV``, as across filesystems: ``mv`` copies instead); ``uuid=off``. A path
that a mount option cannot carry (``,``, ``:``, ``\\``, a newline) is refused
before anything is mounted.

A normal user can only mount an overlay inside a user namespace, where the merged
view exists for that namespace's processes alone: corral's host-side file API and
diff could not see it. :func:`overlay_unsupported` says so, and
:func:`sandbox.factory.open_sandbox` falls back to a plain worktree.

:func:`unmount` detaches (``MNT_DETACH``), so a process still inside cannot keep the
mount alive; :func:`overlay_mounts` lists the overlay mounts under a directory
(``/proc/self/mountinfo``) for gc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import OverlayUnavailable, SandboxError

__all__ = [
    "MOUNT_OPTIONS",
    "OverlayLayers",
    "is_mountpoint",
    "mount_overlay",
    "overlay_mounts",
    "overlay_unsupported",
    "unmount",
]

#: Fixed options besides the layer paths (see the module docstring).
MOUNT_OPTIONS = ("redirect_dir=nofollow", "metacopy=off", "index=off", "xino=off", "uuid=off")
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MNT_DETACH = 0x2
_UNSAFE_CHARS = frozenset(",:\\\n\r\t ")


@dataclass(frozen=True)
class OverlayLayers:
    """The directories of one child's overlay."""

    #: The shared snapshot checkout (read-only).
    lower: Path
    #: What the child wrote: new and changed files, whiteouts, opaque directories.
    upper: Path
    #: overlayfs's scratch directory (same filesystem as ``upper``).
    work: Path
    #: Where the merged view is mounted: the child's workspace.
    merged: Path
    #: Read-only layers under the snapshot checkout (an environment's setup layer): they add
    #: what the snapshot lacks and never change a file of it. A child's diff is against
    #: ``lower`` alone.
    below: tuple[Path, ...] = ()

    def options(self) -> str:
        """The mount data string."""
        lowers = ":".join(str(path) for path in (self.lower, *self.below))
        return ",".join([f"lowerdir={lowers}", f"upperdir={self.upper}",
                         f"workdir={self.work}", *MOUNT_OPTIONS])


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _kernel_has_overlay() -> bool:
    try:
        listing = Path("/proc/filesystems").read_text()
    except OSError:
        return False
    return any(line.split()[-1:] == ["overlay"] for line in listing.splitlines())


def overlay_unsupported(*paths: Path) -> str | None:
    """Why overlay workspaces cannot be used for these paths here, or ``None``.

    Cheap checks only; a mount that still fails is reported by :func:`mount_overlay`.
    """
    if os.geteuid() != 0:
        return ("overlay workspaces need root here: a normal user's overlay exists only "
                "inside a user namespace, where corral's host-side file tools and diff "
                "cannot see it")
    if not _kernel_has_overlay():
        return "the kernel has no overlayfs (/proc/filesystems)"
    for path in paths:
        bad = sorted(_UNSAFE_CHARS & set(str(path)))
        if bad:
            return (f"the path {str(path)!r} holds {''.join(bad)!r}, which overlay mount "
                    "options cannot carry")
    return None


def mount_overlay(layers: OverlayLayers) -> None:
    """Mount ``layers`` at ``layers.merged`` (``nosuid,nodev``); :class:`OverlayUnavailable`
    when the kernel refuses (the reason is its error)."""
    reason = overlay_unsupported(layers.lower, layers.upper, layers.work, layers.merged,
                                 *layers.below)
    if reason is not None:
        raise OverlayUnavailable(reason, operation="mount_overlay")
    done = _libc().mount(b"overlay", os.fsencode(layers.merged), b"overlay",
                         _MS_NOSUID | _MS_NODEV, layers.options().encode())
    if done != 0:
        code = ctypes.get_errno()
        raise OverlayUnavailable(
            f"mounting the overlay failed: {os.strerror(code)}", operation="mount_overlay",
            context={"merged": layers.merged, "upper": layers.upper, "errno": code},
            hint="the state dir's filesystem must support overlayfs upper layers "
            "(ext4, xfs, btrfs and tmpfs do; overlayfs and NFS do not)",
        )


def unmount(path: Path) -> bool:
    """Detach the mount at ``path``; ``False`` when nothing was mounted there."""
    if _libc().umount2(os.fsencode(path), _MNT_DETACH) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOENT):
        return False
    raise SandboxError(f"cannot unmount {path}: {os.strerror(code)}", code="unmount_failed",
                       operation="unmount", context={"path": path})


def _unescape(field: str) -> str:
    """A mountinfo path field (``\\040`` for a space, ...)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field) >= i + 4 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_table() -> list[tuple[str, Path]]:
    """This mount namespace's mounts (``/proc/self/mountinfo``): (filesystem type,
    mountpoint) each, the mountpoint unescaped; empty when it cannot be read."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    table: list[tuple[str, Path]] = []
    for line in lines:
        fields = line.split(" ")
        try:
            fstype = fields[fields.index("-") + 1]
        except (ValueError, IndexError):
            continue
        table.append((fstype, Path(_unescape(fields[4]))))
    return table


def overlay_mounts(under: Path) -> list[Path]:
    """The mountpoints of the overlay mounts at or below ``under`` (deepest first)."""
    found = [mountpoint for fstype, mountpoint in mount_table()
             if fstype == "overlay" and (mountpoint == under or mountpoint.is_relative_to(under))]
    return sorted(set(found), key=lambda path: len(path.parts), reverse=True)


def is_mountpoint(path: Path) -> bool:
    """Whether something is mounted at ``path`` (``/proc/self/mountinfo``)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return os.path.ismount(path)
    target = str(path)
    return any(_unescape(line.split(" ")[4]) == target for line in lines if line.count(" ") > 4)
