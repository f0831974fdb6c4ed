"""What the API returns for a fanout: :class:`FanoutResult`, a :class:`ChildResult` each.

Each wraps what the ledger holds (the fanout's :class:`~executor.ledger.FanoutRecord`,
each child's record as a :class:`~executor.api.RunResult`) and adds what every front
door computes from it: its exit code, the conflict matrix's reasons, each candidate's
standing and the best one (:mod:`executor.fanout.choice`), and the ``corral fanout
--json`` objects. Every key of that JSON is an attribute of the result too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.api.results import RunResult, network_view
from executor.errors import EXIT_DENIED, EXIT_FAILURE, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK
from executor.fanout.check import check_verdict
from executor.fanout.choice import Candidate, best, candidates, next_command
from executor.fanout.conflicts import FilePatch, PairResult, matrix
from executor.fanout.rows import Row, rows
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    FanoutStatus,
    RunRecord,
    RunState,
    fanout_status,
)

__all__ = ["ChildResult", "FanoutResult", "fanout_exit_code"]

#: Worst first: the exit code of a fanout is the first of these any child gives.
_PRECEDENCE = (EXIT_INTERRUPTED, EXIT_FAILURE, EXIT_DENIED, EXIT_FINDINGS, EXIT_OK)


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

    # What its JSON row carries, each from its run's record (``None`` or empty: no run).

    @property
    def state(self) -> RunState | None:
        """What became of its diff (``None``: it never started)."""
        return self.run.state if self.run is not None else None

    @property
    def diff(self) -> str:
        """Its diff as text ("": none, or it never started)."""
        return self.run.diff if self.run is not None else ""

    @property
    def changed_files(self) -> list[dict[str, Any]]:
        return self.run.changed_files if self.run is not None else []

    @property
    def check(self) -> dict[str, Any] | None:
        """Its check command and how it ended (``None``: none ran)."""
        return self.run.check if self.run is not None else None

    @property
    def steps(self) -> int:
        return self.run.steps if self.run is not None else 0

    @property
    def usage(self) -> dict[str, int]:
        return self.run.usage if self.run is not None else {}

    @property
    def model(self) -> str | None:
        """The model it ran on, as recorded."""
        return self.run.record.model if self.run is not None else self.planned.model

    @property
    def error(self) -> dict[str, Any] | None:
        return self.run.error if self.run is not None else None

    @property
    def denied_calls(self) -> list[dict[str, str]]:
        return self.run.denied_calls if self.run is not None else []

    @property
    def base_commit(self) -> str | None:
        """The snapshot commit its diff is relative to."""
        return self.run.record.base_commit if self.run is not None else None

    @property
    def oom_killed(self) -> bool:
        """Whether the OOM killer killed a process of one of its commands (its check's own
        OOM: ``check["oom_killed"]``, an ``error``)."""
        return self.run.oom_killed if self.run is not None else False

    @property
    def network(self) -> dict[str, Any] | None:
        """Its commands' egress under ``--net allow`` (the grant, the denied requests;
        :func:`~executor.api.results.network_view`); ``None`` when they had no network."""
        return network_view(self.run.network) if self.run is not None else None

    def to_json(self) -> dict[str, Any]:
        """Its row of ``corral fanout --json``'s ``runs``."""
        base: dict[str, Any] = {"run_id": self.run_id, "index": self.index,
                                "agent": self.agent}
        if self.run is None:
            return base | {"status": "not_started", "diff": "", "changed_files": [],
                           "check": None, "oom_killed": False}
        run = self.run.record
        return base | {
            "status": self.run.status.value, "state": run.state, "diff": run.diff,
            "changed_files": run.changed_files, "lines_added": self.lines_added,
            "lines_removed": self.lines_removed, "check": run.check, "steps": run.steps,
            "usage": run.usage, "model": run.model, "error": run.error,
            "denied_calls": run.denied_calls, "base_commit": run.base_commit,
            "oom_killed": run.oom_killed, "network": self.network}


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
    def prompt(self) -> str:
        return self.record.prompt

    @property
    def check_command(self) -> str | None:
        return self.record.check_command

    @property
    def created_at(self) -> str:
        return self.record.created_at

    @property
    def finished_at(self) -> str:
        return self.record.finished_at

    @property
    def runs(self) -> tuple[ChildResult, ...]:
        """Its children (``to_json()["runs"]``), in order."""
        return self.children

    @property
    def same_files(self) -> list[list[Any]]:
        """``[run_a, run_b, [paths]]``: pairs that change the same files without
        conflicting (both apply, one after the other)."""
        return self.record.same_files

    @property
    def bases(self) -> dict[str, list[str]]:
        """Snapshot commit -> the children that started from it."""
        return self.record.bases

    @property
    def notes(self) -> list[str]:
        return self.record.notes

    def _pairs(self) -> list[tuple[FanoutChild, RunRecord | None]]:
        return [(c.planned, c.run.record if c.run is not None else None)
                for c in self.children]

    def candidates(self) -> list[Candidate]:
        """Each child as a candidate to apply (:mod:`executor.fanout.choice`): whether
        applying it is recommended (it completed, its check passed, its diff is pending
        and conflicts with nothing applied), and why not."""
        return candidates(self.record, self._pairs())

    def best(self) -> Candidate:
        """The first candidate whose check passed and whose diff conflicts with nothing
        already applied (``corral apply FANOUT --pick best``); :class:`NoBestCandidate`
        (exit code 4), naming each candidate's reason, when there is none."""
        return best(self.record, self._pairs())

    @property
    def next_command(self) -> str | None:
        """The ``corral apply`` command that applies what it recommends (``--pick best``,
        or ``--pick N``), ``None`` when no candidate can be applied (the last line of
        ``corral fanout``)."""
        return next_command(self.record, self._pairs())

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
                "bases": record.bases, "notes": record.notes,
                "next_command": self.next_command}
