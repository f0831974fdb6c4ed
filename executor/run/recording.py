"""Recording an agent's run: ``running`` when it starts, its outcome when a turn ends.

:func:`write_running` writes the record as ``running`` with the process that
owns it (a run killed with SIGKILL then reads ``crashed``, and ``corral gc``
finalises it); the first one opens the run's journal
(:mod:`executor.ledger.journal`), which every event of the run is appended to as
it happens. :func:`finish` ends a turn: the diff is collected once the
child's processes are stopped (with the preimages ``corral apply --3way``
needs), the session's text, audit, denials, usage, timings and resources, the
children started and the reviewers' verdicts go into the record, and the
record is written to the ledger (:mod:`executor.ledger`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from executor.apply.preimages import capture_preimages
from executor.errors import ExecutorError
from executor.ledger import (
    JOURNAL,
    Journal,
    RunStatus,
    find_run,
    now_iso,
    running_owner,
    write_run,
)
from executor.run.session import SessionOutcome
from policies.contract import SandboxMode
from sandbox.errors import SandboxError

if TYPE_CHECKING:
    from executor.ledger import RunRecord
    from executor.run.agent import AgentRun

__all__ = ["finish", "write_running"]


def write_running(run: AgentRun) -> None:
    """The record as it stands, marked ``running`` by this process."""
    running = run.record.model_copy(update={
        "status": RunStatus.RUNNING, "owner": running_owner(),
        "prompt": run.record.prompt or run.first_prompt})
    directory = write_run(run.settings.ledger, running, [])
    if run.journal is None:
        run.journal = Journal(directory / JOURNAL)
    else:
        run.journal.reattach()


def _below(run: AgentRun) -> list[dict[str, str]]:
    """The denied calls of the runs below ``run`` (the children it delegated to, its
    reviewers), each naming the agent and run that made it: a denial deep in a tree
    reaches the top record and its exit code. A child's record holds its own children's
    already, so one level is read. A child that left no record (it failed to start) has
    none to give."""
    below = [*run.child_ids(), *(str(r["run_id"]) for r in run.reviews if r.get("run_id"))]
    found: list[dict[str, str]] = []
    for run_id in below:
        try:
            record = find_run(run.settings.ledger, run_id)
        except ExecutorError:
            continue
        found += [{"agent": record.agent, "run": record.run_id} | denied
                  if "run" not in denied else denied for denied in record.denied_calls]
    return found


def finish(run: AgentRun, prompt: str, status: RunStatus, error: dict[str, Any] | None,
           outcome: SessionOutcome | None) -> RunRecord:
    """Collect the diff, fill in the record, write it; the record."""
    update: dict[str, Any] = {"status": status, "error": error, "finished_at": now_iso(),
                              "prompt": run.record.prompt or prompt}
    if run.sandbox is not None and run.capability.sandbox is not SandboxMode.READ_ONLY:
        run.phase("diff")
        run.collected = False
        try:
            diff = run.sandbox.collect_diff()
            run.collected = True
            run.patch = diff.patch
            run.preimages = capture_preimages(diff.patch, run.sandbox.files.read_bytes)
            update |= {"diff": diff.patch.decode("utf-8", "replace"),
                       "changed_files": [c.model_dump(mode="json") for c in diff.changed],
                       "excluded_files": [e.model_dump(mode="json") for e in diff.excluded],
                       "setid_cleared": list(diff.setid_cleared),
                       "held_files": list(diff.held),
                       "held_dir": str(diff.held_dir) if diff.held_dir else None}
        except SandboxError as exc:
            update |= {"status": RunStatus.FAILED, "error": exc.to_dict()}
    elif run.sandbox is not None:  # read-only: what its commands wrote, all to be dropped
        discarded = run.sandbox.discarded_writes()
        if discarded is not None:
            update["discarded_writes"] = discarded.to_json()
    if run.session is not None:
        audit = run.session.dispatcher.audit
        update |= {
            "final_text": outcome.final_text if outcome else run.record.final_text,
            "audit": [a.to_json() for a in audit],
            "denied_calls": [{"tool": a.tool, "reason": a.reason}
                             for a in run.session.dispatcher.denied] + _below(run),
            "usage": {"input_tokens": run.session.usage.input_tokens,
                      "output_tokens": run.session.usage.output_tokens,
                      "cached_tokens": run.session.usage.cached_tokens,
                      "requests": run.session.requests},
            "steps": run.session.total_steps,
            "timings": {"duration_seconds": round(time.monotonic() - run.clock, 3),
                        "model_seconds": round(run.session.model_seconds, 3),
                        "tool_seconds": round(sum(a.duration_ms for a in audit) / 1000, 3)},
            "resources": dict(run.context.resources) if run.context else {},
            "oom_killed": bool(run.context and run.context.resources.get("oom_kills")),
            "notes": run.record.notes + (outcome.notes if outcome else []),
            "children": run.child_ids(),
            "reviews": list(run.reviews),
        }
    if run.egress is not None:  # the grant and every proxied connection, denied or not
        update["network"] = run.egress.summary()
    run.record = run.record.model_copy(update=update)
    if run.journal is not None:  # before the record: a reader that sees it final has this
        error = run.record.error or {}
        run.journal.event("end", status=run.record.status.value, error={
            "code": str(error.get("code", "")), "message": str(error.get("message", ""))[:2000],
        } if error else None)
    write_run(run.settings.ledger, run.record,
              run.session.messages if run.session else [], patch=run.patch,
              preimages=run.preimages)
    if run.journal is not None:
        run.journal.reattach()
    run.phase(f"ended {run.record.status.value}", journal=False)
    return run.record
