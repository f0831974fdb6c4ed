"""The child's diff, computed on the host after its processes are stopped (threats B2, B8).

The caller (:meth:`sandbox.base.BaseSandbox.collect_diff`) stops every child
process first. Then, with :func:`sandbox.gitsafe.run_git` (hooks, fsmonitor,
pager, system/global config and attributes off; explicit ``--git-dir`` of the
child's *private* git dir and ``--work-tree``; the child-writable ``.git``
pointer is never followed, and the parent's own configuration is never read):

1. the private git dir's ``HEAD``, ``config`` and alternates must still say what
   corral wrote (on the host backend the child could have changed them);
2. a copy of the baseline index (written at creation, never visible to the
   child), in which only the entries whose files provably did not change keep
   their stat data (:mod:`sandbox.workspaces.statcache`: nanosecond ctime
   against the moment the baseline was written, so git hashes what changed
   and nothing else), is brought up to date with ``add -A``, minus nested repositories,
   ``.git`` aliases and special files (found by :func:`sandbox.workspaces.scan.scan_tree`);
   new blobs go to the private git dir's store, and that ``add`` sees no other
   object store, so nothing in the parent's repository is written or freshened.
   The walk that finds the exclusions and the lstat data the stat cache reads is
   also the setuid/setgid sweep that precedes the diff (:func:`sweep_for_diff`):
   one pass over the tree, not three;
3. gitlinks are put back as they were and reported;
4. ``diff-index --cached -p --binary -M`` against the snapshot commit gives the
   patch, and ``--raw``/``--numstat`` the structured list;
5. in workspace-write mode, the tree's lstat manifest is compared with the one
   taken at creation, and every change git's diff does not show (ignored files,
   nested repositories, special files...) is listed too, ``in_patch=False``
   (:mod:`sandbox.workspaces.changes`).

An overlay workspace (:mod:`sandbox.workspaces.overlay`) stages only what its
upper layer holds and compares trees instead (:mod:`sandbox.workspaces.diffupper`):
the same checks and the same comparison (:mod:`sandbox.workspaces.diffcore`),
at the cost of what the child changed.

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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from policies.contract import SandboxMode
from sandbox.errors import DiffTooLarge
from sandbox.gitsafe import run_git, stream_git
from sandbox.results import ChangedFile, DiffResult
from sandbox.state import SandboxState
from sandbox.workspaces.changes import RECORD_FILE, TreeRecord, outside_changes
from sandbox.workspaces.diffcore import Compare, Prepared, RawEntry, finish, gitlink_restore
from sandbox.workspaces.diffupper import prepare_overlay
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.privategit import reading_env, verify_private_git
from sandbox.workspaces.scan import ScanResult, scan_tree
from sandbox.workspaces.staging import pathspec_file, stage_tree
from sandbox.workspaces.statcache import prepare_index

__all__ = ["Swept", "compute_diff", "persist_diff", "sweep_for_diff"]


@dataclass(frozen=True)
class Swept:
    """The setuid/setgid sweep that precedes a diff (the child stopped): the paths it
    cleared, and the walk of the whole tree it was part of, when the diff walks one."""

    cleared: tuple[str, ...] = ()
    #: ``scan_tree(root, manifest=True, clear_setid=True)`` of the workspace.
    scan: ScanResult | None = None


def _walks_tree(ws: Workspace) -> bool:
    """Whether the diff walks the whole tree (a worktree or the user's checkout; an
    overlay's diff reads its upper layer)."""
    return (ws.mode is not SandboxMode.READ_ONLY and ws.kind != "overlay"
            and ws.base_commit is not None and ws.private_git is not None
            and ws.baseline_index is not None)


def sweep_for_diff(ws: Workspace) -> Swept:
    """Clear the setuid/setgid bits the child left, as :meth:`Workspace.sweep_setid` does
    (its processes must be stopped); where the diff walks the whole tree, in the same
    pass as that walk, which :func:`compute_diff` and :func:`persist_diff` then use."""
    if not ws.writable:
        return Swept()
    if _walks_tree(ws):
        scan = scan_tree(ws.root, manifest=True, clear_setid=True)
        return Swept(tuple(scan.setid_cleared), scan)
    return Swept(tuple(ws.sweep_setid()))


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


def _prepare(ws: Workspace, state: SandboxState, swept: Swept) -> Prepared | None:
    """Stage the child's tree and list its changes (``None`` in read-only mode)."""
    setid = swept.cleared
    if (ws.mode is SandboxMode.READ_ONLY or ws.base_commit is None or ws.private_git is None):
        return None
    if ws.kind == "overlay":
        return prepare_overlay(ws, state, setid)
    if ws.baseline_index is None:
        return None
    git_dir = ws.private_git
    verify_private_git(git_dir, ws.git_files)
    index = state.dir / "collect.index"
    record = _record(ws, state)
    scan = swept.scan or scan_tree(ws.root, manifest=True)
    checked_ns = time.time_ns()  # the child is stopped: the tree is as the walk saw it
    plan = prepare_index(ws.baseline_index, index, manifest=scan.manifest or {},
                         hash_size=len(ws.base_commit) // 2)
    spec = pathspec_file(state.dir / "collect.pathspec", scan.paths)
    recorded = checked_ns if plan.understood else ws.baseline_index.stat().st_mtime_ns
    stage_tree(git_dir=git_dir, work_tree=ws.root, private_git=git_dir, index=index, spec=spec,
               attributes=scan.attributes, recorded_ns=recorded, preload=not plan.understood)
    env = reading_env(git_dir, index)  # every command below only reads objects

    def run(argv: list[str]) -> bytes:
        return run_git(argv, git_dir=git_dir, work_tree=ws.root, env=env,
                       operation="collect_diff").stdout

    def stream(argv: list[str], sink: BinaryIO, limit: int | None) -> int | None:
        return stream_git(argv, git_dir=git_dir, work_tree=ws.root, env=env, sink=sink,
                          limit=limit, operation="collect_diff")

    compare = Compare(head=("diff-index", "--cached"), tail=(ws.base_commit,))

    def restore(gitlinks: list[RawEntry]) -> Compare:
        run_git(["update-index", "-z", "--index-info"], git_dir=git_dir, work_tree=ws.root,
                env=env, input_bytes=gitlink_restore(gitlinks), operation="collect_diff")
        return compare

    def outside(entries: list[RawEntry]) -> list[ChangedFile]:
        if record is None:
            return []
        reported = {e.path for e in entries} | {e.old_path for e in entries if e.old_path}
        # What git compares by content: the final index, and what it reports (deletions).
        tracked = _index_paths(git_dir, ws.root, index) | reported
        return outside_changes(record, TreeRecord.of(scan), tracked=tracked,
                               reported=reported, setid=setid)

    return finish(sandbox_id=state.id, base=ws.base_commit, compare=compare, run=run,
                  stream=stream, restore=restore, excluded=scan.excluded, setid=setid,
                  more=outside)


def compute_diff(ws: Workspace, state: SandboxState, *, max_bytes: int,
                 swept: Swept) -> DiffResult:
    """Compute, persist and return the child's diff (processes must already be stopped,
    and ``swept``: :func:`sweep_for_diff` since).

    Raises :class:`DiffTooLarge` as soon as the patch passes ``max_bytes``
    (git is killed; nothing is persisted).
    """
    prepared = _prepare(ws, state, swept)
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


def persist_diff(ws: Workspace, state: SandboxState, *, swept: Swept) -> Path:
    """Capture the child's diff with no cap, streamed to disk (gc); return the patch's path.

    The patch never passes through memory: it is written to a temporary file
    next to ``results/<id>/diff.patch``, synced and renamed into place, then
    the JSON description is written.
    """
    prepared = _prepare(ws, state, swept)
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
