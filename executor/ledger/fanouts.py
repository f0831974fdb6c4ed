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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    "scan_fanouts",
    "write_fanout",
]

#: ``failed``: the fanout itself stopped before every child ended (a second Ctrl-C, an
#: error of its own); each child's record says how far it got.
FanoutStatus = Literal["running", "completed", "cancelled", "failed", "crashed"]
FANOUTS = "fanouts"


class FanoutChild(BaseModel):
    """One child as planned: its place, run id, agent, and model or replay."""

    model_config = ConfigDict(extra="forbid")

    index: int
    run_id: str
    agent: str
    model: str | None = None
    script: str | None = None


class FanoutRecord(BaseModel):
    """What ``corral runs`` groups by and ``corral fanout --json`` reports."""

    model_config = ConfigDict(extra="forbid")

    fanout_id: str
    prompt: str
    created_at: str
    finished_at: str = ""
    status: FanoutStatus = "running"
    children: list[FanoutChild] = Field(default_factory=list)
    check_command: str | None = None
    jobs: int = 1
    timeout_seconds: float | None = None
    backend: str = ""
    #: The process running it while ``running``: host, pid, start time.
    owner: dict[str, Any] | None = None
    #: ``[run_a, run_b, [paths]]``: pairs whose diffs cannot both be applied.
    conflicts: list[list[Any]] = Field(default_factory=list)
    #: ``[run_a, run_b, [paths]]``: pairs that change the same files without conflicting
    #: (``corral apply --3way`` merges the second).
    same_files: list[list[Any]] = Field(default_factory=list)
    #: Snapshot commit -> the children that started from it (one key: one snapshot).
    bases: dict[str, list[str]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def new_fanout_id() -> str:
    """Time-sortable, unique, and never mistaken for a run id: ``f-20261130-120000-a1b2c3``."""
    return "f-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _path(ledger: Path, fanout_id: str) -> Path:
    return ledger / FANOUTS / f"{fanout_id}.json"


def write_fanout(ledger: Path, record: FanoutRecord) -> Path:
    """Write the record atomically (a synced temporary file, then a rename)."""
    directory = ledger / FANOUTS
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
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


def _read(path: Path) -> FanoutRecord:
    try:
        return FanoutRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise RecordError(
            f"the fanout record {path.stem} is corrupted: {reason}", operation="read_record",
            context={"record": str(path)},
            hint="its children's own records are not affected: `corral show RUN` reads each"
        ) from exc


def scan_fanouts(ledger: Path) -> tuple[list[FanoutRecord], list[RecordError]]:
    """Every fanout record, newest first, and every one that cannot be read."""
    directory = ledger / FANOUTS
    if not directory.is_dir():
        return [], []
    found: list[FanoutRecord] = []
    broken: list[RecordError] = []
    for path in sorted(directory.glob("f-*.json"), reverse=True):
        try:
            found.append(_read(path))
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
    return _read(matches[0])


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
