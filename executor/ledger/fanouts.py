"""A fanout's own record, beside its children's run records in the ledger.

``<ledger>/fanouts/<fanout id>.json``, written atomically: when the fanout
starts (``running``, with the process that owns it and the run id every
child will have, so a fanout killed at any point still names its children),
and when it ends (``completed``, ``cancelled`` or ``failed``, with the conflict
matrix).
A ``running`` record whose owner is gone reads as ``crashed``
(:func:`fanout_status`), and ``corral gc`` writes that down
(:func:`finalize_crashed_fanouts`). Each child's own record carries the
fanout's id (``RunRecord.fanout``) and its check result.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

from executor.ledger.fanout_record import (
    FANOUTS,
    FanoutChild,
    FanoutRecord,
    FanoutStatus,
    read_fanout_file,
)
from executor.ledger.rebuild import indexed
from executor.ledger.records import RecordError, check_id_prefix, now_iso
from sandbox.state import owner_alive

__all__ = [
    "FanoutChild",
    "FanoutRecord",
    "FanoutStatus",
    "fanout_status",
    "finalize_crashed_fanouts",
    "find_fanout",
    "new_fanout_id",
    "read_fanout_file",
    "scan_fanouts",
    "write_fanout",
]

def new_fanout_id() -> str:
    """Time-sortable, unique, and never mistaken for a run id: ``f-20261130-120000-a1b2c3``."""
    return "f-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _path(ledger: Path, fanout_id: str) -> Path:
    return ledger / FANOUTS / f"{fanout_id}.json"


def write_fanout(ledger: Path, record: FanoutRecord) -> Path:
    """Write the record atomically (a synced temporary file, then a rename), then its row
    of the ledger's index (:mod:`executor.ledger.index`)."""
    directory = ledger / FANOUTS
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with indexed(ledger, fanout=record.fanout_id):
        return _write_fanout(ledger, directory, record)


def _write_fanout(ledger: Path, directory: Path, record: FanoutRecord) -> Path:
    final = _path(ledger, record.fanout_id)
    tmp = directory / f".{record.fanout_id}.{secrets.token_hex(4)}.tmp"
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=True,
                                    indent=2))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def scan_fanouts(ledger: Path) -> tuple[list[FanoutRecord], list[RecordError]]:
    """Every fanout record, newest first, and every one that cannot be read."""
    directory = ledger / FANOUTS
    if not directory.is_dir():
        return [], []
    found: list[FanoutRecord] = []
    broken: list[RecordError] = []
    for path in sorted(directory.glob("f-*.json"), reverse=True):
        try:
            found.append(read_fanout_file(path))
        except RecordError as exc:
            broken.append(exc)
    return found, broken


def find_fanout(ledger: Path, fanout_id: str) -> FanoutRecord:
    """The fanout whose id is ``fanout_id`` or starts with it (unambiguously)."""
    from executor.errors import ExecutorError  # noqa: PLC0415 - the error family of lookups

    check_id_prefix(fanout_id, "fanout id")
    if not fanout_id.startswith("f-"):
        raise ExecutorError(f"invalid fanout id {fanout_id!r}", code="unknown_run")
    directory = ledger / FANOUTS
    matches = sorted(p for p in directory.iterdir() if p.name.startswith(fanout_id)
                     and p.suffix == ".json") if directory.is_dir() else []
    if len(matches) != 1:
        why = "is ambiguous" if matches else "is not recorded"
        raise ExecutorError(f"fanout {fanout_id!r} {why} in {ledger}", code="unknown_run",
                            hint="`corral runs` lists the fanouts with their children")
    return read_fanout_file(matches[0])


def fanout_status(record: FanoutRecord) -> FanoutStatus:
    """``running`` only while its owner process lives; ``crashed`` once it is gone."""
    if record.status != "running":
        return record.status
    owner = record.owner or {}
    if owner_alive(str(owner.get("host", "")), owner.get("pid"), owner.get("started")):
        return "running"
    return "crashed"


def finalize_crashed_fanouts(state_root: Path) -> list[FanoutRecord]:
    """Write ``crashed`` into every running fanout record of ``state_root`` whose process
    died (``corral gc``; its children's records are finalised run by run)."""
    runs = state_root / "runs"
    done: list[FanoutRecord] = []
    for ledger in sorted(runs.iterdir()) if runs.is_dir() else []:
        if not ledger.is_dir() or ledger.name.startswith("."):
            continue
        for record in scan_fanouts(ledger)[0]:
            if record.status == "running" and fanout_status(record) == "crashed":
                crashed = record.model_copy(update={
                    "status": "crashed", "owner": None,
                    "finished_at": record.finished_at or now_iso(),
                    "notes": [*record.notes, "the process running the fanout died; each "
                              "child's record says how far it got (`corral gc` captured the "
                              "diffs of those that were running)"]})
                write_fanout(ledger, crashed)
                done.append(crashed)
    return done
