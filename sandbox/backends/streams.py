"""Long-lived processes with stdin/stdout pipes (an MCP server), inside a sandbox or not.

A command (:meth:`sandbox.protocol.Sandbox.exec`) runs to its end and returns
its output; a *stream* stays up and talks: the caller writes requests to its
stdin and reads lines from its stdout, each read bounded by a deadline and
each line by a size limit, so a silent or chatty process can never stall or
flood the caller. Its stderr is drained all the time (a full pipe must not
block it) and only the last few KiB are kept, for error messages.

Two transports share :class:`StreamProcess`:

- :class:`PipeStream`: a local process (a ``bwrap`` built by the sandbox's own
  argv builder, so with the child's namespaces, mounts and limits; or, for an
  unconfined server, a plain host process in its own session);
- :class:`SocketStream`: a ``docker exec`` with stdin attached, over the
  engine's hijacked socket (frames of the multiplexed stdout/stderr stream).

Killing one is the backend's business (the whole PID namespace, the
container's processes of the child's uid, the host process tree); a stream
also dies with everything else of its sandbox (freeze, teardown).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox.backends.process import kill_process_tree
from sandbox.errors import SandboxError

__all__ = ["PipeStream", "SocketStream", "StreamClosed", "StreamProcess", "StreamTimeout",
           "start_host_stream"]

_READ_SIZE = 1 << 16
_STDERR_TAIL = 8 * 1024
_REAP_SECONDS = 5.0


class StreamClosed(SandboxError):
    """The process closed its output (it exited or was killed)."""

    code = "stream_closed"


class StreamTimeout(SandboxError):
    """No complete line arrived before the deadline."""

    code = "stream_timeout"
    retryable = True


class StreamProcess(ABC):
    """One long-lived process the caller talks to line by line."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._lock = threading.Lock()
        self._killed = False

    @abstractmethod
    def _write(self, data: bytes, deadline: float) -> None:
        """Write all of ``data`` or raise (closed, deadline)."""

    @abstractmethod
    def _read(self, timeout: float) -> bytes | None:
        """Stdout bytes (``b""``: end of output), or ``None`` when nothing came in time."""

    @abstractmethod
    def _terminate(self) -> None:
        """Kill the process and everything it started; release the transport."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the process may still answer."""

    def send(self, data: bytes, *, deadline: float) -> None:
        """Write ``data`` to the process's stdin."""
        if self._killed:
            raise StreamClosed("the process was stopped", operation="stream_send")
        self._write(data, deadline)

    def read_line(self, *, deadline: float, limit: int) -> bytes:
        """The next line of stdout (without its newline); at most ``limit`` bytes."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                if len(line) > limit:
                    raise SandboxError(f"the process wrote a line of {len(line)} bytes "
                                       f"(the limit is {limit})", code="stream_line_too_long",
                                       operation="stream_read")
                return line
            if len(self._buffer) > limit:
                raise SandboxError(f"the process wrote more than {limit} bytes without a "
                                   "newline", code="stream_line_too_long",
                                   operation="stream_read")
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimeout("no answer before the deadline", operation="stream_read")
            chunk = None if self._killed else self._read(left)
            if self._killed or chunk == b"":
                raise StreamClosed("the process closed its output (it exited or was "
                                   "stopped)", operation="stream_read",
                                   context={"stderr": self.stderr_tail()[-500:]})
            if chunk:
                self._buffer += chunk

    def read_some(self, *, timeout: float) -> bytes | None:
        """Whatever stdout holds now, for a relay (a person's terminal): ``b""`` at its
        end, ``None`` when nothing came within ``timeout`` seconds."""
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            return data
        if self._killed:
            return b""
        return self._read(timeout)

    def _keep_stderr(self, data: bytes) -> None:
        with self._lock:
            self._stderr += data
            del self._stderr[:-_STDERR_TAIL]

    def stderr_tail(self) -> str:
        """The last few KiB the process wrote to stderr."""
        with self._lock:
            return self._stderr.decode("utf-8", "replace")

    def kill(self) -> None:
        """Kill the process (idempotent)."""
        with self._lock:
            if self._killed:
                return
            self._killed = True
        self._terminate()


class PipeStream(StreamProcess):
    """A local process with pipes; ``kill`` is how the backend ends it and its descendants."""

    def __init__(self, popen: subprocess.Popen[bytes], kill: Callable[[PipeStream], None],
                 extra_fds: Sequence[int] = ()) -> None:
        super().__init__()
        self.popen = popen
        self.pidfd = os.pidfd_open(popen.pid)
        self._kill = kill
        self._extra_fds = list(extra_fds)
        if popen.stdout is None or popen.stdin is None or popen.stderr is None:
            raise RuntimeError("stream pipes missing")  # pragma: no cover - PIPE below
        os.set_blocking(popen.stdin.fileno(), False)
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True,
                                       name=f"stream-{popen.pid}-stderr")
        self._drain.start()

    @classmethod
    def start(cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path,
              kill: Callable[[PipeStream], None], pass_fd: int | None = None,
              keep_fd: int | None = None) -> PipeStream:
        """Start ``argv`` in its own session. ``pass_fd`` is handed to the child (then
        closed here); ``keep_fd`` is closed with the stream."""
        try:
            popen = subprocess.Popen(  # noqa: S603 - argv built by the backend, never a shell
                list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=dict(env), cwd=cwd, start_new_session=True,
                close_fds=True, pass_fds=(pass_fd,) if pass_fd is not None else (),
            )
        except OSError as exc:
            if keep_fd is not None:
                os.close(keep_fd)
            raise SandboxError(f"could not start {argv[0]}: {exc}", code="spawn_failed",
                               operation="open_stream") from exc
        finally:
            if pass_fd is not None:
                os.close(pass_fd)
        return cls(popen, kill, [keep_fd] if keep_fd is not None else [])

    def _drain_stderr(self) -> None:
        stream = self.popen.stderr
        assert stream is not None  # noqa: S101 - checked in __init__
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stream.fileno(), _READ_SIZE):
                self._keep_stderr(chunk)

    def _write(self, data: bytes, deadline: float) -> None:
        stdin = self.popen.stdin
        assert stdin is not None  # noqa: S101 - checked in __init__
        view = memoryview(data)
        with selectors.DefaultSelector() as selector:
            selector.register(stdin.fileno(), selectors.EVENT_WRITE)
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StreamTimeout("the process does not read its input",
                                        operation="stream_send")
                if not selector.select(left):
                    continue
                try:
                    written = os.write(stdin.fileno(), view)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, OSError) as exc:
                    raise StreamClosed(f"the process closed its input: {exc}",
                                       operation="stream_send") from exc
                view = view[written:]

    def _read(self, timeout: float) -> bytes | None:
        stdout = self.popen.stdout
        assert stdout is not None  # noqa: S101 - checked in __init__
        with selectors.DefaultSelector() as selector:
            selector.register(stdout.fileno(), selectors.EVENT_READ)
            if not selector.select(timeout):
                return None
        try:
            return os.read(stdout.fileno(), _READ_SIZE)
        except OSError:
            return b""

    @property
    def alive(self) -> bool:
        """See :class:`StreamProcess`."""
        return not self._killed and self.popen.poll() is None

    def _terminate(self) -> None:
        try:
            self._kill(self)
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(_REAP_SECONDS)
            for pipe in (self.popen.stdin, self.popen.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            self._drain.join(_REAP_SECONDS)
            if self.popen.stderr is not None:
                self.popen.stderr.close()
            os.close(self.pidfd)
            for fd in self._extra_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _kill_tree(stream: PipeStream) -> None:
    class _Running:  # the shape kill_process_tree reads
        popen = stream.popen

    kill_process_tree(_Running())  # type: ignore[arg-type]


def start_host_stream(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> PipeStream:
    """A process on the host, as the user, in its own session: no confinement at all
    (an MCP server the user installed with ``confine = false``). Killing it kills its
    process group and every descendant psutil still sees."""
    return PipeStream.start(argv, env=env, cwd=cwd, kill=_kill_tree)


class SocketStream(StreamProcess):
    """A ``docker exec`` with stdin attached: the engine multiplexes stdout and stderr on
    one socket in frames (1 byte stream, 3 zero bytes, 4 bytes big-endian length)."""

    def __init__(self, sock: Any, kill: Callable[[], None], alive: Callable[[], bool]) -> None:
        super().__init__()
        self._io = sock
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._frames = bytearray()
        self._kill = kill
        self._alive = alive
        self._eof = False

    def _write(self, data: bytes, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise StreamTimeout("the process does not read its input", operation="stream_send")
        try:
            self._sock.settimeout(left)
            self._sock.sendall(data)
        except TimeoutError as exc:
            raise StreamTimeout("the process does not read its input",
                                operation="stream_send") from exc
        except OSError as exc:
            raise StreamClosed(f"the process closed its input: {exc}",
                               operation="stream_send") from exc

    def _read(self, timeout: float) -> bytes | None:
        end = time.monotonic() + timeout
        while True:
            out = self._take_frames()
            if out:
                return out
            if self._eof:
                return b""
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                self._sock.settimeout(left)
                chunk = self._sock.recv(_READ_SIZE)
            except TimeoutError:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._frames += chunk

    def _take_frames(self) -> bytes:
        out = bytearray()
        while len(self._frames) >= 8:
            kind, size = self._frames[0], struct.unpack(">I", self._frames[4:8])[0]
            if len(self._frames) < 8 + size:
                break
            payload = bytes(self._frames[8:8 + size])
            del self._frames[:8 + size]
            if kind == 2:
                self._keep_stderr(payload)
            else:
                out += payload
        return bytes(out)

    @property
    def alive(self) -> bool:
        """See :class:`StreamProcess`."""
        return not self._killed and not self._eof and self._alive()

    def _terminate(self) -> None:
        try:
            self._kill()
        finally:
            with contextlib.suppress(OSError):
                self._sock.close()
            with contextlib.suppress(OSError):
                self._io.close()
