"""Helpers shared by the sandbox tests: repositories, backend parameters, scripted runs.

Real git repositories in ``tmp_path``; waits are on state (:func:`wait_for`),
never fixed sleeps. ``CORRAL_REQUIRE_BACKENDS`` (comma list, e.g.
``bubblewrap,docker``) turns "backend unavailable" from a skip into a failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from policies.contract import SandboxMode
from sandbox.backends.fake import FakeSandbox
from sandbox.base import BaseSandbox
from sandbox.config import BubblewrapConfig, DockerConfig, FakeConfig, HostConfig, Limits
from sandbox.errors import OverlayUnavailable
from sandbox.factory import open_sandbox
from sandbox.files.confined import ConfinedFiles
from sandbox.protocol import Sandbox
from sandbox.results import DiffResult, ExecResult
from sandbox.workspaces.overlay import (
    OverlayLayers,
    mount_overlay,
    overlay_unsupported,
    unmount,
)
from sandbox.workspaces.snapshot import SNAPSHOTS, acquire_snapshot, release_snapshot
from tests.backends import git
from tests.procs import pids_matching

#: Small limits so the attack tests stay fast.
TEST_LIMITS = Limits(timeout_seconds=60, memory_bytes=1 << 30, pids=256,
                     file_size_bytes=256 << 20, tmp_size_bytes=64 << 20)


def backend_config(name: str, limits: Limits = TEST_LIMITS, **extra: Any) -> Any:
    """The config of a backend by name."""
    configs: dict[str, Any] = {"host": HostConfig, "bubblewrap": BubblewrapConfig,
                               "docker": DockerConfig, "fake": FakeConfig}
    return configs[name](limits=limits, **extra)


OpenSandbox = Callable[..., BaseSandbox]

BACKENDS = ("host", "bubblewrap", "docker", "fake")
ISOLATING = ("bubblewrap", "docker")
_BACKEND_MARKS = {"bubblewrap": [pytest.mark.bubblewrap], "docker": [pytest.mark.docker]}


def backends(
    *,
    only: Iterable[str] = BACKENDS,
    host_xfail: str | None = None,
    host_raises: type[BaseException] | tuple[type[BaseException], ...] = AssertionError,
    host_not_run: str | None = None,
    fake: bool = True,
    overlay: bool = False,
) -> list[Any]:
    """Parameters for the ``backend`` fixture (use with ``indirect=True``).

    ``host_xfail`` marks the host backend as a strict expected failure (the
    defence is missing there by design) that must fail with ``host_raises``
    (an assertion about the attack's outcome, by default: a crash or a setup
    error is a real failure, not the expected one); ``host_not_run`` does the
    same without running the attack on the machine (a fork bomb, a memory hog).
    ``overlay`` adds, for each backend, a ``NAME/overlay`` parameter: the same test with
    worktree-mode sandboxes opened as overlays over a shared snapshot (``conftest.py``).
    """
    params = []
    for name in only:
        if name == "fake" and not fake:
            continue
        marks = list(_BACKEND_MARKS.get(name, []))
        if name == "host" and host_xfail:
            marks.append(pytest.mark.xfail(strict=True, raises=host_raises,
                                           reason=f"host backend: {host_xfail}"))
        if name == "host" and host_not_run:
            marks.append(pytest.mark.xfail(run=False, reason=f"host backend: {host_not_run}"))
        params.append(pytest.param(name, marks=marks, id=name))
        if overlay:
            params.append(pytest.param(f"{name}/overlay", marks=marks, id=f"{name}-overlay"))
    return params


@functools.cache
def overlay_missing() -> str | None:
    """Why overlay workspaces cannot be mounted here (a real mount is tried), or ``None``."""
    reason = overlay_unsupported()
    if reason is not None:
        return reason
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        layers = OverlayLayers(lower=base / "l", upper=base / "u", work=base / "w",
                               merged=base / "m")
        for path in (layers.lower, layers.upper, layers.work, layers.merged):
            path.mkdir()
        try:
            mount_overlay(layers)
        except OverlayUnavailable as exc:
            return exc.message
        unmount(layers.merged)
    return None


def child_git_dir(sb: BaseSandbox) -> Path:
    """The git dir the child's ``.git`` names (an overlay's shared checkout has its own)."""
    return sb.workspace.child_git or sb.state.private_git


def make_repo(path: Path) -> Path:
    """A small repository: text, binary, an executable, nested dirs; one commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    files = {
        "README.md": b"# demo\n\nHello.\n",
        "src/app.py": b"def main():\n    return 1\n",
        "docs/guide.md": b"Guide\n=====\n",
        "tools/build.sh": b"#!/bin/sh\necho build\n",
        "data.bin": bytes(range(256)),
    }
    for rel, data in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def run(
    sb: Sandbox,
    argv: Sequence[str],
    *,
    effect: Callable[[ConfinedFiles], None] | None = None,
    fake_exit: int = 0,
    fake_stdout: bytes = b"",
    fake_duration: float = 0.0,
    **kwargs: Any,
) -> ExecResult:
    """``sb.exec(argv)``; on the fake backend, script the step first."""
    if isinstance(sb, FakeSandbox):
        sb.expect(argv, exit_code=fake_exit, stdout=fake_stdout, duration=fake_duration,
                  effect=effect)
    return sb.exec(argv, **kwargs)


