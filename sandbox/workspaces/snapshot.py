"""Shared snapshots: the parent's state committed and checked out once, leased by its children.

:func:`acquire_snapshot` stages the parent's current state (``HEAD`` + staged +
unstaged + untracked, :mod:`sandbox.workspaces.staging`) into a private index and
either finds the snapshot of that very state already made (its key,
:mod:`sandbox.workspaces.statekey`, is a digest of exactly that state), or commits
and makes it; either way the caller gets a lease on it. Every sandbox opened on
it (``open_sandbox(..., snapshot=ref)``) takes a lease of its own. When the last
lease is dropped (:func:`release_snapshot`, a sandbox's teardown, or
:func:`collect_snapshots` in gc for leases whose holder is gone) the snapshot
stays, idle, for the next run on the same state, within the bounds of
:mod:`sandbox.workspaces.snapstore` (a few per repository; gc removes old ones).

Layout under the state root::

    snapshots/.lock                      flock held while leases change
    snapshots/<id>/snapshot.json         what it is (commit, tree, repository, exclusions)
    snapshots/<id>/git/                  private git dir; git/store holds its objects
    snapshots/<id>/leases/<lease>.json   who holds it: a sandbox, or a process
    snapshots/<id>/used                  when it last became idle
    snapshots/<id>/aliases/<key>         staged indexes (by their bytes) known to hold it
    snapshots/<id>/checkouts/<uid>-<gid>/tree/   the read-only checkout overlays use,
    snapshots/<id>/checkouts/<uid>-<gid>/git/    with its own git dir and baseline index
    snapshots/.new-<token>/              a snapshot being made (owner.json says by whom)

A checkout is made on first use for the owner a backend needs (docker as root
works as uid 1000: it gets a checkout given to that uid, bubblewrap another one
as root), under a per-snapshot lock; a checkout left half made by a crash is
made again. Nothing a child runs can write a checkout, its git dir or the store:
a child sees only its overlay's merged view, and they are mounted read-only where
its git needs them. The parent's ``.git`` is never written
(:mod:`sandbox.workspaces.privategit`).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxError, SandboxStateError
from sandbox.gitsafe import check_repository_config
from sandbox.results import ExcludedPath, GcEntry
from sandbox.state import atomic_write, check_state_dir, default_state_root, private_dir
from sandbox.workspaces.privategit import (
    STORE,
    create_private_git,
    set_head,
    write_alternates,
)
from sandbox.workspaces.repo import RepoInfo, inspect_repo
from sandbox.workspaces.scan import scan_tree
from sandbox.workspaces.snapstore import (
    DEFAULT_MAX_IDLE,
    KEEP_IDLE,
    NEW,
    SNAPSHOTS,
    Info,
    held,
    locked,
    mark_idle,
    new_lease,
    read_info,
    retire,
    settle_idle,
    snapshots_of,
    write_lease,
)
from sandbox.workspaces.snapstore import collect_snapshots as _collect
from sandbox.workspaces.staging import Staged, commit_staged, stage_snapshot
from sandbox.workspaces.statekey import commit_key, exclusions_hold, index_key, listing_key
from sandbox.workspaces.worktree import checkout_worktree, remove_tree

__all__ = [
    "DEFAULT_MAX_IDLE",
    "KEEP_IDLE",
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
    #: What the parent's tree held that the snapshot leaves out (this acquisition's walk,
    #: or the walk that made the snapshot when this acquisition walked nothing).
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


#: Index keys known to hold a snapshot's state (:func:`_record_alias`).
_ALIASES = "aliases"


def _ref(info: Info, path: Path, state_root: Path, repo: RepoInfo, lease: str, *,
         excluded: tuple[ExcludedPath, ...], reused: bool) -> SnapshotRef:
    return SnapshotRef(id=info.id, commit=info.commit, tree=info.tree, path=path,
                       state_root=state_root, repo=repo, lease=lease, excluded=excluded,
                       attributes=info.attributes, reused=reused)


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def acquire_snapshot(repo: RepoInfo | Path, *, state_root: Path | None = None,
                     keep: bool | None = None) -> SnapshotRef:
    """Lease the snapshot of ``repo``'s current state, making it if no one has.

    Checks what :func:`sandbox.factory.open_sandbox` checks first: the state dir
    must lie outside every repository and workspace a child could write, and the
    repository's configuration must name no program. ``keep``: whether the snapshot
    stays, idle, for reuse after its last lease (:mod:`sandbox.workspaces.snapstore`);
    by default it does unless ``repo`` is a workspace under the state dir (a delegating
    child's: no later run starts from it).
    """
    info_repo = repo if isinstance(repo, RepoInfo) else inspect_repo(repo)
    root = state_root or default_state_root()
    check_state_dir(root, repositories=[info_repo.top, info_repo.git_dir, info_repo.common_dir])
    check_repository_config(info_repo.git_dir)  # staging runs git with the parent's config
    private_dir(root, parents=True)
    base = root / SNAPSHOTS
    private_dir(base)
    kept = keep if keep is not None else not _inside(info_repo.top, root)
    tmp = base / f"{NEW}{secrets.token_hex(8)}"
    tmp.mkdir(mode=0o700)
    try:
        maker = new_lease(None).model_copy(update={"id": "maker"})
        atomic_write(tmp / "owner.json", maker.model_dump_json().encode())
        git_dir = tmp / "git"
        create_private_git(git_dir, parent_git_dir=info_repo.git_dir,
                           common_dir=info_repo.common_dir)
        known = snapshots_of(base, info_repo.top)
        staged = _stage(info_repo, known, tmp, git_dir)
        alias = index_key(info_repo, git_dir, staged.index)
        if (found := _reuse_alias(root, known, alias, info_repo, staged)) is not None:
            return found
        sid = listing_key(info_repo, git_dir, staged.index)
        if sid is not None and (found := _reuse(root, sid, info_repo, staged, alias)):
            return found
        if staged.scan is None:  # staged with the last walk's exclusions: walk now
            staged, again = _walked(info_repo, tmp, git_dir, staged)
            if again:
                alias = index_key(info_repo, git_dir, staged.index)
                sid = listing_key(info_repo, git_dir, staged.index)
                if sid is not None and (found := _reuse(root, sid, info_repo, staged, alias)):
                    return found
        tree, commit = commit_staged(info_repo, git_dir, staged.index)
        sid = sid or commit_key(info_repo, git_dir, commit)
        return _finish(root, tmp, sid, info_repo, staged, tree=tree, commit=commit,
                       keep=kept, alias=alias)
    finally:
        remove_tree(tmp)  # gone already when it became the snapshot


def _stage(repo: RepoInfo, known: list[tuple[Path, Info]], tmp: Path, git_dir: Path) -> Staged:
    """Stage the parent's tree: with the exclusions of the repository's latest snapshot
    (``known``, most recently used first) when they all still hold (no walk:
    :mod:`sandbox.workspaces.statekey`), else walking it."""
    for _directory, info in known[:1]:
        if exclusions_hold(repo.top, info.excluded):
            try:
                return stage_snapshot(repo, tmp, git_dir,
                                      exclusions=[entry.path for entry in info.excluded],
                                      attributes=info.attributes)
            except SandboxError:  # what git refuses to stage (a new nested repository)
                break
    return stage_snapshot(repo, tmp, git_dir)


def _walked(repo: RepoInfo, tmp: Path, git_dir: Path, staged: Staged) -> tuple[Staged, bool]:
    """A staging done without a walk, confirmed by one: kept when the walk finds the same
    exclusions and attribute files, else staged again from the start (and ``True``)."""
    scan = scan_tree(repo.top)
    if tuple(scan.paths) == staged.excluded and scan.attributes == staged.attributes:
        return dataclasses.replace(staged, scan=scan), False
    return stage_snapshot(repo, tmp, git_dir), True


def _record_alias(snapshot_dir: Path, alias: str | None) -> None:
    """Record that a staged index with the bytes keyed ``alias`` holds this snapshot's state
    (:func:`sandbox.workspaces.statekey.index_key`; hold the lock)."""
    if alias is not None:
        private_dir(snapshot_dir / _ALIASES)
        (snapshot_dir / _ALIASES / alias).touch()


def _reuse(root: Path, sid: str, repo: RepoInfo, staged: Staged,
           alias: str | None = None) -> SnapshotRef | None:
    """A lease on the finished snapshot ``sid``, or ``None`` when there is none; ``alias``
    is recorded for it (``sid`` is the state key of the staged index)."""
    final = root / SNAPSHOTS / sid
    lease = new_lease(None)
    with locked(root / SNAPSHOTS / ".lock"):
        info = read_info(final)
        if info is None:
            return None
        write_lease(final, lease)
        _record_alias(final, alias)
    excluded = tuple(staged.scan.excluded) if staged.scan is not None else info.excluded
    return _ref(info, final, root, repo, lease.id, excluded=excluded, reused=True)


def _reuse_alias(root: Path, known: list[tuple[Path, Info]], alias: str | None,
                 repo: RepoInfo, staged: Staged) -> SnapshotRef | None:
    """A lease on the snapshot of ``known`` that ``alias`` (the staged index's bytes) was
    recorded for, or ``None``."""
    for directory, _info in known if alias is not None else []:
        if (directory / _ALIASES / str(alias)).is_file():
            return _reuse(root, directory.name, repo, staged)
    return None


def _finish(root: Path, tmp: Path, sid: str, repo: RepoInfo, staged: Staged, *, tree: str,
            commit: str, keep: bool, alias: str | None) -> SnapshotRef:
    """Make ``tmp`` the snapshot ``sid`` (unless another process made it meanwhile: that one
    is leased); retire idle snapshots of the repository beyond the ones kept."""
    scan = staged.scan
    assert scan is not None  # noqa: S101 - every staging is walked before it is committed
    for scratch in (staged.index, tmp / "snapshot.pathspec"):
        scratch.unlink(missing_ok=True)
    base = root / SNAPSHOTS
    final = base / sid
    excluded = tuple(scan.excluded)
    lease = new_lease(None)
    with locked(base / ".lock"):
        existing = read_info(final)
        if existing is not None:
            write_lease(final, lease)
            _record_alias(final, alias)
            return _ref(existing, final, root, repo, lease.id, excluded=excluded, reused=True)
        info = Info(id=sid, commit=commit, tree=tree, repo_top=repo.top, git_dir=repo.git_dir,
                    common_dir=repo.common_dir, head=repo.head, attributes=scan.attributes,
                    excluded=excluded, created_at=time.time(), keep=keep)
        atomic_write(tmp / "snapshot.json", info.model_dump_json(indent=2).encode())
        write_lease(tmp, lease)
        _record_alias(tmp, alias)
        (tmp / "owner.json").unlink()
        write_alternates(tmp / "git", common_dir=repo.common_dir, moving_to=final / "git")
        tmp.rename(final)
        doomed = settle_idle(root, base, repo.top)
    for directory in doomed:
        remove_tree(directory)
    return _ref(info, final, root, repo, lease.id, excluded=excluded, reused=False)


def lease_snapshot(ref: SnapshotRef, sandbox_id: str) -> str:
    """A lease for sandbox ``sandbox_id`` (alive while its state dir exists); its id."""
    base = ref.state_root / SNAPSHOTS
    lease = new_lease(sandbox_id)
    with locked(base / ".lock"):
        if not (ref.path / "snapshot.json").is_file():
            raise SandboxStateError(
                f"snapshot {ref.id} no longer exists (its last lease was released)",
                operation="open_sandbox", context={"snapshot": ref.path},
                hint="open every sandbox before releasing the snapshot, or acquire it again")
        write_lease(ref.path, lease)
    return lease.id


def drop_lease(state_root: Path, snapshot_id: str, lease_id: str) -> bool:
    """Drop one lease. The last one leaves the snapshot idle, kept for reuse (and retires
    the repository's idle snapshots beyond the ones kept), or removes it when it is not to
    be kept. Whether it was removed."""
    base = state_root / SNAPSHOTS
    snapshot_dir = base / snapshot_id
    if not snapshot_dir.is_dir():
        return False
    doomed: list[Path] = []
    with locked(base / ".lock"):
        (snapshot_dir / "leases" / f"{lease_id}.json").unlink(missing_ok=True)
        if not snapshot_dir.is_dir() or held(state_root, snapshot_dir):
            return False
        info = read_info(snapshot_dir)
        if info is None or not info.keep:
            doomed.append(retire(base, snapshot_dir))
        else:
            mark_idle(snapshot_dir)
            doomed += settle_idle(state_root, base, info.repo_top)
    for directory in doomed:
        remove_tree(directory)
    return info is None or not info.keep


def release_snapshot(ref: SnapshotRef) -> None:
    """Drop this holder's lease (again: nothing); see :func:`drop_lease`."""
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
    with locked(ref.path / ".checkout.lock"):
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


def collect_snapshots(state_root: Path, *, max_idle: float = DEFAULT_MAX_IDLE
                      ) -> list[GcEntry]:
    """gc's part (:func:`sandbox.workspaces.snapstore.collect_snapshots`): dead leases
    dropped, idle snapshots unused for ``max_idle`` seconds (or of a repository that is
    gone) removed, with what crashed while being made or removed."""
    return _collect(state_root, max_idle=max_idle)
