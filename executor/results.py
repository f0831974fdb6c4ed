"""Run records and the run ledger.

Every run writes one record: its id, the agent and its contract digest, the
backend and mode, the status (``completed``, ``failed``, ``denied``,
``timeout``, ``cancelled``), the final text, the unified diff and changed
files, the transcript (JSONL), the audit of every tool call with its decision,
the denied calls, usage, timings and resource use.

The ledger lives under the repository's common git dir
(``.git/corral/runs/<id>/``), so it is never part of the working tree and
never shows in ``git status``; outside a git repository it lives in the user
cache dir (``$XDG_CACHE_HOME/corral/runs/<hash of the root>/``). A record is
written atomically: into a temporary directory next to its final place,
fsynced, then renamed, so a reader never sees half a record.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from executor.errors import ExecutorError
from executor.models.base import Message

__all__ = [
    "RunRecord",
    "RunStatus",
    "find_run",
    "ledger_dir",
    "list_runs",
    "load_transcript",
    "new_run_id",
    "write_run",
]


class RunStatus(StrEnum):
    """How a run ended."""

    COMPLETED = "completed"
    FAILED = "failed"
    DENIED = "denied"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


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
    changed_files: list[dict[str, Any]] = Field(default_factory=list)
    excluded_files: list[dict[str, Any]] = Field(default_factory=list)
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


def new_run_id() -> str:
    """Time-sortable and unique: ``20261129-153409-a1b2c3``."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def now_iso() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _git_common_dir(root: Path) -> Path | None:
    """The common git dir of the repository containing ``root``, read from files only
    (no git process: nothing in the repository's config can run)."""
    for directory in (root, *root.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = Path(text.removeprefix("gitdir:").strip())
            gitdir = gitdir if gitdir.is_absolute() else directory / gitdir
            common = gitdir / "commondir"
            if common.is_file():
                rel = Path(common.read_text(encoding="utf-8").strip())
                return (rel if rel.is_absolute() else gitdir / rel).resolve()
            return gitdir
    return None


def ledger_dir(root: Path, *, env: dict[str, str] | None = None) -> Path:
    """Where the runs of the repository at ``root`` are recorded."""
    env = dict(os.environ) if env is None else env
    common = _git_common_dir(root.resolve())
    if common is not None:
        return common / "corral" / "runs"
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path(
        env.get("HOME", str(Path.home()))) / ".cache"
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return cache / "corral" / "runs" / digest


def _message_json(message: Message) -> dict[str, Any]:
    return {
        "role": message.role, "content": message.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                        **({"raw_arguments": c.raw_arguments} if c.raw_arguments else {})}
                       for c in message.tool_calls],
        "tool_call_id": message.tool_call_id, "name": message.name,
        "is_error": message.is_error,
    }


def _write(path: Path, data: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_run(ledger: Path, record: RunRecord, transcript: list[Message]) -> Path:
    """Write the record atomically; return its directory."""
    ledger.mkdir(parents=True, exist_ok=True)
    final = ledger / record.run_id
    staging = ledger / f".tmp-{record.run_id}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        _write(staging / "transcript.jsonl",
               "".join(json.dumps(_message_json(m), ensure_ascii=False) + "\n"
                       for m in transcript))
        _write(staging / "diff.patch", record.diff)
        _write(staging / "record.json", record.model_dump_json(indent=2))
        if final.exists():  # a re-write (a retained child's follow-up): replace whole
            old = ledger / f".old-{record.run_id}-{secrets.token_hex(4)}"
            final.rename(old)
            staging.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def list_runs(ledger: Path) -> list[RunRecord]:
    """Every complete record, newest first."""
    if not ledger.is_dir():
        return []
    records = []
    for entry in sorted(ledger.iterdir(), reverse=True):
        record_file = entry / "record.json"
        if entry.name.startswith(".") or not record_file.is_file():
            continue
        records.append(RunRecord.model_validate_json(record_file.read_text(encoding="utf-8")))
    return records


def find_run(ledger: Path, run_id: str) -> RunRecord:
    """The record whose id is ``run_id`` or starts with it (unambiguously)."""
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ExecutorError(f"invalid run id {run_id!r}", code="unknown_run")
    matches = [e for e in ledger.glob(f"{run_id}*") if (e / "record.json").is_file()] \
        if ledger.is_dir() else []
    if not matches:
        raise ExecutorError(f"no run {run_id!r} in {ledger}", code="unknown_run",
                            hint="`corral runs` lists the recorded runs")
    if len(matches) > 1:
        names = ", ".join(sorted(m.name for m in matches))
        raise ExecutorError(f"run id {run_id!r} is ambiguous: {names}", code="unknown_run")
    return RunRecord.model_validate_json((matches[0] / "record.json").read_text(
        encoding="utf-8"))


def load_transcript(ledger: Path, run_id: str) -> list[dict[str, Any]]:
    """The transcript of a run, one dict per message."""
    path = ledger / run_id / "transcript.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def elapsed(start: float) -> float:
    """Seconds since ``start`` (a ``time.monotonic()`` value), rounded."""
    return round(time.monotonic() - start, 4)


__all__ += ["elapsed", "now_iso"]
