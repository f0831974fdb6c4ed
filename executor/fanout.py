"""``corral fanout``: N children of one task, concurrently, compared, none applied.

:func:`run_fanout` checks everything a user can get wrong before anything is
created (every child's agent, model or replay, the repository, the state
dirs: :mod:`executor.fanout_plan` says which child gets what), writes the
fanout's record (every child's run id, before any starts), takes the one
snapshot the children start from (:func:`shared_snapshot`), and submits one
portable job per child to the scheduler (:mod:`executor.scheduling`), which
runs up to ``jobs`` at once under one deadline. Each child is a top-level run
of its own (its own sandbox in worktree mode at most, its own budgets, its
own record); after it ended, its diff was recorded and its sandbox removed, the
check command runs on that recorded diff in a fresh sandbox
(:mod:`executor.fanout_check`, :mod:`sandbox.replay`).

One child's failure, timeout or crash never costs another its diff: each job
records its own run, a job that raised is finished by the fanout, a child
that never started (Ctrl-C, the deadline) gets a record saying so, and the
conflict matrix (:mod:`executor.fanout_conflicts`) is computed from the
recorded diffs. Nothing is applied: ``corral apply RUN`` merges the chosen
one; diffs that do not conflict apply one after another.

A job carries only data (:class:`ChildJob`: the plan, and
:class:`FanoutShared`: paths, configs, the loaded definitions, the replay
turns, the snapshot's reference), so a scheduler on other machines can run it
where the state dir is shared; its progress goes through the job's
``report`` channel, its cancellation and deadline come with its context.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from executor.errors import ExecutorError
from executor.fanout_check import run_check, skipped_check
from executor.fanout_plan import ChildPlan
from executor.fanout_view import conclude
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    RunRecord,
    RunStatus,
    find_run,
    new_fanout_id,
    now_iso,
    running_owner,
    set_run_check,
    write_fanout,
)
from executor.models import ScriptedModel
from executor.run import AgentRun, RunSettings, check_top, top_model
from executor.run.approval import parse_approve, policy_handler
from executor.run.session import ProgressEvent
from executor.scheduling import Handle, Job, JobContext, Scheduler
from policies.config import UserConfig
from policies.contract import SandboxMode
from policies.loader import Environment, LoadResult
from sandbox.config import BackendConfig
from sandbox.environment import EnvironmentRef
from sandbox.errors import SandboxError
from sandbox.replay import open_replay
from sandbox.workspaces.snapshot import SnapshotRef, acquire_snapshot, release_snapshot

__all__ = [
    "ChildJob",
    "FanoutRequest",
    "FanoutShared",
    "run_child",
    "run_fanout",
    "shared_snapshot",
]


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


@dataclass(frozen=True)
class FanoutShared:
    """What every child job needs, as plain data (it pickles)."""

    fanout_id: str
    prompt: str
    root: Path
    backend: BackendConfig
    config: UserConfig
    registry: LoadResult
    ledger: Path
    env: Environment
    trust_project: bool
    state_root: Path | None
    use_ripgrep: bool
    config_file: Path | None
    approve: str | None
    check_command: str | None
    check_timeout: float
    replays: Mapping[str, list[object]]
    snapshot: SnapshotRef | None = None
    environment: EnvironmentRef | None = None

    def settings(self, plan: ChildPlan, *, progress: Callable[[ProgressEvent], None] | None,
                 context: JobContext | None) -> RunSettings:
        """The settings of one child's run tree (its own budgets)."""
        script = None
        if plan.script is not None:
            script = ScriptedModel(self.replays[str(plan.script)], source=str(plan.script))
        allowed = parse_approve(self.approve)
        return RunSettings(
            root=self.root, backend=self.backend, config=self.config, registry=self.registry,
            ledger=self.ledger, env=self.env, trust_project=self.trust_project,
            mode_ceiling=SandboxMode.WORKTREE, model_override=plan.model, script=script,
            approval=policy_handler(allowed) if allowed is not None else None,
            progress=progress, state_root=self.state_root, use_ripgrep=self.use_ripgrep,
            config_file=self.config_file, snapshot=self.snapshot, fanout=self.fanout_id,
            cancellation=context.cancellation if context is not None else None,
            environment=self.environment)


@dataclass(frozen=True)
class ChildJob:
    """One child of a fanout, as a portable job: ``job(context)`` runs it."""

    plan: ChildPlan
    shared: FanoutShared

    def __call__(self, context: JobContext) -> str:
        return run_child(self.plan, self.shared, context)


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


def _report(settings: RunSettings, run_id: str, agent: str, detail: str) -> None:
    if settings.progress is not None:
        settings.progress(ProgressEvent("phase", agent, 0, detail, 0, (), run_id))


