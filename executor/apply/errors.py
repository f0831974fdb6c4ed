"""What ``corral apply`` refuses or fails with (stable codes, exit code families).

- :class:`MergeRefused` (exit 4, a refusal): the patch is unsafe
  (``merge_refused``), it conflicts with the checkout (``apply_conflict``),
  files flagged for review were not confirmed (``review_required``), the
  record's diff is not the one the run wrote (``record_tampered``,
  ``record_unverified``), or an earlier apply of the run was interrupted and
  must be recovered first (``apply_interrupted``). Nothing was written.
- :class:`ApplyFailed` (exit 3, infrastructure): a step failed; nothing was
  written yet, or the checkout was restored from the backup and verified
  byte-identical (``apply_failed``).
- :class:`RestoreFailed` (exit 3): the restore could not be verified; the
  backup is kept and named, and ``corral apply --recover RUN`` retries it.
"""

from __future__ import annotations

from executor.errors import ExecutorError

__all__ = ["ApplyFailed", "MergeRefused", "RestoreFailed"]


class MergeRefused(ExecutorError):
    """The patch (or the checkout, or the record) is not safe to merge; nothing changed."""

    code = "merge_refused"
    exit_code = 4


class ApplyFailed(ExecutorError):
    """A step of the apply failed; the checkout was restored and verified."""

    code = "apply_failed"
    exit_code = 3


class RestoreFailed(ExecutorError):
    """A failed apply could not be undone and verified; the backup is kept."""

    code = "restore_failed"
    exit_code = 3
