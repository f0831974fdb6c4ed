"""What every way of computing a child's diff shares once its tree is staged.

A staged tree is compared with the snapshot by one git command prefix (``git
diff-index --cached <base>`` over an index, or ``git diff-tree -r <base>
<tree>`` between trees; both with rename detection, no external diff, no
textconv): :func:`finish` asks for ``--raw --numstat`` in one run (the changed
files, and which are binary), puts back any gitlink (submodule) change and
reports it as excluded (asking again), and returns a :class:`Prepared` whose ``write_patch`` streams
``-p --binary`` on demand. The same function over the same staged content gives
the same bytes, whichever way the content was staged.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from sandbox.names import review_flags
from sandbox.results import ChangedFile, ChangeStatus, DiffResult, ExcludedPath

__all__ = [
    "DIFF_OPTIONS",
    "Compare",
    "PatchWriter",
    "Prepared",
    "RawEntry",
    "finish",
    "gitlink_restore",
    "parse_raw",
]

#: Options of every comparison.
DIFF_OPTIONS = ("-M", "--no-ext-diff", "--no-textconv", "--no-color")
_STATUS: dict[str, ChangeStatus] = {
    "A": "added", "D": "deleted", "M": "modified", "R": "renamed", "T": "type_changed",
}
NULL_MODE = "000000"
_GITLINK = "160000"
_PATCH = ("-p", "--binary", "--src-prefix=a/", "--dst-prefix=b/")


@dataclass(frozen=True)
class RawEntry:
    """One line of ``--raw -z`` output."""

    old_mode: str
    new_mode: str
    old_sha: str
    status: str
    path: str
    old_path: str | None


def _parse_raw(tokens: list[bytes]) -> tuple[list[RawEntry], int]:
    """The ``--raw -z`` entries at the start of ``tokens``, and where they end."""
    entries: list[RawEntry] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith(b":"):
        old_mode, new_mode, old_sha, _new_sha, status = tokens[i][1:].decode().split(" ")
        paths = [t.decode("utf-8", "surrogateescape") for t in tokens[i + 1:i + 3]]
        if status[0] in "RC":
            entries.append(RawEntry(old_mode, new_mode, old_sha, status[0], paths[1], paths[0]))
            i += 3
        else:
            entries.append(RawEntry(old_mode, new_mode, old_sha, status[0], paths[0], None))
            i += 2
    return entries, i


def parse_raw(output: bytes) -> list[RawEntry]:
    """The entries of ``--raw -z`` output."""
    return _parse_raw(output.split(b"\0"))[0]


def _binary_paths(tokens: list[bytes]) -> set[str]:
    """The binary files of ``--numstat -z`` output (split at NULs)."""
    binary: set[str] = set()
    i = 0
    while i < len(tokens) and tokens[i]:
        added, deleted, path = tokens[i].split(b"\t", 2)
        if path:
            i += 1
        else:  # a rename: the old and new paths follow as their own tokens
            path = tokens[i + 2]
            i += 3
        if added == b"-" and deleted == b"-":
            binary.add(path.decode("utf-8", "surrogateescape"))
    return binary


def _raw_and_binary(output: bytes) -> tuple[list[RawEntry], set[str]]:
    """``--raw --numstat -z`` output (git prints every raw entry, then every numstat one):
    the entries and the binary paths."""
    tokens = output.split(b"\0")
    entries, end = _parse_raw(tokens)
    return entries, _binary_paths(tokens[end:])


def _changed(entry: RawEntry, binary: set[str], setid: Collection[str]) -> ChangedFile:
    old_mode = None if entry.old_mode == NULL_MODE else entry.old_mode
    new_mode = None if entry.new_mode == NULL_MODE else entry.new_mode
    flags = review_flags(entry.path, old_mode=old_mode, new_mode=new_mode)
    return ChangedFile(
        path=entry.path, status=_STATUS.get(entry.status, "modified"), old_path=entry.old_path,
        old_mode=old_mode, new_mode=new_mode, binary=entry.path in binary,
        flags=(*flags, "setid_cleared") if entry.path in setid else flags,
    )


def gitlink_restore(gitlinks: Sequence[RawEntry]) -> bytes:
    """``update-index -z --index-info`` records putting gitlink entries back as they were
    (removing one the child added)."""
    return b"".join(
        (f"{e.old_mode} {e.old_sha}\t{e.old_path or e.path}" if e.old_mode != NULL_MODE
         else f"0 {'0' * len(e.old_sha)}\t{e.path}").encode("utf-8", "surrogateescape") + b"\0"
        for e in gitlinks)


PatchWriter = Callable[[BinaryIO, int | None], int | None]


@dataclass(frozen=True)
class Prepared:
    """Everything of a diff but the patch bytes, and how to stream them."""

    result: DiffResult
    write_patch: PatchWriter


@dataclass(frozen=True)
class Compare:
    """How to compare the staged tree with the snapshot: ``[*head, <format>, *tail]``."""

    head: tuple[str, ...]
    tail: tuple[str, ...]

    def argv(self, *output: str) -> list[str]:
        """The command with its output options."""
        return [*self.head, *DIFF_OPTIONS, *output, *self.tail]


def finish(
    *,
    sandbox_id: str,
    base: str,
    compare: Compare,
    run: Callable[[list[str]], bytes],
    stream: Callable[[list[str], BinaryIO, int | None], int | None],
    restore: Callable[[list[RawEntry]], Compare],
    excluded: Sequence[ExcludedPath],
    setid: Collection[str],
    more: Callable[[list[RawEntry]], list[ChangedFile]] | None = None,
) -> Prepared:
    """List the changes ``compare`` shows and prepare the patch (module docstring).

    ``restore`` puts gitlink entries back and returns the comparison to use from
    then on; ``more`` adds changes the patch does not carry (workspace-write).
    """
    entries, binary = _raw_and_binary(run(compare.argv("--raw", "--numstat", "-z")))
    found = list(excluded)
    gitlinks = [e for e in entries if _GITLINK in (e.old_mode, e.new_mode)]
    if gitlinks:
        compare = restore(gitlinks)
        found += [ExcludedPath(path=e.path, reason="gitlink", detail="submodule commit change")
                  for e in gitlinks]
        entries, binary = _raw_and_binary(run(compare.argv("--raw", "--numstat", "-z")))
    changed = [_changed(entry, binary, setid) for entry in entries]
    if more is not None:
        changed += more(entries)
    final = compare

    def write_patch(sink: BinaryIO, limit: int | None) -> int | None:
        return stream(final.argv(*_PATCH), sink, limit)

    result = DiffResult(
        sandbox_id=sandbox_id, base_commit=base, patch=b"", changed=tuple(changed),
        excluded=tuple(sorted(found, key=lambda e: e.path)),
        setid_cleared=tuple(sorted(setid)),
    )
    return Prepared(result, write_patch)
