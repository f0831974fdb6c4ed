"""Fixtures for the sandbox suites: the backend parameter, a repository, a sandbox factory.

A ``backend`` parameter ``NAME/overlay`` (from ``backends(overlay=True)``) runs the
same test with worktree-mode sandboxes opened as overlays over a shared snapshot
of the repository's current state (acquired at each open, as a fanout does);
overlays must work where the suite runs (root), unless it is not required.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sbx_support import (
    TEST_LIMITS,
    OpenSandbox,
    backend_config,
    kill_matching,
    make_repo,
    new_marker,
    overlay_missing,
)

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import Limits
from sandbox.factory import open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot
from tests.backends import require, require_backend


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (parametrized indirectly); skips or fails when unavailable."""
    name, _, kind = str(request.param).partition("/")
    require_backend(name)
    missing = overlay_missing() if kind == "overlay" else None
    if missing is not None:
        require("overlay", missing)
    return name


@pytest.fixture
def workspace(request: pytest.FixtureRequest) -> str:
    """``overlay`` for a ``NAME/overlay`` backend parameter, else ``worktree``."""
    callspec = getattr(request.node, "callspec", None)
    param = str(callspec.params.get("backend", "")) if callspec is not None else ""
    return param.partition("/")[2] or "worktree"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed repository with a clean working tree."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def state_root(tmp_path: Path) -> Path:
    """A private state root for this test."""
    return tmp_path / "state"


@pytest.fixture
def open_sb(backend: str, workspace: str, repo: Path, state_root: Path
            ) -> Iterator[OpenSandbox]:
    """Open sandboxes on the current backend (worktree mode as overlays for an overlay
    parameter); whatever a test leaves open is discarded."""
    made: list[BaseSandbox] = []

    def _open(mode: SandboxMode = SandboxMode.WORKTREE, *, repo_path: Path | None = None,
              limits: Limits = TEST_LIMITS, **extra: Any) -> BaseSandbox:
        config = backend_config(backend, limits, **extra)
        target = repo_path or repo
        if workspace == "overlay" and mode is SandboxMode.WORKTREE:
            ref = acquire_snapshot(target, state_root=state_root)
            try:
                sb = open_sandbox(config, repo=target, mode=mode, state_root=state_root,
                                  snapshot=ref, workspace="overlay")
            finally:
                release_snapshot(ref)
            assert sb.workspace_kind == "overlay"
        else:
            sb = open_sandbox(config, repo=target, mode=mode, state_root=state_root)
        made.append(sb)
        return sb

    yield _open
    for sb in made:
        sb.teardown(discard=True)


@pytest.fixture
def markers() -> Iterator[Callable[[], str]]:
    """Make unique ``sleep`` arguments (:func:`sbx_support.new_marker`); afterwards every
    process whose argv holds one of them as a whole argument is killed, and no other."""
    made: list[str] = []

    def make() -> str:
        made.append(new_marker())
        return made[-1]

    yield make
    for value in made:
        kill_matching(value)


@pytest.fixture
def marker(markers: Callable[[], str]) -> str:
    """One unique ``sleep`` argument (see :func:`markers`)."""
    return markers()
