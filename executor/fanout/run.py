"""``corral fanout``: N children of one task, concurrently, compared, none applied.

:func:`run_fanout` checks everything a user can get wrong before anything is
created (every child's agent, model or replay, the repository, the state
dirs: :mod:`executor.fanout.plan` says which child gets what), writes the
fanout's record (every child's run id, before any starts), takes the one
snapshot the children start from (:func:`shared_snapshot`), and submits one
portable job per child (:mod:`executor.fanout.child`) to the scheduler
(:mod:`executor.scheduling`), which runs up to ``jobs`` at once under one
deadline: here, or on the nodes of a cluster (each job carries
:mod:`executor.fanout.remote`'s way to run there and come back).

One child's failure, timeout or crash never costs another its diff: each job
records its own run, a job that raised is finished by the fanout, a child
that never started (Ctrl-C, the deadline) gets a record saying so, and the
conflict matrix (:mod:`executor.fanout.conflicts`) is computed from the
recorded diffs (:func:`executor.fanout.rows.conclude`). Nothing is applied:
``corral apply RUN`` merges the chosen one; diffs that do not conflict apply
one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from executor.errors import ExecutorError
from executor.fanout.child import ChildJob, FanoutShared, record_unstarted
from executor.fanout.plan import ChildPlan
from executor.fanout.remote import RemoteChild, origin_of
from executor.fanout.rows import conclude
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    RunStatus,
    find_run,
    new_fanout_id,
    now_iso,
    running_owner,
    write_fanout,
)
from executor.ledger.imports import PROVISIONAL
from executor.run import RunSettings, check_top, top_model
from executor.scheduling import Handle, Job, Scheduler
from policies.contract import SandboxMode
from policies.environment import EnvironmentSpec
from sandbox.workspaces.snapshot import SnapshotRef, acquire_snapshot, release_snapshot

__all__ = ["FanoutRequest", "run_fanout", "shared_snapshot"]


@dataclass
class FanoutRequest:
    """What ``corral fanout`` asks for. ``settings`` holds what every child shares (its
    ``script``, ``model_override``, ``approval``, ``progress`` and ``timeout_seconds``
    are not used: those come from the plans and the fields below)."""

    settings: RunSettings
    prompt: str
    plans: list[ChildPlan]
    #: ``corral fanout --approve``: ``never`` or ``always-for=TOOLS`` (no questions: N
    #: children at once ask nobody; an ``ask`` rule denies unless this allows it).
    approve: str | None = None
    check_command: str | None = None
    check_timeout: float = 600.0
    jobs: int = 4
    #: The shared deadline: every child, and every check, ends by then.
    timeout_seconds: float | None = None
    #: Replay turns by script path (read once, so every child plays the same file).
    replays: Mapping[str, list[object]] = field(default_factory=dict)
    #: The project's environment, to be built where a child runs when a scheduler runs
    #: it on another machine (:mod:`executor.fanout.remote`; here it is in ``settings``).
    remote_environment: EnvironmentSpec | None = None


@contextmanager
def shared_snapshot(settings: RunSettings) -> Iterator[SnapshotRef | None]:
    """The one snapshot of the checkout every child of a fanout starts from.

    This is the only place a fanout takes and releases its snapshot: it is
    taken once, before any child starts, and released once every child's
    sandbox is open (each sandbox holds its own lease until its teardown, so
    the snapshot stays until the last child is gone). Its reference reaches
    each child's ``open_sandbox`` through :attr:`RunSettings.snapshot`, so a
    user who edits files while the fanout runs cannot give its children
    different bases. A fanout whose ceiling is not ``worktree`` takes none
    (read-only children read your checkout; workspace-write ones write it).
    """
    if settings.mode_ceiling is not SandboxMode.WORKTREE:
        yield None
        return
    ref = acquire_snapshot(settings.root, state_root=settings.state_root)
    try:
        yield ref
    finally:
        release_snapshot(ref)


def _validate(request: FanoutRequest, shared: FanoutShared) -> None:
    """Every child's user errors, before anything is created."""
    seen: set[tuple[str, str | None, str | None]] = set()
    for plan in request.plans:
        key = (plan.agent, plan.model, str(plan.script) if plan.script else None)
        if key in seen:
            continue
        seen.add(key)
        settings = shared.settings(plan, progress=None, context=None)
        contract, _ = check_top(settings, plan.agent)
        top_model(settings, contract)


