"""The ledger's index: one SQLite database beside the record files, read by every listing.

``.index-<ledger name>/index.sqlite`` beside the ledger (stdlib :mod:`sqlite3`, WAL) holds
one row per run and per fanout with the columns listings filter and sort on
(:mod:`executor.ledger.listing`),
and one per record that cannot be read. **The record files stay the truth**: a row is
only ever made from a record file, the index can be deleted at any time, and ``corral
show``/``diff``/``apply`` read the record itself (an index row only picks which one).

How it stays exact:

- **a write** (:func:`executor.ledger.rebuild.indexed`) leaves a marker in its
  ``pending/`` naming the run (or fanout) and the process, writes the record (atomic
  rename), then re-reads the record file inside one short ``BEGIN IMMEDIATE`` transaction
  and upserts its row: whatever order concurrent writers of one run finish in, the last
  transaction holds the file that is there now. Only then is the marker removed; a write
  whose index update failed (locked past the busy timeout, an unusable index) leaves its
  marker to a reader;
- **a crash** between record and index (SIGKILL at any step) leaves the marker of a dead
  process: the next reader re-reads that record and removes the marker
  (:func:`executor.ledger.rebuild.reading`);
- **files changed by something else** (another corral without this index, a record
  directory removed by hand) move the ledger directory's mtime away from the one the
  index stored, and the next reader with no write in progress syncs the rows with the
  directory's names (new ids read, vanished ones dropped). A record edited in place by
  hand is not seen this way: ``corral ledger reindex`` rebuilds everything;
- **an index that is missing, truncated, corrupt or of another schema version** is
  rebuilt from the files (:func:`executor.ledger.rebuild.rebuild`) before anything is
  read from it; a healthy one is rebuilt in place, keeping rows a writer refreshed
  while the files were scanned.

Writers never hold a transaction longer than one record's read; readers never wait for
writers (WAL).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.ledger.fanout_record import FANOUTS, FanoutRecord, read_fanout_file
from executor.ledger.records import ID_PREFIX, RecordError, RunRecord, read_record
from sandbox.state import owner_alive

__all__ = ["SCHEMA_VERSION", "Progress", "index_dir", "refresh"]

_DB = "index.sqlite"
_PENDING = "pending"
SCHEMA_VERSION = 2
#: How long a writer waits for another's transaction (they last one record's read).
BUSY_SECONDS = 30.0

#: ``(done, total)`` records read while rebuilding.
Progress = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY, fanout TEXT, parent TEXT, agent TEXT NOT NULL,
  status TEXT NOT NULL, state TEXT NOT NULL, started TEXT NOT NULL, finished TEXT NOT NULL,
  backend TEXT NOT NULL, mode TEXT NOT NULL, node TEXT, model TEXT, prompt TEXT NOT NULL,
  files INTEGER NOT NULL, has_diff INTEGER NOT NULL, check_outcome TEXT,
  continued_by TEXT, sandbox_id TEXT, owner TEXT, mtime INTEGER NOT NULL,
  seq INTEGER NOT NULL);
CREATE INDEX runs_started ON runs (started DESC, run_id DESC);
CREATE INDEX runs_fanout ON runs (fanout, started DESC);
CREATE INDEX runs_agent ON runs (agent, started DESC);
CREATE INDEX runs_status ON runs (status, started DESC);
CREATE INDEX runs_sandbox ON runs (sandbox_id);
CREATE TABLE fanouts (
  fanout_id TEXT PRIMARY KEY, status TEXT NOT NULL, created TEXT NOT NULL,
  finished TEXT NOT NULL, prompt TEXT NOT NULL, check_command TEXT, backend TEXT NOT NULL,
  children INTEGER NOT NULL, data TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX fanouts_created ON fanouts (created DESC, fanout_id DESC);
CREATE INDEX fanouts_status ON fanouts (status);
CREATE TABLE broken (
  kind TEXT NOT NULL, id TEXT NOT NULL, error TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (kind, id));
"""

RUN_COLUMNS = ("run_id", "fanout", "parent", "agent", "status", "state", "started",
               "finished", "backend", "mode", "node", "model", "prompt", "files", "has_diff",
               "check_outcome", "continued_by", "sandbox_id", "owner", "mtime")
