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
  runs (its sandbox, budgets, deadline, check); what it recorded is packed
  (:func:`executor.ledger.imports.pack_run`) and its directory removed;
- **land**, in the parent: the packed run is checked and written into the
  parent's ledger (:func:`executor.ledger.imports.land_run`), where ``corral
  runs``, ``show``, ``logs``, ``diff`` and ``apply`` find it.

A node never runs a child with the ``host`` backend unless the parent named it.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from executor.fanout.child import FanoutShared, run_child
from executor.fanout.plan import ChildPlan
from executor.ledger.imports import land_run, pack_run
from executor.scheduling import JobContext
from policies.environment import EnvironmentSpec
from sandbox.environment import prepare_environment
from sandbox.errors import SandboxError
from sandbox.state import private_dir
from sandbox.workspaces.bundle import bundle_snapshot, unpack_snapshot
from sandbox.workspaces.snapshot import SnapshotRef, acquire_snapshot, release_snapshot

__all__ = ["Origin", "RemoteChild", "origin_of"]


@dataclass(frozen=True)
class Origin:
    """What a node needs to rebuild the fanout's start: the snapshot (read from the
    parent's ``git_dir`` when the cargo is made), the parent's ``HEAD`` and the
    description of the project's environment (built there, not here)."""

    git_dir: Path
    commit: str
    head: str | None
    environment: EnvironmentSpec | None = None


def origin_of(snapshot: SnapshotRef, environment: EnvironmentSpec | None) -> Origin:
    """The origin of a fanout that started from ``snapshot``."""
    return Origin(git_dir=snapshot.git_dir, commit=snapshot.commit, head=snapshot.repo.head,
                  environment=environment)


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
                                              config=self.shared.backend, state_root=state)
        shared = replace(self.shared, root=repo, ledger=ledger, state_root=state,
                         snapshot=snapshot, environment=environment)
        run_child(self.plan, shared, context)
        try:
            return pack_run(ledger, self.plan.run_id)
        finally:
            shutil.rmtree(ledger / self.plan.run_id, ignore_errors=True)

    def land(self, returned: Any, notes: list[str]) -> str:
        land_run(self.shared.ledger, returned, run_id=self.plan.run_id,
                 fanout=self.shared.fanout_id, notes=notes)
        return self.plan.run_id
