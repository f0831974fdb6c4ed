"""What the API's ledger calls that change a run's state return: an apply, a branch, a
recovery, a discard (each with the run's :class:`~executor.api.RunResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.api.results import RunResult
from executor.apply import ApplyResult, BranchResult, PatchFile, PatchPlan

__all__ = ["ApplyReport", "BranchReport", "Discarded", "Recovered"]


@dataclass(frozen=True)
class Discarded:
    """A run marked discarded; ``already``: it was before."""

    run: RunResult
    already: bool

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def to_json(self) -> dict[str, Any]:
        """The discard as JSON (``corral discard --json``, MCP ``discard_run``)."""
        record = self.run.record
        data: dict[str, Any] = {"run_id": record.run_id, "state": record.state,
                                "already_discarded": self.already,
                                "changed_files": len(record.changed_files)}
        if record.mode == "workspace-write" and record.diff:
            data["note"] = ("its changes were made in the checkout (workspace-write) and "
                            "stay there: `git restore` undoes them")
        return data


@dataclass(frozen=True)
class Recovered:
    """An interrupted apply put back: the backup ``restored``, and where what the paths
    held just before was ``saved``."""

    run: RunResult
    restored: Path
    saved: Path

    def to_json(self) -> dict[str, Any]:
        """The recovery as JSON (``corral apply --recover --json``)."""
        return {"run_id": self.run.run_id, "status": "recovered",
                "restored": str(self.restored), "saved": str(self.saved)}


@dataclass(frozen=True)
class ApplyReport:
    """An apply (or its check): the run, what its diff changes (``plan``, with each file's
    review flags), what was done (``result``: ``applied``, ``checked``,
    ``already_applied`` or ``conflicts``; files merged three ways; the backup), and the
    siblings of a fanout's child that its apply marked ``superseded`` (their diffs
    conflict with it: :mod:`executor.ledger.siblings`)."""

    run: RunResult
    plan: PatchPlan
    result: ApplyResult
    superseded: tuple[RunResult, ...] = ()

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def state(self) -> str:
        """The run's state after it (``applied`` once the checkout changed)."""
        return self.run.state

    @property
    def merged(self) -> list[str]:
        """Files merged three ways."""
        return self.result.merged

    @property
    def conflicts(self) -> list[str]:
        """Files left with conflict markers (status ``conflicts``)."""
        return self.result.conflicts

    @property
    def backup(self) -> Path | None:
        """The backup of the files as they were before (``None``: nothing was written)."""
        return self.result.backup

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def applied(self) -> bool:
        """Whether the checkout changed (with conflict markers for ``conflicts``)."""
        return self.result.status in ("applied", "conflicts")

    @property
    def files(self) -> list[PatchFile]:
        return self.plan.files

    @property
    def flagged(self) -> list[PatchFile]:
        """Files flagged for review (they need ``yes``)."""
        return self.plan.flagged

    def to_json(self) -> dict[str, Any]:
        """What was checked or applied, as JSON (MCP ``apply_run``'s core)."""
        result = self.result
        return {
            "run_id": self.run.run_id, "status": result.status, "applied": self.applied,
            "files": [{"path": f.path, "status": f.status, "old_path": f.old_path,
                       "flags": list(f.flags)} for f in self.plan.files],
            "flagged": [f.path for f in self.plan.flagged], "merged": result.merged,
            "conflicts": result.conflicts,
            "backup": str(result.backup) if result.backup is not None else None,
            "state": self.run.state,
            "superseded": [r.run_id for r in self.superseded]}


@dataclass(frozen=True)
class BranchReport:
    """A run's diff kept as a branch (``Corral.branch``): the run, its judged ``plan`` (with
    each file's review flags) and the branch made (``result``: name, commit, parent)."""

    run: RunResult
    plan: PatchPlan
    result: BranchResult

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def branch(self) -> str:
        return self.result.branch

    @property
    def commit(self) -> str:
        return self.result.commit

    @property
    def parent(self) -> str:
        """The commit the branch starts from (``HEAD`` when it was made)."""
        return self.result.parent

    @property
    def files(self) -> list[PatchFile]:
        return self.plan.files

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run.run_id, "branch": self.result.branch,
                "commit": self.result.commit, "parent": self.result.parent,
                "files": [{"path": f.path, "status": f.status, "flags": list(f.flags)}
                          for f in self.plan.files]}
