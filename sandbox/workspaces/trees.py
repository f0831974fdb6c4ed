"""Git trees read and written in conversation with one git process each.

:class:`TreeReader` keeps one ``git cat-file --batch`` open and reads tree
objects one at a time, so following a few paths down a 50k-file snapshot costs
a few objects, not the repository. :func:`replace_subtrees` builds a new root
tree from a base tree with some paths replaced: only the directories on the way
to a replaced path are read and rebuilt; their content and ids follow git's tree
format exactly (entries in git's order, git's hash), and :func:`store_trees` writes
them all as one pack with one ``git index-pack`` (``mktree`` writes a loose object
per tree, milliseconds each).

Both run hardened (:mod:`sandbox.gitsafe`); the reader with a reading environment
(it writes nothing), the writer with a writing one (its trees go to a private
store, never to a store whose objects git could "freshen").
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from sandbox.errors import SandboxError
from sandbox.gitsafe import run_git, spawn_git

__all__ = ["TREE_MODE", "Entry", "TreeReader", "replace_subtrees", "store_trees", "tree_object"]

#: The mode of a subtree entry, as git's index and ``ls-tree`` write it.
TREE_MODE = "040000"
#: (mode, object id) of one tree entry; the mode in six octal digits.
Entry = tuple[str, str]
_TREE = 2  # the pack type of a tree


class _Batch:
    """One git process spoken to through its stdin and stdout."""

    def __init__(self, args: list[str], *, git_dir: Path, env: Mapping[str, str],
                 operation: str) -> None:
        self._operation = operation
        self._errors: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._proc = spawn_git(args, git_dir=git_dir, env=env, stderr=self._errors,
                               operation=operation)
        if self._proc.stdin is None or self._proc.stdout is None:  # pragma: no cover
            raise RuntimeError("git pipes missing")
        self._stdin = self._proc.stdin
        self._stdout = self._proc.stdout

    def _failed(self, what: str) -> SandboxError:
        self._errors.seek(0)
        stderr = self._errors.read(2000).decode("utf-8", "replace").strip()
        return SandboxError(f"git {self._operation}: {what}: {stderr or 'no error output'}",
                            code="git_failed", operation=self._operation)

    def _ask(self, request: bytes) -> bytes:
        try:
            self._stdin.write(request)
            self._stdin.flush()
        except OSError as exc:
            raise self._failed(f"it stopped reading ({exc})") from exc
        line = self._stdout.readline()
        if not line.endswith(b"\n"):
            raise self._failed("it stopped answering")
        return line[:-1]

    def close(self) -> None:
        """End the conversation and wait for git."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        self._stdout.close()
        self._proc.wait()
        self._errors.close()

    def __enter__(self) -> _Batch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self._proc.kill()
        self.close()


class TreeReader(_Batch):
    """Reads commits and trees through ``git cat-file --batch``."""

    def __init__(self, *, git_dir: Path, env: Mapping[str, str]) -> None:
        super().__init__(["cat-file", "--batch"], git_dir=git_dir, env=env,
                         operation="read_tree")
        self._trees: dict[str, dict[str, Entry]] = {}

    def __enter__(self) -> TreeReader:
        return self

    def read(self, oid: str) -> tuple[str, bytes]:
        """(type, content) of one object."""
        header = self._ask(f"{oid}\n".encode()).decode("ascii", "replace").split(" ")
        if len(header) != 3:
            raise self._failed(f"object {oid} is {' '.join(header[1:]) or 'unreadable'}")
        size = int(header[2])
        data = self._stdout.read(size + 1)
        if len(data) != size + 1:
            raise self._failed(f"object {oid} was cut short")
        return header[1], data[:size]

    def commit_tree(self, commit: str) -> str:
        """The root tree of ``commit``."""
        kind, data = self.read(commit)
        first = data.split(b"\n", 1)[0].decode("ascii", "replace")
        if kind != "commit" or not first.startswith("tree "):
            raise self._failed(f"{commit} is not a commit")
        return first[5:]

    def tree(self, oid: str) -> dict[str, Entry]:
        """Name -> (mode, id) of one tree (cached)."""
        cached = self._trees.get(oid)
        if cached is not None:
            return cached
        kind, data = self.read(oid)
        if kind != "tree":
            raise self._failed(f"{oid} is a {kind}, not a tree")
        size = len(oid) // 2
        entries: dict[str, Entry] = {}
        pos = 0
        while pos < len(data):
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            mode = data[pos:space].decode("ascii").zfill(6)
            name = data[space + 1:nul].decode("utf-8", "surrogateescape")
            entries[name] = (mode, data[nul + 1:nul + 1 + size].hex())
            pos = nul + 1 + size
        self._trees[oid] = entries
        return entries

    def files(self, oid: str, prefix: str) -> Iterator[tuple[str, Entry]]:
        """Every non-tree entry below tree ``oid`` (paths start with ``prefix``)."""
        for name, (mode, inner) in self.tree(oid).items():
            if mode == TREE_MODE:
                yield from self.files(inner, f"{prefix}{name}/")
            else:
                yield f"{prefix}{name}", (mode, inner)


