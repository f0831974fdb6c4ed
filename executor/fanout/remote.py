"""One fanout child on a machine that shares nothing with the parent (a Ray node).

:class:`RemoteChild` is the :class:`~executor.scheduling.base.Remote` of a
child's job (:mod:`executor.fanout.child`), for a scheduler that runs jobs
elsewhere (:mod:`executor.scheduling.cluster`):

- **cargo**: the fanout's snapshot as a git bundle of its commit
  (:func:`sandbox.workspaces.bundle.bundle_snapshot`), one per fanout, made
  once in the parent and sent once to each node;
- **there**, on the node, under its own directory: the bundle unpacked once
  per node (a repository whose snapshot is the parent's, commit for commit,
  taken there once per worker process),
  the node's own state dir and ledger, the project's environment prepared
  there (once per node and key: :func:`sandbox.environment.prepare_environment`
  builds a key once), then the very same :func:`run_child` as a local child
  runs (its sandbox, budgets, deadline, check); while it runs, its running
  record and its journal as it grows are reported (:class:`Tail`); what it
  recorded is packed (:func:`executor.ledger.imports.pack_run`) and its
  directory removed;
- **relayed**, in the parent, while it runs: each :class:`Tail` goes into the
  parent's ledger (:func:`executor.ledger.imports.follow_run`: a running
  record, its journal appended), so ``corral runs`` and ``logs -f`` follow it;
- **land**, in the parent: the packed run is checked and written into the
  parent's ledger (:func:`executor.ledger.imports.land_run`), where ``corral
  runs``, ``show``, ``logs``, ``diff`` and ``apply`` find it.

A node never runs a child with the ``host`` backend unless the parent named it.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from executor.fanout.child import FanoutShared, run_child
from executor.fanout.plan import ChildPlan
from executor.ledger import JOURNAL, delete_run
from executor.ledger.imports import follow_run, land_run, pack_run
from executor.scheduling import JobContext
from policies.environment import EnvironmentSpec
from sandbox.environment import prepare_environment
from sandbox.errors import SandboxError
from sandbox.state import private_dir
from sandbox.workspaces.bundle import bundle_snapshot, unpack_snapshot
from sandbox.workspaces.snapshot import SnapshotRef, acquire_snapshot, release_snapshot

__all__ = ["Origin", "RemoteChild", "Tail", "origin_of"]

#: Seconds between looks at a remote child's journal; bytes of it reported at most at once.
TAIL = 0.5
TAIL_BYTES = 1 << 20


@dataclass(frozen=True)
class Origin:
    """What a node needs to rebuild the fanout's start: the snapshot (read from the
    parent's ``git_dir`` when the cargo is made), the parent's ``HEAD`` and the
    description of the project's environment (built there, not here)."""

    git_dir: Path
    commit: str
    head: str | None
    environment: EnvironmentSpec | None = None
    #: The parent checkout's directory name: the node's workspace is ``/workspaces/<name>``
    #: as the parent's is, so its environment's key does not change with the commit.
    name: str | None = None


def origin_of(snapshot: SnapshotRef, environment: EnvironmentSpec | None) -> Origin:
    """The origin of a fanout that started from ``snapshot``."""
    return Origin(git_dir=snapshot.git_dir, commit=snapshot.commit, head=snapshot.repo.head,
                  environment=environment, name=snapshot.repo.top.name)


_snapshots: dict[tuple[Path, str], SnapshotRef] = {}
_snapshots_lock = threading.Lock()


def _node_snapshot(repo: Path, state: Path, commit: str) -> SnapshotRef:
    """The node's snapshot of ``repo`` (the parent's ``commit``), taken once per worker
    process and leased by it while it lives (``corral gc`` drops the lease of a process
    that is gone); every child's sandbox takes a lease of its own."""
    with _snapshots_lock:
        ref = _snapshots.get((state, commit))
        if ref is not None and (ref.path / "snapshot.json").is_file():
            return ref
        ref = acquire_snapshot(repo, state_root=state)
        if ref.commit != commit:
            release_snapshot(ref)
            raise SandboxError(
                f"the snapshot made on this node is {ref.commit}, not the parent's {commit}",
                code="snapshot_mismatch", operation="run_remote",
                hint="the node's git writes other commits than the parent's")
        _snapshots[(state, commit)] = ref
        return ref


@dataclass(frozen=True)
class Tail:
    """What a remote child journaled since the last one (whole lines), with its running
    record; reported there, relayed here (:meth:`RemoteChild.relayed`)."""

    source: str
    offset: int
    lines: bytes
    record: bytes


class _Tailer:
    """Reports a run's journal as it grows (whole lines), from a thread of its own."""

    def __init__(self, directory: Path, context: JobContext, source: str) -> None:
        self.directory, self.context, self.source = directory, context, source
        self.offset = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="corral-tail")

    def __enter__(self) -> _Tailer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stop.wait(TAIL):
            self.once()

    def once(self) -> None:
        try:
            record = (self.directory / "record.json").read_bytes()
            with (self.directory / JOURNAL).open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read(TAIL_BYTES)
        except OSError:
            return  # not there yet
        whole = data[:data.rfind(b"\n") + 1]
        if whole or self.offset == 0:
            self.context.report(Tail(self.source, self.offset, whole, record))
            self.offset += len(whole)


@dataclass(frozen=True)
class RemoteChild:
    """One child of a fanout, as it runs on another machine (see the module docstring)."""

    plan: ChildPlan
    shared: FanoutShared
    origin: Origin

    def cargo_key(self) -> str:
        return f"snapshot {self.origin.commit}"

    def cargo(self) -> bytes:
        return bundle_snapshot(self.origin.git_dir, self.origin.commit)

    def there(self, context: JobContext, cargo: bytes, place: Path) -> Any:
        repo = unpack_snapshot(cargo, into=place / "repos", commit=self.origin.commit,
                               head=self.origin.head)
        state, ledger = place / "state", place / "ledger"
        private_dir(state)
        snapshot = _node_snapshot(repo, state, self.origin.commit)
        environment = None
        if self.origin.environment is not None:
            environment = prepare_environment(self.origin.environment, repo=repo,
                                              config=self.shared.backend, state_root=state,
                                              name=self.origin.name)
        shared = replace(self.shared, root=repo, ledger=ledger, state_root=state,
                         snapshot=snapshot, environment=environment)
        with _Tailer(ledger / self.plan.run_id, context, f"{place.name}-{secrets.token_hex(4)}"):
            run_child(self.plan, shared, context)
        try:
            return pack_run(ledger, self.plan.run_id)
        finally:
            # The node's copy, handed back: through the ledger, so the node's index keeps
            # no row for a run that is not there.
            with contextlib.suppress(OSError):
                delete_run(ledger, self.plan.run_id)

    def relayed(self, event: Any) -> Any:
        if not isinstance(event, Tail):
            return event  # progress, for the display
        follow_run(self.shared.ledger, run_id=self.plan.run_id, fanout=self.shared.fanout_id,
                   record=event.record, source=event.source, offset=event.offset,
                   lines=event.lines)
        return None

    def land(self, returned: Any, notes: list[str]) -> str:
        land_run(self.shared.ledger, returned, run_id=self.plan.run_id,
                 fanout=self.shared.fanout_id, notes=notes)
        return self.plan.run_id
