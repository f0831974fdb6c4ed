"""The snapshots directory: its lock, leases, and the idle snapshots kept for reuse.

A snapshot is *held* while a lease on it is alive (a sandbox whose state dir
exists, or a process that still runs) and *idle* once its last lease is dropped.
An idle snapshot stays on disk, its checkouts included: the next run on the same
state leases it and pays no staging commit, no checkout and no tree walk of its
own. What stays is bounded:

- at most :data:`KEEP_IDLE` idle snapshots per repository, the most recently
  used; an older one is removed when another one becomes idle or a new one is
  made (:func:`settle_idle`);
- ``corral gc`` (:func:`collect_snapshots`) removes idle snapshots unused for
  longer than its limit (``max_idle``), those whose repository is gone, and
  those made not to be kept (``keep=False``: a snapshot of a delegating child's
  workspace, a path no later run starts from).

A held snapshot is never removed. Every lease change, lookup and removal
happens under one ``flock`` (``snapshots/.lock``), and a removal renames the
snapshot away (``.dead-*``) before deleting it outside the lock: a run that
starts while gc or an eviction removes an idle snapshot either leased it first
(it stays) or no longer finds it (and makes a fresh one).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sandbox.results import ExcludedPath, GcEntry
from sandbox.state import atomic_write, owner_alive, owner_token, private_dir
from sandbox.workspaces.worktree import remove_tree

__all__ = [
    "DEAD",
    "DEFAULT_MAX_IDLE",
    "KEEP_IDLE",
    "NEW",
    "SNAPSHOTS",
    "Info",
    "Lease",
    "collect_snapshots",
    "held",
    "locked",
    "mark_idle",
    "new_lease",
    "read_info",
    "retire",
    "settle_idle",
    "snapshots_of",
    "write_lease",
]

#: The directory of the state root that holds snapshots.
SNAPSHOTS = "snapshots"
NEW, DEAD = ".new-", ".dead-"
#: Idle snapshots kept per repository (the most recently used).
KEEP_IDLE = 2
#: How long gc keeps an idle snapshot, by default (seconds).
DEFAULT_MAX_IDLE = 24 * 3600.0
_USED = "used"
#: How long a snapshot being made may lack its ``owner.json`` (seconds).
_MAKER_GRACE = 600.0


class Info(BaseModel):
    """``snapshot.json``."""

    model_config = ConfigDict(extra="forbid")

    id: str
    commit: str
    tree: str
    repo_top: Path
    git_dir: Path
    common_dir: Path
    head: str | None
    attributes: bool
    excluded: tuple[ExcludedPath, ...] = ()
    created_at: float
    #: Kept idle for reuse after its last lease (``False``: removed with it).
    keep: bool = True


class Lease(BaseModel):
    """``leases/<id>.json``: a sandbox's (alive while its state dir exists) or a process's."""

    model_config = ConfigDict(extra="forbid")

    id: str
    sandbox: str | None = None
    owner_host: str
    owner_pid: int
    owner_started: float
    created_at: float


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created ``0600``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def new_lease(sandbox: str | None) -> Lease:
    host, pid, started = owner_token()
    return Lease(id=f"lease-{secrets.token_hex(6)}", sandbox=sandbox, owner_host=host,
                 owner_pid=pid, owner_started=started, created_at=time.time())


def write_lease(snapshot_dir: Path, lease: Lease) -> None:
    leases = snapshot_dir / "leases"
    private_dir(leases)
    atomic_write(leases / f"{lease.id}.json", lease.model_dump_json().encode())


def read_info(snapshot_dir: Path) -> Info | None:
    """A snapshot's ``snapshot.json`` (``None``: none, or unreadable)."""
    try:
        return Info.model_validate_json((snapshot_dir / "snapshot.json").read_bytes())
    except (OSError, ValueError):
        return None


def snapshots_of(base: Path, repo_top: Path) -> list[tuple[Path, Info]]:
    """The finished snapshots of ``repo_top``, most recently used first (no lock needed to
    read: a snapshot only ever appears whole, by a rename, and may vanish)."""
    found = []
    for directory in base.iterdir() if base.is_dir() else []:
        if directory.name.startswith(".") or not directory.is_dir():
            continue
        info = read_info(directory)
        if info is not None and info.repo_top == repo_top:
            found.append((directory, info))
    return sorted(found, key=lambda item: _last_used(*item), reverse=True)


def _last_used(directory: Path, info: Info) -> float:
    try:
        return float((directory / _USED).read_text())
    except (OSError, ValueError):
        return info.created_at


