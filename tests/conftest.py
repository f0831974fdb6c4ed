"""Shared fixtures: every test runs with HOME and XDG dirs inside its tmp_path.

No test may leave a mount behind (:func:`_no_leaked_mounts`): corral unmounts every
overlay it makes, and a leaked one also breaks pytest's removal of old tmp dirs (EBUSY).

Also the ``requires`` marker: ``@pytest.mark.requires("ripgrep", ...)`` skips
a test whose requirement is missing here, or fails it when CI requires that
name (``CORRAL_REQUIRE`` / ``CORRAL_REQUIRE_BACKENDS``; see ``tests/backends.py``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import REQUIREMENTS, require
from tests.timescale import TimeScaleError, scale, scaled

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    try:
        scale()
    except TimeScaleError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line(
        "markers",
        "requires(*names): needs each named requirement ("
        + ", ".join(REQUIREMENTS) + "); skips without it, fails when CI requires it",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's pytest-timeout (its own ``timeout`` marker, else the ini's) on the time
    scale (``tests/timescale.py``); untouched at the default scale."""
    if scale() == 1.0:
        return
    settings = getattr(config, "_env_timeout", None)  # pytest-timeout's: --timeout, env, ini
    default = float(getattr(settings, "timeout", None) or config.getini("timeout") or 0)
    for item in items:
        marker = item.get_closest_marker("timeout")
        seconds = float(marker.args[0]) if marker is not None and marker.args else default
        if seconds > 0:
            item.add_marker(pytest.mark.timeout(scaled(seconds)), append=False)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("requires"):
        for name in marker.args:
            require(name)


def _mounts_under(root: Path) -> dict[str, str]:
    """The mounts at or below ``root`` (``/proc/self/mountinfo``): mountpoint -> its line."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(errors="surrogateescape").splitlines()
    except OSError:
        return {}
    prefix = str(root).rstrip("/") + "/"
    found = {}
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])  # \040: space
        if point.startswith(prefix) or point == prefix[:-1]:
            found[point] = line
    return found


def _detach(mountpoints: list[str]) -> None:
    """``umount -l`` each (deepest first), so the rest of the run and pytest's own
    removal of old tmp dirs are not held up by them."""
    for point in sorted(mountpoints, key=lambda p: p.count("/"), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@pytest.fixture(autouse=True)
def _no_leaked_mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the test that leaves a new mount under the tmp dirs (its own: tests run one
    at a time), naming it; then detach it.

    First of the autouse fixtures, so it checks after every other function-scoped
    fixture is torn down; mounts a module- or session-scoped fixture holds were made
    before it looked (and :func:`pytest_sessionfinish` catches those that stay).
    """
    base = tmp_path_factory.getbasetemp()
    before = _mounts_under(base)
    yield
    leaked = {point: line for point, line in _mounts_under(base).items()
              if point not in before}
    if leaked:
        _detach(list(leaked))
        pytest.fail("the test left mounts behind (now detached):\n"
                    + "\n".join(leaked.values()), pytrace=False)


@pytest.hookimpl(tryfirst=True)  # before the tmpdir plugin removes old tmp dirs
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Mounts still under the tmp dirs when the session ends (a module- or session-scoped
    fixture's): detached, and the run fails."""
    factory: pytest.TempPathFactory | None = getattr(session.config, "_tmp_path_factory", None)
    base = factory._basetemp if factory is not None else None
    leaked = _mounts_under(base) if base is not None else {}
    if leaked:
        _detach(list(leaked))
        session.config.get_terminal_writer().line(
            "mounts left under the tmp dirs at the end of the session (now detached):\n"
            + "\n".join(leaked.values()), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                   ) -> Path:
    """No test ever reads the real user's agents or corral config; nor corral's bundled
    agents, unless it asks for them (``CORRAL_BUNDLED_AGENTS=1``): tests count agents."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CORRAL_CONFIG", str(home / ".config" / "corral" / "config.toml"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.setenv("CORRAL_BUNDLED_AGENTS", "0")
    return home
