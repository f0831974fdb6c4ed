"""Finding one run's record: by id, by a unique start of one, or ``last`` / ``last~N``.

The ledger's index (:mod:`executor.ledger.index`) only picks which record; what is
returned is always read from the record's own file, so a row changed by hand never
changes what ``show``, ``diff`` or ``apply`` read.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from executor.errors import ExecutorError
from executor.ledger.rebuild import rebuild, retrying
from executor.ledger.records import RecordError, RunRecord, check_id_prefix, read_record

__all__ = ["find_run"]

_read = read_record


#: ``last``: the newest run you started; ``last~N``: the N-th before it.
_LAST = re.compile(r"last(?:~([0-9]{1,6}))?")


def find_run(ledger: Path, run_id: str) -> RunRecord:
    """The record whose id is ``run_id`` or starts with it (unambiguously), or ``last`` /
    ``last~N``; never a pattern. The index only picks which record: what is returned is
    always read from the record's own file."""
    last = _LAST.fullmatch(run_id)
    if last is not None:
        return _newest(ledger, int(last.group(1) or 0), run_id)
    check_id_prefix(run_id)
    if (ledger / run_id / "record.json").is_file():
        return _read(ledger / run_id / "record.json")
    matches = [m for m in _indexed_prefix(ledger, run_id)
               if (ledger / m / "record.json").is_file()]
    if not matches:  # not indexed (yet): the directory's names are the truth
        matches = sorted(e.name for e in ledger.iterdir() if e.name.startswith(run_id)
                         and (e / "record.json").is_file()) if ledger.is_dir() else []
    if not matches:
        raise ExecutorError(f"no run {run_id!r} in {ledger}", code="unknown_run",
                            hint="`corral runs` lists the recorded runs")
    if len(matches) > 1:
        names = ", ".join(sorted(matches))
        raise ExecutorError(f"run id {run_id!r} is ambiguous: {names}", code="unknown_run")
    return _read(ledger / matches[0] / "record.json")


def _indexed_prefix(ledger: Path, prefix: str) -> list[str]:
    def query(conn: sqlite3.Connection) -> list[str]:
        return [row[0] for row in conn.execute(
            "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ? LIMIT 50",
            (len(prefix), prefix))]
    return retrying(ledger, query) or []


def _newest(ledger: Path, back: int, given: str) -> RunRecord:
    """The ``back``-th newest run a user started (``corral run`` or a fanout's child; never
    a run an agent delegated or a reviewer), by start time, as the index orders them. A
    record that cannot be read has no start time to order by: it is skipped here and named
    by ``corral runs``. The record picked is read from its file; one that does not say what
    its row says (an index changed by hand) has the index rebuilt and the pick made again."""
    def query(conn: sqlite3.Connection) -> tuple[tuple[str, str] | None, int]:
        row = conn.execute("SELECT run_id, started FROM runs WHERE parent IS NULL "
                           "ORDER BY started DESC, run_id DESC LIMIT 1 OFFSET ?",
                           (back,)).fetchone()
        if row is not None:
            return (str(row[0]), str(row[1])), 0
        return None, int(conn.execute(
            "SELECT count(*) FROM runs WHERE parent IS NULL").fetchone()[0])

    for attempt in range(2):
        found, count = retrying(ledger, query) or (None, 0)
        if found is None:
            raise ExecutorError(
                f"no run {given!r} in {ledger}: {count} run(s) recorded",
                code="unknown_run", hint="`last` is the newest run, `last~1` the one before "
                "it; `corral runs` lists them")
        path = ledger / found[0] / "record.json"
        try:
            record = _read(path)
        except RecordError:
            record = None
        if record is not None and record.parent_run is None \
                and record.started_at == found[1] and record.run_id == found[0]:
            return record
        if attempt == 0:
            rebuild(ledger)
    raise ExecutorError(f"the ledger index of {ledger} does not match its record files",
                        code="unknown_run", hint="`corral ledger reindex` rebuilds it")


