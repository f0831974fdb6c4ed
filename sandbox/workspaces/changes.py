"""What a child changed in the user's checkout that git's diff cannot show (workspace-write).

In ``workspace-write`` mode the child edits the user's checkout itself, and the
diff's base is the snapshot, which leaves out ignored files, nested
repositories' contents, ``.git`` aliases and special files. So at creation the
workspace records an lstat manifest of the whole tree (:func:`sandbox.workspaces.scan.scan_tree`,
:class:`TreeRecord`, also saved next to the sandbox's state for gc), and every
collection compares it with the tree as it is (:func:`outside_changes`). Each
difference git's diff does not already report becomes a
:class:`sandbox.results.ChangedFile` with ``in_patch=False``, a status
(``added``, ``deleted``, ``modified``, ``type_changed``) and flags saying why
git does not carry it:

- ``ignored``: matched by ignore rules (neither the snapshot nor the final index
  holds it);
- ``nested_repository``: inside a repository of its own (before or after);
- ``special_file``: a FIFO, socket or device node (before or after);
- ``protected_name``: under a ``.git`` alias;
- ``unreadable``: a directory the walk could not read, before or after (its
  contents are not compared);
- ``directory``: a directory added, removed or replaced, an empty one, or one
  whose mode changed (git records no directories);
- ``mode_change`` / ``owner_change``: permission bits git does not record (all but
  the owner's execute bit), or the owner, changed on a file git tracks.

A whole directory added, deleted or replaced outside what git tracks (``npm
install`` into an ignored ``node_modules``) is one entry whose ``detail``
counts what it held; a tracked file whose content did not change (git says so)
is never reported for its timestamps alone.
"""

from __future__ import annotations

import stat
import struct
from array import array
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxError
from sandbox.names import has_git_alias, is_under
from sandbox.results import ChangedFile, ChangeStatus
from sandbox.workspaces.scan import Manifest, ScanResult, Stat, kind_of

__all__ = ["RECORD_FILE", "TreeRecord", "outside_changes"]

#: The saved :class:`TreeRecord` of a workspace-write sandbox, in its state dir.
RECORD_FILE = "tree.manifest"

_MAGIC = b"corral-tree-manifest-1\n"
_HEADER = struct.Struct("<QQQQ")
_SIGNED_FIELDS = 7  # mode, size, mtime_ns, ctime_ns, uid, gid, rdev (the inode is unsigned)
_SPECIAL = frozenset({"fifo", "socket", "device", "unknown"})


def _join(items: Iterable[str]) -> bytes:
    return b"\0".join(item.encode("utf-8", "surrogateescape") for item in items)


def _split(blob: bytes) -> list[str]:
    return [part.decode("utf-8", "surrogateescape") for part in blob.split(b"\0")] if blob else []


