"""Listings of the ledger, from its index: O(what they show), whatever the ledger holds.

What ``corral runs`` (and the web view, MCP's ``list_runs``, :meth:`Corral.runs`) list
is a sequence of **entries**, newest first: a fanout with its children under it, or one
run on its own (a run of a fanout that has no record of its own is on its own too). Each
run is a :class:`RunSummary`, made from its index row (:mod:`executor.ledger.index`):
never the record's diff or transcript. :func:`iter_entries` streams them (the first
entry comes before the rest are read); :func:`page` cuts ``limit`` of them after an
entry (``after``: keyset paging by start time and id).

A summary is what a listing shows and nothing more: ``show``, ``diff`` and ``apply`` read
the record file itself (:func:`executor.ledger.store.find_run`), so a row changed by hand
never changes what they read.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executor.errors import ExecutorError
from executor.ledger.fanout_record import FanoutRecord
from executor.ledger.index import RUN_COLUMNS, broken_error, refresh, run_row
from executor.ledger.rebuild import reading, retrying
from executor.ledger.records import RecordError, RunStatus, check_id_prefix, read_record
from sandbox.state import owner_alive

__all__ = [
    "Entry",
    "Filters",
    "Page",
    "RunSummary",
    "broken_records",
    "iter_entries",
    "page",
    "running_runs",
    "runs_by_sandbox",
]


@dataclass(frozen=True)
class RunSummary:
    """One run as a listing shows it (its index row)."""

    run_id: str
    fanout: str | None
    parent_run: str | None
    agent: str
    #: As recorded (``running`` stays so here: :meth:`live_status` asks its owner).
    recorded_status: str
    state: str
    started_at: str
    finished_at: str
    backend: str
    mode: str
    node: str | None
    model: str | None
    #: The prompt's start, whitespace collapsed, cut.
    prompt: str
    files: int
    has_diff: bool
    #: ``passed``, ``failed``, ``timed out``, ``error``, ``skipped``; None: no check.
    check: str | None
    continued_by: str | None
    sandbox_id: str | None
    owner: dict[str, Any] | None
    #: Its record file's mtime (ns) when the row was made.
    mtime: int = 0

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> RunSummary:
        values = dict(zip(RUN_COLUMNS, row, strict=False))
        owner = json.loads(values["owner"]) if values["owner"] else None
        return cls(values["run_id"], values["fanout"], values["parent"], values["agent"],
                   values["status"], values["state"], values["started"], values["finished"],
                   values["backend"], values["mode"], values["node"], values["model"],
                   values["prompt"], int(values["files"]), bool(values["has_diff"]),
                   values["check_outcome"], values["continued_by"], values["sandbox_id"],
                   owner if isinstance(owner, dict) else None, int(values["mtime"] or 0))

    @property
    def status(self) -> RunStatus:
        """How it stands now (:meth:`live_status`)."""
        return self.live_status()

    def live_status(self) -> RunStatus:
        """How it stands now: a ``running`` run whose process is gone is ``crashed``."""
        try:
            status = RunStatus(self.recorded_status)
        except ValueError:
            return RunStatus.FAILED
        if status is not RunStatus.RUNNING:
            return status
        owner = self.owner or {}
        alive = owner_alive(str(owner.get("host", "")), owner.get("pid"), owner.get("started"))
        return RunStatus.RUNNING if alive else RunStatus.CRASHED

    def diff_state(self, status: RunStatus | None = None) -> str:
        """What became of its diff (as ``corral runs`` says it): ``pending``, ``applied``,
        ``discarded``, ``continued``, ``in checkout``, or nothing."""
        if self.continued_by:
            return "continued"
        if self.state in ("applied", "discarded"):
            return self.state
        if self.state not in ("pending", ""):
            return self.state  # a state this corral does not know yet: shown as it is
        running = (status or self.live_status()) is RunStatus.RUNNING
        if self.has_diff and not running:
            return "in checkout" if self.mode == "workspace-write" else "pending"
        return ""

    def to_json(self) -> dict[str, Any]:
        """Its object in ``corral runs --json`` and MCP's ``list_runs``."""
        status = self.live_status()
        return {"run_id": self.run_id, "agent": self.agent, "status": status.value,
                "state": self.state, "diff_state": self.diff_state(status),
                "started_at": self.started_at, "finished_at": self.finished_at,
                "parent_run": self.parent_run, "fanout": self.fanout,
                "backend": self.backend, "mode": self.mode, "node": self.node,
                "model": self.model, "prompt": self.prompt, "files": self.files,
                "check": self.check}


