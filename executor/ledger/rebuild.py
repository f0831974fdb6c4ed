"""The ledger's index made exact again: rebuilt from the record files, synced with the
directory's names, and opened for reading only once it holds what the files hold (see
:mod:`executor.ledger.index` for how it stays so)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.ledger.fanout_record import FANOUTS, read_fanout_file
from executor.ledger.index import (
    _DB,
    _PENDING,
    _SCHEMA,
    SCHEMA_VERSION,
    Progress,
    _connect,
    _db,
    _error_json,
    _fanout_row,
    _index_dir,
    _insert_runs,
    _markers,
    _meta,
    _mtimes,
    _put_fanout,
    _put_run,
    _repair,
    _set_meta,
    _Unusable,
    refresh,
    run_row,
)
from executor.ledger.records import ID_PREFIX, RecordError, read_record
from sandbox.state import owner_token

__all__ = ["indexed", "reading", "rebuild", "retrying"]

# -- rebuild and sync ------------------------------------------------------------------

def _names(ledger: Path) -> tuple[set[str], set[str]]:
    """The run ids and fanout ids the directories hold (names only: nothing is read)."""
    runs = {name for name in os.listdir(ledger)  # noqa: PTH208 - 100k names, no Paths
            if name != FANOUTS and ID_PREFIX.fullmatch(name)} if ledger.is_dir() else set()
    directory = ledger / FANOUTS
    fanouts = {name[:-5] for name in os.listdir(directory)  # noqa: PTH208
               if name.startswith("f-") and name.endswith(".json")
               and ID_PREFIX.fullmatch(name[:-5])} if directory.is_dir() else set()
    return runs, fanouts


def _sync(ledger: Path, conn: sqlite3.Connection) -> None:
    """Rows for names the directories hold and the index does not, none for names they
    no longer hold; the directories' mtimes stored."""
    before = _mtimes(ledger)
    runs, fanouts = _names(ledger)
    indexed_runs = {row[0] for row in conn.execute("SELECT run_id FROM runs")} | {
        row[0] for row in conn.execute("SELECT id FROM broken WHERE kind = 'run'")}
    indexed_fanouts = {row[0] for row in conn.execute("SELECT fanout_id FROM fanouts")} | {
        row[0] for row in conn.execute("SELECT id FROM broken WHERE kind = 'fanout'")}
    conn.execute("BEGIN IMMEDIATE")
    try:
        seq = int(_meta(conn).get("write_seq", "0")) + 1
        for run_id in runs ^ indexed_runs:
            _put_run(conn, ledger, run_id, seq)
        for fanout_id in fanouts ^ indexed_fanouts:
            _put_fanout(conn, ledger, fanout_id, seq)
        _set_meta(conn, write_seq=seq, ledger_mtime=before[0], fanouts_mtime=before[1])
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


@dataclass
class _Scan:
    runs: list[tuple[Any, ...]]
    fanouts: list[tuple[Any, ...]]
    broken: list[tuple[str, str, str]]


def _scan(ledger: Path, progress: Progress | None) -> _Scan:
    runs, fanouts = _names(ledger)
    total, done = len(runs) + len(fanouts), 0
    scan = _Scan([], [], [])
    for run_id in sorted(runs):
        path = ledger / run_id / "record.json"
        if path.is_file():
            try:
                mtime = path.stat().st_mtime_ns
                scan.runs.append(run_row(read_record(path), mtime))
            except RecordError as exc:
                scan.broken.append(("run", run_id, _error_json(exc)))
        done += 1
        if progress is not None and (done % 200 == 0 or done == total):
            progress(done, total)
    for fanout_id in sorted(fanouts):
        try:
            scan.fanouts.append(_fanout_row(read_fanout_file(
                ledger / FANOUTS / f"{fanout_id}.json")))
        except RecordError as exc:
            scan.broken.append(("fanout", fanout_id, _error_json(exc)))
        done += 1
        if progress is not None and (done % 200 == 0 or done == total):
            progress(done, total)
    return scan


