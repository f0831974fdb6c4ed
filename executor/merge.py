"""Merging a child's diff into the parent's checkout, explicitly and safely (threats B3).

The pieces, in the order an apply uses them:

- :mod:`executor.merge_patch`: the patch on its own (paths, modes, symlinks,
  binaries, gitlinks, git directories and ``gitdir:`` pointers, caps, review
  flags), cross-checked against git's own reading;
- :mod:`executor.merge_checkout`: the real checkout under every path the
  patch touches (directories, ignored and untracked files, nested
  repositories, symlinks and files in the way), before anything is written;
- :mod:`executor.merge_backup`: the fingerprint, the backup and the verified
  restore that make an apply all or nothing;
- :mod:`executor.merge_apply`: the apply itself, plain or three-way;
- :mod:`executor.merge_preimages`: the versions a child started from, kept
  with its record so a three-way merge works after the child is gone;
- :mod:`executor.merge_run`: a recorded run (digest check, backups in the
  ledger, recovery of an interrupted apply);
- :mod:`executor.merge_steps`: the named steps (and the tests' fault hook).
"""

from __future__ import annotations

from executor.merge_apply import ApplyResult, apply_to_checkout
from executor.merge_errors import ApplyFailed, MergeRefused, RestoreFailed
from executor.merge_patch import PatchFile, PatchPlan, inspect_patch, unquote
from executor.merge_run import ApplyOptions, apply_run, recover_run

__all__ = [
    "ApplyFailed",
    "ApplyOptions",
    "ApplyResult",
    "MergeRefused",
    "PatchFile",
    "PatchPlan",
    "RestoreFailed",
    "apply_run",
    "apply_to_checkout",
    "inspect_patch",
    "recover_run",
    "unquote",
]