_RAN_ON = re.compile(r"ran on Ray (\S+)")
#: Characters of a prompt's start a row keeps (a listing shows fewer).
PROMPT_CHARS = 200


class _Unusable(Exception):
    """The index cannot be used as it is: missing, corrupt, another version, incomplete."""


def index_dir(ledger: Path) -> Path:
    """Where the index of ``ledger`` lives: ``.index-<name>`` beside it (never inside it: the
    ledger directory holds run directories and ``fanouts/`` only), with ``pending/``
    markers and ``staging/``, where a run's directory is written before its rename."""
    return ledger.parent / f".index-{ledger.name}"


_index_dir = index_dir


def _db(ledger: Path) -> Path:
    return _index_dir(ledger) / _DB


def _connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode={'rwc' if create else 'rw'}", uri=True,
                           timeout=BUSY_SECONDS, isolation_level=None,
                           check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError as exc:
        raise _Unusable(str(exc)) from exc
    if meta.get("version") != str(SCHEMA_VERSION):
        raise _Unusable(f"schema version {meta.get('version')!r}")
    return meta


def _mtimes(ledger: Path) -> tuple[int, int]:
    """The ledger directory's and its fanouts directory's mtimes (0: not there)."""
    found = []
    for path in (ledger, ledger / FANOUTS):
        try:
            found.append(path.stat().st_mtime_ns)
        except OSError:
            found.append(0)
    return found[0], found[1]


def _prompt_head(prompt: str) -> str:
    """The prompt's start as a listing shows it: whitespace (line breaks too) collapsed."""
    return " ".join(prompt[:PROMPT_CHARS * 4].split())[:PROMPT_CHARS]


def _check_outcome(check: dict[str, Any] | None) -> str | None:
    if not check:
        return None
    if check.get("error"):
        return "error"
    if check.get("skipped"):
        return "skipped"
    if check.get("timed_out"):
        return "timed out"
    return "passed" if check.get("exit_code") == 0 else "failed"


def _node(record: RunRecord) -> str | None:
    for note in record.notes:
        found = _RAN_ON.search(note)
        if found:
            return found.group(1)
    return None


def run_row(record: RunRecord, mtime: int) -> tuple[Any, ...]:
    """The row of one run record (:data:`RUN_COLUMNS`); ``mtime``: its file's, in ns (a
    listing re-reads a record whose file changed since: :mod:`executor.ledger.listing`)."""
    return (record.run_id, record.fanout, record.parent_run, record.agent,
            record.status.value, record.state, record.started_at, record.finished_at,
            record.backend, record.mode, _node(record), record.model,
            _prompt_head(record.prompt), len(record.changed_files), int(bool(record.diff)),
            _check_outcome(record.check), record.continued_by, record.sandbox_id,
            json.dumps(record.owner) if record.owner else None, mtime)


def _fanout_row(record: FanoutRecord) -> tuple[Any, ...]:
    return (record.fanout_id, record.status, record.created_at, record.finished_at,
            _prompt_head(record.prompt), record.check_command, record.backend,
            len(record.children), record.model_dump_json())


def _error_json(exc: RecordError) -> str:
    return json.dumps({"message": exc.message, "operation": exc.operation,
                       "context": exc.context, "hint": exc.hint}, ensure_ascii=True,
                      default=str)


def broken_error(text: str) -> RecordError:
    """The :class:`RecordError` a ``broken`` row stands for."""
    data = json.loads(text)
    return RecordError(data["message"], operation=data.get("operation"),
                       context=data.get("context") or {}, hint=data.get("hint"))


# -- one record into the index ----------------------------------------------------------

def _put_run(conn: sqlite3.Connection, ledger: Path, run_id: str, seq: int) -> None:
    """The row of run ``run_id`` as its file is now (none, or broken)."""
    path = ledger / run_id / "record.json"
    conn.execute("DELETE FROM broken WHERE kind = 'run' AND id = ?", (run_id,))
    if not path.is_file():
        conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        return
    try:
        mtime = path.stat().st_mtime_ns
        record = read_record(path)
    except RecordError as exc:
        conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        conn.execute("INSERT INTO broken VALUES ('run', ?, ?, ?)",
                     (run_id, _error_json(exc), seq))
        return
    _insert_runs(conn, [run_row(record, mtime)], seq)


