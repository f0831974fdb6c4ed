"""Shared fixtures: every test runs with HOME and XDG dirs inside its tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
