"""``corral gc --older-than DURATION``: what finished runs left, removed once it is old.

Plain ``corral gc`` cleans what *crashed* runs left (their sandboxes, with
their diffs captured first: :mod:`sandbox.gc`, :mod:`executor.ledger.crashes`) and
marks crashed fanouts. ``--older-than`` also removes what *finished* runs
left behind once they finished longer ago than DURATION:

- ``results/<sandbox id>/``: the diff a sandbox captured when it ended (or gc
  captured from it), a working copy of what the run's record holds. It is
  removed only when a run record of the state dir names that sandbox, is
  final (not ``running``, not a crash gc has not finalised yet), and holds its
  own diff, verified against the digest it stored: **a diff that was not
  captured in a record is never removed** (no record names it, the record is
  not final, or its patch does not verify: kept, and reported with why);
- the run's workspace: removed when the run ends (or by plain gc when it
  crashed), so a finished run has none left. Shared snapshots (a fanout's, or
  a top-level run's as root) stay idle after their last lease for the next run
  on the same state; gc removes those unused for DURATION
  (:func:`sandbox.workspaces.snapshot.collect_snapshots`, called with it).

Records themselves (``runs/``), applied or discarded, are never removed: they
are the diffs and their history.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from executor.errors import ExecutorError
from executor.ledger.listing import runs_by_sandbox
from executor.ledger.records import RecordError, RunRecord, RunStatus, read_record, run_status
from executor.ledger.store import load_patch

__all__ = ["Pruned", "parse_duration", "prune_finished"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


class BadDuration(ExecutorError):
    """A ``--older-than`` value that is not a duration (a user error, exit 2)."""

    code = "bad_duration"
    exit_code = 2


def parse_duration(text: str) -> float:
    """Seconds in ``30s``, ``10m``, ``12h``, ``7d``, ``2w`` or a sum (``1h30m``); ``0``."""
    value = text.strip().lower()
    if value == "0":
        return 0.0
    parts = _PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise BadDuration(f"--older-than: {text!r} is not a duration",
                          operation="parse_duration", context={"value": text},
                          hint="a number and a unit: 30s, 10m, 12h, 7d, 2w, or a sum such as "
                          "1h30m; 0 means everything finished")
    return float(sum(float(n) * _UNITS[u] for n, u in parts))


@dataclass(frozen=True)
class Pruned:
    """One thing ``--older-than`` looked at: removed, or kept and why."""

    path: Path
    action: Literal["removed", "kept"]
    run_id: str | None
    detail: str = ""


def _finished(record: RunRecord, fallback: Path) -> float:
    if record.finished_at:
        try:
            return datetime.fromisoformat(record.finished_at).timestamp()
        except ValueError:
            pass
    return fallback.stat().st_mtime


def _holds_diff(ledger: Path, record: RunRecord) -> bool:
    """Whether the record holds its own diff, verified against the digest it stored."""
    if record.diff_sha256 is None:
        return False
    return hashlib.sha256(load_patch(ledger, record.run_id)).hexdigest() == record.diff_sha256


def _recorded(found: tuple[Path, str] | None, sandbox_id: str) -> tuple[Path, RunRecord] | None:
    """The record the index says ran in ``sandbox_id``, read from its file (and naming
    that sandbox: a row changed by hand never removes a diff)."""
    if found is None:
        return None
    try:
        record = read_record(found[0] / found[1] / "record.json")
    except RecordError:
        return None
    return (found[0], record) if record.sandbox_id == sandbox_id else None


def prune_finished(state_root: Path, older_than: float, *,
                   now: float | None = None) -> list[Pruned]:
    """Remove what finished runs left, older than ``older_than`` seconds (see above)."""
    cutoff = (time.time() if now is None else now) - older_than
    by_sandbox: dict[str, tuple[Path, str]] = {}
    runs = state_root / "runs"
    for ledger in sorted(runs.iterdir()) if runs.is_dir() else []:
        if ledger.is_dir() and not ledger.name.startswith("."):
            for sandbox_id, run_id in runs_by_sandbox(ledger).items():
                by_sandbox[sandbox_id] = (ledger, run_id)
    done: list[Pruned] = []
    results = state_root / "results"
    for directory in sorted(results.iterdir()) if results.is_dir() else []:
        if not directory.is_dir():
            continue
        found = _recorded(by_sandbox.get(directory.name), directory.name)
        if found is None:
            if directory.stat().st_mtime <= cutoff:
                done.append(Pruned(directory, "kept", None, "no run record holds this diff; "
                                   "only a diff captured in a record is ever removed"))
            continue
        ledger, record = found
        status = run_status(record)
        if status is RunStatus.RUNNING:
            continue  # in use
        if _finished(record, directory) > cutoff:
            continue
        if status is RunStatus.CRASHED and record.status is RunStatus.RUNNING:
            done.append(Pruned(directory, "kept", record.run_id, "its run crashed and gc has "
                               "not handed this diff to its record yet"))
        elif record.mode != "read-only" and not _holds_diff(ledger, record):
            done.append(Pruned(directory, "kept", record.run_id, "its record does not hold a "
                               "diff that verifies; this copy may be the only one"))
        else:
            shutil.rmtree(directory)
            done.append(Pruned(directory, "removed", record.run_id,
                               "a copy of the diff its record holds"))
    return done
