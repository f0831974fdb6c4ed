"""Run the real ``corral`` CLI with a pseudo-terminal as its terminal, and read what a
terminal would receive.

The pty's output processing (``OPOST``: ``\\n`` -> ``\\r\\n``) and echo are off, so
every byte read from the master side is a byte corral wrote: a ``\\r`` or an
``ESC`` in it came from corral, not from the line discipline. The window is wide
(``COLUMNS``) so rich never wraps a line in the middle of what a test looks for.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Terminal", "on_terminal", "raw_controls"]

COLUMNS = 1000


@dataclass
class Terminal:
    """What one CLI run left: its exit code, the terminal's bytes, and a piped stdout."""

    code: int
    screen: bytes
    stdout: bytes | None  # set when stdout went to a file instead of the terminal

    @property
    def text(self) -> str:
        """The terminal's bytes as text (invalid UTF-8 shown as U+FFFD)."""
        return self.screen.decode("utf-8", "replace")


def _pty() -> tuple[int, int]:
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST  # oflag: no \n -> \r\n translation
    attrs[3] &= ~termios.ECHO  # lflag: what a test types is not echoed into the screen
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, COLUMNS, 0, 0))
    return master, slave


def on_terminal(*args: str, cwd: Path | None = None, stdout_to: Path | None = None,
                tty_stdin: bool = False, answers: dict[bytes, bytes] | None = None,
                env: dict[str, str] | None = None) -> Terminal:
    """Run ``python -m executor ARGS`` with a pty as stderr (and stdout, unless
    ``stdout_to`` names a file; and stdin when ``tty_stdin``).

    ``answers`` maps a prompt the screen shows to the bytes typed after it (once each).
    """
    master, slave = _pty()
    pending = dict(answers or {})
    out_file = stdout_to.open("wb") if stdout_to is not None else None
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "executor", *args], cwd=cwd,
            stdin=slave if tty_stdin else subprocess.DEVNULL,
            stdout=out_file if out_file is not None else slave, stderr=slave,
            # Colours off and no pager unless a test asks (they are corral's own codes,
            # tested in test_diff_colours.py); the user's settings never leak in.
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS),
                 "LINES": "60", "NO_COLOR": "1", "PAGER": "cat", **(env or {})},
        )
    finally:
        os.close(slave)
        if out_file is not None:
            out_file.close()
    screen = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError as exc:  # EIO: every process holding the terminal is gone
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            screen += chunk
            for prompt in [p for p in pending if p in screen]:
                os.write(master, pending.pop(prompt))
    finally:
        os.close(master)
    code = process.wait()
    return Terminal(code=code, screen=bytes(screen),
                    stdout=stdout_to.read_bytes() if stdout_to is not None else None)


#: Bytes no text from a child may put on a terminal: C0 controls but tab and newline,
#: DEL, C1 controls as UTF-8, bidi controls, zero-width and line/paragraph separators.
_RAW = [bytes([c]) for c in range(0x20) if c not in (0x09, 0x0A)] + [b"\x7f"] + [
    chr(c).encode() for c in [*range(0x80, 0xA0), 0x200B, 0x200C, 0x200D, 0x2028, 0x2029,
                              *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF]
]


def raw_controls(data: bytes) -> list[bytes]:
    """The raw control sequences (of the list above) found in ``data``."""
    return [seq for seq in _RAW if seq in data]