def run_fanout(request: FanoutRequest, *, scheduler: Scheduler,
               report: Callable[[Any], None] | None = None) -> FanoutRecord:
    """Run the fanout (see the module docstring); its final record (also written).

    A Ctrl-C while it waits cancels every child (each ends ``cancelled``, its diff
    recorded, or never starts and says so) and the record's status is ``cancelled``; a
    second one stops waiting (``failed``; what the children left, ``corral gc`` cleans).
    """
    base = request.settings
    shared = FanoutShared(
        fanout_id=new_fanout_id(), prompt=request.prompt, root=base.root, backend=base.backend,
        config=base.config, registry=base.registry, ledger=base.ledger, env=base.env,
        trust_project=base.trust_project, state_root=base.state_root,
        use_ripgrep=base.use_ripgrep, config_file=base.config_file, approve=request.approve,
        check_command=request.check_command, check_timeout=request.check_timeout,
        replays=dict(request.replays), environment=base.environment, egress=base.egress)
    _validate(request, shared)
    record = FanoutRecord(
        fanout_id=shared.fanout_id, prompt=request.prompt, created_at=now_iso(),
        children=[FanoutChild(index=p.index, run_id=p.run_id, agent=p.agent, model=p.model,
                              script=str(p.script) if p.script else None)
                  for p in request.plans],
        check_command=request.check_command, jobs=request.jobs,
        timeout_seconds=request.timeout_seconds, backend=base.backend.type,
        owner=running_owner())
    write_fanout(base.ledger, record)
    try:
        interrupted, bug = _execute(request, shared, scheduler, report)
    except BaseException as exc:  # a second Ctrl-C, or a failure of the fanout itself
        write_fanout(base.ledger, conclude(record, base.ledger, status="failed").model_copy(
            update={"notes": [*record.notes, f"the fanout stopped before every child "
                              f"ended: {type(exc).__name__}: {exc}"[:300]]}))
        raise
    final = conclude(record, base.ledger, status="cancelled" if interrupted else "completed")
    write_fanout(base.ledger, final)
    if bug is not None:
        raise bug
    return final  # interrupted: ``cancelled``, every child recorded


def _wait(scheduler: Scheduler, handles: list[Handle[str]]) -> bool:
    """Wait for every job; a first Ctrl-C cancels them all (each ends ``cancelled``, its
    diff recorded) and waits on; a second one is raised. Whether it was interrupted."""
    interrupted = False
    pending = list(handles)
    while pending:
        try:
            for handle in scheduler.as_completed(pending):
                pending.remove(handle)
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            scheduler.cancel("interrupted (Ctrl-C)")
    return interrupted


def _execute(request: FanoutRequest, shared: FanoutShared, scheduler: Scheduler,
             report: Callable[[Any], None] | None) -> tuple[bool, BaseException | None]:
    """Submit every child, wait for all, record those that never ran; (interrupted, a bug
    to raise once everything is recorded)."""
    with shared_snapshot(request.settings) as snapshot:
        shared = replace(shared, snapshot=snapshot)
        origin = (origin_of(snapshot, request.remote_environment) if snapshot is not None
                  else None)  # without a snapshot children work on this checkout: here
        handles = [scheduler.submit(Job(key=f"child {plan.index}: {plan.agent}",
                                        run=ChildJob(plan, shared), portable=True,
                                        remote=None if origin is None else
                                        RemoteChild(plan, shared, origin)),
                                    report=report) for plan in request.plans]
        interrupted = _wait(scheduler, handles)
    bug: BaseException | None = None
    for plan, handle in zip(request.plans, handles, strict=True):
        outcome = handle.outcome()
        if outcome in ("cancelled", "expired"):
            why = ("the fanout was cancelled before its turn came" if outcome == "cancelled"
                   else "the fanout's deadline passed before a slot was free")
            record_unstarted(shared, plan, RunStatus.CANCELLED if outcome == "cancelled"
                       else RunStatus.TIMEOUT,
                       {"code": f"not_started_{outcome}", "message": f"never started: {why}"},
                       report)
            continue
        try:
            handle.result()
        except ExecutorError as exc:  # a user's mistake found when it started (a skill)
            if not _recorded(request.settings.ledger, plan.run_id):
                record_unstarted(shared, plan, RunStatus.FAILED, exc.to_dict(), report)
        except Exception as exc:  # a bug: its own record says so; raised after the others
            bug = bug or exc
    return interrupted, bug


def _recorded(ledger: Path, run_id: str) -> bool:
    """Whether the child recorded itself (the running record of a child that ran on another
    machine, :func:`executor.ledger.imports.follow_run`'s, is not its record)."""
    try:
        find_run(ledger, run_id)
    except ExecutorError:
        return False
    return not (ledger / run_id / PROVISIONAL).is_file()