def _fill(conn: sqlite3.Connection, scan: _Scan, start: int) -> None:
    """Replace every row not refreshed by a writer since ``start`` with the scanned one."""
    recent_runs = {r[0] for r in conn.execute("SELECT run_id FROM runs WHERE seq > ?",
                                              (start,))}
    recent_runs |= {r[0] for r in conn.execute(
        "SELECT id FROM broken WHERE kind = 'run' AND seq > ?", (start,))}
    recent_fanouts = {r[0] for r in conn.execute(
        "SELECT fanout_id FROM fanouts WHERE seq > ?", (start,))}
    recent_fanouts |= {r[0] for r in conn.execute(
        "SELECT id FROM broken WHERE kind = 'fanout' AND seq > ?", (start,))}
    for table in ("runs", "fanouts", "broken"):
        conn.execute(f"DELETE FROM {table} WHERE seq <= ?", (start,))  # noqa: S608 - fixed names
    _insert_runs(conn, (row for row in scan.runs if row[0] not in recent_runs), start)
    conn.executemany("INSERT OR REPLACE INTO fanouts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     ((*row, start) for row in scan.fanouts if row[0] not in recent_fanouts))
    conn.executemany("INSERT OR REPLACE INTO broken VALUES (?, ?, ?, ?)",
                     ((*row, start) for row in scan.broken
                      if row[1] not in (recent_runs if row[0] == "run" else recent_fanouts)))


def _fresh(ledger: Path, scan: _Scan, mtimes: tuple[int, int]) -> None:
    """A new index file from ``scan``, renamed in place of whatever was there."""
    directory = _index_dir(ledger)
    tmp = directory / f".{_DB}.{secrets.token_hex(4)}.tmp"
    try:
        conn = _connect(tmp, create=True)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN")
            _fill(conn, scan, 0)
            _set_meta(conn, version=SCHEMA_VERSION, complete=1, write_seq=0,
                      ledger_mtime=mtimes[0], fanouts_mtime=mtimes[1])
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        for suffix in ("-wal", "-shm"):  # an old database's log must never meet the new one
            (directory / f"{_DB}{suffix}").unlink(missing_ok=True)
        tmp.replace(directory / _DB)
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def rebuild(ledger: Path, *, progress: Progress | None = None) -> int:
    """Rebuild the index from the record files (one rebuild at a time); the number of
    rows it holds. A healthy index is rebuilt in place (writers keep going); one that
    cannot be used is replaced by a new file."""
    directory = _index_dir(ledger)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    (directory / _PENDING).mkdir(exist_ok=True, mode=0o700)
    with (directory / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        mtimes = _mtimes(ledger)
        conn: sqlite3.Connection | None = None
        try:
            conn = _connect(_db(ledger))
            start = int(_meta(conn).get("write_seq", "0"))
        except (sqlite3.Error, _Unusable):
            if conn is not None:
                conn.close()
            conn = None
        try:
            scan = _scan(ledger, progress)
            if conn is None:
                _fresh(ledger, scan, mtimes)
            else:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    _fill(conn, scan, start)
                    _set_meta(conn, complete=1, ledger_mtime=mtimes[0],
                              fanouts_mtime=mtimes[1])
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.DatabaseError:  # it broke while being filled: start again afresh
            if conn is not None:
                conn.close()
                conn = None
            _fresh(ledger, _scan(ledger, None), mtimes)
        finally:
            if conn is not None:
                conn.close()
        check = _connect(_db(ledger))
        try:
            _repair(ledger, check, _markers(ledger))
            return int(check.execute("SELECT (SELECT count(*) FROM runs) + "
                                     "(SELECT count(*) FROM fanouts)").fetchone()[0])
        finally:
            check.close()


def _open(ledger: Path) -> sqlite3.Connection:
    conn = _connect(_db(ledger))
    try:
        meta = _meta(conn)
        if meta.get("complete") != "1":
            raise _Unusable("incomplete")
        markers = _markers(ledger)
        _repair(ledger, conn, markers)
        stored = (int(meta.get("ledger_mtime", "0")), int(meta.get("fanouts_mtime", "0")))
        if stored != _mtimes(ledger) and not any(m.alive for m in markers):
            _sync(ledger, conn)
        return conn
    except BaseException:
        conn.close()
        raise


@contextlib.contextmanager
def reading(ledger: Path) -> Iterator[sqlite3.Connection | None]:
    """A connection to an index that holds every record the files hold (rebuilt first
    when it is missing, unusable or older than the files); ``None``: no ledger yet."""
    if not ledger.is_dir():
        yield None
        return
    try:
        conn = _open(ledger)
    except (sqlite3.Error, _Unusable, OSError):
        rebuild(ledger)
        conn = _open(ledger)
    try:
        yield conn
    finally:
        conn.close()


def retrying(ledger: Path, query: Callable[[sqlite3.Connection], Any]) -> Any:
    """``query(conn)`` on a fresh index; once more after a rebuild when the index turns out
    corrupt while being read."""
    try:
        with reading(ledger) as conn:
            return None if conn is None else query(conn)
    except sqlite3.DatabaseError:
        rebuild(ledger)
        with reading(ledger) as conn:
            return None if conn is None else query(conn)


@contextlib.contextmanager
def indexed(ledger: Path, *, run: str | None = None, fanout: str | None = None
            ) -> Iterator[None]:
    """Around one write of a record: its marker first, its row after (see the module
    docstring); a process killed inside leaves the marker for the next reader."""
    pending = _index_dir(ledger) / _PENDING
    pending.mkdir(parents=True, exist_ok=True, mode=0o700)
    kind, name = ("run", run) if run is not None else ("fanout", str(fanout))
    host, pid, started = owner_token()
    marker = pending / f"{kind}~{name}~{secrets.token_hex(4)}"
    marker.write_text(json.dumps({"host": host, "pid": pid, "started": started}))
    before = _mtimes(ledger)
    try:
        yield
    finally:
        done = refresh(ledger, runs=[name] if kind == "run" else [],
                       fanouts=[name] if kind == "fanout" else [], before=before)
        if not done and not _db(ledger).exists():
            rebuild(ledger)  # a new ledger's first write (or its index deleted): made now
            done = True  # its scan read this write's record
        if done:
            marker.unlink(missing_ok=True)
        else:
            marker.write_text("{}")  # nobody owns it now: the next reader repairs it
