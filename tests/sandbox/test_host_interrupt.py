"""A stop (Ctrl-C, SIGTERM) that lands while the host backend is still starting a command.

``subprocess.Popen`` waits after the fork until the child has exec'd; a signal raised as
an exception there loses the only handle on a command that is already running. Under
load this happened: a stopped ``corral run`` left its command behind, reparented to
init. The tests make the landing certain instead of likely.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.backends import process
from sandbox.backends.process import LocalRunner, kill_process_tree
from tests.procs import still_running
from tests.timescale import scaled


class Stopped(Exception):
    """What this test's SIGTERM handler raises (corral's CLI raises KeyboardInterrupt)."""


@pytest.fixture
def sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise Stopped(signum)

    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_stop_during_the_spawn_still_kills_the_command(
        tmp_path: Path, marker: str, sigterm_raises: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal arrives once the child exists, before ``Popen`` has returned."""
    real = subprocess.Popen

    def popen_then_stopped(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        child = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode: still in here
        return child

    monkeypatch.setattr(process.subprocess, "Popen", popen_then_stopped)
    with pytest.raises(Stopped):
        LocalRunner().run(["sleep", marker], env={"PATH": os.defpath}, cwd=tmp_path,
                          timeout=scaled(120), output_cap=1024, kill=kill_process_tree)
    assert not still_running(f"sleep {marker}")
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the handler is back


def test_nothing_is_held_off_the_main_thread_or_after_a_failed_start(
        tmp_path: Path, sigterm_raises: None) -> None:
    """Off the main thread no handler is touched (Python would refuse); a command that
    cannot start puts the handlers back as they were."""
    handler = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            LocalRunner().run(["true"], env={"PATH": os.defpath}, cwd=tmp_path, timeout=scaled(60),
                              output_cap=1024)
        except BaseException as exc:  # handed to the test below
            errors.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(scaled(60))
    assert errors == []
    with pytest.raises(Exception, match="could not start"):
        LocalRunner().run(["/nonexistent/program"], env={"PATH": os.defpath}, cwd=tmp_path,
                          timeout=scaled(60), output_cap=1024)
    assert signal.getsignal(signal.SIGTERM) is handler
