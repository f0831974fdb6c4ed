"""Shared snapshots: the parent's state committed and checked out once, leased by its children.

:func:`acquire_snapshot` commits the parent's current state (``HEAD`` + staged +
unstaged + untracked, :mod:`sandbox.workspaces.staging`) into a private store and
either finds the snapshot of that very state already made, or makes it; either
way the caller gets a lease on it. Every sandbox opened on it
(``open_sandbox(..., snapshot=ref)``) takes a lease of its own, and a snapshot is
removed when its last lease is dropped (:func:`release_snapshot`, a sandbox's
teardown, or :func:`collect_snapshots` in gc for leases whose holder is gone).

Layout under the state root::

    snapshots/.lock                      flock held while leases change
    snapshots/<id>/snapshot.json         what it is (commit, tree, repository, exclusions)
    snapshots/<id>/git/                  private git dir; git/store holds its objects
    snapshots/<id>/leases/<lease>.json   who holds it: a sandbox, or a process
    snapshots/<id>/checkouts/<uid>-<gid>/tree/   the read-only checkout overlays use,
    snapshots/<id>/checkouts/<uid>-<gid>/git/    with its own git dir and baseline index
    snapshots/.new-<token>/              a snapshot being made (owner.json says by whom)

The id is a digest of the snapshot commit (fixed identity and date, so the same
state gives the same commit), the repository's paths and the data-only git
settings and ignore rules copied with it. A checkout is made on first use for the
owner a backend needs (docker as root works as uid 1000: it gets a checkout given
to that uid, bubblewrap another one as root), under a per-snapshot lock; a
checkout left half made by a crash is made again. The parent's ``.git`` is never
written (:mod:`sandbox.workspaces.privategit`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sandbox.errors import SandboxStateError
from sandbox.gitsafe import check_repository_config
from sandbox.results import ExcludedPath, GcEntry
from sandbox.state import (
    atomic_write,
    check_state_dir,
    default_state_root,
    owner_alive,
    owner_token,
    private_dir,
)
from sandbox.workspaces.privategit import (
    STORE,
    create_private_git,
    set_head,
    write_alternates,
)
from sandbox.workspaces.repo import RepoInfo, inspect_repo
from sandbox.workspaces.staging import take_snapshot
from sandbox.workspaces.worktree import checkout_worktree, remove_tree

__all__ = [
    "SNAPSHOTS",
    "Checkout",
    "SnapshotRef",
    "acquire_snapshot",
    "collect_snapshots",
    "drop_lease",
    "lease_snapshot",
    "release_snapshot",
    "snapshot_checkout",
]

#: The directory of the state root that holds snapshots.
SNAPSHOTS = "snapshots"
_NEW, _DEAD = ".new-", ".dead-"


class _Info(BaseModel):
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


class _Lease(BaseModel):
    """``leases/<id>.json``: a sandbox's (alive while its state dir exists) or a process's."""

    model_config = ConfigDict(extra="forbid")

    id: str
    sandbox: str | None = None
    owner_host: str
    owner_pid: int
    owner_started: float
    created_at: float


@dataclass(frozen=True)
class SnapshotRef:
    """A lease on one shared, read-only snapshot of a repository's state."""

    id: str
    #: The snapshot commit (in :attr:`git_dir`'s store, never in the parent's repository).
    commit: str
    tree: str
    #: ``<state root>/snapshots/<id>``.
    path: Path
    state_root: Path
    repo: RepoInfo
    #: This holder's lease (dropped by :func:`release_snapshot`).
    lease: str
    #: What the parent's tree held that the snapshot leaves out (this acquisition's walk).
    excluded: tuple[ExcludedPath, ...] = ()
    #: Whether the snapshot's tree holds ``.gitattributes`` files.
    attributes: bool = False
    #: Whether an existing snapshot of the same state was leased (nothing was checked out).
    reused: bool = False

    @property
    def git_dir(self) -> Path:
        """The snapshot's private git dir."""
        return self.path / "git"

    @property
    def store(self) -> Path:
        """Where its objects are (children's git dirs borrow from it)."""
        return self.git_dir / STORE


@dataclass(frozen=True)
class Checkout:
    """One checkout of a snapshot, given to one owner."""

    tree: Path
    git_dir: Path
    owner: tuple[int, int]


