"""A read-only child's throwaway layer: its commands may write, its checkout never changes.

A read-only agent the user granted review commands (``[review] commands = true``,
``--review-commands``) keeps its shell. Its commands run over the parent's checkout
through an overlay whose lower layer is the checkout itself (overlayfs never writes a
lower layer) and whose upper and work directories live on a tmpfs of a fixed size
(``size=``, ``nr_inodes=``, ``nosuid,nodev``), mounted at the sandbox's
``worktrees/<id>``; the merged view (``worktrees/<id>/merged``) is bound at the
checkout's own path inside the sandbox, so absolute paths (a venv's shebangs) hold.

What the child's commands write (a ``.pytest_cache``, ``build/``, a deleted file) lands
in the upper layer: the next command sees it, the checkout never does, and teardown
unmounts both and counts what it dropped (:func:`count_discarded`: files and bytes; the
run's record says so). The tmpfs's pages are charged to the memory cgroup of the process
that writes them, and a write past the size fails with ``ENOSPC`` inside the sandbox
alone. The checkout's ``.git`` stays the real one, bound read-only over the merged view
(:meth:`sandbox.workspaces.model.Workspace.mounts`): refs, objects, config and the index
cannot be written even in the throwaway layer, and ``git status`` works as it does on
a read-only checkout. The file tools keep refusing writes (the workspace is not
writable); they read the merged view, so they see what the commands wrote.

The mounts are made on the host with ``mount(2)`` and need ``CAP_SYS_ADMIN`` (corral
running as root), as overlay workspaces do (:mod:`sandbox.workspaces.overlay`):
:func:`scratch_unsupported` says why not otherwise, and the sandbox refuses to open
(``scratch_unavailable``) rather than run the commands on the checkout.
"""

from __future__ import annotations

import ctypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxConfigError
from sandbox.workspaces.overlay import (
    OverlayLayers,
    _libc,
    is_mountpoint,
    mount_overlay,
    mount_table,
    overlay_unsupported,
    unmount,
)
from sandbox.workspaces.upper import is_whiteout

__all__ = ["DEFAULT_SCRATCH_SIZE", "Discarded", "ScratchLayer", "count_discarded",
           "mount_scratch", "scratch_mounts", "scratch_unsupported", "unmount_scratch"]

#: The throwaway layer's size when the user sets none (``[review] scratch_size``).
DEFAULT_SCRATCH_SIZE = 1 << 30
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
#: One inode per this many bytes of the layer (empty files cost memory too).
_BYTES_PER_INODE = 4096


@dataclass(frozen=True)
class ScratchLayer:
    """One read-only child's throwaway layer over ``lower`` (the checkout)."""

    #: The tmpfs holding the upper and work directories and the merged mountpoint.
    root: Path
    #: The checkout (read-only: overlayfs never writes a lower layer).
    lower: Path
    size: int

    @property
    def layers(self) -> OverlayLayers:
        """The overlay of the layer (merged: what the child's commands see)."""
        return OverlayLayers(lower=self.lower, upper=self.root / "upper",
                             work=self.root / "work", merged=self.root / "merged")

    @property
    def merged(self) -> Path:
        """The merged view, bound at the checkout's path inside the sandbox."""
        return self.root / "merged"


@dataclass(frozen=True)
class Discarded:
    """What a throwaway layer held when it was dropped."""

    #: Files, symlinks and deletions (whiteouts) the child's commands made.
    files: int
    #: The bytes of the regular files among them.
    bytes: int

    def to_json(self) -> dict[str, int]:
        """The record's ``discarded_writes``."""
        return {"files": self.files, "bytes": self.bytes}


def scratch_unsupported(*paths: Path) -> str | None:
    """Why a throwaway layer cannot be mounted for these paths here, or ``None``."""
    reason = overlay_unsupported(*paths)
    if reason is None:
        return None
    return reason.replace("overlay workspaces need", "a read-only agent's throwaway layer "
                          "(review commands) needs")


def mount_scratch(lower: Path, root: Path, *, size: int) -> ScratchLayer:
    """Mount a throwaway layer over ``lower`` at ``root`` (which must not exist)."""
    layer = ScratchLayer(root=root, lower=lower, size=size)
    reason = scratch_unsupported(lower, root)
    if reason is not None:
        raise SandboxConfigError(
            reason, code="scratch_unavailable", operation="open_sandbox",
            context={"checkout": lower},
            hint="run corral as root for review commands, or run the reviewer without "
            "them (leave out --review-commands and [review] commands)")
    root.mkdir(mode=0o700)
    inodes = max(size // _BYTES_PER_INODE, 1024)
    data = f"size={size},nr_inodes={inodes},mode=0700".encode()
    if _libc().mount(b"tmpfs", os.fsencode(root), b"tmpfs", _MS_NOSUID | _MS_NODEV, data) != 0:
        code = ctypes.get_errno()
        raise SandboxConfigError(f"mounting the throwaway layer's tmpfs failed: "
                                 f"{os.strerror(code)}", code="scratch_unavailable",
                                 operation="open_sandbox", context={"path": root})
    try:
        layers = layer.layers
        owner = lower.stat()
        layers.upper.mkdir(mode=0o700)
        os.chown(layers.upper, owner.st_uid, owner.st_gid)
        layers.upper.chmod(stat.S_IMODE(owner.st_mode))
        layers.work.mkdir(mode=0o700)
        layers.merged.mkdir(mode=0o700)
        mount_overlay(layers)
    except BaseException:
        unmount_scratch(layer)
        raise
    return layer


def count_discarded(layer: ScratchLayer) -> Discarded:
    """What the upper layer holds now (never following a symlink the child made)."""
    files = size = 0
    for directory, dirs, names, dir_fd in os.fwalk(layer.layers.upper, follow_symlinks=False):
        del directory
        for name in [*names, *dirs]:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode):
                continue
            files += 1
            if stat.S_ISREG(info.st_mode) and not is_whiteout(info):
                size += info.st_size
    return Discarded(files=files, bytes=size)


def unmount_scratch(layer: ScratchLayer) -> None:
    """Drop the layer: the overlay, then the tmpfs (everything in it goes), then its
    mountpoint."""
    unmount(layer.merged)
    unmount(layer.root)
    if os.path.lexists(layer.root) and not is_mountpoint(layer.root):
        layer.root.rmdir()


def scratch_mounts(worktrees: Path) -> dict[str, list[Path]]:
    """The throwaway layers' mounts under ``worktrees`` (sandbox id -> its mountpoints,
    deepest first): gc drops those of sandboxes no live process owns."""
    found: dict[str, list[Path]] = {}
    for fstype, mountpoint in mount_table():
        if fstype != "tmpfs" or mountpoint.parent != worktrees:
            continue
        found.setdefault(mountpoint.name, []).extend([mountpoint / "merged", mountpoint])
    return found