def _insert_runs(conn: sqlite3.Connection, rows: Iterable[tuple[Any, ...]], seq: int) -> None:
    marks = ", ".join("?" * (len(RUN_COLUMNS) + 1))
    conn.executemany(f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}, seq) "  # noqa: S608 - fixed column names
                     f"VALUES ({marks})", ((*row, seq) for row in rows))


def _put_fanout(conn: sqlite3.Connection, ledger: Path, fanout_id: str, seq: int) -> None:
    path = ledger / FANOUTS / f"{fanout_id}.json"
    conn.execute("DELETE FROM broken WHERE kind = 'fanout' AND id = ?", (fanout_id,))
    conn.execute("DELETE FROM fanouts WHERE fanout_id = ?", (fanout_id,))
    if not path.is_file():
        return
    try:
        record = read_fanout_file(path)
    except RecordError as exc:
        conn.execute("INSERT INTO broken VALUES ('fanout', ?, ?, ?)",
                     (fanout_id, _error_json(exc), seq))
        return
    conn.execute("INSERT INTO fanouts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (*_fanout_row(record), seq))


def _set_meta(conn: sqlite3.Connection, **values: object) -> None:
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                     [(key, str(value)) for key, value in values.items()])


def _refresh_in(conn: sqlite3.Connection, ledger: Path, runs: Iterable[str],
                fanouts: Iterable[str], before: tuple[int, int] | None) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        meta = _meta(conn)
        seq = int(meta.get("write_seq", "0")) + 1
        for run_id in runs:
            _put_run(conn, ledger, run_id, seq)
        for fanout_id in fanouts:
            _put_fanout(conn, ledger, fanout_id, seq)
        update: dict[str, object] = {"write_seq": seq}
        stored = (int(meta.get("ledger_mtime", "0")), int(meta.get("fanouts_mtime", "0")))
        if before is not None and stored == before:
            # Only this write changed the directories since the index was last exact.
            update |= dict(zip(("ledger_mtime", "fanouts_mtime"), _mtimes(ledger),
                               strict=True))
        _set_meta(conn, **update)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def refresh(ledger: Path, *, runs: Iterable[str] = (), fanouts: Iterable[str] = (),
            before: tuple[int, int] | None = None) -> bool:
    """Re-read these records' files into their rows, in one short transaction; whether the
    index took them (False: it is missing, unusable or stayed locked: a reader repairs it).
    ``before``: the directories' mtimes before this write (:func:`indexed`)."""
    path = _db(ledger)
    if not path.is_file():
        return False
    try:
        conn = _connect(path)
    except sqlite3.Error:
        return False
    try:
        _refresh_in(conn, ledger, list(runs), list(fanouts), before)
        return True
    except (sqlite3.Error, _Unusable):
        return False
    finally:
        conn.close()


# -- markers ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Marker:
    path: Path
    kind: str
    id: str
    alive: bool


def _markers(ledger: Path) -> list[_Marker]:
    pending = _index_dir(ledger) / _PENDING
    try:
        names = os.listdir(pending)  # noqa: PTH208 - names only
    except OSError:
        return []
    found = []
    for name in names:
        parts = name.split("~")
        if len(parts) != 3 or parts[0] not in ("run", "fanout") \
                or not ID_PREFIX.fullmatch(parts[1]):
            continue
        try:
            owner = json.loads((pending / name).read_text())
        except (OSError, ValueError):
            owner = {}
        alive = isinstance(owner, dict) and owner_alive(
            str(owner.get("host", "")), owner.get("pid"), owner.get("started"))
        found.append(_Marker(pending / name, parts[0], parts[1], alive))
    return found


def _repair(ledger: Path, conn: sqlite3.Connection, markers: list[_Marker]) -> None:
    """The rows of writes whose process died (or whose index update failed), from their
    files now; their markers removed."""
    dead = [m for m in markers if not m.alive]
    if not dead:
        return
    _refresh_in(conn, ledger, {m.id for m in dead if m.kind == "run"},
                {m.id for m in dead if m.kind == "fanout"}, None)
    for marker in dead:
        marker.path.unlink(missing_ok=True)


__all__ += ["PROMPT_CHARS", "RUN_COLUMNS", "broken_error", "run_row"]
