"""One child of a fanout as a portable job: its run, then its check on what it recorded.

A job carries only data (:class:`ChildJob`: the plan, and :class:`FanoutShared`:
paths, configs, the loaded definitions, the replay turns, the snapshot's
reference); its progress goes through the job's ``report`` channel, its
cancellation and deadline come with its context. Its paths are this machine's:
on a machine that shares nothing, :mod:`executor.fanout.remote` runs the same
:func:`run_child` with them replaced by that machine's own. Each child is a top-level run
of its own (:mod:`executor.run`: its own sandbox in worktree mode at most, its
own budgets, its own record); after it ended, its diff was recorded and its
sandbox removed, the check command runs on that recorded diff in a fresh
sandbox (:func:`check_recorded`, :mod:`executor.fanout.check`,
:mod:`sandbox.replay`). A child that never ran its session still gets a record
(:func:`record_unstarted`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.fanout.check import check_verdict, errored_check, run_check, skipped_check
from executor.fanout.plan import ChildPlan
from executor.ledger import RunRecord, RunStatus, set_run_check
from executor.models import ScriptedModel
from executor.run import AgentRun, RunSettings, check_top, top_model
from executor.run.approval import parse_approve, policy_handler
from executor.run.session import ProgressEvent
from executor.scheduling import JobContext
from policies.config import UserConfig
from policies.contract import SandboxMode
from policies.loader import Environment, LoadResult
from sandbox.config import BackendConfig
from sandbox.environment import EnvironmentRef
from sandbox.errors import SandboxError
from sandbox.replay import open_replay
from sandbox.workspaces.snapshot import SnapshotRef

__all__ = ["ChildJob", "FanoutShared", "check_recorded", "record_unstarted", "run_child"]


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
    #: ``--net allow``: each child's commands reach the user's grant through a proxy of its
    #: own (on a Ray node, one that node runs).
    egress: bool = False

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
            environment=self.environment, egress=self.egress)


@dataclass(frozen=True)
class ChildJob:
    """One child of a fanout, as a portable job: ``job(context)`` runs it."""

    plan: ChildPlan
    shared: FanoutShared

    def __call__(self, context: JobContext) -> str:
        return run_child(self.plan, self.shared, context)


def check_recorded(run: AgentRun, shared: FanoutShared, context: JobContext) -> dict[str, Any]:
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
        return errored_check(command, exc)
    forget = context.cancellation.on_cancel(replay.cancel)
    try:
        left = context.deadline.remaining()
        return run_check(replay, command, timeout=min(
            shared.check_timeout, left if left is not None else shared.check_timeout))
    except SandboxError as exc:
        return errored_check(command, exc)
    finally:
        forget()
        replay.teardown(discard=True)


def _summary(record: RunRecord) -> str:
    files = len([c for c in record.changed_files if c.get("in_patch", True)])
    verdict = check_verdict(record.check)
    return f"done {record.status.value}, {files} file(s){f', check {verdict}' if verdict else ''}"


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
        check = check_recorded(run, shared, context)
        record = set_run_check(settings.ledger, record.run_id, check)
    run.phase(_summary(record))
    return record.run_id



def record_unstarted(shared: FanoutShared, plan: ChildPlan, status: RunStatus,
               error: dict[str, Any], progress: Callable[[Any], None] | None) -> None:
    """A record for a child that never ran its session (or could not start)."""
    settings = shared.settings(plan, progress=progress, context=None)
    contract, capability = check_top(settings, plan.agent)
    run = AgentRun(settings, contract, capability, top_model(settings, contract),
                   repo=settings.root, depth=0, parent_run=None, deadline=None,
                   run_id=plan.run_id)
    record = run.skip(shared.prompt, status, error)
    run.phase(_summary(record))