@dataclass(frozen=True)
class TreeRecord:
    """One walk of the tree: its manifest, nested repositories and unreadable directories."""

    entries: Manifest
    nested: frozenset[str] = frozenset()
    unreadable: frozenset[str] = frozenset()

    @classmethod
    def of(cls, scan: ScanResult) -> TreeRecord:
        """The record of a scan made with ``manifest=True``."""
        if scan.manifest is None:
            raise ValueError("the scan recorded no manifest")
        return cls(entries=scan.manifest,
                   nested=frozenset(path.removesuffix("/.git") for path in scan.nested_git),
                   unreadable=frozenset(scan.unreadable))

    def save(self, path: Path) -> None:
        """Write the record (compact binary: a tree of 100k entries takes milliseconds)."""
        paths = _join(self.entries)
        nested, unreadable = _join(sorted(self.nested)), _join(sorted(self.unreadable))
        signed = array("q")
        inodes = array("Q")
        for mode, size, mtime, ctime, ino, uid, gid, rdev in self.entries.values():
            signed.extend((mode, size, mtime, ctime, uid, gid, rdev))
            inodes.append(ino)
        header = _HEADER.pack(len(self.entries), len(paths), len(nested), len(unreadable))
        with path.open("wb") as handle:
            for part in (_MAGIC, header, paths, nested, unreadable, signed.tobytes(),
                         inodes.tobytes()):
                handle.write(part)

    @classmethod
    def load(cls, path: Path) -> TreeRecord:
        """Read a saved record; :class:`SandboxError` (``manifest_invalid``) if it is not one."""
        try:
            data = path.read_bytes()
            if not data.startswith(_MAGIC):
                raise ValueError("not a tree manifest")
            offset = len(_MAGIC)
            count, *sizes = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            blobs = []
            for size in sizes:
                blobs.append(data[offset:offset + size])
                offset += size
            signed, inodes = array("q"), array("Q")
            signed.frombytes(data[offset:offset + count * _SIGNED_FIELDS * signed.itemsize])
            inodes.frombytes(data[offset + len(signed) * signed.itemsize:])
            paths = _split(blobs[0])
            if not (len(paths) == count == len(inodes) and len(signed) == count * 7):
                raise ValueError("truncated tree manifest")
        except (OSError, ValueError, struct.error) as exc:
            raise SandboxError(
                f"the workspace's tree manifest cannot be read: {exc}", code="manifest_invalid",
                operation="collect_diff", context={"path": path},
                hint="changes outside git's diff cannot be listed; inspect the checkout "
                "(git status --ignored) and discard the sandbox",
            ) from exc
        entries: Manifest = {}
        for i, rel in enumerate(paths):
            mode, size, mtime, ctime, uid, gid, rdev = signed[i * 7:i * 7 + 7]
            entries[rel] = (mode, size, mtime, ctime, inodes[i], uid, gid, rdev)
        return cls(entries=entries, nested=frozenset(_split(blobs[1])),
                   unreadable=frozenset(_split(blobs[2])))



def _parents(paths: Iterable[str]) -> set[str]:
    """Every directory that holds one of ``paths``."""
    found: set[str] = set()
    for path in paths:
        slash = path.rfind("/")
        while slash > 0 and path[:slash] not in found:
            found.add(path[:slash])
            slash = path.rfind("/", 0, slash)
    return found


def _status(before: Stat | None, after: Stat | None) -> ChangeStatus | None:
    """How one entry changed (``None``: it did not, as far as it can tell)."""
    if before is None:
        return "added"
    if after is None:
        return "deleted"
    if stat.S_IFMT(before[0]) != stat.S_IFMT(after[0]):
        return "type_changed"
    if stat.S_ISDIR(before[0]):  # its entries speak for its size and times
        same = (before[0], before[5], before[6]) == (after[0], after[5], after[6])
        return None if same else "modified"
    return None if before == after else "modified"


def _metadata_flags(old: Stat | None, new: Stat | None) -> list[str]:
    """What changed besides content: permission bits, owner."""
    if old is None or new is None:
        return []
    flags = []
    if stat.S_IMODE(old[0]) != stat.S_IMODE(new[0]):
        flags.append("mode_change")
    if (old[5], old[6]) != (new[5], new[6]):
        flags.append("owner_change")
    return flags


def _is_dir(*stats: Stat | None) -> bool:
    return any(s is not None and stat.S_ISDIR(s[0]) for s in stats)


@dataclass
class _Collapsed:
    """A directory reported as one entry, and what it held."""

    index: int
    prefix: str
    held: int = 0
    files: bool = False