def held(state_root: Path, snapshot_dir: Path) -> int:
    """Count the live leases of one snapshot, deleting the others, and what a crash left
    of a lease being written (hold the lock: every lease is written under it)."""
    live = 0
    leases = snapshot_dir / "leases"
    for path in sorted(leases.iterdir()) if leases.is_dir() else []:
        if path.name.startswith(".") or path.suffix != ".json":
            path.unlink(missing_ok=True)
            continue
        try:
            lease = Lease.model_validate_json(path.read_bytes())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if lease.sandbox is not None:
            alive = (state_root / "sandboxes" / lease.sandbox).is_dir()
        else:
            alive = owner_alive(lease.owner_host, lease.owner_pid, lease.owner_started)
        if alive:
            live += 1
        else:
            path.unlink(missing_ok=True)
    return live


def retire(base: Path, snapshot_dir: Path) -> Path:
    """Rename a snapshot away (hold the lock); remove what is returned after releasing it."""
    dead = base / f"{DEAD}{snapshot_dir.name}-{secrets.token_hex(4)}"
    snapshot_dir.rename(dead)
    return dead


def mark_idle(snapshot_dir: Path) -> None:
    """Record when a snapshot became idle (the last lease was dropped)."""
    atomic_write(snapshot_dir / _USED, f"{time.time()}\n".encode())


def settle_idle(state_root: Path, base: Path, repo_top: Path,
                keep: int = KEEP_IDLE) -> list[Path]:
    """Retire the idle snapshots of ``repo_top`` beyond the ``keep`` most recently used
    (hold the lock); the directories to remove once it is released."""
    doomed = []
    idle = 0
    for directory, _info in snapshots_of(base, repo_top):
        if held(state_root, directory):
            continue
        idle += 1
        if idle > keep:
            doomed.append(retire(base, directory))
    return doomed


def _maker_alive(directory: Path) -> bool:
    """Whether the process making a snapshot still runs. Its ``owner.json`` is written
    just after the directory is made: a directory without one is young (a maker that has
    not written it yet) or was left by a crash in between (once older than a grace)."""
    try:
        maker = Lease.model_validate_json((directory / "owner.json").read_bytes())
    except FileNotFoundError:
        try:
            return time.time() - directory.stat().st_mtime < _MAKER_GRACE
        except OSError:
            return False
    except (OSError, ValueError):
        return False
    return owner_alive(maker.owner_host, maker.owner_pid, maker.owner_started)


def _idle_reason(directory: Path, info: Info | None, max_idle: float) -> str | None:
    """Why gc removes an idle snapshot, or ``None`` (it stays for reuse)."""
    if info is None:
        return "snapshot without readable metadata"
    if not info.keep:
        return "snapshot no sandbox or process holds any more"
    if not info.repo_top.is_dir() or not info.common_dir.is_dir():
        return f"idle snapshot of a repository that is gone ({info.repo_top})"
    unused = time.time() - _last_used(directory, info)
    if unused >= max_idle:
        return f"idle snapshot unused for {unused / 3600:.1f} h"
    return None


def collect_snapshots(state_root: Path, *, max_idle: float = DEFAULT_MAX_IDLE
                      ) -> list[GcEntry]:
    """gc: drop the leases whose holder is gone, remove the idle snapshots gc removes
    (see the module docstring), and what crashed while being made or removed."""
    base = state_root / SNAPSHOTS
    if not base.is_dir():
        return []
    entries: list[GcEntry] = []
    doomed: list[Path] = []
    with locked(base / ".lock"):
        for directory in sorted(base.iterdir()):
            name = directory.name
            if not directory.is_dir():
                continue
            if name.startswith(DEAD):
                doomed.append(directory)
            elif name.startswith(NEW):
                if not _maker_alive(directory):
                    doomed.append(directory)
                    entries.append(GcEntry(sandbox_id=name, action="cleaned",
                                           detail="snapshot left half made by a crash"))
            else:
                live = held(state_root, directory)
                if live:
                    entries.append(GcEntry(sandbox_id=name, action="in_use",
                                           detail=f"snapshot held by {live} lease(s)"))
                    continue
                reason = _idle_reason(directory, read_info(directory), max_idle)
                if reason is not None:
                    doomed.append(retire(base, directory))
                    entries.append(GcEntry(sandbox_id=name, action="cleaned", detail=reason))
    for directory in doomed:
        remove_tree(directory)
    return entries
