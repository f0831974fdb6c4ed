"""``corral apply RUN``: a recorded run's diff, verified, judged and applied.

:func:`apply_run` verifies the record before anything else: the sha256 of its
``diff.patch`` must be the one :func:`executor.ledger.write_run` stored, and
the display text (what ``corral show`` prints) must be that patch, or the
apply is refused (``record_tampered``). A record written before corral kept
digests is refused too (``record_unverified``): accepting it with a warning
would let anyone who can edit the ledger turn off the check by deleting the
field; ``allow_unverified`` (``--allow-unverified``) applies such a record
after the user has read it, with every other check still run.

An earlier apply of the same run that never finished (the process was
killed: its backup's manifest still says ``applying``, or its restore failed)
blocks a new one until :func:`recover_run` has put the saved files back.
Backups live in ``<ledger>/<run>/apply-backup/``; the one of a successful
apply stays there (the files as they were before it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from executor.apply.backup import INTERRUPTED, Backup, fingerprint
from executor.apply.checkout import open_checkout
from executor.apply.errors import MergeRefused
from executor.apply.merge import ApplyResult, apply_to_checkout
from executor.apply.patch import PatchPlan, inspect_patch
from executor.apply.preimages import PREIMAGE_DIR, load_preimages
from executor.errors import ExecutorError
from executor.ledger import RunRecord, RunStatus, find_run, load_patch, set_run_state

__all__ = ["ApplyOptions", "apply_run", "backup_root", "recover_run", "verified_patch"]


@dataclass(frozen=True)
class ApplyOptions:
    """What the user allowed (the CLI flags of ``corral apply``)."""

    check_only: bool = False
    three_way: bool = False
    allow_symlinks: bool = False
    allow_binary: bool = False
    allow_git_dirs: bool = False
    allow_unverified: bool = False


def backup_root(ledger: Path, run_id: str) -> Path:
    """Where the backups of the applies of one run are kept."""
    return ledger / run_id / "apply-backup"


def verified_patch(ledger: Path, record: RunRecord, *, allow_unverified: bool) -> bytes:
    """The run's exact patch, once its digest and display text check out."""
    patch = load_patch(ledger, record.run_id)
    where = {"record": ledger / record.run_id}
    if record.diff_sha256 is None:
        if not allow_unverified:
            raise MergeRefused(
                f"run {record.run_id} was recorded before corral kept a digest of each diff, "
                "so its diff.patch cannot be verified", code="record_unverified", context=where,
                hint=f"read it with `corral diff {record.run_id}`; if it is what you expect, "
                     f"`corral apply --allow-unverified {record.run_id}` applies it (every "
                     "other check still runs)")
    elif hashlib.sha256(patch).hexdigest() != record.diff_sha256:
        raise MergeRefused(
            f"the diff of run {record.run_id} is not the one the run wrote (its sha256 does "
            "not match the record): refusing to apply it", code="record_tampered",
            context=where | {"expected": record.diff_sha256,
                             "found": hashlib.sha256(patch).hexdigest()},
            hint="something changed the run ledger; discard this run and run the agent again")
    if record.diff and record.diff not in (patch.decode("utf-8", "replace"),
                                           patch.decode("utf-8", "surrogateescape")):
        raise MergeRefused(
            f"the diff `corral show {record.run_id}` displays is not the diff that would be "
            "applied", code="record_tampered", context=where,
            hint="something changed the run ledger; discard this run and run the agent again")
    return patch


def _interrupted(ledger: Path, run_id: str) -> list[Backup]:
    root = backup_root(ledger, run_id)
    found = []
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        try:
            backup = Backup.load(manifest.parent)
        except (OSError, ValueError):
            continue
        if backup.state in INTERRUPTED:
            found.append(backup)
    return found


def apply_run(root: Path, ledger: Path, run_id: str, options: ApplyOptions, *,
              confirm: Callable[[PatchPlan], bool],
              show: Callable[[RunRecord, PatchPlan], None] | None = None,
              ) -> tuple[RunRecord, PatchPlan, ApplyResult]:
    """Verify, judge and apply a recorded run (see the module docstring).

    ``show`` is called with the judged plan before any refusal; ``confirm`` is
    asked when files are flagged for review (not for ``check_only``).
    """
    record = find_run(ledger, run_id)
    if record.status is RunStatus.RUNNING:
        raise ExecutorError(
            f"run {record.run_id} is still running: its diff is not final yet",
            code="run_in_progress", context={"record": ledger / record.run_id},
            hint="apply it when it has ended; if its process died, `corral gc` captures "
                 "its diff and marks it crashed")
    patch = verified_patch(ledger, record, allow_unverified=options.allow_unverified)
    if not patch:
        raise ExecutorError(f"run {record.run_id} changed nothing", code="empty_diff")
    pending = _interrupted(ledger, record.run_id)
    if pending:
        raise MergeRefused(
            f"an earlier apply of run {record.run_id} did not finish; its backup holds the "
            "files as they were before it", code="apply_interrupted",
            context={"backup": pending[-1].dir},
            hint=f"`corral apply --recover {record.run_id}` puts them back")
    plan = inspect_patch(patch, allow_symlinks=options.allow_symlinks,
                         allow_binary=options.allow_binary,
                         allow_git_dirs=options.allow_git_dirs)
    if show is not None:
        show(record, plan)
    if plan.problems:
        raise MergeRefused("the diff is not safe to merge",
                           context={"problems": "; ".join(plan.problems)})
    if plan.flagged and not options.check_only and not confirm(plan):
        raise MergeRefused(f"{len(plan.flagged)} file(s) are flagged for review",
                           code="review_required",
                           hint=f"read them with `corral diff {record.run_id}`, then pass --yes")
    result = apply_to_checkout(
        root, patch, plan=plan, allow_symlinks=options.allow_symlinks,
        allow_binary=options.allow_binary, allow_git_dirs=options.allow_git_dirs,
        check_only=options.check_only, three_way=options.three_way,
        backups=backup_root(ledger, record.run_id),
        preimages=load_preimages(ledger / record.run_id / PREIMAGE_DIR),
        run_hint=record.run_id)
    if result.status in ("applied", "conflicts", "already_applied") and record.state != "applied":
        record = set_run_state(ledger, record.run_id, "applied")
    return record, plan, result


def recover_run(root: Path, ledger: Path, run_id: str) -> tuple[RunRecord, Path, Path]:
    """Put back the files an interrupted apply of the run saved; return (record, the
    backup restored, a copy of what the paths held just before)."""
    record = find_run(ledger, run_id)
    pending = _interrupted(ledger, record.run_id)
    if not pending:
        raise ExecutorError(f"no apply of run {record.run_id} is waiting to be recovered",
                            code="nothing_to_recover")
    backup = pending[-1]
    checkout = open_checkout(root)
    if Path(backup.manifest["top"]) != checkout.top:
        raise MergeRefused(f"that apply wrote to {backup.manifest['top']}, not {checkout.top}",
                           code="wrong_checkout",
                           hint=f"run the recovery from {backup.manifest['top']}")
    paths = [saved.path for saved in backup.saved]
    current = Backup.create(backup.dir.parent, checkout, paths, fingerprint(checkout, paths),
                            label="before-recover", state="saved")
    backup.restore(checkout, paths_only=True)
    return record, backup.dir, current.dir
