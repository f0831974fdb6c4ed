"""Supervising local processes (the host backend): timeout, output cap, reaping.

One selector loop waits on the command's stdout, stderr, any extra status
pipe, and a pidfd for its exit, so there is no polling and no thread:

- output beyond the cap is read and counted but not kept, so a chatty child
  never blocks on a full pipe (threats B6.33);
- at the deadline, or when :meth:`LocalRunner.stop_all` is called, the
  backend's ``kill`` runs (the process group and psutil descendants), then the loop keeps
  draining until the pipes close or a short grace period ends (an escaped
  process holding a pipe cannot stall the parent);
- the exit status and resource use come from ``wait4`` (peak RSS of the
  largest process, user + system CPU of the whole reaped tree).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sandbox.errors import SandboxError
from sandbox.results import ExecResult

__all__ = [
    "LocalOutcome", "LocalRunner", "OutputCapture", "RunningProcess", "captures",
    "kill_process_group", "kill_process_tree",
]

_READ_SIZE = 1 << 16
#: How long pipes may stay open after the command ended or was killed.
DRAIN_GRACE_SECONDS = 1.0


class OutputCapture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest; ``listener`` sees
    every chunk as it arrives (a terminal showing setup output live)."""

    def __init__(self, cap: int, listener: Callable[[bytes], None] | None = None) -> None:
        self.cap = cap
        self.buffer = bytearray()
        self.total = 0
        self.listener = listener

    def feed(self, data: bytes) -> None:
        """Take one chunk."""
        if self.listener is not None and data:
            self.listener(data)
        self.total += len(data)
        room = self.cap - len(self.buffer)
        if room > 0:
            self.buffer += data[:room]

    @property
    def data(self) -> bytes:
        """What was kept."""
        return bytes(self.buffer)


@dataclass
class LocalOutcome:
    """The raw outcome of one supervised process."""

    exit_code: int | None
    stdout: OutputCapture
    stderr: OutputCapture
    timed_out: bool
    stopped: bool
    duration: float
    peak_rss: int | None
    cpu_seconds: float | None
    status: bytes = b""

    def result(self, argv: tuple[str, ...]) -> ExecResult:
        """The backend-neutral :class:`ExecResult` of this outcome."""
        return ExecResult(
            argv=argv, exit_code=self.exit_code, stdout=self.stdout.data,
            stderr=self.stderr.data, stdout_bytes=self.stdout.total,
            stderr_bytes=self.stderr.total, timed_out=self.timed_out, stopped=self.stopped,
            duration_seconds=self.duration, peak_rss_bytes=self.peak_rss,
            cpu_seconds=self.cpu_seconds,
        )


@dataclass(eq=False)
class RunningProcess:
    """One supervised process, as the backend's ``kill`` sees it."""

    popen: subprocess.Popen[bytes]
    pidfd: int
    kill: Callable[[RunningProcess], None]
    stopped: bool = False
    killed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kill_once(self) -> None:
        with self.lock:
            if self.killed:
                return
            self.killed = True
        self.kill(self)


def captures(cap: int, on_output: Callable[[str, bytes], None] | None
             ) -> tuple[OutputCapture, OutputCapture]:
    """stdout's and stderr's captures, each telling ``on_output`` which stream it is."""
    if on_output is None:
        return OutputCapture(cap), OutputCapture(cap)
    return (OutputCapture(cap, lambda data: on_output("stdout", data)),
            OutputCapture(cap, lambda data: on_output("stderr", data)))


def kill_process_group(running: RunningProcess) -> None:
    """Kill what is left of the command's process group, after the command itself exited.

    A walk of the process table here would find nothing more: an exited command's
    children were reparented (to init) the moment it exited, so no descendant is left to
    find, and a scan of every process after every command only cost time. What stayed in
    the group (``sleep &``) dies here; what left it (``setsid``) survives on the host
    backend, as it always did (the escape tests mark it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(running.popen.pid, signal.SIGKILL)


def kill_process_tree(running: RunningProcess) -> None:
    """Kill the process group and every descendant psutil can still see."""
    pid = running.popen.pid
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()


#: What stops a run from outside (corral's CLI raises SIGTERM and SIGHUP as Ctrl-C).
_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _HeldStops:
    """Holds Ctrl-C, SIGTERM and SIGHUP back while a command is being started.

    Python raises a signal's exception wherever the main thread is. Raised inside
    ``subprocess.Popen`` after the fork (it waits there for the exec), the command runs
    on with no handle left to kill it: under load the command is already running then
    (seen: 2 of 90 stopped runs left their command behind while a test suite ran
    beside them). So the handlers are swapped for a recorder until the command is
    registered, and a stop that came meanwhile is sent again on :meth:`release`,
    where the caller's ``except`` kills the command. Only the main thread receives
    signals; elsewhere this does nothing. A blocked signal mask would be inherited by
    the command, which is why the handlers are swapped instead.
    """

    def __init__(self) -> None:
        self._before: dict[int, Any] = {}
        self._came: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for number in _STOPS:
                if signal.getsignal(number) is not None:  # None: set outside Python, kept
                    self._before[number] = signal.signal(number, self._record)

    def _record(self, signum: int, frame: object) -> None:
        self._came.append(signum)

    def release(self) -> None:
        """Put the handlers back, then send again the first stop that came (idempotent)."""
        before, self._before = self._before, {}
        for number, handler in before.items():
            signal.signal(number, handler)
        came, self._came = self._came, []
        if came:
            signal.raise_signal(came[0])


def _end_interrupted(running: RunningProcess) -> None:
    """Kill and reap a command whose supervision was interrupted (Ctrl-C or SIGTERM raised
    as KeyboardInterrupt inside the selector, a failing output listener): without this
    the command outlived its run, its workspace and corral itself. Not yet reaped, its
    pid cannot have been reused, so the kill reaches the command's own group."""
    if running.popen.returncode is not None:
        return  # reaped: it ended, and ``after_exit`` already ran
    running.stopped = True
    running.kill_once()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(running.popen.pid, 0)
    running.popen.returncode = -signal.SIGKILL


