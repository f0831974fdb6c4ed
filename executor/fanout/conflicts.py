"""Which children's diffs conflict: a matrix from their paths and hunks.

Each diff is read into files and, per file, its *change blocks*: runs of
removed and added lines at a place of the base file (a hunk's context lines
are not part of a block). Two diffs of the same base, for one path:

- the **same change** (same old and new blob, same modes, same paths) is never
  a conflict: either one applied, the other is already there;
- one side **deletes or renames the path** while the other changes it, both
  **add** it with different content, either side is **binary**, or they give
  it different **modes** or **types** (a file, a symlink): a conflict;
- both **edit** it: a conflict when a block of one overlaps or touches a block
  of the other (a change right next to another conflicts, as in ``git
  merge``: ``xdiff`` merges two changes only when one ends strictly before the
  other begins), unless the two blocks are identical (same place, same lines
  removed, same lines added); otherwise the two change the **same file** without
  conflicting: both apply one after the other (a plain ``corral apply`` of the
  second refuses when the first changed lines of its context; ``--3way`` then
  merges it).

Two diffs that share no path never conflict: ``corral apply`` applies them one
after the other. The rule is the one ``git merge-file`` follows, and tests
hold the two together.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations

__all__ = ["Block", "FilePatch", "PairResult", "compare", "matrix", "parse_patch"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(?: (\d{6}))?$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class Block:
    """One change of a file: ``removed`` lines from base line ``start`` (1-based; for a
    pure insertion, the line it goes before), replaced by ``added``; ``eof``: which side's
    last line has no newline (``-``, ``+``, both, or neither)."""

    start: int
    removed: tuple[str, ...]
    added: tuple[str, ...]
    eof: str = ""

    @property
    def end(self) -> int:
        """The base line just after the block (``start`` for an insertion)."""
        return self.start + len(self.removed)


@dataclass
class FilePatch:
    """One file of a diff."""

    old_path: str | None
    new_path: str | None
    old_mode: str | None = None
    new_mode: str | None = None
    old_blob: str = ""
    new_blob: str = ""
    binary: bool = False
    blocks: list[Block] = field(default_factory=list)

    @property
    def paths(self) -> set[str]:
        """Every path it reads or writes."""
        return {p for p in (self.old_path, self.new_path) if p is not None}

    @property
    def added(self) -> int:
        return sum(len(b.added) for b in self.blocks)

    @property
    def removed(self) -> int:
        return sum(len(b.removed) for b in self.blocks)

    def same_change(self, other: FilePatch) -> bool:
        """Whether both make exactly the same change."""
        return (self.old_path, self.new_path, self.old_mode, self.new_mode, self.old_blob,
                self.new_blob, self.blocks) == (other.old_path, other.new_path, other.old_mode,
                                                other.new_mode, other.old_blob, other.new_blob,
                                                other.blocks) and bool(self.new_blob)


def _unquote(text: str) -> str:
    """A path as git writes it: C-quoted (octal bytes for non-ASCII) when it must be."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        return text
    out = bytearray()
    body, i = text[1:-1], 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1:i + 2] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
    return out.decode("utf-8", "surrogateescape")


def _strip(path: str, prefix: str) -> str | None:
    path = _unquote(path.split("\t", maxsplit=1)[0] if not path.startswith('"') else path)
    if path == "/dev/null":
        return None
    return path.removeprefix(prefix)


def _header_paths(rest: str) -> tuple[str, str]:
    """The two paths of ``diff --git a/X b/Y`` (used when no other line names them)."""
    if rest.startswith('"'):
        end = rest.index('"', 1)
        while rest[end - 1] == "\\":
            end = rest.index('"', end + 1)
        first, second = rest[:end + 1], rest[end + 2:]
        return _unquote(first)[2:], _unquote(second)[2:]
    half = (len(rest) - 5) // 2  # "a/P b/P": one path twice, when unquoted and unrenamed
    return rest[2:2 + half], rest[5 + half:]


def _hunk(lines: list[str], i: int, match: re.Match[str]) -> tuple[list[Block], int]:
    """The blocks of the hunk whose header ``match`` is at ``lines[i]``; the next index."""
    old_start, old_count = int(match.group(1)), int(match.group(2) or "1")
    new_count = int(match.group(4) or "1")
    line = old_start if old_count else old_start + 1
    blocks: list[Block] = []
    start, eof, previous = 0, "", ""
    removed: list[str] = []
    added: list[str] = []
    old_left, new_left = old_count, new_count
    i += 1

    def flush() -> None:
        nonlocal removed, added, eof
        if removed or added:
            blocks.append(Block(start, tuple(removed), tuple(added), eof))
        removed, added, eof = [], [], ""

    while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
        text = lines[i]
        kind, body = text[:1], text[1:]
        if kind == "\\":  # "\ No newline at end of file": of the line before it
            if previous in ("-", "+") and (removed or added):
                eof += previous
        elif kind == "-":
            if not (removed or added):
                start = line
            removed.append(body)
            line += 1
            old_left -= 1
        elif kind == "+":
            if not (removed or added):
                start = line
            added.append(body)
            new_left -= 1
        else:  # context
            flush()
            line += 1
            old_left -= 1
            new_left -= 1
        previous = kind if kind != "\\" else previous
        i += 1
    flush()
    return blocks, i


