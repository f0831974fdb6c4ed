"""A fresh sandbox holding exactly a recorded diff: where checks and reviewers run.

A fanout's check command and a response reviewer judge a child's work. They
must judge what was *recorded*, the diff ``corral apply`` would merge, and
nothing else of the child's session: no process it left, no file of its
``/tmp``, no ignored or special file its diff does not carry. So they never run
in the child's sandbox. :func:`open_replay` opens a new worktree-mode sandbox
from the snapshot the child started from, with new namespaces or a new
container, and applies the recorded patch in it with ``git apply`` (inside
the sandbox, as its user, so nothing on the host parses the patch and every
file has the owner the sandbox's commands have). A patch that does not apply
to its base is an error, never a silently smaller workspace.

A replay is *disposable* (:attr:`sandbox.state.SandboxMeta.disposable`):
nothing in it is anyone's work, so a crash leaves nothing ``gc`` would keep.
``corral shell`` and ``corral run --continue`` rebuild a finished run's
workspace the same way (a sandbox of the checkout's current state with the
run's recorded diff applied): there what happens next *is* someone's work, so
that sandbox is not disposable.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import BackendConfig, FakeConfig
from sandbox.environment import EnvironmentRef
from sandbox.errors import SandboxError
from sandbox.factory import open_sandbox
from sandbox.workspaces.snapshot import SnapshotRef

__all__ = ["REPLAY_APPLY_TIMEOUT", "apply_recorded", "open_replay"]

#: How long applying the recorded patch inside the replay may take.
REPLAY_APPLY_TIMEOUT = 120.0


def open_replay(
    config: BackendConfig | FakeConfig,
    *,
    repo: Path,
    snapshot: SnapshotRef | None,
    patch: bytes,
    state_root: Path | None = None,
    environment: EnvironmentRef | None = None,
    disposable: bool = True,
    onto: str = "the snapshot it was made from",
) -> BaseSandbox:
    """A new worktree-mode sandbox of ``repo``'s ``snapshot`` (``None``: the repository's
    current state) with ``patch`` applied, in ``environment`` (the child's); the caller tears
    it down. ``disposable=False``: what is done in it is someone's work (``corral shell``
    on a run's workspace), so a crash leaves its diff for ``gc`` to capture. ``onto`` names
    the base in the error of a patch that does not apply."""
    sandbox = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE, state_root=state_root,
                           snapshot=snapshot, disposable=disposable, environment=environment)
    try:
        if patch:
            apply_recorded(sandbox, patch, onto=onto)
    except BaseException:
        sandbox.teardown(discard=True)
        raise
    return sandbox


def apply_recorded(sandbox: BaseSandbox, patch: bytes, *,
                   onto: str = "the snapshot it was made from") -> None:
    """Apply a recorded ``patch`` inside ``sandbox`` (``git apply`` as the sandbox's user;
    nothing on the host parses it); ``replay_failed`` when it does not apply to ``onto``."""
    name = f".corral-replay-{secrets.token_hex(8)}.patch"
    sandbox.files.write_bytes(name, patch)
    try:
        done = sandbox.exec(["git", "apply", "--whitespace=nowarn", "--", name],
                            timeout=REPLAY_APPLY_TIMEOUT)
    finally:
        with contextlib.suppress(SandboxError):
            sandbox.files.remove(name)
    if not done.ok:
        said = done.stderr.decode("utf-8", "replace").strip()[:500]
        raise SandboxError(
            f"the recorded diff does not apply to {onto}: {said or 'git apply failed'}",
            code="replay_failed", operation="replay",
            context={"sandbox": sandbox.id},
            hint="the diff or its snapshot was changed after it was recorded")