def _check(run: AgentRun, shared: FanoutShared, context: JobContext) -> dict[str, Any]:
    """Run the check command on what was recorded: a fresh sandbox of the fanout's snapshot
    with the child's recorded diff applied (:func:`sandbox.replay.open_replay`), never the
    child's own, so nothing of its session (a process, ``/tmp``, a file its diff does not
    carry) can make a check pass; the child's sandbox is already gone."""
    command = str(shared.check_command)
    if run.capability.sandbox is SandboxMode.READ_ONLY:
        return skipped_check(command, "a read-only child changed nothing")
    if not run.opened:
        return skipped_check(command, "it has no workspace: its sandbox did not open")
    if not run.collected:
        return skipped_check(command, "its diff could not be recorded")
    if context.cancellation.cancelled:
        return skipped_check(command, f"the fanout was cancelled: {context.cancellation.reason}")
    remaining = context.deadline.remaining()
    if remaining is not None and remaining <= 0:
        return skipped_check(command, "no time left: the fanout's deadline passed")
    run.phase("check")
    settings = run.settings
    # No snapshot: a workspace-write child, whose record is what your checkout now holds
    # (base and diff in one); a replay of that state carries nothing else of the child.
    patch = run.patch if settings.snapshot is not None else b""
    try:
        replay = open_replay(settings.backend, repo=settings.root, snapshot=settings.snapshot,
                             patch=patch, state_root=settings.state_root,
                             environment=settings.environment)
    except SandboxError as exc:
        return skipped_check(command, f"it could not run ({exc.code}): {exc.message}")
    forget = context.cancellation.on_cancel(replay.cancel)
    try:
        left = context.deadline.remaining()
        return run_check(replay, command, timeout=min(
            shared.check_timeout, left if left is not None else shared.check_timeout))
    except SandboxError as exc:
        return skipped_check(command, f"it could not run ({exc.code}): {exc.message}")
    finally:
        forget()
        replay.teardown(discard=True)


def _summary(record: RunRecord) -> str:
    files = len([c for c in record.changed_files if c.get("in_patch", True)])
    check = record.check or {}
    verdict = ""
    if check.get("skipped"):
        verdict = ", check skipped"
    elif check:
        verdict = (", check timed out" if check.get("timed_out") else
                   f", check {'passed' if check.get('exit_code') == 0 else 'failed'}")
    return f"done {record.status.value}, {files} file(s){verdict}"


def run_child(plan: ChildPlan, shared: FanoutShared, context: JobContext) -> str:
    """Run one child, then its check; its record is in the ledger; its run id."""
    settings = shared.settings(plan, progress=context.report, context=context)
    contract, capability = check_top(settings, plan.agent)
    model = top_model(settings, contract)
    deadlines = [d for d in (context.deadline.monotonic(), None if contract.timeout_seconds
                             is None else time.monotonic() + contract.timeout_seconds)
                 if d is not None]
    run = AgentRun(settings, contract, capability, model, repo=settings.root, depth=0,
                   parent_run=None, deadline=min(deadlines) if deadlines else None,
                   run_id=plan.run_id)
    try:
        record = run.turn(shared.prompt)
    except BaseException:
        run.close()
        raise
    # The child's sandbox goes before its check starts: the check runs on its record.
    record = run.close_recorded(record, recorded=True)
    if shared.check_command is not None:
        check = _check(run, shared, context)
        record = set_run_check(settings.ledger, record.run_id, check)
    run.phase(_summary(record))
    return record.run_id


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


def _unstarted(shared: FanoutShared, plan: ChildPlan, status: RunStatus,
               error: dict[str, Any], progress: Callable[[Any], None] | None) -> None:
    """A record for a child that never ran its session (or could not start)."""
    settings = shared.settings(plan, progress=progress, context=None)
    contract, capability = check_top(settings, plan.agent)
    run = AgentRun(settings, contract, capability, top_model(settings, contract),
                   repo=settings.root, depth=0, parent_run=None, deadline=None,
                   run_id=plan.run_id)
    record = run.skip(shared.prompt, status, error)
    run.phase(_summary(record))


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
        replays=dict(request.replays), environment=base.environment)
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
        handles = [scheduler.submit(Job(key=f"child {plan.index}: {plan.agent}",
                                        run=ChildJob(plan, shared), portable=True),
                                    report=report) for plan in request.plans]
        interrupted = _wait(scheduler, handles)
    bug: BaseException | None = None
    for plan, handle in zip(request.plans, handles, strict=True):
        outcome = handle.outcome()
        if outcome in ("cancelled", "expired"):
            why = ("the fanout was cancelled before its turn came" if outcome == "cancelled"
                   else "the fanout's deadline passed before a slot was free")
            _unstarted(shared, plan, RunStatus.CANCELLED if outcome == "cancelled"
                       else RunStatus.TIMEOUT,
                       {"code": f"not_started_{outcome}", "message": f"never started: {why}"},
                       report)
            continue
        try:
            handle.result()
        except ExecutorError as exc:  # a user's mistake found when it started (a skill)
            if not _recorded(request.settings.ledger, plan.run_id):
                _unstarted(shared, plan, RunStatus.FAILED, exc.to_dict(), report)
        except Exception as exc:  # a bug: its own record says so; raised after the others
            bug = bug or exc
    return interrupted, bug


def _recorded(ledger: Path, run_id: str) -> bool:
    try:
        find_run(ledger, run_id)
    except ExecutorError:
        return False
    return True
