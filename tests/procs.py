"""Processes as tests see them: waiting for a condition, finding processes by their
argv, and whether a killed one is gone. Shared by the sandbox and the executor suites
(imported as ``tests.procs``; the repository root is on ``sys.path``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tests.timescale import scaled


def wait_for(predicate: Callable[[], bool], timeout: float | None = None) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (default: ``scaled(10)``;
    a caller's own timeout is already on the time scale); return its last value."""
    deadline = time.monotonic() + (scaled(10.0) if timeout is None else timeout)
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def pids_matching(pattern: str) -> list[int]:
    """Host pids (not this process) whose argv holds the words of ``pattern`` as consecutive
    whole arguments: ``"sleep 1000.123"`` matches ``sleep 1000.123`` (and a ``bwrap ... --
    sleep 1000.123``), never ``sleep 1000.1234`` nor a shell whose script merely mentions
    it. Every backend's processes are host processes on this machine."""
    import psutil

    words = pattern.split()
    width = len(words)
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            argv = list(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if proc.pid != os.getpid() and any(
                argv[i:i + width] == words for i in range(len(argv) - width + 1)):
            found.append(proc.pid)
    return found


def still_running(pattern: str, wait: float | None = None) -> list[int]:
    """:func:`pids_matching` once a killed process has had up to ``wait`` seconds to go: a
    SIGKILLed process goes within milliseconds but not at the instant its killer returns
    (nothing waits for a grandchild reparented to init); one never killed stays."""
    wait_for(lambda: not pids_matching(pattern), scaled(10.0) if wait is None else wait)
    return pids_matching(pattern)
