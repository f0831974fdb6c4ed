"""Trusting a baseline index's stat data only where a hostile child cannot have faked it.

``git add -A`` over a copy of the baseline index re-hashes a file only when its
stat data differs from the index's or when the entry is "racily clean" (its
mtime is not in an earlier second than the index file's). Both rules are too
weak or too costly for a child's tree:

- git 2.39 (built without ``USE_NSEC``) compares ctime and mtime in whole
  seconds. A child that rewrites a file and restores its size and mtime
  (``utime``) in the same second as the checkout leaves git's view unchanged:
  the change vanishes from the diff.
- Every file checked out in the second the index was dated is racy, so a child
  collected in the second it was created (a fast one) has every file re-hashed.

:func:`prepare_index` decides instead, per entry, at nanosecond precision,
against a *fence*: the instant the baseline's stat data was complete (the
baseline index file's mtime, written after the checkout and before the child
could start). The kernel sets ctime on every change of a file's content or
metadata, user space cannot set it, and a change made after the fence gets a
ctime not before the fence. So an entry is *trusted* (its content is the
index's blob) only when its recorded ctime is strictly before the fence and the
file's ``lstat`` now matches the recorded ctime, mtime, inode, size, owner and
type exactly. Every other entry has its stat data (all but the mode) zeroed in the copy, so git
must hash it; the copy is then dated after every trusted entry's mtime (the
child is stopped: nothing can change the tree before git reads it), so no
trusted entry counts as racy. Gitlinks are left as they are (git never
compares them by stat). The result is what git would compute by hashing every
file, at the cost of one ``lstat`` per file (done by the walk,
:func:`sandbox.workspaces.scan.scan_tree`) and one hash per changed file.

A trusted entry is also marked "assume valid" (``CE_VALID``, the bit
``update-index --assume-unchanged`` sets) in the copy: what git would conclude
from its own ``lstat`` of that file (unchanged) is already proven, so ``add``
(run without index preloading, :func:`sandbox.workspaces.staging.stage_tree`)
does not ``lstat`` it a second time. An entry git must hash never carries the
bit, and nothing in the copy is ever checked out or shown to the child.

An index this module does not understand (not version 2 or 3, a split index,
a checksum that does not match) is copied unchanged: git then decides (and
re-hashes, or refuses a damaged index) as it always would.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox.workspaces.scan import Manifest

__all__ = ["IndexPlan", "prepare_index"]

_HEADER = struct.Struct(">4sII")
_STAT = struct.Struct(">10I")
_FLAGS = struct.Struct(">H")
_VALID = 0x8000  # CE_VALID, "assume unchanged"
_EXTENDED = 0x4000
_STAGE = 0x3000
_NAME_MASK = 0xFFF
_MASK32 = 0xFFFFFFFF
_NS = 1_000_000_000
_GITLINK = 0o160000
_IFMT = 0o170000
_IFREG = 0o100000
_IXUSR = stat.S_IXUSR
_MODE_AT = 24  # the stat block: ctime, mtime, dev, ino (24 bytes), mode, uid, gid, size


@dataclass(frozen=True)
class IndexPlan:
    """What :func:`prepare_index` did."""

    #: Entries whose stat data was kept (their files are known unchanged).
    trusted: int
    #: Entries git must hash (changed, or not provably unchanged).
    rehash: int
    #: Whether the index could be read at all (``False``: copied unchanged).
    understood: bool


def _plan(data: bytes, hash_size: int, manifest: Manifest,
          fence_ns: int) -> tuple[list[int], list[int], int] | None:
    """Offsets of the stat blocks to zero, and of the trusted entries' flags, and the
    latest trusted mtime (seconds); ``None`` when the index is not one this module reads.

    An entry is trusted when it is a plain one (stage 0, no extended flags, not a
    gitlink), its recorded ctime is strictly before ``fence_ns``, and its file's
    lstat now (``manifest``) shows that ctime and the recorded mtime, inode, size,
    owner, type and (a regular file) owner's execute bit, exactly. One loop, no
    call per entry: it runs once for every file of the tree.
    """
    if len(data) < _HEADER.size + hash_size:
        return None
    signature, version, count = _HEADER.unpack_from(data, 0)
    if signature != b"DIRC" or version not in (2, 3):
        return None
    pos = _HEADER.size
    end = len(data) - hash_size
    # The stat block, the object id skipped, the flags: one unpack per entry.
    unpack = struct.Struct(f">10I{hash_size}xH").unpack_from
    flags_at = _STAT.size + hash_size
    name_at = flags_at + _FLAGS.size
    get = manifest.get
    zero: list[int] = []
    trusted: list[int] = []
    latest = 0
    try:
        for _ in range(count):
            entry = pos
            ctime_s, ctime_ns, mtime_s, mtime_ns, _dev, ino, mode, uid, gid, size, flags = (
                unpack(data, entry))
            start = entry + name_at + (2 if flags & _EXTENDED else 0)
            length = flags & _NAME_MASK
            stop = data.index(b"\0", start) if length == _NAME_MASK else start + length
            pos += (stop - entry + 8) & ~7  # the name's NULs (1 to 8): an 8-byte multiple
            if pos > end:
                return None
            if mode & _IFMT == _GITLINK:
                continue  # git never compares a gitlink by stat: left as it is
            now = get(data[start:stop].decode("utf-8", "surrogateescape"))
            ctime = ctime_s * _NS + ctime_ns
            if now is None or flags & (_EXTENDED | _STAGE):
                zero.append(entry)
                continue
            if ctime >= fence_ns:  # in the fence's tick: a change now could keep this ctime
                zero.append(entry)
                continue
            st_mode, st_size, st_mtime, st_ctime, st_ino, st_uid, st_gid, _rdev = now
            changed = st_mode ^ mode  # the type, and for a regular file the owner's execute bit
            if changed & _IFMT or (mode & _IFMT == _IFREG and changed & _IXUSR):
                zero.append(entry)
            elif (st_ctime == ctime and st_mtime == mtime_s * _NS + mtime_ns
                  and st_ino & _MASK32 == ino and st_size & _MASK32 == size
                  and st_uid & _MASK32 == uid and st_gid & _MASK32 == gid):
                trusted.append(entry + flags_at)
                if mtime_s > latest:  # noqa: PLR1730 - no call per entry
                    latest = mtime_s
            else:
                zero.append(entry)
    except (struct.error, ValueError):
        return None
    if data[pos:end].startswith(b"link"):  # a split index: entries live elsewhere
        return None
    return zero, trusted, latest


def prepare_index(baseline: Path, target: Path, *, manifest: Manifest, hash_size: int) -> IndexPlan:
    """Write ``target``: ``baseline`` with untrusted entries' stat data zeroed, dated so
    no trusted entry is racy (module docstring). ``manifest``: the tree's lstat now (the
    child stopped); ``hash_size``: bytes of an object id (20, or 32 for SHA-256)."""
    data = baseline.read_bytes()
    fence_ns = baseline.stat().st_mtime_ns
    digest = hashlib.sha256 if hash_size == 32 else hashlib.sha1
    body = len(data) - hash_size
    intact = body > 0 and digest(memoryview(data)[:body]).digest() == data[body:]
    planned = _plan(data, hash_size, manifest, fence_ns) if intact else None
    if planned is None:
        target.write_bytes(data)
        return IndexPlan(trusted=0, rehash=0, understood=False)
    zero, trusted, latest = planned
    out = bytearray(data)
    for pos in zero:
        out[pos:pos + _MODE_AT] = bytes(_MODE_AT)  # every stat field but the mode
        out[pos + _MODE_AT + 4:pos + _STAT.size] = bytes(_STAT.size - _MODE_AT - 4)
    valid = _VALID >> 8
    for at in trusted:  # the flags' high byte (big-endian)
        out[at] |= valid
    out[body:] = digest(memoryview(out)[:body]).digest()
    target.write_bytes(out)
    # Racy means "mtime not in an earlier second than the index": date it after them all.
    dated = (max(time.time_ns() // _NS, latest) + 2) * _NS
    os.utime(target, ns=(dated, dated))
    kept = _HEADER.unpack_from(data, 0)[2] - len(zero)  # the trusted, and gitlinks
    return IndexPlan(trusted=kept, rehash=len(zero), understood=True)
