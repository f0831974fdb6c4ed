"""Named steps of ``corral apply``, and the hardened git every step runs.

Every step of an apply (each git invocation, the precheck, each file the
backup saves, each file a restore puts back, each verification) first calls
:func:`step` with its name. :data:`fault_hook` is ``None`` in corral; the
fault-injection tests set it (in-process, from Python) to make a named step
fail and prove the checkout comes back byte-identical. Nothing a child, a
repository, a record or the environment holds can set it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sandbox.gitsafe import git_env, run_git

__all__ = ["fault_hook", "git", "step"]

#: Tests only: called with each step's name before the step runs; raising fails it.
fault_hook: Callable[[str], None] | None = None


def step(name: str) -> None:
    """Mark the start of one step (see the module docstring)."""
    if fault_hook is not None:
        fault_hook(name)


def git(label: str, args: Sequence[str], *, git_dir: Path, top: Path,
        env: Mapping[str, str] | None = None, input_bytes: bytes | None = None,
        ) -> subprocess.CompletedProcess[bytes]:
    """One hardened git command in the checkout (step ``git <label>``); never raises for
    git's exit status (the caller judges it)."""
    step(f"git {label}")
    return run_git(list(args), git_dir=git_dir, work_tree=top, cwd=top,
                   env=git_env() if env is None else env, input_bytes=input_bytes,
                   check=False, operation="apply")
