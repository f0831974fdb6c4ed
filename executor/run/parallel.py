"""Fanout inside a run tree: the ``delegate`` tool's parallel mode (pi's ``tasks``).

``delegate(tasks=[{agent, prompt}, ...])`` runs up to eight children at once
and returns each one's result, in task order. What holds for one delegated
child holds for each task (capability derived at creation, the allowlist,
reachability, depth, its own sandbox on the caller's workspace, retained for
follow-ups), and:

- **all or nothing before anything starts**: every task is checked first (its
  agent, a follow-up's child, the model), and the tree's children budget is
  spent for all new children at once; one bad task refuses the whole call and
  nothing was started or spent;
- **concurrently, under the tree's budgets**: the tasks go through the
  scheduling seam (:data:`executor.run.settings.RunSettings.scheduler`, a thread pool
  by default, ``parallel_jobs`` at once) with the caller's deadline as the
  shared one; the step budget, the children budget and the depth are the
  tree's, shared and locked (:class:`executor.run.session.SharedLimits`);
- **each its own replay**: under a scripted model the turn after the call holds
  one replay per task (:meth:`executor.models.ScriptedModel.fork`), so a replay
  is deterministic whatever the threads do;
- **one task's failure never costs another's result**: a child that fails,
  times out or cannot start has its own record and line in the result; the
  call waits for every task, and a Ctrl-C cancels the others (each ends
  ``cancelled`` with its diff recorded) before it is raised again;
- **one question at a time**: approval questions of concurrent children are
  asked one after the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from executor.errors import RunError
from executor.ledger import RunRecord, RunStatus
from executor.models import Model, ScriptedModel
from executor.run.delegation import (
    child_model,
    forget_child,
    plan_child,
    result_text,
    retained,
    spawn,
)
from executor.scheduling import Cancellation, Deadline, Handle, Job, JobContext
from executor.tools.agents import DelegateTask
from executor.tools.dispatch import ApprovalHandler, ApprovalRequest, ToolDenied
from policies.contract import AgentContract

if TYPE_CHECKING:
    from executor.run.agent import AgentRun

__all__ = ["delegate_tasks"]

#: One approval question on the terminal at a time, whichever child asks.
_QUESTION = threading.Lock()


@dataclass
class _Task:
    """One task of the call, checked: a new child (its contract, task contract, and the
    note when that was cut) or a follow-up of a retained ``child``."""

    number: int
    prompt: str
    child: AgentRun | None = None
    contract: AgentContract | None = None
    handoff: str | None = None
    cut: str | None = None

    @property
    def new(self) -> bool:
        return self.contract is not None


def _serialized(handler: ApprovalHandler | None) -> ApprovalHandler | None:
    if handler is None:
        return None

    def ask(request: ApprovalRequest) -> bool:
        with _QUESTION:
            return handler(request)

    return ask


def _check(parent: AgentRun, tasks: Sequence[DelegateTask]) -> list[_Task]:
    """Every task checked before anything starts (a :class:`ToolDenied` names the task)."""
    checked: list[_Task] = []
    following: set[str] = set()
    for number, task in enumerate(tasks, 1):
        try:
            if task.child is not None:
                child = retained(parent, task.child, task.agent, task.instructions)
                if child.run_id in following:
                    raise ToolDenied(f"child {child.run_id} is named by two tasks; one child "
                                     "takes one follow-up at a time")
                following.add(child.run_id)
                checked.append(_Task(number, task.prompt, child=child))
            else:
                contract, handoff, cut = plan_child(parent, task.agent, task.instructions)
                checked.append(_Task(number, task.prompt, contract=contract, handoff=handoff,
                                     cut=cut))
        except ToolDenied as exc:
            raise ToolDenied(f"task {number} of {len(tasks)} ({task.agent}): {exc.message}; "
                             "no task was started") from exc
    return checked


def delegate_tasks(parent: AgentRun, tasks: Sequence[DelegateTask]) -> str:
    """Run ``tasks`` concurrently as children of ``parent``; every result, in task order."""
    if parent.sandbox is None:
        raise ToolDenied("this agent has no workspace to delegate from")
    checked = _check(parent, tasks)
    models: dict[int, Model] = {}
    if not isinstance(parent.model, ScriptedModel):
        for task in checked:
            if task.contract is not None:
                try:
                    models[task.number] = child_model(parent, task.contract)
                except ToolDenied as exc:
                    raise ToolDenied(f"task {task.number} of {len(tasks)}: {exc.message}; no "
                                     "task was started") from exc
    new = sum(1 for task in checked if task.new)
    if new and not parent.settings.limits.take_children(new):
        left = parent.settings.limits.children_left()
        raise ToolDenied(f"this run may start {left} more child(ren) and the call asked for "
                         f"{new} (shared limit); no task was started")
    scripted = isinstance(parent.model, ScriptedModel)
    if isinstance(parent.model, ScriptedModel):  # each task plays its own replay
        for task, replay in zip(checked, parent.model.fork(len(tasks)), strict=True):
            models[task.number] = replay
    # The children's snapshots read this workspace from the host: nothing of ours may run.
    parent.sandbox.stop_processes()
    cancellation = Cancellation()
    outer = parent.settings.cancellation
    unlink = outer.on_cancel(lambda: cancellation.cancel(outer.reason)) if outer else None
    settings = replace(parent.settings, cancellation=cancellation,
                       approval=_serialized(parent.settings.approval))
    for task in checked:
        if task.contract is not None:
            task.child = spawn(parent, task.contract, models[task.number],
                               handoff=task.handoff, cut=task.cut, settings=settings)
        elif task.child is not None and scripted:
            task.child.model = models[task.number]
            if task.child.session is not None:
                task.child.session.model = models[task.number]
    try:
        reports = _run(parent, checked, cancellation)
    finally:
        if unlink is not None:
            unlink()
    return "\n".join([f"parallel delegation: {len(checked)} task(s), each in its own sandbox; "
                      "every result follows, in task order", *reports])


def _job(task: _Task, cancellation: Cancellation) -> Job[RunRecord]:
    child = task.child
    assert child is not None  # noqa: S101 - set for every task before the jobs are made

    def run(context: JobContext) -> RunRecord:
        def stop() -> None:
            if child.sandbox is not None:
                child.sandbox.stop_processes()

        forget = cancellation.on_cancel(stop)  # a follow-up's sandbox was opened earlier
        session = child.session
        previous = session.cancellation if session is not None else None
        if session is not None:
            session.cancellation = cancellation
        try:
            return child.turn(task.prompt)
        finally:
            forget()
            if session is not None:
                session.cancellation = previous

    return Job(key=f"task {task.number}: {child.contract.name}", run=run, portable=False)


def _run(parent: AgentRun, tasks: list[_Task], cancellation: Cancellation) -> list[str]:
    deadline = Deadline() if parent.deadline is None else Deadline.after(
        max(parent.deadline - time.monotonic(), 0.0))
    scheduler = parent.settings.scheduler(min(len(tasks), parent.settings.parallel_jobs),
                                          deadline, cancellation)
    handles: dict[int, Handle[RunRecord]] = {}
    interrupted: KeyboardInterrupt | None = None
    try:
        for task in tasks:
            handles[task.number] = scheduler.submit(_job(task, cancellation))
        pending = list(handles.values())
        while pending:
            try:
                for handle in scheduler.as_completed(pending):
                    pending.remove(handle)
            except KeyboardInterrupt as exc:  # the others end cancelled, diffs recorded
                if interrupted is not None:
                    raise  # a second Ctrl-C: stop waiting
                interrupted = exc
                scheduler.cancel("interrupted (Ctrl-C)")
    finally:
        scheduler.close()
    reports: list[str] = []
    bug: BaseException | None = None
    for task in tasks:
        report, error = _outcome(parent, task, handles[task.number], len(tasks))
        bug = bug or error
        reports.append(f"=== task {task.number} of {len(tasks)}: agent "
                       f"{task.child.contract.name if task.child else '?'} ===")
        reports.append(f"note: {task.cut}\n{report}" if task.cut else report)
    if interrupted is not None:
        raise interrupted
    if bug is not None:
        raise bug
    return reports


def _outcome(parent: AgentRun, task: _Task, handle: Handle[RunRecord],
             share: int) -> tuple[str, BaseException | None]:
    """One task's text for the model, and an unforeseen error to raise after the others."""
    child = task.child
    assert child is not None  # noqa: S101 - set for every task before the jobs are made
    outcome = handle.outcome()
    if outcome in ("cancelled", "expired"):
        status = RunStatus.CANCELLED if outcome == "cancelled" else RunStatus.TIMEOUT
        why = ("the call was cancelled before it started" if outcome == "cancelled" else
               "the deadline passed before a slot was free")
        record = child.skip(task.prompt, status, {"code": f"not_started_{outcome}",
                                                  "message": f"never started: {why}"})
        return result_text(record, share=share), None
    try:
        record = handle.result()
    except RunError as exc:  # a user's mistake it could not start with (a missing skill)
        if task.new:
            forget_child(parent, child)
        return f"could not start: {exc.message}", None
    except Exception as exc:  # raised again once every task has ended
        return f"failed: internal error ({type(exc).__name__})", exc
    return result_text(record, share=share), None