def _snapshots(state_root: Path) -> Path:
    return state_root / SNAPSHOTS


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created ``0600``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _lease(sandbox: str | None) -> _Lease:
    host, pid, started = owner_token()
    return _Lease(id=f"lease-{secrets.token_hex(6)}", sandbox=sandbox, owner_host=host,
                  owner_pid=pid, owner_started=started, created_at=time.time())


def _write_lease(snapshot_dir: Path, lease: _Lease) -> None:
    leases = snapshot_dir / "leases"
    private_dir(leases)
    atomic_write(leases / f"{lease.id}.json", lease.model_dump_json().encode())


def _digest(commit: str, repo: RepoInfo, git_dir: Path) -> str:
    h = hashlib.sha256(f"{commit}\0{repo.top}\0{repo.common_dir}\0".encode())
    for name in ("config", "info/exclude"):
        with contextlib.suppress(OSError):
            h.update((git_dir / name).read_bytes())
        h.update(b"\0")
    return f"snap-{h.hexdigest()[:20]}"


def _ref(info: _Info, path: Path, state_root: Path, repo: RepoInfo, lease: str, *,
         excluded: tuple[ExcludedPath, ...], reused: bool) -> SnapshotRef:
    return SnapshotRef(id=info.id, commit=info.commit, tree=info.tree, path=path,
                       state_root=state_root, repo=repo, lease=lease, excluded=excluded,
                       attributes=info.attributes, reused=reused)


def acquire_snapshot(repo: RepoInfo | Path, *, state_root: Path | None = None) -> SnapshotRef:
    """Lease the snapshot of ``repo``'s current state, making it if no one has.

    Checks what :func:`sandbox.factory.open_sandbox` checks first: the state dir
    must lie outside every repository and workspace a child could write, and the
    repository's configuration must name no program.
    """
    info_repo = repo if isinstance(repo, RepoInfo) else inspect_repo(repo)
    root = state_root or default_state_root()
    check_state_dir(root, repositories=[info_repo.top, info_repo.git_dir, info_repo.common_dir])
    check_repository_config(info_repo.git_dir)  # staging runs git with the parent's config
    private_dir(root, parents=True)
    base = _snapshots(root)
    private_dir(base)
    tmp = base / f"{_NEW}{secrets.token_hex(8)}"
    tmp.mkdir(mode=0o700)
    try:
        host, pid, started = owner_token()
        atomic_write(tmp / "owner.json", _Lease(
            id="maker", owner_host=host, owner_pid=pid, owner_started=started,
            created_at=time.time()).model_dump_json().encode())
        git_dir = tmp / "git"
        create_private_git(git_dir, parent_git_dir=info_repo.git_dir,
                           common_dir=info_repo.common_dir)
        snap = take_snapshot(info_repo, tmp, git_dir)
        for scratch in (snap.index, tmp / "snapshot.pathspec"):
            scratch.unlink(missing_ok=True)
        sid = _digest(snap.commit, info_repo, git_dir)
        excluded = tuple(snap.scan.excluded)
        lease = _lease(None)
        final = base / sid
        with _locked(base / ".lock"):
            existing = final / "snapshot.json"
            if existing.is_file():
                info = _Info.model_validate_json(existing.read_bytes())
                _write_lease(final, lease)
                return _ref(info, final, root, info_repo, lease.id, excluded=excluded,
                            reused=True)
            info = _Info(id=sid, commit=snap.commit, tree=snap.tree, repo_top=info_repo.top,
                         git_dir=info_repo.git_dir, common_dir=info_repo.common_dir,
                         head=info_repo.head, attributes=snap.scan.attributes,
                         excluded=excluded, created_at=time.time())
            atomic_write(tmp / "snapshot.json", info.model_dump_json(indent=2).encode())
            _write_lease(tmp, lease)
            (tmp / "owner.json").unlink()
            write_alternates(git_dir, common_dir=info_repo.common_dir, moving_to=final / "git")
            tmp.rename(final)
            return _ref(info, final, root, info_repo, lease.id, excluded=excluded,
                        reused=False)
    finally:
        remove_tree(tmp)  # gone already when it became the snapshot


def lease_snapshot(ref: SnapshotRef, sandbox_id: str) -> str:
    """A lease for sandbox ``sandbox_id`` (alive while its state dir exists); its id."""
    base = _snapshots(ref.state_root)
    lease = _lease(sandbox_id)
    with _locked(base / ".lock"):
        if not (ref.path / "snapshot.json").is_file():
            raise SandboxStateError(
                f"snapshot {ref.id} no longer exists (its last lease was released)",
                operation="open_sandbox", context={"snapshot": ref.path},
                hint="open every sandbox before releasing the snapshot, or acquire it again")
        _write_lease(ref.path, lease)
    return lease.id