class LocalRunner:
    """Runs commands as local processes and can stop every one of them at once."""

    def __init__(self) -> None:
        self._running: set[RunningProcess] = set()
        self._mutex = threading.Lock()

    def stop_all(self) -> None:
        """Kill every running command (they return with ``stopped=True``)."""
        with self._mutex:
            running = list(self._running)
        for item in running:
            item.stopped = True
            item.kill_once()

    @property
    def busy(self) -> bool:
        """Whether any command is running."""
        with self._mutex:
            return bool(self._running)

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        timeout: float,
        output_cap: int,
        kill: Callable[[RunningProcess], None] = kill_process_tree,
        after_exit: Callable[[RunningProcess], None] | None = None,
        status_fd: tuple[int, int] | None = None,
        on_output: Callable[[str, bytes], None] | None = None,
    ) -> LocalOutcome:
        """Run ``argv``; ``status_fd`` is a (read, write) pipe the child reports on;
        ``on_output(stream, chunk)`` sees the output as it arrives."""
        start = time.monotonic()
        held = _HeldStops()  # until the command has a handle that can kill it
        try:
            popen = subprocess.Popen(  # noqa: S603 - argv built by the backend, never a shell
                list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=dict(env), cwd=cwd, start_new_session=True,
                close_fds=True, pass_fds=(status_fd[1],) if status_fd else (),
            )
        except OSError as exc:
            if status_fd:
                os.close(status_fd[0])
            held.release()
            raise SandboxError(f"could not start {argv[0]}: {exc}", code="spawn_failed",
                               operation="exec") from exc
        except BaseException:
            held.release()
            raise
        finally:
            if status_fd:
                os.close(status_fd[1])
        running = RunningProcess(popen, os.pidfd_open(popen.pid), kill)
        with self._mutex:
            self._running.add(running)
        try:
            held.release()  # a stop that came meanwhile is raised here, and kills the command
            return self._supervise(running, start, timeout, output_cap, after_exit,
                                   status_fd[0] if status_fd else None, on_output)
        except BaseException:
            _end_interrupted(running)
            raise
        finally:
            with self._mutex:
                self._running.discard(running)
            os.close(running.pidfd)
            for stream in (popen.stdout, popen.stderr):
                if stream is not None:
                    stream.close()
            if status_fd:
                os.close(status_fd[0])

    def _supervise(
        self,
        running: RunningProcess,
        start: float,
        timeout: float,
        output_cap: int,
        after_exit: Callable[[RunningProcess], None] | None,
        status_read: int | None,
        on_output: Callable[[str, bytes], None] | None = None,
    ) -> LocalOutcome:
        popen = running.popen
        if popen.stdout is None or popen.stderr is None:  # pragma: no cover - PIPE above
            raise RuntimeError("subprocess pipes missing")
        out, err = captures(output_cap, on_output)
        status = OutputCapture(1 << 16)
        sinks = {popen.stdout.fileno(): out, popen.stderr.fileno(): err}
        if status_read is not None:
            sinks[status_read] = status
        selector = selectors.DefaultSelector()
        for fd in sinks:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(running.pidfd, selectors.EVENT_READ)
        deadline = start + timeout
        exited_at: float | None = None
        timed_out = False
        try:
            while sinks or exited_at is None:
                now = time.monotonic()
                if exited_at is None and now >= deadline and not running.killed:
                    timed_out = True
                    running.kill_once()
                if exited_at is not None and now >= exited_at + DRAIN_GRACE_SECONDS:
                    break
                limit = deadline if exited_at is None else exited_at + DRAIN_GRACE_SECONDS
                if running.killed and exited_at is None:
                    limit = now + DRAIN_GRACE_SECONDS
                for key, _ in selector.select(max(0.0, limit - now)):
                    fd = int(key.fd)
                    if fd == running.pidfd:
                        exited_at = time.monotonic()
                        selector.unregister(fd)
                        if after_exit is not None:
                            after_exit(running)
                        continue
                    chunk = os.read(fd, _READ_SIZE)
                    if chunk:
                        sinks[fd].feed(chunk)
                    else:
                        selector.unregister(fd)
                        del sinks[fd]
        finally:
            selector.close()
        end = exited_at or time.monotonic()
        if exited_at is None:  # killed but not yet seen exiting: make sure, then reap
            running.kill_once()
        _, wait_status, usage = os.wait4(popen.pid, 0)
        popen.returncode = code = os.waitstatus_to_exitcode(wait_status)
        stopped = running.stopped and not timed_out
        exit_code = None if (timed_out or stopped) else (code if code >= 0 else 128 - code)
        return LocalOutcome(
            exit_code=exit_code, stdout=out, stderr=err, timed_out=timed_out, stopped=stopped,
            duration=end - start, peak_rss=usage.ru_maxrss * 1024,
            cpu_seconds=usage.ru_utime + usage.ru_stime, status=status.data,
        )