@dataclass(frozen=True)
class Filters:
    """Which runs a listing keeps (every field narrows; none: every run)."""

    statuses: tuple[str, ...] = ()
    agent: str | None = None
    #: Only runs whose diff waits for apply or discard.
    pending: bool = False
    #: Only runs started at or after this ISO time.
    since: str | None = None
    #: Only this fanout (an id or unique start of one) and its children.
    fanout: str | None = None
    state: str | None = None

    @property
    def narrowing(self) -> bool:
        return bool(self.statuses or self.agent or self.pending or self.since
                    or self.state)

    def sql(self) -> tuple[str, list[Any]]:
        """What SQL can decide (liveness and diff state are decided per row after)."""
        where: list[str] = []
        args: list[Any] = []
        if self.statuses:
            stored = {"running" if s == "crashed" else s for s in self.statuses}
            stored |= {"crashed"} & set(self.statuses)
            where.append(f"status IN ({', '.join('?' * len(stored))})")
            args += sorted(stored)
        if self.agent is not None:
            where.append("agent = ?")
            args.append(self.agent)
        if self.state is not None:
            where.append("state = ?")
            args.append(self.state)
        if self.pending:
            where.append("state = 'pending' AND continued_by IS NULL AND has_diff = 1 "
                         "AND mode != 'workspace-write'")
        if self.since is not None:
            where.append("started >= ?")
            args.append(self.since)
        return " AND ".join(where) or "1", args

    def keeps(self, run: RunSummary) -> bool:
        status = run.live_status()
        return ((not self.statuses or status.value in self.statuses)
                and (not self.pending or run.diff_state(status) == "pending"))


@dataclass(frozen=True)
class Entry:
    """A fanout with its members (``index``, a run, or a planned child's id without a
    record), or one run on its own (``fanout`` None, one member)."""

    fanout: FanoutRecord | None
    members: tuple[tuple[int | None, RunSummary | str], ...]
    #: Its place in the listing: (start time, id); ``after`` takes the id.
    key: tuple[str, str]

    @property
    def id(self) -> str:
        return self.key[1]


@dataclass(frozen=True)
class Page:
    """``limit`` entries after ``after``, and the id to pass as ``after`` for the next
    page (None: this is the last)."""

    entries: tuple[Entry, ...]
    next_after: str | None
    broken: tuple[RecordError, ...] = field(default=())


def _current(ledger: Path, run: RunSummary) -> RunSummary | None:
    """``run`` as its record file says now: a file changed since its row was made (edited
    or damaged in place) is read again and its row refreshed; None: it cannot be read (it
    is then among the broken records)."""
    path = ledger / run.run_id / "record.json"
    try:
        if path.stat().st_mtime_ns == run.mtime:
            return run
        record = read_record(path)
        mtime = path.stat().st_mtime_ns
    except (OSError, RecordError):
        refresh(ledger, runs=[run.run_id])
        return None
    refresh(ledger, runs=[run.run_id])
    return RunSummary.from_row(run_row(record, mtime))


_SELECT = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"  # noqa: S608 - fixed column names


def _resolve_fanout(conn: sqlite3.Connection, given: str) -> str:
    check_id_prefix(given, "fanout id")
    rows = [r[0] for r in conn.execute(
        "SELECT fanout_id FROM fanouts WHERE substr(fanout_id, 1, ?) = ? LIMIT 2",
        (len(given), given))]
    if len(rows) == 1:
        return str(rows[0])
    if conn.execute("SELECT 1 FROM runs WHERE fanout = ? LIMIT 1", (given,)).fetchone():
        return given  # children of a fanout that has no record of its own
    why = "is ambiguous" if rows else "is not recorded"
    raise ExecutorError(f"fanout {given!r} {why}", code="unknown_run",
                        hint="`corral runs` lists the fanouts")


def _after_key(conn: sqlite3.Connection, after: str) -> tuple[str, str]:
    check_id_prefix(after, "run or fanout id")
    row = conn.execute("SELECT started, run_id FROM runs WHERE run_id = ?",
                       (after,)).fetchone() or conn.execute(
        "SELECT created, fanout_id FROM fanouts WHERE fanout_id = ?", (after,)).fetchone()
    if row is None:
        raise ExecutorError(f"--after {after!r}: no run or fanout has this id",
                            code="unknown_run", hint="give the id a listing ended with "
                            "(its `next` line or `next_after`)")
    return str(row[0]), str(row[1])


def _members(ledger: Path, conn: sqlite3.Connection, fanout: FanoutRecord, filters: Filters,
             where: str, args: list[Any]) -> tuple[tuple[int | None, RunSummary | str], ...]:
    found = ((row[0], _current(ledger, RunSummary.from_row(row))) for row in conn.execute(
        f"{_SELECT} WHERE fanout = ? ORDER BY started, run_id", (fanout.fanout_id,)))
    runs = {key: run for key, run in found if run is not None}
    if filters.narrowing:
        matching = {row[0] for row in conn.execute(
            f"SELECT run_id FROM runs WHERE fanout = ? AND {where}",  # noqa: S608 - built from fixed parts
            (fanout.fanout_id, *args))}
        keep = {k for k, run in runs.items() if k in matching and filters.keeps(run)}
    else:
        keep = set(runs)
    planned = {child.run_id for child in fanout.children}
    members: list[tuple[int | None, RunSummary | str]] = []
    for child in fanout.children:
        run = runs.get(child.run_id)
        if run is not None and child.run_id in keep:
            members.append((child.index, run))
        elif run is None and not filters.narrowing:
            members.append((child.index, child.run_id))
    members += [(None, run) for key, run in runs.items() if key not in planned and key in keep]
    return tuple(members)