def drop_lease(state_root: Path, snapshot_id: str, lease_id: str) -> bool:
    """Drop one lease; remove the snapshot when it was the last. Whether it was removed."""
    base = _snapshots(state_root)
    snapshot_dir = base / snapshot_id
    if not snapshot_dir.is_dir():
        return False
    with _locked(base / ".lock"):
        (snapshot_dir / "leases" / f"{lease_id}.json").unlink(missing_ok=True)
        leases = snapshot_dir / "leases"
        if leases.is_dir() and any(leases.iterdir()):
            return False
        dead = base / f"{_DEAD}{snapshot_id}-{secrets.token_hex(4)}"
        snapshot_dir.rename(dead)
    remove_tree(dead)
    return True


def release_snapshot(ref: SnapshotRef) -> None:
    """Drop this holder's lease (again: nothing); the last lease removes the snapshot."""
    drop_lease(ref.state_root, ref.id, ref.lease)


def snapshot_checkout(ref: SnapshotRef, owner: tuple[int, int] | None = None) -> Checkout:
    """The snapshot's checkout for ``owner`` (default: this process), made on first use.

    The caller holds a lease. The checkout's ``.git`` names its own git dir, whose
    objects are the snapshot's store and the parent's object dirs (read through
    alternates), and whose index has the checkout's stat data.
    """
    owned = owner or (os.geteuid(), os.getegid())
    checkouts = ref.path / "checkouts"
    private_dir(checkouts)
    place = checkouts / f"{owned[0]}-{owned[1]}"
    done = Checkout(tree=place / "tree", git_dir=place / "git", owner=owned)
    with _locked(ref.path / ".checkout.lock"):
        if (place / "ready").is_file():
            return done
        remove_tree(place)  # half made by a crash: start again
        place.mkdir(mode=0o700)
        create_private_git(done.git_dir, parent_git_dir=ref.repo.git_dir,
                           common_dir=ref.repo.common_dir, shared=[ref.store])
        set_head(done.git_dir, ref.commit)
        chown = owned if owned != (os.geteuid(), os.getegid()) else None
        checkout_worktree(ref.commit, private_git=done.git_dir, worktree=done.tree,
                          baseline=place / "baseline.index", chown=chown)
        (place / "ready").write_text(f"{ref.commit}\n")
    return done


def collect_snapshots(state_root: Path) -> list[GcEntry]:
    """gc: drop the leases whose holder is gone, remove every snapshot left without one,
    and what crashed while being made or removed."""
    base = _snapshots(state_root)
    if not base.is_dir():
        return []
    entries: list[GcEntry] = []
    doomed: list[Path] = []
    with _locked(base / ".lock"):
        for directory in sorted(base.iterdir()):
            name = directory.name
            if not directory.is_dir():
                continue
            if name.startswith(_DEAD):
                doomed.append(directory)
            elif name.startswith(_NEW):
                if not _maker_alive(directory):
                    doomed.append(directory)
                    entries.append(GcEntry(sandbox_id=name, action="cleaned",
                                           detail="snapshot left half made by a crash"))
            else:
                held = _live_leases(state_root, directory)
                if held:
                    entries.append(GcEntry(sandbox_id=name, action="in_use",
                                           detail=f"snapshot held by {held} lease(s)"))
                    continue
                dead = base / f"{_DEAD}{name}-{secrets.token_hex(4)}"
                directory.rename(dead)
                doomed.append(dead)
                entries.append(GcEntry(sandbox_id=name, action="cleaned",
                                       detail="snapshot no sandbox or process holds any more"))
    for directory in doomed:
        remove_tree(directory)
    return entries


def _maker_alive(directory: Path) -> bool:
    try:
        maker = _Lease.model_validate_json((directory / "owner.json").read_bytes())
    except (OSError, ValueError):
        return False
    return owner_alive(maker.owner_host, maker.owner_pid, maker.owner_started)


def _live_leases(state_root: Path, snapshot_dir: Path) -> int:
    """Count the live leases of one snapshot, deleting the others."""
    live = 0
    leases = snapshot_dir / "leases"
    for path in sorted(leases.glob("*.json")) if leases.is_dir() else []:
        try:
            lease = _Lease.model_validate_json(path.read_bytes())
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
