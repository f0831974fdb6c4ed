"""The host side of a warm sandbox: one supervisor per child, commands through its channel.

:mod:`sandbox.backends.warm_init` runs inside the sandbox (bubblewrap: the
namespace's PID 1; docker: one exec as the command's uid) and starts every
command of the child. This module speaks its framed protocol over a
:class:`Channel` (bubblewrap: the supervisor's stdin/stdout pipes; docker: the
exec's hijacked socket, whose output docker multiplexes with 8-byte headers).

The host never trusts the supervisor to answer: :meth:`Warm.run` waits until
the command's deadline plus :data:`BACKSTOP_GRACE_SECONDS`, and a supervisor
that is silent by then, or whose channel ends, is *lost*: the backend stops the
whole sandbox from outside (bubblewrap: the process and its cgroup; docker:
the reaper exec, then the container) and the next command starts a new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.backends import warm_init
from sandbox.backends.process import OutputCapture, captures
from sandbox.base import ExecSpec
from sandbox.errors import SandboxError
from sandbox.results import ExecResult

__all__ = [
    "BACKSTOP_GRACE_SECONDS", "Channel", "DockerChannel", "PipeChannel", "Warm", "WarmOutcome",
    "supervisor_argv",
]

#: How long after a command's deadline the host waits for the supervisor's report.
BACKSTOP_GRACE_SECONDS = 10.0
#: How long a new supervisor may take to say hello (Python's start in the sandbox).
HELLO_TIMEOUT_SECONDS = 60.0
_HEADER = 5
_MAX_FRAME = 64 << 20
_SOURCE = Path(warm_init.__file__).read_bytes()


def supervisor_argv(python: str, mode: str, egress: str | None = None) -> list[str]:
    """The supervisor's argv inside the sandbox (its source follows on stdin); ``egress``:
    the Unix socket of the egress proxy it relays ``127.0.0.1:3128`` to (no root)."""
    return [python, "-I", "-S", "-c", warm_init.BOOTSTRAP, mode,
            *([f"egress={egress}"] if egress else [])]


def frame(kind: bytes, payload: bytes) -> bytes:
    """One frame of the control protocol."""
    return kind + len(payload).to_bytes(4, "big") + payload


class Channel(ABC):
    """A byte stream to and from one supervisor."""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write everything (raises :class:`OSError` when the supervisor is gone)."""

    @abstractmethod
    def fileno(self) -> int:
        """The descriptor to wait on for :meth:`read`."""

    @abstractmethod
    def read(self) -> bytes | None:
        """Supervisor output available now: ``b""`` at end of stream, ``None`` when what
        arrived completed no payload yet; call when readable."""

    @abstractmethod
    def close(self) -> None:
        """Release the descriptors."""

    def diagnostics(self) -> str:
        """What the supervisor (or the tool that started it) said on stderr."""
        return ""


