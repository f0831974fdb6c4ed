"""The child's diff, computed on the host after its processes are stopped (threats B2, B8).

The caller (:meth:`sandbox.base.BaseSandbox.collect_diff`) stops every child
process first. Then, with :func:`sandbox.gitsafe.run_git` (hooks, fsmonitor,
pager, system/global config and attributes off; explicit ``--git-dir`` of the
child's *private* git dir and ``--work-tree``; the child-writable ``.git``
pointer is never followed, and the parent's own configuration is never read):

1. the private git dir's ``HEAD``, ``config`` and alternates must still say what
   corral wrote (on the host backend the child could have changed them);
2. a copy of the baseline index (written at creation, never visible to the
   child) is brought up to date with ``add -A``, minus nested repositories,
   ``.git`` aliases and special files (found by :func:`sandbox.workspaces.scan.scan_tree`);
   new blobs go to the private git dir's store, and that ``add`` sees no other
   object store, so nothing in the parent's repository is written or freshened;
3. gitlinks are put back as they were and reported;
4. ``diff-index --cached -p --binary -M`` against the snapshot commit gives the
   patch, and ``--raw``/``--numstat`` the structured list;
5. in workspace-write mode, the tree's lstat manifest is compared with the one
   taken at creation, and every change git's diff does not show (ignored files,
   nested repositories, special files...) is listed too, ``in_patch=False``
   (:mod:`sandbox.workspaces.changes`).

The patch is streamed (:func:`sandbox.gitsafe.stream_git`): :func:`compute_diff`
stops git as soon as the patch passes ``max_bytes`` (:class:`DiffTooLarge`,
with at most the cap in memory), and :func:`persist_diff` (gc, no cap) writes
it straight to ``results/<id>/diff.patch`` without holding it. Either way the
result is persisted under ``results/<id>/`` before it is returned.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from policies.contract import SandboxMode
from sandbox.errors import DiffTooLarge
from sandbox.gitsafe import run_git, stream_git
from sandbox.names import review_flags
from sandbox.results import ChangedFile, ChangeStatus, DiffResult, ExcludedPath
from sandbox.state import SandboxState
from sandbox.workspaces.changes import RECORD_FILE, TreeRecord, outside_changes
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.privategit import reading_env, verify_private_git
from sandbox.workspaces.scan import scan_tree
from sandbox.workspaces.snapshot import pathspec_file, stage_tree

__all__ = ["compute_diff", "persist_diff"]

_STATUS: dict[str, ChangeStatus] = {
    "A": "added", "D": "deleted", "M": "modified", "R": "renamed", "T": "type_changed",
}
_NULL_MODE = "000000"
_DIFF_OPTIONS = ("--cached", "-M", "--no-ext-diff", "--no-textconv", "--no-color")


@dataclass(frozen=True)
class _RawEntry:
    old_mode: str
    new_mode: str
    old_sha: str
    status: str
    path: str
    old_path: str | None


def _parse_raw(output: bytes) -> list[_RawEntry]:
    tokens = output.split(b"\0")
    entries: list[_RawEntry] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith(b":"):
        old_mode, new_mode, old_sha, _new_sha, status = tokens[i][1:].decode().split(" ")
        paths = [t.decode("utf-8", "surrogateescape") for t in tokens[i + 1:i + 3]]
        if status[0] in "RC":
            entries.append(_RawEntry(old_mode, new_mode, old_sha, status[0], paths[1], paths[0]))
            i += 3
        else:
            entries.append(_RawEntry(old_mode, new_mode, old_sha, status[0], paths[0], None))
            i += 2
    return entries


def _binary_paths(output: bytes) -> set[str]:
    binary: set[str] = set()
    tokens = output.split(b"\0")
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


def _changed(entry: _RawEntry, binary: set[str], setid: Collection[str]) -> ChangedFile:
    old_mode = None if entry.old_mode == _NULL_MODE else entry.old_mode
    new_mode = None if entry.new_mode == _NULL_MODE else entry.new_mode
    flags = review_flags(entry.path, old_mode=old_mode, new_mode=new_mode)
    return ChangedFile(
        path=entry.path, status=_STATUS.get(entry.status, "modified"), old_path=entry.old_path,
        old_mode=old_mode, new_mode=new_mode, binary=entry.path in binary,
        flags=(*flags, "setid_cleared") if entry.path in setid else flags,
    )


_PatchWriter = Callable[[BinaryIO, int | None], int | None]


@dataclass(frozen=True)
class _Prepared:
    """Everything of a diff but the patch bytes, and how to stream them."""

    result: DiffResult
    write_patch: _PatchWriter


def _record(ws: Workspace, state: SandboxState) -> TreeRecord | None:
    """The tree as a workspace-write child found it (saved on disk for gc), else ``None``."""
    if ws.mode is not SandboxMode.WORKSPACE_WRITE:
        return None
    if ws.record is None and (state.dir / RECORD_FILE).exists():
        ws.record = TreeRecord.load(state.dir / RECORD_FILE)
    return ws.record


def _index_paths(git_dir: Path, work_tree: Path, index: Path) -> set[str]:
    listing = run_git(["ls-files", "-z"], git_dir=git_dir, work_tree=work_tree,
                      env=reading_env(git_dir, index), operation="collect_diff").stdout
    return {path.decode("utf-8", "surrogateescape") for path in listing.split(b"\0") if path}


def _prepare(ws: Workspace, state: SandboxState, setid: Collection[str]) -> _Prepared | None:
    """Stage the child's tree and list its changes (``None`` in read-only mode)."""
    if (ws.mode is SandboxMode.READ_ONLY or ws.base_commit is None or ws.baseline_index is None
            or ws.private_git is None):
        return None
    git_dir = ws.private_git
    verify_private_git(git_dir, ws.git_files)
    index = state.dir / "collect.index"
    shutil.copyfile(ws.baseline_index, index)
    record = _record(ws, state)
    scan = scan_tree(ws.root, manifest=record is not None)
    spec = pathspec_file(state.dir / "collect.pathspec", scan.paths)
    stage_tree(git_dir=git_dir, work_tree=ws.root, private_git=git_dir, index=index, spec=spec,
               attributes=scan.attributes, recorded_ns=ws.baseline_index.stat().st_mtime_ns)
    env = reading_env(git_dir, index)  # every command below only reads objects

    def git(*args: str) -> bytes:
        return run_git(list(args), git_dir=git_dir, work_tree=ws.root, env=env,
                       operation="collect_diff").stdout

    base = ws.base_commit
    entries = _parse_raw(git("diff-index", *_DIFF_OPTIONS, "--raw", "-z", base))
    excluded = list(scan.excluded)
    gitlinks = [e for e in entries if "160000" in (e.old_mode, e.new_mode)]
    if gitlinks:
        restore = b"".join(
            (f"{e.old_mode} {e.old_sha}\t{e.old_path or e.path}" if e.old_mode != _NULL_MODE
             else f"0 {'0' * 40}\t{e.path}").encode("utf-8", "surrogateescape") + b"\0"
            for e in gitlinks
        )
        run_git(["update-index", "-z", "--index-info"], git_dir=git_dir, work_tree=ws.root,
                env=env, input_bytes=restore, operation="collect_diff")
        excluded += [ExcludedPath(path=e.path, reason="gitlink", detail="submodule commit change")
                     for e in gitlinks]
        entries = _parse_raw(git("diff-index", *_DIFF_OPTIONS, "--raw", "-z", base))
    binary = _binary_paths(git("diff-index", *_DIFF_OPTIONS, "--numstat", "-z", base))
    changed = [_changed(entry, binary, setid) for entry in entries]
    if record is not None:
        reported = {e.path for e in entries} | {e.old_path for e in entries if e.old_path}
        # What git compares by content: the final index, and what it reports (deletions).
        tracked = _index_paths(git_dir, ws.root, index) | reported
        changed += outside_changes(record, TreeRecord.of(scan), tracked=tracked,
                                   reported=reported, setid=setid)

    def write_patch(sink: BinaryIO, limit: int | None) -> int | None:
        return stream_git(["diff-index", *_DIFF_OPTIONS, "-p", "--binary", "--src-prefix=a/",
                           "--dst-prefix=b/", base], git_dir=git_dir, work_tree=ws.root,
                          env=env, sink=sink, limit=limit, operation="collect_diff")

    result = DiffResult(
        sandbox_id=state.id, base_commit=base, patch=b"",
        changed=tuple(changed),
        excluded=tuple(sorted(excluded, key=lambda e: e.path)),
        setid_cleared=tuple(sorted(setid)),
    )
    return _Prepared(result, write_patch)


