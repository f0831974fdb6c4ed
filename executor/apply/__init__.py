"""Merging a child's diff into the parent's checkout, explicitly and safely (threats B3).

The pieces, in the order an apply uses them:

- :mod:`executor.apply.patch`: the patch on its own (paths, modes, symlinks,
  binaries, gitlinks, git directories and ``gitdir:`` pointers, caps, review
  flags), cross-checked against git's own reading;
- :mod:`executor.apply.checkout`: the real checkout under every path the
  patch touches (directories, ignored and untracked files, nested
  repositories, symlinks and files in the way), before anything is written;
- :mod:`executor.apply.backup`: the fingerprint, the backup and the verified
  restore that make an apply all or nothing;
- :mod:`executor.apply.merge`: the apply itself, plain or three-way;
- :mod:`executor.apply.preimages`: the versions a child started from, kept
  with its record so a three-way merge works after the child is gone;
- :mod:`executor.apply.recorded`: a recorded run (digest check, backups in the
  ledger, recovery of an interrupted apply);
- :mod:`executor.apply.steps`: the named steps (and the tests' fault hook).
"""

from __future__ import annotations

from executor.apply.errors import ApplyFailed, MergeRefused, RestoreFailed
from executor.apply.merge import ApplyResult, apply_to_checkout
from executor.apply.patch import PatchFile, PatchPlan, inspect_patch, unquote
from executor.apply.recorded import ApplyOptions, apply_run, recover_run

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