class PipeChannel(Channel):
    """The supervisor's stdin and stdout pipes (bubblewrap)."""

    def __init__(self, stdin: int, stdout: int, stderr: int | None = None) -> None:
        self._in, self._out, self._err = stdin, stdout, stderr
        self._shut = False

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._in, view):]

    def fileno(self) -> int:
        return self._out

    def read(self) -> bytes:
        return os.read(self._out, 1 << 16)

    def diagnostics(self) -> str:
        if self._err is None:
            return ""
        chunks = []
        while select.select([self._err], [], [], 0)[0]:
            chunk = os.read(self._err, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace").strip()

    def close(self) -> None:
        if self._shut:
            return  # a second close must never close a descriptor number reused since
        self._shut = True
        for fd in (self._in, self._out, self._err):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


class DockerChannel(Channel):
    """An exec's hijacked socket: docker frames the output (``tty=False``) with an 8-byte
    header (stream, 0, 0, 0, big-endian length); stream 1 is ours, stream 2 is stderr."""

    def __init__(self, attached: Any) -> None:
        # docker-py hands back a ``socket.SocketIO`` (unix engines) or the socket itself.
        self._attached = attached
        self._sock: socket.socket = getattr(attached, "_sock", None) or attached
        self._raw = bytearray()
        self._stderr = bytearray()

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self) -> bytes | None:
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            return b""
        self._raw += chunk
        out = bytearray()
        while len(self._raw) >= 8:
            size = int.from_bytes(self._raw[4:8], "big")
            if len(self._raw) < 8 + size:
                break
            stream, payload = self._raw[0], self._raw[8:8 + size]
            del self._raw[:8 + size]
            if stream == 1:
                out += payload
            elif len(self._stderr) < 1 << 16:
                self._stderr += payload
        # Only a header or part of a frame arrived: not the end of the stream.
        return bytes(out) if out else None

    def diagnostics(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace").strip()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        for closable in (getattr(self._attached, "_response", None), self._attached, self._sock):
            if closable is not None:
                with contextlib.suppress(OSError, ValueError):
                    closable.close()


@dataclass
class WarmOutcome:
    """One command as the supervisor reported it, or as far as the host saw it."""

    stdout: OutputCapture
    stderr: OutputCapture
    report: dict[str, Any] | None = None
    #: Whether the supervisor confirmed it started the command.
    started: bool = False
    #: The backstop expired with no report (the supervisor was silent past deadline + grace).
    overdue: bool = False
    duration: float = 0.0
    survivors: tuple[str, ...] = ()
    #: The host found a process the report said was gone: the sandbox must be stopped.
    distrusted: bool = False

    @property
    def lost(self) -> bool:
        """No report: the supervisor died or went silent."""
        return self.report is None

    @property
    def needs_stop(self) -> bool:
        """The host must stop the whole sandbox: no report, or the supervisor could not kill
        every process the command left."""
        return self.distrusted or self.report is None or not self.report.get("clean", False)

    def result(self, argv: tuple[str, ...], *, stopped: bool, lost_exit: int | None = None,
               killed: tuple[str, ...] = ()) -> ExecResult:
        """The backend-neutral result (``lost_exit``: the exit code of a lost supervisor;
        ``killed``: what the command left that was killed at its end)."""
        report = self.report or {}
        timed_out = bool(report.get("timed_out")) or (self.lost and self.overdue)
        stopped = stopped and not timed_out
        exit_code: int | None = None
        if not (timed_out or stopped):
            exit_code = report["exit"] if report else lost_exit
        return ExecResult(
            argv=argv, exit_code=exit_code, stdout=self.stdout.data, stderr=self.stderr.data,
            stdout_bytes=int(report.get("out_bytes", self.stdout.total)),
            stderr_bytes=int(report.get("err_bytes", self.stderr.total)),
            timed_out=timed_out, stopped=stopped,
            duration_seconds=float(report.get("duration", self.duration)),
            peak_rss_bytes=report.get("peak_rss") if report else None,
            cpu_seconds=report.get("cpu") if report else None,
            killed=killed,
        )


@dataclass(eq=False)
class Warm:
    """One live supervisor and its channel; used by one command at a time."""

    channel: Channel
    pid: int | None = None
    _buffer: bytearray = field(default_factory=bytearray)
    _closed: bool = False

    @classmethod
    def start(cls, channel: Channel, *, timeout: float = HELLO_TIMEOUT_SECONDS) -> Warm:
        """Send the supervisor its source and wait for its hello."""
        warm = cls(channel)
        try:
            channel.send(len(_SOURCE).to_bytes(4, "big") + _SOURCE)
            kind, payload = warm._next(time.monotonic() + timeout)
        except (OSError, _Ended) as exc:
            raise warm._failure("the sandbox's supervisor did not start") from exc
        if kind != b"H":
            raise warm._failure(f"the sandbox's supervisor sent {kind!r} before its hello")
        warm.pid = int(json.loads(payload)["pid"])
        return warm

    def _failure(self, message: str) -> SandboxError:
        said = self.channel.diagnostics()
        return SandboxError(f"{message}: {said[:500] or 'no output'}", code="warm_start_failed",
                            operation="exec")

    def idle_alive(self) -> bool:
        """Whether the channel is still open (an idle supervisor never writes)."""
        if self._closed:
            return False
        readable, _, _ = select.select([self.channel.fileno()], [], [], 0)
        return not readable

    def _next(self, deadline: float) -> tuple[bytes, bytes]:
        """The next frame; :class:`_Overdue` past ``deadline``, :class:`_Ended` at EOF."""
        while True:
            if len(self._buffer) >= _HEADER:
                size = int.from_bytes(self._buffer[1:_HEADER], "big")
                if size > _MAX_FRAME:
                    raise _Ended("oversized frame")
                if len(self._buffer) >= _HEADER + size:
                    kind = bytes(self._buffer[:1])
                    payload = bytes(self._buffer[_HEADER:_HEADER + size])
                    del self._buffer[:_HEADER + size]
                    return kind, payload
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Overdue
            readable, _, _ = select.select([self.channel.fileno()], [], [], left)
            if not readable:
                continue
            chunk = self.channel.read()
            if chunk is None:
                continue
            if not chunk:
                self._closed = True
                raise _Ended("end of stream")
            self._buffer += chunk

    def run(self, spec: ExecSpec) -> WarmOutcome:
        """Run one command; never raises for the child's own failures or a lost supervisor."""
        outcome = WarmOutcome(*captures(spec.output_cap, spec.on_output))
        command = {"argv": list(spec.argv), "cwd": str(spec.cwd), "env": spec.env,
                   "timeout": spec.timeout, "cap": spec.output_cap}
        start = time.monotonic()
        deadline = start + spec.timeout + BACKSTOP_GRACE_SECONDS
        try:
            self.channel.send(frame(b"C", json.dumps(command).encode()))
            while True:
                kind, payload = self._next(deadline)
                if kind == b"o":
                    outcome.stdout.feed(payload)
                elif kind == b"e":
                    outcome.stderr.feed(payload)
                elif kind == b"s":
                    outcome.started = True
                elif kind == b"R":
                    outcome.report = json.loads(payload)
                    outcome.survivors = tuple(outcome.report.get("survivors", ()))
                    break
        except _Overdue:
            outcome.overdue = True
        except (_Ended, OSError, ValueError, KeyError):
            self._closed = True
        outcome.duration = time.monotonic() - start
        if outcome.needs_stop:
            self._closed = True
        return outcome

    @property
    def usable(self) -> bool:
        """Whether another command may use this supervisor."""
        return not self._closed

    def close(self) -> None:
        """Close the channel (the supervisor then kills what is left and exits)."""
        self._closed = True
        self.channel.close()


class _Ended(Exception):
    """The channel ended or carried garbage."""


class _Overdue(Exception):
    """No frame before the deadline."""