def parse_patch(patch: bytes) -> list[FilePatch]:
    """The files of a ``git diff`` patch, with their change blocks."""
    lines = patch.decode("utf-8", "surrogateescape").split("\n")
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            old, new = _header_paths(line[len("diff --git "):])
            current = FilePatch(old_path=old, new_path=new)
            files.append(current)
        elif current is None:
            pass
        elif line.startswith("new file mode "):
            current.old_path, current.new_mode = None, line.split()[-1]
        elif line.startswith("deleted file mode "):
            current.new_path, current.old_mode = None, line.split()[-1]
        elif line.startswith("old mode "):
            current.old_mode = line.split()[-1]
        elif line.startswith("new mode "):
            current.new_mode = line.split()[-1]
        elif line.startswith(("rename from ", "copy from ")):
            current.old_path = _unquote(line.split(" ", 2)[2])
        elif line.startswith(("rename to ", "copy to ")):
            current.new_path = _unquote(line.split(" ", 2)[2])
        elif (found := _INDEX.match(line)) is not None:
            current.old_blob, current.new_blob = found.group(1), found.group(2)
            if found.group(3):
                current.old_mode = current.old_mode or found.group(3)
                current.new_mode = current.new_mode or found.group(3)
        elif line.startswith("--- "):
            current.old_path = _strip(line[4:], "a/")
        elif line.startswith("+++ "):
            current.new_path = _strip(line[4:], "b/")
        elif line.startswith(("GIT binary patch", "Binary files ")):
            current.binary = True
            while i + 1 < len(lines) and not lines[i + 1].startswith("diff --git "):
                i += 1  # base85 lines may start with + or -: never read them as a hunk
        elif (hunk := _HUNK.match(line)) is not None:
            blocks, i = _hunk(lines, i, hunk)
            current.blocks += blocks
            continue
        i += 1
    return files


@dataclass(frozen=True)
class PairResult:
    """How two diffs relate: paths that conflict (with why) and paths both change cleanly."""

    conflicts: dict[str, str]
    same_files: tuple[str, ...]


def _overlap(first: Block, second: Block) -> bool:
    if first == second:
        return False
    return not (first.end < second.start or second.end < first.start)


def _why(mine: FilePatch, theirs: FilePatch, path: str) -> str | None:
    """Why two changes of ``path`` conflict, or ``None`` (see the module docstring)."""
    for one in (mine, theirs):
        if one.new_path is None and path == one.old_path:
            return "deleted by one, changed by the other"
        if one.old_path == path and one.new_path not in (None, path):
            return f"renamed to {one.new_path} by one, changed by the other"
    if mine.old_path is None and theirs.old_path is None:
        return "added by both, with different content"
    if mine.binary or theirs.binary:
        return "a binary change"
    if (mine.old_mode, mine.new_mode) != (theirs.old_mode, theirs.new_mode) and (
            mine.old_mode != mine.new_mode or theirs.old_mode != theirs.new_mode):
        return "a mode or type change"
    for block in mine.blocks:
        for other_block in theirs.blocks:
            if _overlap(block, other_block):
                lines = (f"{block.start}" if block.end - block.start <= 1 else
                         f"{block.start}-{block.end - 1}")
                return f"both change lines near {lines}"
    return None


def compare(first: Sequence[FilePatch], second: Sequence[FilePatch]) -> PairResult:
    """How two diffs of one base relate, path by path."""
    conflicts: dict[str, str] = {}
    shared: set[str] = set()
    for mine in first:
        for theirs in second:
            common = mine.paths & theirs.paths
            if not common or mine.same_change(theirs):
                continue
            for path in sorted(common):
                why = _why(mine, theirs, path)
                if why is not None:
                    conflicts.setdefault(path, why)
                else:
                    shared.add(path)
    return PairResult(conflicts, tuple(sorted(shared - set(conflicts))))


def matrix(diffs: Sequence[tuple[str, Sequence[FilePatch]]]
           ) -> Iterator[tuple[str, str, PairResult]]:
    """Every pair of (id, files) that shares a path: (id a, id b, how they relate)."""
    for (first_id, first), (second_id, second) in combinations(diffs, 2):
        result = compare(first, second)
        if result.conflicts or result.same_files:
            yield first_id, second_id, result
