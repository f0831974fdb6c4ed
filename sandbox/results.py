"""What the sandbox hands back: command results, diffs, teardown and gc reports.

All frozen pydantic models, JSON-ready for the run ledger (the patch itself is
bytes and is persisted next to the JSON, never inside it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sandbox.errors import CommandTimeout

__all__ = [
    "ChangeStatus",
    "ChangedFile",
    "DiffResult",
    "ExcludedPath",
    "ExcludedReason",
    "ExecResult",
    "GcEntry",
    "GcReport",
    "TeardownReport",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ExecResult(BaseModel):
    """The outcome of one command, identical in shape on every backend.

    A timeout gives ``timed_out=True`` and ``exit_code=None`` everywhere; a
    command stopped by :meth:`Sandbox.stop_processes` gives ``stopped=True``.
    ``stdout``/``stderr`` hold at most the output cap; ``*_bytes`` count what
    the command really wrote (the rest was drained, never left in the pipe).
    Resource figures are ``None`` where a backend cannot measure them.
    """

    model_config = _FROZEN

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int
    timed_out: bool = False
    stopped: bool = False
    duration_seconds: float
    #: Largest resident set of any process of the command, from ``wait4`` (on bubblewrap
    #: and docker it includes the warm supervisor's, which the command inherits at exec).
    peak_rss_bytes: int | None = None
    cpu_seconds: float | None = None
    #: Processes the command left running when it ended (``pid comm``, as the sandbox saw
    #: them), every one of them killed before the result was returned.
    killed: tuple[str, ...] = ()
    #: The kernel's OOM killer killed a process of the command: the sandbox's memory cap
    #: (``limits.memory_bytes``) was reached (bubblewrap's memory cgroup, docker's container).
    oom_killed: bool = False

    @property
    def truncated(self) -> bool:
        """Whether either stream was cut at the output cap."""
        return self.stdout_bytes > len(self.stdout) or self.stderr_bytes > len(self.stderr)

    @property
    def ok(self) -> bool:
        """Exit code 0, not timed out, not stopped."""
        return self.exit_code == 0 and not self.timed_out and not self.stopped

    def check(self) -> ExecResult:
        """Raise :class:`CommandTimeout` when the command timed out; return ``self``."""
        if self.timed_out:
            raise CommandTimeout(
                f"command timed out after {self.duration_seconds:.1f}s: {self.argv[0]}",
                operation="exec",
                context={"argv": " ".join(self.argv)[:200]},
                hint="raise the timeout, or make the command finish sooner",
            )
        return self


ChangeStatus = Literal["added", "modified", "deleted", "renamed", "type_changed"]
ExcludedReason = Literal[
    "nested_repository", "protected_name", "special_file", "gitlink", "too_deep", "unreadable"
]


class ChangedFile(BaseModel):
    """One path in a diff, with the facts a reviewer needs before merging."""

    model_config = _FROZEN

    path: str
    status: ChangeStatus
    old_path: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False
    #: Review flags: ``symlink``, ``executable``, ``mode_change``, one per row of
    #: :data:`sandbox.names.REVIEW_RULES` (``agent_config``, ``ci_config``,
    #: ``build_script``, ``runs_on_open``, ...), and ``setid_cleared`` (the child
    #: made it setuid/setgid; corral cleared those bits, which a patch never carries).
    #: A change the patch does not carry (``in_patch=False``) also says why: ``ignored``,
    #: ``nested_repository``, ``special_file``, ``protected_name``, ``unreadable``,
    #: ``directory``, ``owner_change`` (:mod:`sandbox.workspaces.changes`).
    flags: tuple[str, ...] = ()
    #: Whether the patch carries this change. In workspace-write mode the child changed
    #: the checkout itself, and changes git cannot show are listed too, with ``False``.
    in_patch: bool = True
    #: More about a change the patch does not carry ("12 entries" in a directory).
    detail: str = ""


class ExcludedPath(BaseModel):
    """A path the child created that is deliberately left out of the diff."""

    model_config = _FROZEN

    path: str
    reason: ExcludedReason
    detail: str = ""


class DiffResult(BaseModel):
    """Everything the child changed relative to the snapshot it started from.

    ``patch`` is ``git diff --binary`` output (``a/``/``b/`` prefixes, full
    index lines, renames detected); it applies with ``git apply`` onto the
    parent's state at snapshot time. ``base_commit`` is that state as a commit
    (it lives in the child's private git dir, not in the parent's repository).
    """

    model_config = _FROZEN

    sandbox_id: str
    base_commit: str | None
    patch: bytes = Field(repr=False)
    changed: tuple[ChangedFile, ...] = ()
    excluded: tuple[ExcludedPath, ...] = ()
    #: Where the patch was persisted before anything was removed.
    patch_path: Path | None = None
    #: Workspace files whose setuid/setgid bits were cleared just before this diff
    #: (:mod:`sandbox.workspaces.setid`); changed or not, a reviewer should know the child tried.
    setid_cleared: tuple[str, ...] = ()
    #: Agent and editor configuration a workspace-write child's command created, moved out
    #: of the checkout to ``held_dir`` before this diff (:mod:`sandbox.workspaces.held`).
    held: tuple[str, ...] = ()
    held_dir: Path | None = None

    @property
    def is_empty(self) -> bool:
        """No change at all (in the patch, or outside it)."""
        return not self.patch and not self.changed

    @property
    def flagged(self) -> tuple[ChangedFile, ...]:
        """Changed files carrying at least one review flag."""
        return tuple(change for change in self.changed if change.flags)


class TeardownReport(BaseModel):
    """What teardown did."""

    model_config = _FROZEN

    sandbox_id: str
    diff_captured: bool
    patch_path: Path | None = None
    removed: tuple[str, ...] = ()
    #: Every file whose setuid/setgid bits corral cleared during the sandbox's life.
    setid_cleared: tuple[str, ...] = ()


class GcEntry(BaseModel):
    """One piece of left-over state gc looked at."""

    model_config = _FROZEN

    sandbox_id: str
    action: Literal["cleaned", "in_use", "kept", "orphan_removed"]
    patch_path: Path | None = None
    detail: str = ""
    #: Files whose setuid/setgid bits gc cleared in the abandoned workspace.
    setid_cleared: tuple[str, ...] = ()


class GcReport(BaseModel):
    """What :func:`sandbox.gc.gc` found and did."""

    model_config = _FROZEN

    entries: tuple[GcEntry, ...] = ()

    def by_action(self, action: str) -> tuple[GcEntry, ...]:
        """Entries with the given action."""
        return tuple(entry for entry in self.entries if entry.action == action)