def compute_diff(ws: Workspace, state: SandboxState, *, max_bytes: int,
                 setid_cleared: Collection[str] = ()) -> DiffResult:
    """Compute, persist and return the child's diff (processes must already be stopped).

    Raises :class:`DiffTooLarge` as soon as the patch passes ``max_bytes``
    (git is killed; nothing is persisted).
    """
    prepared = _prepare(ws, state, setid_cleared)
    if prepared is None:
        return state.save_result(DiffResult(sandbox_id=state.id, base_commit=None, patch=b""))
    sink = io.BytesIO()
    if prepared.write_patch(sink, max_bytes) is None:
        raise DiffTooLarge(
            f"the child's diff is over the {max_bytes}-byte cap",
            operation="collect_diff", context={"files": len(prepared.result.changed)},
            hint="raise limits.max_diff_bytes, or discard this child's work",
        )
    return state.save_result(prepared.result.model_copy(update={"patch": sink.getvalue()}))


def persist_diff(ws: Workspace, state: SandboxState, *,
                 setid_cleared: Collection[str] = ()) -> Path:
    """Capture the child's diff with no cap, streamed to disk (gc); return the patch's path.

    The patch never passes through memory: it is written to a temporary file
    next to ``results/<id>/diff.patch``, synced and renamed into place, then
    the JSON description is written.
    """
    prepared = _prepare(ws, state, setid_cleared)
    if prepared is None:
        saved = state.save_result(DiffResult(sandbox_id=state.id, base_commit=None, patch=b""))
        return saved.patch_path or state.patch_path
    results = state.make_results_dir()
    tmp = results / f".diff.patch.{secrets.token_hex(4)}.tmp"
    try:
        with tmp.open("wb") as sink:
            prepared.write_patch(sink, None)
            sink.flush()
            os.fsync(sink.fileno())
        tmp.replace(state.patch_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    state.save_description(prepared.result.model_copy(update={"patch_path": state.patch_path}))
    return state.patch_path