class _Comparison:
    """One pass over the union of both manifests, in tree order."""

    def __init__(self, before: TreeRecord, after: TreeRecord, *, tracked: Collection[str],
                 reported: Collection[str], setid: Collection[str]) -> None:
        self.before, self.after = before, after
        self.tracked = frozenset(tracked)
        self.tracked_dirs = frozenset(_parents(tracked))
        self.reported = frozenset(reported)
        self.setid = frozenset(setid)
        self.nested = before.nested | after.nested
        self.unreadable = before.unreadable | after.unreadable
        self.changes: list[ChangedFile] = []
        self.collapsed: _Collapsed | None = None

    def flags(self, path: str, old: Stat | None, new: Stat | None) -> list[str]:
        """Why git's diff does not carry ``path`` (empty: it would, if it were a file)."""
        flags = []
        if is_under(path, self.nested):
            flags.append("nested_repository")
        if has_git_alias(path):
            flags.append("protected_name")
        if any(kind_of(s[0]) in _SPECIAL for s in (old, new) if s is not None):
            flags.append("special_file")
        return flags

    def add(self, path: str, status: ChangeStatus, flags: list[str], detail: str = "") -> None:
        if path in self.setid:
            flags.append("setid_cleared")
        self.changes.append(ChangedFile(path=path, status=status, flags=tuple(flags),
                                        in_patch=False, detail=detail))

    def close_collapsed(self) -> None:
        group, self.collapsed = self.collapsed, None
        if group is None:
            return
        change = self.changes[group.index]
        flags = change.flags
        if group.files and not {"nested_repository", "protected_name"} & set(flags):
            flags = ("ignored", *flags)
        detail = f"{group.held} entries" if group.held else "empty"
        self.changes[group.index] = change.model_copy(update={"flags": flags, "detail": detail})

    def visit(self, path: str) -> None:
        old, new = self.before.entries.get(path), self.after.entries.get(path)
        if old == new and path not in self.unreadable:
            return  # the common case (never inside a directory reported whole)
        group = self.collapsed
        if group is not None and path.startswith(group.prefix):
            group.held += 1
            group.files = group.files or any(
                s is not None and kind_of(s[0]) in ("file", "symlink") for s in (old, new))
            return
        self.close_collapsed()
        if any(path.startswith(f"{root}/") for root in self.unreadable):
            return  # unknown on one side: its directory is reported
        if (path in self.before.unreadable) != (path in self.after.unreadable):
            when = ("cannot be read any more" if path in self.after.unreadable
                    else "could not be read when the run started")
            self.add(path, "modified", [*self.flags(path, old, new), "unreadable", "directory"],
                     when)
            return
        status = _status(old, new)
        if status is None or path in self.reported:
            return
        flags = self.flags(path, old, new)
        if _is_dir(old, new):
            self.directory(path, status, flags, old, new)
        elif path in self.tracked and not flags:
            flags = _metadata_flags(old, new)
            if flags:  # git compared the content and found it unchanged
                self.add(path, status, flags)
        else:
            self.add(path, status, [*(flags or ["ignored"]), *_metadata_flags(old, new)])

    def directory(self, path: str, status: ChangeStatus, flags: list[str], old: Stat | None,
                  new: Stat | None) -> None:
        if status == "modified":  # the same directory with a new mode or owner
            self.add(path, status, [*flags, "directory", *_metadata_flags(old, new)])
        elif flags or path not in self.tracked_dirs:
            # Added, removed or replaced as a whole, and git tracks nothing in it: one entry.
            self.add(path, status, [*flags, "directory"])
            self.collapsed = _Collapsed(len(self.changes) - 1, f"{path}/")
        # Otherwise git lists the tracked files it held or holds; the rest come one by one.


def outside_changes(before: TreeRecord, after: TreeRecord, *, tracked: Collection[str],
                    reported: Collection[str], setid: Collection[str] = ()) -> list[ChangedFile]:
    """Every change between two walks that git's diff does not report (module docstring).

    ``tracked``: the paths in the snapshot's index or in the final one (what git
    compares by content); ``reported``: the paths git's diff already lists.
    """
    comparison = _Comparison(before, after, tracked=tracked, reported=reported, setid=setid)
    for path in sorted(before.entries.keys() | after.entries.keys(),
                       key=lambda p: p.replace("/", "\0")):
        comparison.visit(path)
    comparison.close_collapsed()
    return comparison.changes
