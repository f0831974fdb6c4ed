"""A fanout's result as its children recorded it: one row per child, the conflict matrix.

Everything here is read back from the ledger (each child's record and exact
``diff.patch``), so ``corral fanout`` shows the same result a later reader
computes (:class:`executor.api.FanoutResult` holds it; the CLI's text is
:mod:`executor.cli.fanout_views`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from executor.errors import ExecutorError
from executor.fanout.conflicts import FilePatch, PairResult, matrix, parse_patch
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    FanoutStatus,
    RunRecord,
    find_run,
    load_patch,
    now_iso,
)

__all__ = ["Row", "conclude", "pairs", "rows"]


@dataclass(frozen=True)
class Row:
    """One child: as planned, as recorded (``None``: it left no record), its diff's files."""

    child: FanoutChild
    record: RunRecord | None
    files: tuple[FilePatch, ...]

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)


def rows(record: FanoutRecord, ledger: Path) -> list[Row]:
    """Every child of ``record``, in its order."""
    found: list[Row] = []
    for child in record.children:
        try:
            run = find_run(ledger, child.run_id)
        except ExecutorError:
            found.append(Row(child, None, ()))
            continue
        found.append(Row(child, run, tuple(parse_patch(load_patch(ledger, run.run_id)))))
    return found


def pairs(found: list[Row]) -> list[tuple[str, str, PairResult]]:
    """Every pair of children with a diff: whether they conflict, and where."""
    return list(matrix([(row.child.run_id, row.files) for row in found if row.files]))


def conclude(record: FanoutRecord, ledger: Path, *, status: FanoutStatus) -> FanoutRecord:
    """The fanout's final record: status, conflicts, same-file pairs, snapshot bases."""
    found = rows(record, ledger)
    analysed = pairs(found)
    bases: dict[str, list[str]] = {}
    for row in found:
        if row.record is not None and row.record.base_commit:
            bases.setdefault(row.record.base_commit, []).append(row.child.run_id)
    notes = list(record.notes)
    if len(bases) > 1:
        notes.append(f"the children started from {len(bases)} different states of the "
                     "checkout (it changed while they were starting): compare and apply "
                     "their diffs knowing that")
    for row in found:  # a child a scheduler ran again (a cluster node was lost)
        notes += [f"#{row.child.index} {note}" for note in
                  (row.record.notes if row.record is not None else [])
                  if note.startswith("retried once")]
    return record.model_copy(update={
        "status": status, "finished_at": now_iso(),
        "owner": None, "bases": bases, "notes": notes,
        "conflicts": [[a, b, sorted(p.conflicts)] for a, b, p in analysed if p.conflicts],
        "same_files": [[a, b, list(p.same_files)] for a, b, p in analysed if p.same_files]})
