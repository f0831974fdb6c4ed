"""Shared fixtures: every test runs with HOME and XDG dirs inside its tmp_path.

Also the ``requires`` marker: ``@pytest.mark.requires("ripgrep", ...)`` skips
a test whose requirement is missing here, or fails it when CI requires that
name (``CORRAL_REQUIRE`` / ``CORRAL_REQUIRE_BACKENDS``; see ``tests/backends.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import REQUIREMENTS, require

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*names): needs each named requirement ("
        + ", ".join(REQUIREMENTS) + "); skips without it, fails when CI requires it",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("requires"):
        for name in marker.args:
            require(name)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                   ) -> Path:
    """No test ever reads the real user's agents or corral config."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CORRAL_CONFIG", str(home / ".config" / "corral" / "config.toml"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    return home
