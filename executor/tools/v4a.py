"""The V4A patch format (``*** Begin Patch``), which GPT-family models write for apply_patch.

    *** Begin Patch
    *** Add File: path          then every line of the new file, each after ``+``
    *** Delete File: path
    *** Update File: path
    *** Move to: new/path       (optional, right after Update File)
    @@ def handler():           a chunk; the text after ``@@`` (optional) is a line to find
     context                    first, from where the previous chunk ended
    -removed
    +added
    *** End of File             (optional) the chunk ends the file
    *** End Patch

A chunk has no line numbers: its context and removed lines are looked up in the file,
from where the previous chunk of the same file ended (``*** End of File``: at the end),
as an exact run of lines, else one equal but for trailing whitespace, else one equal but
for surrounding whitespace (the tolerance the format's own applier has, no more). The
first match wins; no match fails the whole patch, naming the file and the chunk. What
this module computes goes through the same all-or-nothing writes as a unified diff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from executor.tools.dispatch import ToolFailure

__all__ = ["BEGIN", "Chunk", "FileOp", "apply_op", "is_v4a", "parse_v4a"]

BEGIN = "*** Begin Patch"
_END = "*** End Patch"
_ADD, _DELETE, _UPDATE, _MOVE = ("*** Add File: ", "*** Delete File: ", "*** Update File: ",
                                 "*** Move to: ")
_EOF = "*** End of File"


@dataclass
class Chunk:
    """One ``@@`` section of an Update File."""

    anchor: str | None
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_end: bool = False


@dataclass
class FileOp:
    """One file of the patch: ``kind`` is add, delete or update (``move_to``: renamed)."""

    kind: str
    path: str
    move_to: str | None = None
    added: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


def is_v4a(text: str) -> bool:
    """Whether ``text`` is a V4A patch (its first non-blank line opens one)."""
    return text.lstrip().startswith(BEGIN)


def parse_v4a(text: str) -> list[FileOp]:
    """The file operations of a V4A patch; :class:`ToolFailure` naming the line otherwise."""
    lines = text.strip().split("\n")
    lines = [line.removesuffix("\r") for line in lines]
    if lines[0].strip() != BEGIN:
        raise ToolFailure(f"line 1: a V4A patch starts with {BEGIN!r}")
    if lines[-1].strip() != _END:
        raise ToolFailure(f"the patch must end with {_END!r}")
    ops: list[FileOp] = []
    i = 1
    while i < len(lines) - 1:
        line = lines[i]
        if line.startswith(_ADD):
            op = FileOp("add", _path(line, _ADD, i))
            i += 1
            while i < len(lines) - 1 and not lines[i].startswith("*** "):
                if not lines[i].startswith("+"):
                    raise ToolFailure(f"line {i + 1}: every line of an added file starts with "
                                      f"'+': {lines[i][:60]!r}")
                op.added.append(lines[i][1:])
                i += 1
        elif line.startswith(_DELETE):
            op = FileOp("delete", _path(line, _DELETE, i))
            i += 1
        elif line.startswith(_UPDATE):
            op = FileOp("update", _path(line, _UPDATE, i))
            i += 1
            if i < len(lines) - 1 and lines[i].startswith(_MOVE):
                op.move_to = _path(lines[i], _MOVE, i)
                i += 1
            i = _chunks(lines, i, op)
        elif not line.strip():
            i += 1
            continue
        else:
            raise ToolFailure(f"line {i + 1}: expected '*** Add File:', '*** Delete File:' or "
                              f"'*** Update File:', found {line[:60]!r}")
        if any(other.path == op.path for other in ops):
            raise ToolFailure(f"the patch changes {op.path} twice; put all its chunks in one "
                              "Update File")
        ops.append(op)
    if not ops:
        raise ToolFailure("the patch changes no file")
    return ops


def _path(line: str, prefix: str, index: int) -> str:
    path = line[len(prefix):].strip()
    if not path:
        raise ToolFailure(f"line {index + 1}: {prefix.strip()} names no file")
    return path


def _chunks(lines: list[str], i: int, op: FileOp) -> int:
    """Read an Update File's chunks from line ``i``; the index after them."""
    chunk: Chunk | None = None
    while i < len(lines) - 1 and not (lines[i].startswith("*** ") and lines[i] != _EOF):
        line = lines[i]
        if line.startswith("@@"):
            chunk = Chunk(anchor=line[2:].strip() or None)
            op.chunks.append(chunk)
        elif line == _EOF:
            if chunk is None:
                raise ToolFailure(f"line {i + 1}: {_EOF!r} outside a chunk")
            chunk.at_end = True
        else:
            if chunk is None:  # the first chunk may leave out its @@ line
                chunk = Chunk(anchor=None)
                op.chunks.append(chunk)
            tag, body = (line[:1], line[1:]) if line else (" ", "")
            if tag not in " -+":
                raise ToolFailure(f"line {i + 1}: a chunk line starts with ' ', '-' or '+': "
                                  f"{line[:60]!r}")
            if tag in " -":
                chunk.old.append(body)
            if tag in " +":
                chunk.new.append(body)
        i += 1
    if not op.chunks or not any(c.old or c.new for c in op.chunks):
        raise ToolFailure(f"{op.path}: an Update File with no change")
    return i


_TOLERANCES: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip)


def _find(source: list[str], wanted: list[str], start: int, *, at_end: bool) -> int | None:
    """Where ``wanted`` starts in ``source`` at or after ``start`` (see the module)."""
    if not wanted:
        return len(source) if at_end else start
    last = len(source) - len(wanted)
    candidates = [last] if at_end else []
    candidates += range(start, last + 1)
    for norm in _TOLERANCES:
        target = [norm(line) for line in wanted]
        for at in candidates:
            if at >= start and [norm(line) for line in source[at:at + len(wanted)]] == target:
                return at
    return None


def apply_op(original: str, op: FileOp) -> str:
    """The new content of an updated file (``original`` its current text)."""
    crlf = "\r\n" in original and original.count("\r\n") == original.count("\n")
    text = original.replace("\r\n", "\n") if crlf else original
    ends = text.endswith("\n")
    source = text.split("\n")
    if ends:
        source.pop()
    position = 0
    for number, chunk in enumerate(op.chunks, start=1):
        if chunk.anchor is not None:
            found = _find(source, [chunk.anchor], position, at_end=False)
            if found is None:
                raise ToolFailure(f"{op.path}: chunk {number}: its @@ line "
                                  f"{chunk.anchor[:80]!r} is not in the file")
            position = found + 1
        at = _find(source, chunk.old, position, at_end=chunk.at_end)
        if at is None:
            shown = chunk.old[0][:80] if chunk.old else ""
            raise ToolFailure(f"{op.path}: chunk {number} does not apply: its lines (from "
                              f"{shown!r}) are not in the file after line {position}")
        source[at:at + len(chunk.old)] = chunk.new
        position = at + len(chunk.new)
    joined = "\n".join(source) + ("\n" if source and (ends or not text) else "")
    return joined.replace("\n", "\r\n") if crlf else joined
