"""What every suite that runs real sandboxes shares: availability and test git.

``require_backend`` probes bubblewrap or docker for real and skips a test that
needs a missing one, unless ``CORRAL_REQUIRE_BACKENDS`` (comma list, set by
CI) names it: then the test fails, so a suite can never pass by skipping.
Imported as ``tests.backends`` (the repository root is on ``sys.path``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sandbox.config import BubblewrapConfig, DockerConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import probe

__all__ = ["GIT_ENV", "git", "require_backend", "required_backends"]

#: A git with no user or system config, fixed identity and dates (reproducible commits).
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Parent",
    "GIT_AUTHOR_EMAIL": "parent@example.com",
    "GIT_COMMITTER_NAME": "Parent",
    "GIT_COMMITTER_EMAIL": "parent@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}
_ISOLATING: dict[str, Any] = {"bubblewrap": BubblewrapConfig, "docker": DockerConfig}


def required_backends() -> set[str]:
    """Backends CI demands (``CORRAL_REQUIRE_BACKENDS``)."""
    raw = os.environ.get("CORRAL_REQUIRE_BACKENDS", "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def require_backend(name: str) -> None:
    """Skip (or, when required, fail) unless backend ``name`` really works here."""
    config = _ISOLATING.get(name)
    if config is None:
        return  # host and fake need nothing
    try:
        probe(config())
    except BackendUnavailable as exc:
        message = f"{name} backend unavailable: {exc.message}"
        if name in required_backends():
            pytest.fail(f"{message} (required by CORRAL_REQUIRE_BACKENDS)")
        pytest.skip(message)


def git(repo: Path, *args: str, check: bool = True,
        **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Plain git for test setup and checks (no user or system config)."""
    env = {**os.environ, **GIT_ENV, **kwargs.pop("env", {})}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=check,
                          capture_output=True, text=True, **kwargs)
