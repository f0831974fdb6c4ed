"""A run's record: what one run left behind, how it stands, and its id.

Every run writes one record: its id, the agent and its contract digest, the
backend and mode, the status (``completed``, ``failed``, ``denied``,
``timeout``, ``cancelled``, ``step_limit``, ``review_failed``), the final
text, the unified diff and changed files, the transcript (JSONL), the audit of
every tool call with its decision, the denied calls, usage, timings, resource
use and the response reviewers' verdicts.

A run writes its record twice before it ends: when it starts (``running``,
with the process that owns it) and once its sandbox exists (with the
sandbox's id). A process killed with SIGKILL therefore leaves a ``running``
record whose owner is gone, which :func:`run_status` shows as ``crashed``, and
``corral gc`` finalises it with the diff it captured from the abandoned sandbox
(:func:`executor.ledger.store.finalize_crashed`). What the user did with a run's
diff is its ``state``: ``pending``, ``applied``, ``discarded`` or ``superseded`` (a
fanout's sibling of an applied child whose diff conflicts with it). Where records are
kept and how they are written: :mod:`executor.ledger.store`.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from executor.errors import ExecutorError
from sandbox.state import owner_alive, owner_token

__all__ = [
    "ID_PREFIX",
    "RUN_STATES",
    "RecordError",
    "RunRecord",
    "RunState",
    "RunStatus",
    "check_id_prefix",
    "elapsed",
    "new_run_id",
    "now_iso",
    "read_record",
    "run_status",
    "running_owner",
]


class RunStatus(StrEnum):
    """How a run ended."""

    COMPLETED = "completed"
    FAILED = "failed"
    DENIED = "denied"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    #: Stopped by its step limit: the final text is the one text-only summary request.
    STEP_LIMIT = "step_limit"
    #: A response reviewer found the answer wanting (see ``reviews``).
    REVIEW_FAILED = "review_failed"
    #: Still going (its owner process is alive), or crashed (it is not).
    RUNNING = "running"
    #: The process died without finishing the record (``corral gc`` wrote this).
    CRASHED = "crashed"


#: What the user did with a run's diff.
RunState = Literal["pending", "applied", "discarded", "superseded"]
#: Every state, in the order listings and filters name them.
RUN_STATES: tuple[RunState, ...] = ("pending", "applied", "discarded", "superseded")


class RunRecord(BaseModel):
    """Everything one run left behind (the transcript is stored beside it as JSONL)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    parent_run: str | None = None
    agent: str
    agent_format: str
    agent_source: str
    contract_digest: str
    prompt: str
    model: str | None = None
    backend: str
    mode: str
    status: RunStatus
    error: dict[str, Any] | None = None
    final_text: str = ""
    diff: str = ""
    #: sha256 of the exact ``diff.patch`` bytes, written by :func:`write_run`; ``corral
    #: apply`` refuses a record whose patch does not match (None: a record from before).
    diff_sha256: str | None = None
    changed_files: list[dict[str, Any]] = Field(default_factory=list)
    excluded_files: list[dict[str, Any]] = Field(default_factory=list)
    #: Files whose setuid/setgid bits the sandbox cleared after the child ran.
    setid_cleared: list[str] = Field(default_factory=list)
    #: Agent and editor configuration a workspace-write child created, moved out of the
    #: checkout into ``held_dir`` (:mod:`sandbox.workspaces.held`).
    held_files: list[str] = Field(default_factory=list)
    held_dir: str | None = None
    audit: list[dict[str, Any]] = Field(default_factory=list)
    denied_calls: list[dict[str, str]] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    steps: int = 0
    started_at: str = ""
    finished_at: str = ""
    timings: dict[str, float] = Field(default_factory=dict)
    resources: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    #: ``--net allow``: the grant its commands had and every proxied connection (protocol,
    #: host, port, allowed, reason, address), ``denied`` counted.
    network: dict[str, Any] | None = None
    #: Response reviewers' checks of the answer: reviewer, run_id, verdict, text.
    reviews: list[dict[str, Any]] = Field(default_factory=list)
    #: The process running it, while ``status`` is ``running``: host, pid, start time.
    owner: dict[str, Any] | None = None
    #: The sandbox it runs in (its captured diff survives a crash under results/<id>).
    sandbox_id: str | None = None
    state: RunState = "pending"
    state_changed_at: str = ""
    #: ``superseded``: the sibling (of its fanout) whose apply made this diff conflict with
    #: the checkout.
    superseded_by: str | None = None
    #: The fanout that started it (``corral fanout``), if any.
    fanout: str | None = None
    #: The key of the environment it ran in (``corral env show KEY``), if any.
    environment: str | None = None
    #: The snapshot commit its diff is relative to (the same for every child of a fanout
    #: that started from one state of the checkout).
    base_commit: str | None = None
    #: A fanout's check command, run in its sandbox after its diff was recorded:
    #: command, exit_code, duration_seconds, timed_out, output_tail, output_bytes, skipped,
    #: error (``{"code", "message"}``: it could not run as asked; see executor.fanout.check).
    check: dict[str, Any] | None = None
    #: The kernel's OOM killer killed a process of one of its commands: the sandbox's
    #: memory cap (``[sandbox] memory``, ``--memory``) was reached. Its check's own OOM is
    #: ``check["oom_killed"]`` (an ``error``, never a failed test).
    oom_killed: bool = False
    #: What a read-only run's commands wrote into its throwaway layer (review commands,
    #: ``[review] commands``), all of it dropped: ``{"files": N, "bytes": N}``; ``None``:
    #: it had no such layer.
    discarded_writes: dict[str, int] | None = None
    #: The run this one continues (``corral run --continue RUN``): its conversation was
    #: this run's start, its diff is part of this run's (cumulative).
    continues: str | None = None
    #: The run that continued this one: its diff holds this one's (this one was then
    #: marked ``discarded``).
    continued_by: str | None = None
    #: Paths changed by hand (``corral shell``), not by the agent; their changes are in
    #: ``diff``. A continued run keeps the list of the run it continues.
    hand_changes: list[str] = Field(default_factory=list)