def _entries(ledger: Path, conn: sqlite3.Connection, filters: Filters, after: str | None
             ) -> Iterator[Entry]:
    where, args = filters.sql()
    fanout_id = _resolve_fanout(conn, filters.fanout) if filters.fanout else None
    key_sql, key_args = "", []
    if after is not None:
        key_sql, key_args = " AND (started, run_id) < (?, ?)", list(_after_key(conn, after))
    lone = " AND (fanout IS NULL OR NOT EXISTS (SELECT 1 FROM fanouts f WHERE " \
        "f.fanout_id = runs.fanout))"
    if fanout_id is not None:
        lone = " AND fanout = ? AND NOT EXISTS (SELECT 1 FROM fanouts f WHERE " \
            "f.fanout_id = runs.fanout)"
        args = [*args, fanout_id]
    runs_cursor = conn.execute(
        f"{_SELECT} WHERE {where}{lone}{key_sql} ORDER BY started DESC, run_id DESC",
        [*args, *key_args])
    fanout_where = ("fanout_id = ?", [fanout_id]) if fanout_id else ("1", [])
    fanout_key = key_sql.replace("started", "created").replace("run_id", "fanout_id")
    fanouts_cursor = conn.execute(
        f"SELECT created, fanout_id, data FROM fanouts WHERE {fanout_where[0]}"  # noqa: S608
        f"{fanout_key} ORDER BY created DESC, fanout_id DESC", [*fanout_where[1], *key_args])
    # A second connection for the members: the two cursors above stay open as they stream.
    lone_runs = ((str(r[6]), str(r[0]), RunSummary.from_row(r)) for r in runs_cursor)
    fanouts = ((str(r[0]), str(r[1]), r[2]) for r in fanouts_cursor)
    plain_where, plain_args = filters.sql()
    for item in heapq.merge(lone_runs, fanouts, key=lambda i: (i[0], i[1]), reverse=True):
        if isinstance(item[2], RunSummary):
            run = _current(ledger, item[2])
            if run is not None and filters.keeps(run):
                yield Entry(None, ((None, run),), (item[0], item[1]))
            continue
        fanout = FanoutRecord.model_validate_json(item[2])
        members = _members(ledger, conn, fanout, filters, plain_where, plain_args)
        if members or not filters.narrowing:
            yield Entry(fanout, members, (item[0], item[1]))


def iter_entries(ledger: Path, filters: Filters | None = None, *, after: str | None = None
                 ) -> Iterator[Entry]:
    """Every entry a listing holds, newest first, streamed from the index (see above)."""
    with reading(ledger) as conn:
        if conn is None:
            return
        yield from _entries(ledger, conn, filters or Filters(), after)


def broken_records(ledger: Path) -> tuple[RecordError, ...]:
    """Every record the index found unreadable (one never hides the others)."""
    def query(conn: sqlite3.Connection) -> tuple[RecordError, ...]:
        return tuple(broken_error(row[0]) for row in conn.execute(
            "SELECT error FROM broken ORDER BY kind DESC, id DESC"))
    return retrying(ledger, query) or ()


def page(ledger: Path, filters: Filters | None = None, *, limit: int | None = None,
         after: str | None = None) -> Page:
    """``limit`` entries (None: all) after entry ``after``; unreadable records with the
    first page only."""
    entries: list[Entry] = []
    more = False
    for entry in iter_entries(ledger, filters, after=after):
        if limit is not None and len(entries) == limit:
            more = True
            break
        entries.append(entry)
    next_after = entries[-1].id if more and entries else None
    return Page(tuple(entries), next_after, () if after else broken_records(ledger))


def running_runs(ledger: Path) -> list[str]:
    """The ids of runs recorded ``running`` (``corral gc`` asks each one's owner)."""
    def query(conn: sqlite3.Connection) -> list[str]:
        return [str(r[0]) for r in conn.execute(
            "SELECT run_id FROM runs WHERE status = 'running' ORDER BY run_id DESC")]
    return retrying(ledger, query) or []


def runs_by_sandbox(ledger: Path) -> dict[str, str]:
    """Sandbox id -> the run recorded in it, for every run that names one."""
    def query(conn: sqlite3.Connection) -> dict[str, str]:
        return {str(r[0]): str(r[1]) for r in conn.execute(
            "SELECT sandbox_id, run_id FROM runs WHERE sandbox_id IS NOT NULL")}
    return retrying(ledger, query) or {}
