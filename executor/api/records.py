"""What :class:`Corral` reads and changes in the ledger: runs, diffs, applies, discards, gc.

Every call checks the state dir first (a ledger a child could write is refused:
:func:`executor.ledger.ledger_dir`); a run id is an id or a unique prefix of one,
never a pattern (:func:`executor.ledger.find_run`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from executor.api.fanouts import FanoutResult
from executor.api.journal import live, transcript_so_far
from executor.api.reports import ApplyReport, BranchReport, Discarded, Recovered
from executor.api.results import Diff, RunList, RunResult
from executor.apply import ApplyOptions, PatchPlan, apply_run, branch_run, recover_run
from executor.errors import ExecutorError
from executor.ledger import (
    BadDuration,
    CrashedRun,
    Entry,
    FanoutRecord,
    Filters,
    Pruned,
    RunStatus,
    discard_run,
    finalize_crashed_fanouts,
    finalize_crashed_runs,
    find_fanout,
    find_run,
    iter_entries,
    load_patch,
    load_transcript,
    page,
    parse_duration,
    prune_finished,
    rebuild,
)
from executor.ledger.siblings import supersede_conflicting
from policies.config import load_user_config
from sandbox.state import check_state_dir

if TYPE_CHECKING:
    from executor.api.corral import Corral
    from executor.ledger import RunRecord
    from sandbox.environment import EnvironmentInfo
    from sandbox.results import GcEntry
    from sandbox.results import GcReport as SandboxReport

__all__ = ["GcReport", "apply", "branch", "diff", "discard", "filters", "gc",
           "iter_runs", "pick", "recover", "reindex", "runs", "show", "show_fanout",
           "transcript"]


def filters(*, status: Sequence[str] | str = (), agent: str | None = None,
            pending: bool = False, since: str | None = None, fanout: str | None = None,
            state: str | None = None) -> Filters:
    """The :class:`Filters` of :meth:`Corral.runs`' keywords (``since``: a duration such
    as ``2h`` or ``7d`` back from now, or an ISO time); a bad one is a user error."""
    statuses = (status,) if isinstance(status, str) else tuple(status)
    known = {s.value for s in RunStatus}
    for value in statuses:
        if value not in known:
            raise ExecutorError(f"status {value!r} is not a run status", code="bad_arguments",
                                hint="one of " + ", ".join(sorted(known)))
    return Filters(statuses=statuses, agent=agent or None, pending=pending,
                   since=_since(since) if since else None, fanout=fanout or None,
                   state=state or None)


def _since(text: str) -> str:
    try:
        return (datetime.now(UTC) - timedelta(seconds=parse_duration(text))).isoformat(
            timespec="milliseconds")
    except BadDuration:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadDuration(f"--since: {text!r} is neither a duration nor a time",
                          operation="runs", context={"value": text},
                          hint="a duration back from now (30m, 12h, 7d, 1h30m) or an ISO "
                          "time (2026-12-01, 2026-12-01T09:30)") from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.isoformat(timespec="milliseconds")


def runs(corral: Corral, wanted: Filters, *, limit: int | None, after: str | None
         ) -> RunList:
    """:meth:`Corral.runs`."""
    found = page(corral.ledger(), wanted, limit=limit, after=after)
    return RunList(found.entries, found.broken, found.next_after)


def iter_runs(corral: Corral, wanted: Filters, *, after: str | None) -> Iterator[Entry]:
    """:meth:`Corral.iter_runs`."""
    return iter_entries(corral.ledger(), wanted, after=after)


def reindex(corral: Corral, progress: Callable[[int, int], None] | None) -> int:
    """:meth:`Corral.reindex`."""
    ledger = corral.ledger()
    return rebuild(ledger, progress=progress) if ledger.is_dir() else 0


def show(corral: Corral, run_id: str) -> RunResult:
    """:meth:`Corral.show` (a run without calls of its own yet: those of its journal)."""
    ledger = corral.ledger()
    record = find_run(ledger, run_id)
    so_far = live(ledger, record)
    return RunResult(record) if so_far is None else RunResult(so_far, from_journal=True)


def show_fanout(corral: Corral, fanout_id: str) -> FanoutResult:
    """:meth:`Corral.show_fanout`."""
    ledger = corral.ledger()
    return FanoutResult.read(find_fanout(ledger, fanout_id), ledger)


def pick(corral: Corral, fanout_id: str, index: int | str) -> str:
    """:meth:`Corral.pick`."""
    found = show_fanout(corral, fanout_id)
    if index == "best":
        return found.best().run_id
    if not isinstance(index, int):
        raise ExecutorError(f"pick {index!r}: give a child's number (from 1) or 'best'",
                            code="usage_error", operation="pick",
                            hint=f"`corral show {found.fanout_id}` lists the children")
    for child in found.children:
        if child.index == index:
            if child.run is None:
                raise ExecutorError(f"child #{index} of fanout {found.fanout_id} never "
                                    "started: it has no diff", code="unknown_run")
            return child.run_id
    raise ExecutorError(f"fanout {found.fanout_id} has no child #{index}",
                        code="unknown_run", context={"children": len(found.children)},
                        hint=f"pick one of 1..{len(found.children)}: `corral show "
                             f"{found.fanout_id}` lists them")


def transcript(corral: Corral, run_id: str) -> list[dict[str, Any]]:
    """:meth:`Corral.transcript` (none written yet: the one its journal holds so far)."""
    ledger = corral.ledger()
    record = find_run(ledger, run_id)
    return load_transcript(ledger, record.run_id) or transcript_so_far(ledger, record)


def diff(corral: Corral, run_id: str) -> Diff:
    """:meth:`Corral.diff`."""
    ledger = corral.ledger()
    record = find_run(ledger, run_id)
    return Diff(RunResult(record), load_patch(ledger, record.run_id))


def discard(corral: Corral, run_id: str) -> Discarded:
    """:meth:`Corral.discard`."""
    record, already = discard_run(corral.ledger(), run_id)
    return Discarded(RunResult(record), already)


def apply(corral: Corral, run_id: str, *, yes: bool,
          confirm: Callable[[PatchPlan], bool] | None,
          on_plan: Callable[[RunRecord, PatchPlan], None] | None, **allowed: bool
          ) -> ApplyReport:
    """:meth:`Corral.apply` (``allowed``: the fields of :class:`ApplyOptions`)."""
    options = ApplyOptions(**allowed)
    ledger = corral.ledger()

    def asked(plan: PatchPlan) -> bool:
        return yes or (confirm is not None and confirm(plan))

    record, plan, result = apply_run(corral.root.resolve(), ledger, run_id, options,
                                     confirm=asked, show=on_plan)
    superseded = () if options.check_only else tuple(
        RunResult(r) for r in supersede_conflicting(ledger, record))
    return ApplyReport(RunResult(record), plan, result, superseded)


def branch(corral: Corral, run_id: str, name: str, **allowed: bool) -> BranchReport:
    """:meth:`Corral.branch` (``allowed``: fields of :class:`ApplyOptions`)."""
    record, plan, result = branch_run(corral.root.resolve(), corral.ledger(), run_id, name,
                                      ApplyOptions(**allowed))
    return BranchReport(RunResult(record), plan, result)


def recover(corral: Corral, run_id: str) -> Recovered:
    """:meth:`Corral.recover`."""
    record, restored, saved = recover_run(corral.root.resolve(), corral.ledger(), run_id)
    return Recovered(RunResult(record), restored, saved)


@dataclass(frozen=True)
class GcReport:
    """What ``gc`` cleaned: abandoned ``sandboxes`` (their diffs saved first), the runs and
    fanouts it marked ``crashed``, what ``older_than`` pruned or kept, and the cached
    environments no run used for ``environment_days`` days."""

    sandboxes: SandboxReport
    crashed: tuple[CrashedRun, ...]
    fanouts: tuple[FanoutRecord, ...]
    pruned: tuple[Pruned, ...]
    environments: tuple[EnvironmentInfo, ...]
    environment_days: float

    @property
    def entries(self) -> tuple[GcEntry, ...]:
        """What was found under the state dir and done with it (the sandboxes' sweep)."""
        return self.sandboxes.entries

    @property
    def runs(self) -> tuple[CrashedRun, ...]:
        """The runs it marked ``crashed`` (the JSON's ``runs``)."""
        return self.crashed

    @property
    def empty(self) -> bool:
        """Whether there was nothing to clean."""
        return not (self.sandboxes.entries or self.crashed or self.fanouts or self.pruned
                    or self.environments)

    def to_json(self) -> dict[str, Any]:
        """The ``corral gc --json`` object (ASCII JSON: a directory name cannot put raw
        controls on a terminal)."""
        return self.sandboxes.model_dump(mode="json") | {"runs": [
            {"run_id": c.record.run_id, "agent": c.record.agent, "status": "crashed",
             "ledger": str(c.ledger), "changed_files": len(c.record.changed_files),
             "patch_path": str(c.patch) if c.patch else None} for c in self.crashed],
            "fanouts": [{"fanout_id": f.fanout_id, "status": f.status} for f in self.fanouts],
            "pruned": [{"path": str(p.path), "action": p.action, "run_id": p.run_id,
                        "detail": p.detail} for p in self.pruned],
            "environments": [{"key": e.key, "repo": e.repo, "size_bytes": e.size_bytes}
                             for e in self.environments]}


def gc(corral: Corral, older_than: str | float | None) -> GcReport:
    """:meth:`Corral.gc`."""
    from sandbox.environment import prune_environments  # noqa: PLC0415
    from sandbox.gc import gc as sweep  # noqa: PLC0415 - docker only where gc runs

    age = parse_duration(older_than) if isinstance(older_than, str) else older_than
    state_root = corral.state_root()
    check_state_dir(state_root)
    config = load_user_config()
    idle = config.snapshots.prune_after_hours * 3600
    report = sweep(state_root, snapshot_max_idle=min(idle, age) if age is not None else idle)
    crashed = finalize_crashed_runs(state_root)
    fanouts = finalize_crashed_fanouts(state_root)
    pruned = prune_finished(state_root, age) if age is not None else []
    environment = config.environment
    days = environment.prune_after_days if environment is not None else 14.0
    environments = prune_environments(state_root, older_than=days * 86400)
    return GcReport(report, tuple(crashed), tuple(fanouts), tuple(pruned),
                    tuple(environments), days)
