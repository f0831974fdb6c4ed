"""Fixtures for the sandbox suites: the backend parameter, a repository, a sandbox factory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sbx_support import TEST_LIMITS, OpenSandbox, backend_config, make_repo

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import Limits
from sandbox.factory import open_sandbox
from tests.backends import require_backend


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (parametrized indirectly); skips or fails when unavailable."""
    name = str(request.param)
    require_backend(name)
    return name


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed repository with a clean working tree."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def state_root(tmp_path: Path) -> Path:
    """A private state root for this test."""
    return tmp_path / "state"


@pytest.fixture
def open_sb(backend: str, repo: Path, state_root: Path) -> Iterator[OpenSandbox]:
    """Open sandboxes on the current backend; whatever a test leaves open is discarded."""
    made: list[BaseSandbox] = []

    def _open(mode: SandboxMode = SandboxMode.WORKTREE, *, repo_path: Path | None = None,
              limits: Limits = TEST_LIMITS, **extra: Any) -> BaseSandbox:
        config = backend_config(backend, limits, **extra)
        sb = open_sandbox(config, repo=repo_path or repo, mode=mode, state_root=state_root)
        made.append(sb)
        return sb

    yield _open
    for sb in made:
        sb.teardown(discard=True)
