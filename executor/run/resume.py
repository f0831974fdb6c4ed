"""A finished run's workspace, rebuilt: where ``corral run --continue`` and ``corral shell`` work.

A run's sandbox is torn down when it ends, and the snapshot it started from is
released with it. So "the run's workspace" is rebuilt: a fresh sandbox of the
run's backend over the checkout **as it is now** (snapshotted as every
worktree run's is), with the run's recorded diff applied inside it
(:func:`sandbox.replay.apply_recorded`). A diff taken there afterwards is
cumulative: the run's changes plus what happened since, against that base.
The current checkout, not the run's snapshot, is the base because it is what
the diff must apply to in the end; and a snapshot outlives its last sandbox
only as an idle copy kept for reuse, which may be gone by then.

Before anything is created, :func:`check_reopenable` refuses a run whose
workspace is not its own to change any more (applied, discarded, continued,
still running, crashed before ``corral gc`` gave it its diff), and
:func:`replayable_patch` reads the diff the way ``corral apply`` does: its
digest must match the record (:func:`executor.apply.recorded.verified_patch`),
every header is judged (:func:`executor.apply.patch.inspect_patch`: no path
outside the repository, no ``.git``, no gitlink, nothing beyond a symlink the
patch creates, no directory it makes a git directory; symlinks and binary
files are fine here, the run had them in its sandbox too), and it must apply
to the checkout as it is now (``corral apply --check``'s own check), or the
rebuild is refused with the files in the way named (``workspace_diverged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from executor.apply import MergeRefused, apply_to_checkout, inspect_patch
from executor.apply.recorded import verified_patch
from executor.errors import ExecutorError
from executor.ledger import RunRecord, RunStatus, run_status
from executor.models.base import Message
from executor.text import one_line
from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.replay import apply_recorded

__all__ = ["ONTO", "Resume", "check_reopenable", "replay_into", "replayable_patch"]

#: What a rebuilt workspace's base is, in errors.
ONTO = "your checkout as it is now"


@dataclass(frozen=True)
class Resume:
    """What a continued run starts from: the run it continues (``record``), that run's
    verified diff (``patch``, empty when there is nothing to replay: no changes, a
    read-only or a workspace-write run) and its conversation (``messages``)."""

    record: RunRecord
    patch: bytes
    messages: tuple[Message, ...]


def check_reopenable(record: RunRecord, *, doing: str) -> None:
    """Refuse a run whose workspace cannot be rebuilt for ``doing`` (``"continue"``,
    ``"open a shell on"``): still running, crashed and not finalised, applied, discarded
    or continued. A user's mistake (exit code 2), before anything is created."""
    run = one_line(record.run_id)
    context = {"run": record.run_id, "state": record.state}
    if run_status(record) is RunStatus.RUNNING:
        raise ExecutorError(f"cannot {doing} run {run}: it is still running",
                            code="run_in_progress", context=context,
                            hint="wait for it to end (`corral logs -f RUN` follows it)")
    if record.status is RunStatus.RUNNING:  # its process died before it finished
        raise ExecutorError(f"cannot {doing} run {run}: its process died before its diff "
                            "was recorded", code="run_crashed", context=context,
                            hint="`corral gc` hands it its diff; then try again")
    if record.state == "applied":
        raise ExecutorError(f"cannot {doing} run {run}: it was applied "
                            f"{one_line(record.state_changed_at)}", code="already_applied",
                            context=context,
                            hint="its changes are in your checkout: start a new run there")
    if record.continued_by:
        later = one_line(record.continued_by)
        raise ExecutorError(f"cannot {doing} run {run}: run {later} continued it",
                            code="run_continued", context=context,
                            hint=f"run {later} holds its changes: use that one")
    if record.state == "discarded":
        raise ExecutorError(f"cannot {doing} run {run}: it was discarded",
                            code="run_discarded", context=context,
                            hint="start a new run")


def replayable_patch(root: Path, ledger: Path, record: RunRecord) -> bytes:
    """Run ``record``'s diff, verified, judged and checked against the checkout at
    ``root`` (see the module docstring); empty when there is nothing to replay (no
    changes; read-only; workspace-write, whose changes are in the checkout already)."""
    if record.mode != SandboxMode.WORKTREE.value:
        return b""
    patch = verified_patch(ledger, record, allow_unverified=False)
    if not patch:
        return b""
    run = one_line(record.run_id)
    plan = inspect_patch(patch, allow_symlinks=True, allow_binary=True)
    if plan.problems:
        raise MergeRefused(f"run {run}'s diff cannot be replayed safely", code="unsafe_diff",
                           context={"problems": "; ".join(plan.problems)},
                           hint="read it with `corral diff RUN`; start a new run instead")
    try:
        result = apply_to_checkout(root, patch, plan=plan, allow_symlinks=True,
                                   allow_binary=True, check_only=True, run_hint=record.run_id)
    except MergeRefused as exc:
        raise MergeRefused(
            f"run {run}'s diff no longer applies to {ONTO}: {exc.message}",
            code="workspace_diverged", context=exc.context,
            hint="the files named changed in your checkout since the run; bring them back "
                 "(or commit or stash your changes there) and try again, or merge the run "
                 f"with `corral apply --3way {run}`") from exc
    if result.status == "already_applied":
        raise MergeRefused(f"your checkout already holds run {run}'s changes",
                           code="workspace_diverged", context={"run": record.run_id},
                           hint="they are in your checkout: work there, or start a new run")
    return patch


def replay_into(sandbox: BaseSandbox, patch: bytes) -> None:
    """Put a verified ``patch`` into a rebuilt workspace (a worktree sandbox)."""
    if patch and sandbox.mode is SandboxMode.WORKTREE:
        apply_recorded(sandbox, patch, onto=ONTO)
