"""A person's interactive shell in a sandbox (``corral shell``), on a terminal of its own.

The shell never gets the person's terminal. A small helper runs inside the
sandbox (:data:`PTY_HELPER`, ``python3 -I -S -c``: no site, no user
directories, nothing of the workspace imported) as a long-lived process of the
sandbox (:meth:`sandbox.base.BaseSandbox.open_terminal`: the same namespaces,
mounts, limits and environment allowlist as its commands; bubblewrap starts it
with ``--new-session``). It opens a pseudo-terminal *inside* the sandbox,
starts the shell on it with the window size it was given, and copies bytes
between that pseudo-terminal and its own stdin/stdout. :func:`relay` copies
them on, between the stream and the person's descriptors (the caller puts its
terminal in raw mode). So nothing in the sandbox can reach the person's
terminal with an ioctl (``TIOCSTI`` pushes keys into the terminal it is
called on: here the sandbox's own), only write bytes to it, which is what a
shell does.

The helper's stderr carries one line when the shell ends, ``corral-exit N``
(``128 + signal`` for a signal), which :func:`relay` returns. A change of
the window's size after the start is not passed on.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sandbox.backends.streams import StreamProcess
from sandbox.errors import SandboxError

__all__ = ["PTY_HELPER", "TerminalIO", "relay", "terminal_argv"]

#: Runs inside the sandbox: ``python3 -I -S -c PTY_HELPER ROWS COLS ARGV...``.
PTY_HELPER = r"""
import fcntl, os, pty, select, struct, sys, termios
rows, cols, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)

def put(target, data):
    while data:
        data = data[os.write(target, data):]

reading, status = True, None
while True:
    ready = select.select([fd] + ([0] if reading else []), [], [], 0.2)[0]
    if fd in ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        put(1, data)
    if 0 in ready:
        data = os.read(0, 65536)
        if data:
            put(fd, data)
        else:
            reading = False
    if status is None:
        done, found = os.waitpid(pid, os.WNOHANG)
        if done:
            status = found
    elif not ready:
        break
if status is None:
    status = os.waitpid(pid, 0)[1]
code = os.waitstatus_to_exitcode(status)
sys.stderr.write("\ncorral-exit %d\n" % (code if code >= 0 else 128 - code))
sys.stderr.flush()
"""
_EXIT = re.compile(r"corral-exit (\d+)")
#: How long a keystroke may wait for the sandbox to read it.
_SEND_SECONDS = 30.0
_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class TerminalIO:
    """A person's terminal: the descriptor keys are read from, the one the screen is
    written to, its size and its ``TERM`` (kept only when it is a plain name).
    ``session``, when given, is entered around the copying and nothing else (the
    caller's raw mode: what is printed before and after reads as usual)."""

    input_fd: int
    output_fd: int
    rows: int = 24
    cols: int = 80
    term: str = "xterm"
    session: Callable[[], AbstractContextManager[None]] | None = None


def terminal_argv(argv: list[str], terminal: TerminalIO) -> list[str]:
    """The helper's argv inside the sandbox, running ``argv`` on a pseudo-terminal of
    ``terminal``'s size."""
    rows = min(max(terminal.rows, 1), 1000)
    cols = min(max(terminal.cols, 1), 1000)
    return ["python3", "-I", "-S", "-c", PTY_HELPER, str(rows), str(cols), *argv]


def safe_term(term: str) -> str:
    """``TERM`` for the sandbox: the person's when it is a plain terminal name."""
    return term if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}", term) else "xterm"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [], _POLL_SECONDS)


def relay(stream: StreamProcess, terminal: TerminalIO) -> int | None:
    """Copy the person's keys to ``stream`` and its output to the screen until the shell
    ends; its exit code (``None``: it ended without saying, e.g. killed). The stream is
    killed before this returns."""
    finished = threading.Event()

    def keys() -> None:
        while not finished.is_set():
            ready = select.select([terminal.input_fd], [], [], _POLL_SECONDS)[0]
            if not ready:
                continue
            try:
                data = os.read(terminal.input_fd, 65536)
            except OSError:
                return
            if not data:
                return  # end of input: the shell goes on with what it has
            try:
                stream.send(data, deadline=time.monotonic() + _SEND_SECONDS)
            except SandboxError:
                return

    reader = threading.Thread(target=keys, name="corral-shell-keys", daemon=True)
    with contextlib.ExitStack() as stack:
        if terminal.session is not None:
            stack.enter_context(terminal.session())
        reader.start()
        _copy(stream, terminal, finished, reader)
    said = _EXIT.findall(stream.stderr_tail())
    return int(said[-1]) if said else None


def _copy(stream: StreamProcess, terminal: TerminalIO, finished: threading.Event,
          reader: threading.Thread) -> None:
    """The stream's output to the screen until it ends; then the keys' reader stopped and
    the stream killed."""
    try:
        while True:
            chunk = stream.read_some(timeout=_POLL_SECONDS)
            if chunk is None:
                if not stream.alive:
                    break
                continue
            if not chunk:
                break
            _write_all(terminal.output_fd, chunk)
    finally:
        finished.set()
        reader.join(_POLL_SECONDS * 5)
        with contextlib.suppress(SandboxError):
            stream.kill()