class RecordError(ExecutorError):
    """A run record that cannot be read (truncated, edited, from an incompatible corral):
    an infrastructure problem of the state dir, not the user's input."""

    code = "corrupted_record"
    exit_code = 3


def read_record(record_file: Path) -> RunRecord:
    """The run record in ``record_file`` (a :class:`RecordError` naming it when it cannot
    be read)."""
    try:
        return RunRecord.model_validate(json.loads(record_file.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSON and validation errors
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise RecordError(
            f"the run record {record_file.parent.name} is corrupted: {reason}",
            operation="read_record", context={"record": str(record_file)},
            hint="nothing can be shown or applied from it: restore the file from a backup, "
            "or delete its directory (the other runs are not affected)") from exc


def running_owner() -> dict[str, Any]:
    """The owner of a run started by this process."""
    host, pid, started = owner_token()
    return {"host": host, "pid": pid, "started": started}


def run_status(record: RunRecord) -> RunStatus:
    """How a run stands now: a ``running`` record whose owner process is gone (or was
    replaced by another process with its pid) is ``crashed``."""
    if record.status is not RunStatus.RUNNING:
        return record.status
    owner = record.owner or {}
    if owner_alive(str(owner.get("host", "")), owner.get("pid"), owner.get("started")):
        return RunStatus.RUNNING
    return RunStatus.CRASHED


def new_run_id() -> str:
    """Time-sortable and unique: ``20261129-153409-a1b2c3``."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def now_iso() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")



#: What a run or fanout id (or a prefix of one) may hold: never a glob, a path or a dot file.
ID_PREFIX = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")


def check_id_prefix(value: str, what: str = "run id") -> None:
    """Refuse anything but an id or a prefix of one (``*``, ``?``, ``[``, ``/``, ``..``)."""
    if not ID_PREFIX.fullmatch(value):
        raise ExecutorError(f"invalid {what} {value!r}: ids hold letters, digits, '-' and '_'",
                            code="unknown_run",
                            hint="give the id `corral runs` shows, an unambiguous start "
                            "of it, `last` (the newest run) or `last~N` (the N-th before)")



def elapsed(start: float) -> float:
    """Seconds since ``start`` (a ``time.monotonic()`` value), rounded."""
    return round(time.monotonic() - start, 4)


__all__ += ["elapsed", "now_iso"]
