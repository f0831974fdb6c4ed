"""Bounded, symlink-free reading of definition files.

Discovery reads files that an untrusted repository controls, so every read is
bounded (256 KiB per file) and never follows a symlink or opens a special
file: a FIFO would hang the loader, a device could be anything, and a symlink
could point at a file outside the repository.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from policies.loader.diagnostics import DefinitionRejected

__all__ = [
    "MAX_FILES_PER_SCOPE", "MAX_FILE_BYTES", "MAX_HEADER_BYTES", "decode_text", "read_bounded",
]

MAX_FILE_BYTES = 256 * 1024
MAX_HEADER_BYTES = 32 * 1024
MAX_FILES_PER_SCOPE = 256


def read_bounded(path: Path, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """Read a regular file of at most ``limit`` bytes without following symlinks."""
    try:
        info = path.lstat()
    except FileNotFoundError as exc:
        raise DefinitionRejected("file", "the file does not exist", code="file_missing") from exc
    except OSError as exc:
        raise DefinitionRejected("file", f"cannot stat the file: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise DefinitionRejected(
            "file",
            "symlinks are not followed",
            hint="copy the definition into place instead of linking it",
            code="symlink",
        )
    if not stat.S_ISREG(info.st_mode):
        raise DefinitionRejected("file", "not a regular file (special files are rejected)",
                                 code="special_file")
    if info.st_size > limit:
        raise DefinitionRejected(
            "file",
            f"the file is {info.st_size} bytes; definitions are limited to {limit} bytes",
            code="too_large",
        )
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DefinitionRejected("file", "symlinks are not followed", code="symlink") from exc
        raise DefinitionRejected("file", f"cannot open the file: {exc.strerror}") from exc
    try:
        # The path may have been swapped between lstat and open: check the fd.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DefinitionRejected("file", "not a regular file (special files are rejected)",
                                     code="special_file")
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise DefinitionRejected(
            "file", f"the file grew past the {limit}-byte limit while being read", code="too_large"
        )
    return data


def decode_text(data: bytes) -> str:
    """Decode UTF-8 (a BOM is dropped) and normalize CRLF and lone CR to LF."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DefinitionRejected(
            "file",
            f"not valid UTF-8 (byte {exc.start}, line {line})",
            line=line,
            hint="save the file as UTF-8",
            code="encoding",
        ) from exc
    if "\x00" in text:
        raise DefinitionRejected("file", "contains NUL bytes (binary file?)", code="encoding")
    return text.replace("\r\n", "\n").replace("\r", "\n")
