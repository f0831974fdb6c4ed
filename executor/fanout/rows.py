"""A fanout's result as its children recorded it: rows, the conflict matrix, text, JSON.

Everything here is read back from the ledger (each child's record and exact
``diff.patch``), so ``corral fanout`` prints the same result a later reader
computes, and every value shown on a terminal is escaped (:func:`one_line`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.errors import ExecutorError
from executor.fanout.conflicts import FilePatch, PairResult, matrix, parse_patch
from executor.ledger import (
    FanoutChild,
    FanoutRecord,
    FanoutStatus,
    RunRecord,
    fanout_status,
    find_run,
    load_patch,
    now_iso,
    run_status,
)
from executor.runview import human_bytes, human_seconds
from executor.text import one_line

__all__ = ["Row", "check_lines", "conclude", "fanout_json", "fanout_lines", "rows"]


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


def _pairs(found: list[Row]) -> list[tuple[str, str, PairResult]]:
    return list(matrix([(row.child.run_id, row.files) for row in found if row.files]))


def conclude(record: FanoutRecord, ledger: Path, *, status: FanoutStatus) -> FanoutRecord:
    """The fanout's final record: status, conflicts, same-file pairs, snapshot bases."""
    found = rows(record, ledger)
    pairs = _pairs(found)
    bases: dict[str, list[str]] = {}
    for row in found:
        if row.record is not None and row.record.base_commit:
            bases.setdefault(row.record.base_commit, []).append(row.child.run_id)
    notes = list(record.notes)
    if len(bases) > 1:
        notes.append(f"the children started from {len(bases)} different states of the "
                     "checkout (it changed while they were starting): compare and apply "
                     "their diffs knowing that")
    return record.model_copy(update={
        "status": status, "finished_at": now_iso(),
        "owner": None, "bases": bases, "notes": notes,
        "conflicts": [[a, b, sorted(p.conflicts)] for a, b, p in pairs if p.conflicts],
        "same_files": [[a, b, list(p.same_files)] for a, b, p in pairs if p.same_files]})


def _run_json(row: Row) -> dict[str, Any]:
    run = row.record
    base: dict[str, Any] = {"run_id": row.child.run_id, "index": row.child.index,
                            "agent": row.child.agent}
    if run is None:
        return base | {"status": "not_started", "diff": "", "changed_files": [],
                       "check": None}
    return base | {
        "status": run_status(run).value, "state": run.state, "diff": run.diff,
        "changed_files": run.changed_files, "lines_added": row.added,
        "lines_removed": row.removed, "check": run.check, "steps": run.steps,
        "usage": run.usage, "model": run.model, "error": run.error,
        "denied_calls": run.denied_calls, "base_commit": run.base_commit}


def fanout_json(record: FanoutRecord, ledger: Path) -> dict[str, Any]:
    """The ``fanout --json`` object."""
    return {"fanout_id": record.fanout_id, "status": fanout_status(record),
            "prompt": record.prompt, "check_command": record.check_command,
            "created_at": record.created_at, "finished_at": record.finished_at,
            "runs": [_run_json(row) for row in rows(record, ledger)],
            "conflicts": record.conflicts, "same_files": record.same_files,
            "bases": record.bases, "notes": record.notes}


def _check_cell(run: RunRecord) -> str:
    check = run.check
    if not check:
        return "-"
    if check.get("skipped"):
        return "skipped"
    took = human_seconds(float(check.get("duration_seconds", 0.0)))
    if check.get("timed_out"):
        return f"timed out {took}"
    code = check.get("exit_code")
    return f"{'passed' if code == 0 else f'failed ({code})'} {took}"


def fanout_lines(record: FanoutRecord, ledger: Path) -> list[str]:
    """The result table, the conflicts, and what to do next (escaped, one line each)."""
    found = rows(record, ledger)
    short = {row.child.run_id: f"#{row.child.index}" for row in found}
    check = f", check `{one_line(record.check_command)}`" if record.check_command else ""
    lines = [f"fanout {one_line(record.fanout_id)}: {len(found)} child(ren), "
             f"{fanout_status(record)}{check}",
             f"  {'#':>2}  {'run':22}  {'agent':16}  {'status':12}  {'files':>5}  {'+/-':>11}  "
             f"{'check':18}  {'steps':>5}  {'tokens':>8}"]
    for row in found:
        run = row.record
        if run is None:
            lines.append(f"  {row.child.index:>2}  {one_line(row.child.run_id):22}  "
                         f"{one_line(row.child.agent):16}  not started")
            continue
        files = len([c for c in run.changed_files if c.get("in_patch", True)])
        tokens = run.usage.get("input_tokens", 0) + run.usage.get("output_tokens", 0)
        lines.append(f"  {row.child.index:>2}  {one_line(run.run_id):22}  "
                     f"{one_line(run.agent):16}  {run_status(run).value:12}  {files:>5}  "
                     f"{f'+{row.added} -{row.removed}':>11}  {_check_cell(run):18}  "
                     f"{run.steps:>5}  {tokens:>8,}")
        if run.error and run.error.get("message"):
            lines.append(f"        {one_line(str(run.error['message']))[:200]}")
        skipped = (run.check or {}).get("skipped")
        if skipped:
            lines.append(f"        check skipped: {one_line(str(skipped))}")
    for a, b, pair in _pairs(found):
        if pair.conflicts:
            why = "; ".join(f"{path} ({reason})" for path, reason in pair.conflicts.items())
            merge = (" (or apply the second with `corral apply --3way` and resolve the "
                     "marked conflicts)" if all(r.startswith("both change lines")
                                               for r in pair.conflicts.values()) else "")
            lines.append(f"conflict: {short.get(a, a)} and {short.get(b, b)}: "
                         f"{one_line(why)}: apply one of them{merge}")
        elif pair.same_files:
            lines.append(f"same files: {short.get(a, a)} and {short.get(b, b)} change "
                         f"{one_line(', '.join(pair.same_files))} in different places: both "
                         "apply, one after the other (`corral apply --3way` merges the second "
                         "where a plain apply finds its context changed)")
    lines += [f"note: {one_line(note)}" for note in record.notes]
    with_diff = [row for row in found if row.record is not None and row.record.diff]
    if with_diff:
        lines.append("apply the one you choose: corral apply RUN  (diffs: corral diff RUN; "
                     "those that share no file apply one after another)")
    return lines


def check_lines(record: RunRecord) -> list[str]:
    """A fanout child's check, for ``corral show``: the command, how it ended, its output's
    end (escaped, indented)."""
    check = record.check
    if not check:
        return []
    head = f"check:     `{one_line(str(check.get('command')))}` "
    if check.get("skipped"):
        return [head + f"skipped: {one_line(str(check['skipped']))}"]
    ended = ("timed out" if check.get("timed_out") else f"exit {check.get('exit_code')}")
    size = int(check.get("output_bytes") or 0)
    tail = str(check.get("output_tail") or "")
    shown = len(tail.encode("utf-8", "surrogatepass"))
    cut = f"; its last {human_bytes(shown)} of {human_bytes(size)}" if size > shown else ""
    lines = [head + f"{ended} in {human_seconds(float(check.get('duration_seconds', 0.0)))}"
             f"{cut}"]
    lines += [f"      {one_line(line)}" for line in tail.rstrip("\n").split("\n") if tail]
    return lines
