"""What the API returns: typed views over what the ledger holds.

Each result wraps a record as it is (:class:`~executor.ledger.RunRecord`,
:class:`~executor.ledger.FanoutRecord`: every field, under ``.record``) and adds
what every front door computes from it: a run's status as it stands now (a
``running`` record whose process died reads ``crashed``), its exit code (the
README's table: the CLI's, the MCP server's ``exit_code``), and the JSON
objects ``--json`` prints and MCP tools return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.errors import EXIT_DENIED, EXIT_FAILURE, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK
from executor.fanout.check import check_verdict
from executor.fanout.conflicts import FilePatch, PairResult, matrix
from executor.fanout.rows import Row, rows
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    FanoutStatus,
    RecordError,
    RunRecord,
    RunState,
    RunStatus,
    fanout_status,
    run_status,
)

__all__ = ["ChildResult", "Diff", "FanoutResult", "RunList", "RunResult", "exit_code",
           "fanout_exit_code"]

#: A run's exit code by its status (the README's "Exit codes").
STATUS_EXIT = {RunStatus.COMPLETED: EXIT_OK, RunStatus.FAILED: EXIT_FAILURE,
               RunStatus.TIMEOUT: EXIT_FAILURE, RunStatus.DENIED: EXIT_DENIED,
               RunStatus.CANCELLED: EXIT_INTERRUPTED, RunStatus.RUNNING: EXIT_FAILURE,
               RunStatus.CRASHED: EXIT_FAILURE,
               # The run ended and found something to fix: out of steps, or its answer
               # failed a response reviewer's check (its answer and diff are recorded).
               RunStatus.STEP_LIMIT: EXIT_FINDINGS, RunStatus.REVIEW_FAILED: EXIT_FINDINGS}
#: Worst first: the exit code of a fanout is the first of these any child gives.
_PRECEDENCE = (EXIT_INTERRUPTED, EXIT_FAILURE, EXIT_DENIED, EXIT_FINDINGS, EXIT_OK)


def exit_code(record: RunRecord) -> int:
    """The exit code of ``corral run`` (the README's table): a run that completed with a
    denied tool call exits 4, so a script learns it without parsing JSON; a failure
    (3) outranks a denial."""
    code = STATUS_EXIT[record.status]
    if code == EXIT_OK and record.denied_calls:
        return EXIT_DENIED
    return code


def _check_passed(check: dict[str, Any] | None) -> bool | None:
    verdict = check_verdict(check)
    if verdict in (None, "skipped", "error"):
        return None
    return verdict == "passed"


@dataclass(frozen=True)
class RunResult:
    """One recorded run. ``record`` holds every field; the properties are the ones callers
    use most."""

    record: RunRecord
    #: Its calls (``record.audit``) and steps are the ones its journal holds so far: it is
    #: still running, or its process died before it could record them.
    from_journal: bool = False

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def agent(self) -> str:
        return self.record.agent

    @property
    def status(self) -> RunStatus:
        """How the run stands now: ``running`` only while its process lives (else
        ``crashed``), or how it ended."""
        return run_status(self.record)

    @property
    def final_text(self) -> str:
        return self.record.final_text

    @property
    def diff(self) -> str:
        """The diff as text (bytes that are not UTF-8 replaced: :meth:`Corral.diff` has the
        exact bytes)."""
        return self.record.diff

    @property
    def changed_files(self) -> list[dict[str, Any]]:
        return self.record.changed_files

    @property
    def denied_calls(self) -> list[dict[str, str]]:
        return self.record.denied_calls

    @property
    def state(self) -> RunState:
        """What became of its diff: ``pending``, ``applied`` or ``discarded``."""
        return self.record.state

    @property
    def check(self) -> dict[str, Any] | None:
        """A fanout child's check command and how it ended (``None``: none ran)."""
        return self.record.check

    @property
    def check_passed(self) -> bool | None:
        """Whether its check exited 0; ``None`` when no check ran (or it was skipped)."""
        return _check_passed(self.record.check)

    @property
    def exit_code(self) -> int:
        """The exit code ``corral run`` gives for it (see :func:`exit_code`)."""
        return exit_code(self.record)

    def to_json(self) -> dict[str, Any]:
        """The ``corral run --json`` object."""
        record = self.record
        return {
            "run_id": record.run_id, "agent": record.agent, "status": self.status.value,
            "final_text": record.final_text, "diff": record.diff,
            "changed_files": record.changed_files, "denied_calls": record.denied_calls,
            "backend": record.backend, "mode": record.mode, "error": record.error,
            "children": record.children, "usage": record.usage, "steps": record.steps,
            "state": record.state,
            "reviews": record.reviews,
        }

    def record_json(self) -> dict[str, Any]:
        """The whole record with its status as it stands now (``corral show --json``
        without the transcript); ``from_journal``: its calls are the journal's so far."""
        return self.record.model_dump(mode="json") | {"status": self.status.value} | (
            {"from_journal": True} if self.from_journal else {})


@dataclass(frozen=True)
class ChildResult:
    """One child of a fanout: as planned, its run (``None``: it left no record), the lines
    its diff adds and removes, and the diff's files as the conflict matrix reads them."""

    planned: FanoutChild
    run: RunResult | None
    lines_added: int = 0
    lines_removed: int = 0
    files: tuple[FilePatch, ...] = ()

    @classmethod
    def of_row(cls, row: Row) -> ChildResult:
        return cls(row.child, RunResult(row.record) if row.record is not None else None,
                   row.added, row.removed, row.files)

    @property
    def index(self) -> int:
        """Its place, from 1."""
        return self.planned.index

    @property
    def run_id(self) -> str:
        return self.planned.run_id

    @property
    def agent(self) -> str:
        return self.planned.agent

    @property
    def status(self) -> str:
        """Its run's status, or ``not_started``."""
        return self.run.status.value if self.run is not None else "not_started"

    @property
    def check_passed(self) -> bool | None:
        """Whether its check command exited 0 (``None``: no check ran)."""
        return self.run.check_passed if self.run is not None else None

    def to_json(self) -> dict[str, Any]:
        """Its row of ``corral fanout --json``'s ``runs``."""
        base: dict[str, Any] = {"run_id": self.run_id, "index": self.index,
                                "agent": self.agent}
        if self.run is None:
            return base | {"status": "not_started", "diff": "", "changed_files": [],
                           "check": None}
        run = self.run.record
        return base | {
            "status": self.run.status.value, "state": run.state, "diff": run.diff,
            "changed_files": run.changed_files, "lines_added": self.lines_added,
            "lines_removed": self.lines_removed, "check": run.check, "steps": run.steps,
            "usage": run.usage, "model": run.model, "error": run.error,
            "denied_calls": run.denied_calls, "base_commit": run.base_commit}


def fanout_exit_code(record: FanoutRecord, children: Sequence[ChildResult]) -> int:
    """The exit code of ``corral fanout``: 0 every child completed and every check passed;
    1 every child ran, but a check failed (or a child stopped at its step limit or failed
    a review); 3 a child failed, timed out or crashed, or a check could not run as asked
    (an ``error``: its sandbox, or the environment its fanout asked for, was not there);
    4 a child was denied, or completed with a denied call; 130 the fanout was cancelled."""
    if record.status == "cancelled":
        return EXIT_INTERRUPTED
    codes = {EXIT_OK}
    for child in children:
        if child.run is None:
            codes.add(EXIT_FAILURE)
            continue
        codes.add(child.run.exit_code)
        verdict = check_verdict(child.run.check)
        if verdict == "error":
            codes.add(EXIT_FAILURE)
        elif verdict in ("failed", "timed out"):
            codes.add(EXIT_FINDINGS)
    return next(code for code in _PRECEDENCE if code in codes)


@dataclass(frozen=True)
class FanoutResult:
    """A fanout: its record (``record``: conflicts, same-file pairs, snapshot bases, notes)
    and each child as it recorded itself, in order."""

    record: FanoutRecord
    children: tuple[ChildResult, ...]

    @classmethod
    def read(cls, record: FanoutRecord, ledger: Path) -> FanoutResult:
        """The fanout with each child's record read back from ``ledger``."""
        return cls(record, tuple(ChildResult.of_row(row) for row in rows(record, ledger)))

    @property
    def fanout_id(self) -> str:
        return self.record.fanout_id

    @property
    def status(self) -> FanoutStatus:
        """``running`` only while its process lives (else ``crashed``), or how it ended."""
        return fanout_status(self.record)

    @property
    def conflicts(self) -> list[list[Any]]:
        """``[run_a, run_b, [paths]]``: pairs whose diffs cannot both be applied."""
        return self.record.conflicts

    @property
    def passed(self) -> tuple[ChildResult, ...]:
        """The children whose check command exited 0, in order."""
        return tuple(child for child in self.children if child.check_passed)

    @property
    def exit_code(self) -> int:
        """The exit code ``corral fanout`` gives for it (see :func:`fanout_exit_code`)."""
        return fanout_exit_code(self.record, self.children)

    def pairs(self) -> list[tuple[str, str, PairResult]]:
        """Every pair of children with a diff: which paths conflict and why, which files
        both change in different places (the record keeps the paths only)."""
        return list(matrix([(c.run_id, c.files) for c in self.children if c.files]))

    def to_json(self) -> dict[str, Any]:
        """The ``corral fanout --json`` object."""
        record = self.record
        return {"fanout_id": record.fanout_id, "status": self.status,
                "prompt": record.prompt, "check_command": record.check_command,
                "created_at": record.created_at, "finished_at": record.finished_at,
                "runs": [child.to_json() for child in self.children],
                "conflicts": record.conflicts, "same_files": record.same_files,
                "bases": record.bases, "notes": record.notes}


#: One entry of :meth:`RunList.groups`: a fanout (``None``: a run on its own) and its
#: members (index in the fanout or ``None``; a run, or the id of a planned child that
#: left no record).
Group = tuple[FanoutRecord | None, list[tuple[int | None, RunResult | str]]]


@dataclass(frozen=True)
class RunList:
    """The recorded runs and fanouts of a repository, newest first, and every record that
    cannot be read (one corrupted record never hides the others)."""

    runs: tuple[RunResult, ...]
    fanouts: tuple[FanoutRecord, ...]
    broken: tuple[RecordError, ...]

    def groups(self) -> list[Group]:
        """Newest first: a fanout with its children (by index; runs they delegated after
        them; a planned child without a record by its id), or one run on its own."""
        by_id = {r.run_id: r for r in self.runs}
        grouped = {f.fanout_id for f in self.fanouts}
        entries: list[tuple[str, FanoutRecord | None,
                            list[tuple[int | None, RunResult | str]]]] = []
        for fanout in self.fanouts:
            members: list[tuple[int | None, RunResult | str]] = [
                (child.index, by_id.get(child.run_id) or child.run_id)
                for child in fanout.children]
            planned = {child.run_id for child in fanout.children}
            members += [(None, r) for r in self.runs if r.record.fanout == fanout.fanout_id
                        and r.run_id not in planned]
            entries.append((fanout.created_at, fanout, members))
        entries += [(r.record.started_at, None, [(None, r)]) for r in self.runs
                    if r.record.fanout not in grouped]
        entries.sort(key=lambda entry: entry[0], reverse=True)
        return [(fanout, members) for _, fanout, members in entries]

    def to_json(self) -> list[dict[str, Any]]:
        """The ``corral runs --json`` list: each fanout before its runs, each run with its
        fanout, then every corrupted record."""
        listed: list[dict[str, Any]] = []
        for fanout, members in self.groups():
            if fanout is not None:
                listed.append({"fanout_id": fanout.fanout_id, "status": fanout_status(fanout),
                               "prompt": fanout.prompt, "created_at": fanout.created_at,
                               "check_command": fanout.check_command,
                               "children": [c.run_id for c in fanout.children]})
            listed += [r.to_json() | {"started_at": r.record.started_at,
                                      "parent_run": r.record.parent_run,
                                      "fanout": r.record.fanout}
                       for _, r in members if isinstance(r, RunResult)]
        return listed + [{"status": "corrupted", "error": exc.to_dict()}
                         for exc in self.broken]


@dataclass(frozen=True)
class Diff:
    """A run's exact diff (``patch``: the bytes ``corral apply`` merges)."""

    run: RunResult
    patch: bytes

    @property
    def empty(self) -> bool:
        return not self.patch

    @property
    def text(self) -> str:
        """The patch as text, bytes that are not UTF-8 replaced."""
        return self.patch.decode("utf-8", "replace")
