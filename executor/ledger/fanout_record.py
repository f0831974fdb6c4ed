"""A fanout's record as stored (``<ledger>/fanouts/<fanout id>.json``) and read back: the
model alone, so the ledger's index (:mod:`executor.ledger.index`) reads fanout records
without the module that writes them (:mod:`executor.ledger.fanouts`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from executor.ledger.records import RecordError

__all__ = ["FANOUTS", "FanoutChild", "FanoutRecord", "FanoutStatus", "read_fanout_file"]

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


def read_fanout_file(path: Path) -> FanoutRecord:
    """The fanout record in ``path`` (a :class:`RecordError` when it cannot be read)."""
    try:
        return FanoutRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise RecordError(
            f"the fanout record {path.stem} is corrupted: {reason}", operation="read_record",
            context={"record": str(path)},
            hint="its children's own records are not affected: `corral show RUN` reads each"
        ) from exc