def tree_object(entries: Mapping[str, Entry], *, sha256: bool = False) -> tuple[str, bytes]:
    """(id, content) of the tree object holding ``entries`` (SHA-1 ids unless ``sha256``).

    Entries in git's order: names compared as bytes, a subtree's as if it ended in ``/``.
    """
    records = []
    for name, (mode, oid) in entries.items():
        raw = name.encode("utf-8", "surrogateescape")
        tree = mode == TREE_MODE
        records.append((raw + b"/" if tree else raw,
                        (b"40000 " if tree else mode.encode() + b" ") + raw + b"\0"
                        + bytes.fromhex(oid)))
    records.sort()
    content = b"".join(record for _, record in records)
    digest = hashlib.sha256 if sha256 else hashlib.sha1
    return digest(b"tree %d\0" % len(content) + content).hexdigest(), content


def _pack_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size (git's pack format, version 2)."""
    first = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(first | 0x80)
        first = size & 0x7F
        size >>= 7
    out.append(first)
    return bytes(out)


def store_trees(*, git_dir: Path, env: Mapping[str, str], trees: Mapping[str, bytes]) -> None:
    """Write ``trees`` (id -> content from :func:`tree_object`) into the object store ``env``
    names as one pack (``git index-pack --stdin``): one process, however many directories
    changed."""
    if not trees:
        return
    sha256 = len(next(iter(trees))) == 64
    body = bytearray(b"PACK" + struct.pack(">II", 2, len(trees)))
    for content in trees.values():
        body += _pack_header(_TREE, len(content)) + zlib.compress(content, 1)
    body += (hashlib.sha256 if sha256 else hashlib.sha1)(body).digest()
    run_git(["index-pack", "--stdin"], git_dir=git_dir, env=env, input_bytes=bytes(body),
            operation="write_tree")


@dataclass
class _Node:
    """A directory being rebuilt: its base entries, then the changes."""

    entries: dict[str, Entry] = field(default_factory=dict)
    children: dict[str, _Node] = field(default_factory=dict)


def _node(reader: TreeReader, entry: Entry | None) -> _Node:
    if entry is not None and entry[0] == TREE_MODE:
        return _Node(entries=dict(reader.tree(entry[1])))
    return _Node()


def _descend(reader: TreeReader, node: _Node, name: str) -> _Node:
    """The rebuilt directory ``name`` of ``node`` (a non-directory there is replaced)."""
    child = node.children.get(name)
    if child is None:
        child = _node(reader, node.entries.pop(name, None))
        node.children[name] = child
    return child


def _write(node: _Node, trees: dict[str, bytes], sha256: bool) -> str | None:
    """Compute ``node`` bottom-up into ``trees``; ``None`` when it ends up empty (git keeps no
    empty tree)."""
    entries = dict(node.entries)
    for name, child in node.children.items():
        oid = _write(child, trees, sha256)
        if oid is not None:
            entries[name] = (TREE_MODE, oid)
    if not entries:
        return None
    oid, content = tree_object(entries, sha256=sha256)
    trees[oid] = content
    return oid


def replace_subtrees(reader: TreeReader, base: str, roots: list[str],
                     entries: Mapping[str, Entry]) -> tuple[str, dict[str, bytes]]:
    """The tree ``base`` with everything at or below each of ``roots`` replaced by the
    ``entries`` (path -> entry) at or below it; every entry lies under some root.

    Reads only the directories on the way to a root or an entry; returns the new root
    tree's id and the trees to write (:func:`store_trees`).
    """
    top = _Node(entries=dict(reader.tree(base)))
    for root in roots:
        *parents, name = root.split("/")
        node = top
        for part in parents:
            node = _descend(reader, node, part)
        node.entries.pop(name, None)
        node.children.pop(name, None)
    for path, entry in entries.items():
        *parents, name = path.split("/")
        node = top
        for part in parents:
            node = _descend(reader, node, part)
        node.children.pop(name, None)
        node.entries[name] = entry
    trees: dict[str, bytes] = {}
    sha256 = len(base) == 64
    oid = _write(top, trees, sha256)
    if oid is None:  # everything deleted: the empty tree
        oid, content = tree_object({}, sha256=sha256)
        trees[oid] = content
    return oid, trees