def sh(sb: Sandbox, script: str, **kwargs: Any) -> ExecResult:
    """Run a shell script in the sandbox (see :func:`run`)."""
    return run(sb, ["sh", "-c", script], **kwargs)


def new_marker() -> str:
    """A unique ``sleep`` argument: ``1000.``, eight random digits, then ``1``. All markers
    have one width, so none is a prefix of another (nor of ``<marker>0``), and the trailing
    ``1`` keeps any tool from shortening it; ``sleep`` takes it as ~17 minutes."""
    return f"1000.{secrets.randbelow(10**8):08d}1"


def kill_matching(pattern: str) -> None:
    """SIGKILL every process :func:`pids_matching` finds for ``pattern``."""
    for pid in pids_matching(pattern):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def diffs_by_kind(config: Any, repo: Path, state_root: Path, script: str,
                  kinds: Sequence[str] = ("overlay", "worktree")) -> dict[str, DiffResult]:
    """Run ``script`` (``sh -c``) in one sandbox of each workspace kind, all opened on one
    shared snapshot of ``repo``; the diff of each, every sandbox torn down."""
    ref = acquire_snapshot(repo, state_root=state_root)
    diffs: dict[str, DiffResult] = {}
    try:
        for kind in kinds:
            sb = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                              state_root=state_root, snapshot=ref, workspace=kind)
            try:
                assert sb.workspace_kind == kind
                result = sh(sb, script)
                assert result.exit_code == 0, result.stderr.decode()
                diffs[kind] = sb.collect_diff()
            finally:
                sb.teardown(discard=True)
    finally:
        release_snapshot(ref)
    return diffs


def held_snapshots(state_root: Path) -> list[str]:
    """The shared snapshots under ``state_root`` someone holds (a lease file), and any being
    made or removed; an idle snapshot stays for reuse (:func:`idle_snapshots`)."""
    base = state_root / SNAPSHOTS
    found = []
    for path in sorted(base.iterdir()) if base.is_dir() else []:
        leases = path / "leases"
        if path.is_dir() and (path.name.startswith(".") or (
                leases.is_dir() and any(leases.iterdir()))):
            found.append(path.name)
    return found


def idle_snapshots(state_root: Path) -> list[str]:
    """The shared snapshots under ``state_root`` no one holds, kept for the next run."""
    base = state_root / SNAPSHOTS
    held = set(held_snapshots(state_root))
    return sorted(p.name for p in base.iterdir() if p.is_dir() and p.name not in held) \
        if base.is_dir() else []


def diff_facts(diff: DiffResult) -> tuple[object, ...]:
    """What must be identical between workspace kinds."""
    return diff.patch, diff.changed, diff.excluded, diff.setid_cleared, diff.base_commit


#: One parameter per backend with overlays required (tests comparing kinds themselves).
def overlay_backends(**options: Any) -> list[Any]:
    """``backends(overlay=True, ...)`` without the plain parameters."""
    return [p for p in backends(overlay=True, **options) if str(p.values[0]).endswith("/overlay")]
