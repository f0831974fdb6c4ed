"""``cancel``: a cancelled child runs no further command, even one that was just starting.

A cancellation (Ctrl-C, a fanout's deadline, an MCP client's ``notifications/cancelled``)
stops the child's processes. ``stop_processes`` alone races the session: a backend that
sees no running command has nothing to stop, and a command the session was about to
start then runs to its own timeout. ``cancel`` closes that window on every backend.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sbx_support import OpenSandbox, backends

from sandbox.base import ExecSpec
from sandbox.errors import SandboxError
from sandbox.results import ExecResult
from tests.procs import pids_matching, still_running
from tests.timescale import scaled

pytestmark = pytest.mark.parametrize("backend", backends(fake=False), indirect=True)




def test_no_command_runs_after_cancel(open_sb: OpenSandbox) -> None:
    """Cancelled while idle: the next command returns ``stopped`` and never ran."""
    sb = open_sb()
    assert sb.exec(["true"]).ok
    sb.cancel()
    result = sb.exec(["sh", "-c", "echo ran > ran.txt"])
    assert result.stopped and result.exit_code is None and not result.timed_out
    assert not (sb.workspace.root / "ran.txt").exists()
    with pytest.raises(SandboxError) as caught:
        sb.open_stream(["cat"])
    assert caught.value.code == "cancelled"


def test_cancel_stops_a_running_command(open_sb: OpenSandbox, marker: str) -> None:
    sb = open_sb()
    results: list[ExecResult] = []
    started = threading.Event()
    thread = threading.Thread(target=lambda: results.append(sb.exec(
        ["sh", "-c", f"touch started; sleep {marker}"], timeout=scaled(120))))
    thread.start()
    workspace = sb.workspace.root
    try:
        while not started.wait(0.02):
            if (workspace / "started").exists():
                started.set()
        sb.cancel()
        thread.join(scaled(60))
        assert results and results[0].stopped and not results[0].timed_out
        assert not pids_matching(f"sleep {marker}")
    finally:
        sb.stop_processes()
        thread.join(scaled(60))


def test_a_command_starting_as_the_cancel_lands_is_stopped(
        open_sb: OpenSandbox, marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race itself, made certain: the cancel lands after the command passed the
    sandbox's start gate and before the backend started it (so the backend's own stop
    finds nothing running). Without ``cancel``'s retry the command sleeps to its timeout."""
    sb = open_sb()
    assert sb.exec(["true"]).ok  # a warm backend's supervisor is up
    real_run = sb._run
    canceller: list[threading.Thread] = []

    def run_after_cancel(spec: ExecSpec) -> ExecResult:
        thread = threading.Thread(target=sb.cancel)
        canceller.append(thread)
        thread.start()
        while not sb._cancelled:  # the flag is set first, then the stop finds nothing
            threading.Event().wait(0.005)
        return real_run(spec)

    monkeypatch.setattr(sb, "_run", run_after_cancel)
    result = sb.exec(["sh", "-c", f"sleep {marker}"], timeout=scaled(120))
    canceller[0].join(scaled(60))
    assert result.stopped and not result.timed_out
    assert not pids_matching(f"sleep {marker}")




class _Stop(KeyboardInterrupt):
    """What Ctrl-C (or SIGTERM, which corral's CLI raises as Ctrl-C) raises inside the
    thread that waits on a command."""


def test_a_command_whose_wait_is_interrupted_dies_and_the_sandbox_goes_on(
        open_sb: OpenSandbox, marker: str) -> None:
    """Ctrl-C lands while the caller waits on a command (here: raised from the output
    listener, the same thread and the same wait). The command must not outlive that: it
    would go on writing to the workspace while the diff is taken, and outlive corral (the
    host backend left it running, reparented to init). The sandbox then still answers the
    next command with that command's own result, and its diff is the workspace's."""
    sb = open_sb()
    assert sb.exec(["true"]).ok  # a warm backend's supervisor is up

    def interrupt(stream: str, chunk: bytes) -> None:
        if b"up" in chunk:
            raise _Stop

    with pytest.raises(_Stop):
        sb.exec(["sh", "-c", f"echo up; sleep {marker}; echo late > late.txt"],
                timeout=scaled(120), on_output=interrupt)
    assert not still_running(f"sleep {marker}")
    after = sb.exec(["sh", "-c", "echo next"])
    assert after.ok and after.stdout == b"next\n"
    assert b"late.txt" not in sb.collect_diff().patch


def next_diff_is_taken(sb: Any) -> None:
    """The next diff is taken (an idle sandbox's takes milliseconds), not left waiting for a
    claim or a freeze that ended. Either way, what was left is cleared afterwards, or the
    fixture's teardown would wait too."""
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(sb.collect_diff()), daemon=True)
    thread.start()
    thread.join(scaled(10))  # milliseconds when it works; when it does not, it never returns
    try:
        assert done, "the diff waited for a command or a freeze that had ended"
    finally:
        with sb._cond:
            sb._busy, sb._freezing = False, 0
            sb._cond.notify_all()
        thread.join(scaled(30))


def test_a_stop_as_a_command_claims_the_sandbox_leaves_it_usable(
        open_sb: OpenSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C raised in the instant the command has claimed the sandbox, as the claim's
    lock is let go (``Condition.__exit__`` is Python code: a signal is handled there).
    The claim must be given back, or the run's diff, taken next, waits forever."""
    sb = open_sb()

    class StopOnRelease(type(sb._cond)):  # type: ignore[misc]
        armed = True

        def __exit__(self, *exc: object) -> None:
            super().__exit__(*exc)
            if StopOnRelease.armed and sb._busy:
                StopOnRelease.armed = False
                raise _Stop

    monkeypatch.setattr(sb, "_cond", StopOnRelease())
    with pytest.raises(_Stop):
        sb.exec(["sh", "-c", "echo never > ran.txt"])
    assert not StopOnRelease.armed  # the stop landed where it was meant to
    next_diff_is_taken(sb)
    assert sb.exec(["true"]).ok


def test_a_stop_as_a_diff_ends_leaves_the_sandbox_usable(
        open_sb: OpenSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C raised as a freeze (a diff) is given back, when its lock is being taken
    (``Condition.__enter__`` is Python code too). Teardown, which freezes again, must not
    wait forever for a freeze that ended."""
    sb = open_sb()
    assert sb.exec(["sh", "-c", "echo kept > kept.txt"]).ok

    class StopOnTake(type(sb._cond)):  # type: ignore[misc]
        armed = False

        def __enter__(self) -> bool:
            if StopOnTake.armed and sb._busy and sb._freezing:
                StopOnTake.armed = False
                raise _Stop
            return bool(super().__enter__())

    real_collect = sb._collect

    def collect_then_arm() -> Any:
        diff = real_collect()
        StopOnTake.armed = True  # the next take of the lock is the freeze's end
        return diff

    monkeypatch.setattr(sb, "_cond", StopOnTake())
    monkeypatch.setattr(sb, "_collect", collect_then_arm)
    with pytest.raises(_Stop):
        sb.collect_diff()
    monkeypatch.setattr(sb, "_collect", real_collect)
    next_diff_is_taken(sb)
    assert b"kept" in sb.collect_diff().patch
