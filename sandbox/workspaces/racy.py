"""A fresh checkout's index with no "racily clean" entry, so the child's ``git status`` hashes
nothing it did not change.

git 2.39 (built without ``USE_NSEC``) cannot trust an entry whose file's mtime is not in
an earlier second than the index file itself (the file could have changed in that second
without its stat data moving): each ``git status`` or ``git diff`` re-reads and hashes
every such file, then writes the index back so that the next one need not. A checkout
that takes under a second, its index written right after, leaves every entry racy; and
a child's git dir is read-only, so its git can never write the index back. Every ``git
status`` of a child in a 10k-file worktree hashed all 10k files: 2-4x what it costs in a
checkout in daily use, and the same in a bare ``bwrap`` or on the host with the index
read-only (``scripts/bench_git_status.py``).

:func:`settle_racy` gives the index what git's own write-back would, without hashing
every file and without waiting for the clock's next second: each racy entry's file
(corral's own fresh checkout, which no child has touched yet; its lstat must show the
entry's stat data to the nanosecond, or it is left alone) gets an mtime one second
earlier, the entry takes the file's new mtime and ctime, and the index is written again,
so it is dated after them all. A later change of a file gives it an mtime in a later
second than the one recorded, so git sees it as it sees any change; and every ctime
recorded is before the rewritten index's mtime, the fence
:mod:`sandbox.workspaces.statcache` trusts stat data against. It costs three system
calls per racy file (about 10 us; 0.1-0.15 s of CPU for a 10k-file checkout made in
under a second, bounded by the files written in the index's last second for a bigger
one), once per checkout: once per shared snapshot for overlay children, once per child
for a plain worktree. One ``git status`` in the child saves about as much.

An index this module does not read (not version 2 or 3, a bad checksum) is left as it is:
git then hashes its racy entries, as it always would.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from pathlib import Path

__all__ = ["settle_racy"]

_HEADER = struct.Struct(">4sII")
_TIMES = struct.Struct(">4I")  # ctime s, ns, mtime s, ns: the first 16 bytes of an entry
_NS = 1_000_000_000
_MASK32 = 0xFFFFFFFF
_EXTENDED = 0x4000
_STAGE = 0x3000
_NAME_MASK = 0xFFF
_IFMT = 0o170000
_IFREG = 0o100000
_IFLNK = 0o120000


def _hash_size(data: bytes) -> int | None:
    """20 (SHA-1) or 32 (SHA-256): the one whose checksum of the body ends ``data``."""
    for size, digest in ((20, hashlib.sha1), (32, hashlib.sha256)):
        body = len(data) - size
        if body > _HEADER.size and digest(memoryview(data)[:body]).digest() == data[body:]:
            return size
    return None


class _Dirs:
    """One open directory at a time (index entries come sorted: a directory's files mostly
    follow each other), so each file is reached by its name, not its whole path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name: str | None = None
        self.fd = -1

    def of(self, rel: str) -> tuple[int, str]:
        parent, _, leaf = rel.rpartition("/")
        if parent != self.name:
            self.close()
            self.fd = os.open(self.root / parent, os.O_RDONLY | os.O_DIRECTORY)
            self.name = parent
        return self.fd, leaf

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd, self.name = -1, None


def _racy(data: bytes, hash_size: int, fence: int, now: int
           ) -> list[tuple[int, str, tuple[int, ...]]] | None:
    """Each racy plain file's or link's entry: its offset, path and recorded stat data
    (``None``: not an index this module reads)."""
    signature, version, count = _HEADER.unpack_from(data, 0)
    if signature != b"DIRC" or version not in (2, 3):
        return None
    unpack = struct.Struct(f">10I{hash_size}xH").unpack_from
    name_at = 40 + hash_size + 2
    end = len(data) - hash_size
    found = []
    pos = _HEADER.size
    try:
        for _ in range(count):
            entry = pos
            fields = unpack(data, entry)
            mtime_s, mode, flags = fields[2], fields[6], fields[10]
            start = entry + name_at + (2 if flags & _EXTENDED else 0)
            length = flags & _NAME_MASK
            stop = data.index(b"\0", start) if length == _NAME_MASK else start + length
            pos += (stop - entry + 8) & ~7  # the name's NULs (1 to 8): an 8-byte multiple
            if pos > end:
                return None
            # Not racy; dated ahead of the clock; not a plain entry of a file or a link.
            if (mtime_s < fence or mtime_s > now or flags & (_EXTENDED | _STAGE)
                    or mode & _IFMT not in (_IFREG, _IFLNK)):
                continue
            found.append((entry, data[start:stop].decode("utf-8", "surrogateescape"), fields))
    except (struct.error, ValueError):
        return None
    return found


def settle_racy(index: Path, work_tree: Path) -> int:
    """Re-date the racily clean entries of ``index`` (a checkout of ``work_tree`` corral just
    made) and their files, as the module docstring says; how many it re-dated."""
    data = index.read_bytes()
    hash_size = _hash_size(data)
    # Racy: an mtime not in an earlier second than the index file's.
    found = None if hash_size is None else _racy(
        data, hash_size, index.stat().st_mtime_ns // _NS, time.time_ns() // _NS)
    if not found or hash_size is None:
        return 0
    out = bytearray(data)
    settled = 0
    dirs = _Dirs(work_tree)
    lstat, utime, pack = os.lstat, os.utime, _TIMES.pack_into
    try:
        for entry, rel, fields in found:
            ctime_s, ctime_ns, mtime_s, mtime_ns, _dev, ino, mode, _uid, _gid, size = fields[:10]
            recorded = mtime_s * _NS + mtime_ns
            try:
                fd, leaf = dirs.of(rel)
                st = lstat(leaf, dir_fd=fd)
                if (st.st_mtime_ns != recorded or st.st_ctime_ns != ctime_s * _NS + ctime_ns
                        or st.st_ino & _MASK32 != ino or st.st_size & _MASK32 != size
                        or st.st_mode & _IFMT != mode & _IFMT):
                    continue  # not as git recorded it: git decides, as it always would
                utime(leaf, ns=(st.st_atime_ns, recorded - _NS), dir_fd=fd,
                      follow_symlinks=False)
                st = lstat(leaf, dir_fd=fd)
            except OSError:
                continue  # gone (or its directory): git decides too
            ctime, mtime = st.st_ctime_ns, st.st_mtime_ns
            pack(out, entry, ctime // _NS, ctime % _NS, mtime // _NS, mtime % _NS)
            settled += 1
    finally:
        dirs.close()
    if settled:
        body = len(out) - hash_size
        digest = hashlib.sha256 if hash_size == 32 else hashlib.sha1
        out[body:] = digest(memoryview(out)[:body]).digest()
        fresh = index.with_name(index.name + ".settled")
        fresh.write_bytes(out)
        fresh.replace(index)
    return settled
