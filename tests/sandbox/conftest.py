"""Fixtures for the sandbox suites: the backend parameter, a repository, a sandbox factory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sbx_support import TEST_LIMITS, OpenSandbox, backend_config, make_repo, required_backends

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import Limits
from sandbox.errors import BackendUnavailable
from sandbox.factory import open_sandbox, probe


def _require(name: str) -> None:
    if name not in ("bubblewrap", "docker"):
        return
    try:
        probe(backend_config(name))
    except BackendUnavailable as exc:
        message = f"{name} backend unavailable: {exc.message}"
        if name in required_backends():
            pytest.fail(f"{message} (required by CORRAL_REQUIRE_BACKENDS)")
        pytest.skip(message)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (parametrized indirectly); skips or fails when unavailable."""
    name = str(request.param)
    _require(name)
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
