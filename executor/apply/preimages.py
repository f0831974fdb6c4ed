"""The versions a child started from, kept with its record for ``corral apply --3way``.

A three-way merge needs the *preimage* of every file the patch changes: the
blob its ``index <old>..<new>`` line names. A file the user had not committed
when the child started exists only in the child's private object directory,
which teardown removes. So when a run ends, :func:`capture_preimages`
rebuilds the preimages from what is still there: the child's final files
(read through the sandbox's confined file API, never following a symlink out)
with the patch reverse-applied in a private scratch directory. Each rebuilt
file is kept only when its blob id matches the one in the patch, so nothing
the child wrote can pose as a preimage. They are written with the record
(``<ledger>/<run>/preimages/<full blob id>``), at most
:data:`MAX_PREIMAGE_BYTES` in all.

At apply time :func:`load_preimages` reads them back, and keeps a file only
when its bytes hash to its name; an abbreviated id from the patch must match
exactly one of them. A record without preimages (older records, a file over
the cap, a checkout with CRLF conversion) still applies; only a three-way
merge of such a file is impossible, and ``apply --3way`` says so by path.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from executor.apply.patch import PatchFile, PatchPlan, inspect_patch
from policies.errors import CorralError
from sandbox.gitsafe import git_env, run_git

__all__ = ["MAX_PREIMAGE_BYTES", "PREIMAGE_DIR", "blob_ids", "capture_preimages",
           "find_preimage", "load_preimages"]

PREIMAGE_DIR = "preimages"
MAX_PREIMAGE_BYTES = 64 * 1024 * 1024
_REGULAR = ("100644", "100755")
_BLOB_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def blob_ids(content: bytes) -> tuple[str, str]:
    """The SHA-1 and SHA-256 git blob ids of ``content``."""
    header = f"blob {len(content)}\0".encode()
    sha1 = hashlib.sha1(header + content, usedforsecurity=False).hexdigest()  # git's object id
    return sha1, hashlib.sha256(header + content).hexdigest()


def _eligible(item: PatchFile) -> bool:
    modes = {m for m in (item.old_mode, item.new_mode) if m}
    return (item.old_blob is not None and item.status in ("modified", "renamed", "deleted")
            and modes <= set(_REGULAR))


def _reverse(scratch: Path, section: bytes) -> bool:
    done = run_git(["apply", "-R", "-"], git_dir=None, cwd=scratch, input_bytes=section,
                   env=git_env(extra={"GIT_CEILING_DIRECTORIES": str(scratch.parent)}),
                   check=False, operation="capture_preimages")
    return done.returncode == 0


def _rebuild(scratch: Path, plan: PatchPlan, items: list[PatchFile],
             read: Callable[[str], bytes]) -> bool:
    """Write the final files of ``items`` into ``scratch`` and reverse the patch there."""
    total = 0
    for item in items:
        if item.status == "deleted":
            continue
        data = read(item.path)
        total += len(data)
        if total > MAX_PREIMAGE_BYTES:
            return False
        target = scratch / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return _reverse(scratch, b"".join(plan.section(item) for item in items))


def capture_preimages(patch: bytes, read: Callable[[str], bytes]) -> dict[str, bytes]:
    """{full blob id: bytes} of the preimages of ``patch`` (see the module docstring);
    ``read`` gives a final file of the child by relative path. Never raises: what
    cannot be rebuilt is simply not kept."""
    try:
        plan = inspect_patch(patch, allow_symlinks=True, allow_binary=True, allow_git_dirs=True)
        items = [item for item in plan.files if _eligible(item)]
        if plan.problems or not items:
            return {}
        kept: dict[str, bytes] = {}
        with tempfile.TemporaryDirectory(prefix="corral-preimages-") as tmp:
            groups = [items] if len(items) > 1 else []
            groups += [[item] for item in items]
            done: set[int] = set()
            for number, group in enumerate(groups):
                if all(id(item) in done for item in group):
                    continue
                scratch = Path(tmp) / str(number)
                scratch.mkdir()
                try:
                    rebuilt = _rebuild(scratch, plan, group, read)
                except (OSError, CorralError):
                    rebuilt = False
                if not rebuilt:
                    continue
                for item in group:
                    source = scratch / (item.old_path or item.path)
                    content = source.read_bytes() if source.is_file() else None
                    if content is None or item.old_blob is None:
                        continue
                    full = next((i for i in blob_ids(content) if i.startswith(item.old_blob)),
                                None)
                    if full is not None and sum(map(len, kept.values())) + len(content) \
                            <= MAX_PREIMAGE_BYTES:
                        kept[full] = content
                        done.add(id(item))
                shutil.rmtree(scratch, ignore_errors=True)
        return kept
    except (OSError, CorralError):
        return {}


def load_preimages(directory: Path) -> dict[str, Path]:
    """{full blob id: file} of the preimages kept in ``directory`` whose bytes match
    their names (anything else there is ignored)."""
    found: dict[str, Path] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.iterdir()):
        if not _BLOB_NAME.fullmatch(path.name) or path.is_symlink() or not path.is_file():
            continue
        if path.name in blob_ids(path.read_bytes()):
            found[path.name] = path
    return found


def find_preimage(preimages: Mapping[str, Path], abbreviated: str) -> Path | None:
    """The one kept preimage whose id starts with ``abbreviated`` (None when none or
    ambiguous)."""
    matches = [path for full, path in preimages.items() if full.startswith(abbreviated)]
    return matches[0] if len(matches) == 1 else None
