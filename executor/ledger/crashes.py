"""Runs whose process died: found in every ledger of a state dir, finalised by ``corral gc``.

A run writes a ``running`` record naming its owner process and, once it has
one, its sandbox (:mod:`executor.ledger.records`). When the owner is gone,
:func:`sandbox.gc.gc` cleans the abandoned sandbox and saves its diff under
``results/<sandbox id>/``; :func:`finalize_crashed_runs` then turns each such
record into a ``crashed`` one carrying that diff, so ``corral show``, ``diff``
and ``apply`` work on it by run id like on any other run. A sandbox gc kept
(its diff could not be captured) leaves its record as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from executor.ledger.listing import running_runs
from executor.ledger.records import RecordError, RunRecord, RunStatus, read_record, run_status
from executor.ledger.store import finalize_crashed
from sandbox.state import SandboxState

__all__ = ["CrashedRun", "finalize_crashed_runs"]


@dataclass(frozen=True)
class CrashedRun:
    """A run gc finalised: its record (now ``crashed``) and where the diff came from."""

    record: RunRecord
    ledger: Path
    patch: Path | None


def finalize_crashed_runs(state_root: Path) -> list[CrashedRun]:
    """Finalise every ``running`` record of ``state_root`` whose owner process is gone."""
    runs = state_root / "runs"
    done: list[CrashedRun] = []
    for ledger in sorted(runs.iterdir()) if runs.is_dir() else []:
        if not ledger.is_dir() or ledger.name.startswith("."):
            continue
        for run_id in running_runs(ledger):  # the index picks them; each file is read
            try:
                record = read_record(ledger / run_id / "record.json")
            except RecordError:
                continue
            if run_status(record) is not RunStatus.CRASHED or record.status is RunStatus.CRASHED:
                continue
            state = SandboxState(state_root, record.sandbox_id) if record.sandbox_id else None
            if state is not None and state.dir.exists():
                continue  # gc kept the sandbox (its diff is not captured yet): not final
            result = state.load_result() if state is not None else None
            if result is not None:
                crashed = finalize_crashed(
                    ledger, record, patch=result.patch,
                    changed_files=[c.model_dump(mode="json") for c in result.changed],
                    note="the process running it died; `corral gc` captured its diff from "
                    f"the abandoned sandbox {record.sandbox_id}")
            else:
                crashed = finalize_crashed(
                    ledger, record, patch=None, changed_files=[],
                    note="the process running it died" + (
                        " (a read-only run has no diff)" if record.mode == "read-only" else
                        " before any diff could be captured"))
            done.append(CrashedRun(crashed, ledger, state.patch_path if result and state
                                   else None))
    return done
