"""A recorded owner pid that now belongs to another process keeps nothing alive.

Sandboxes, snapshot leases, half-made snapshots, runs and fanouts record the process
that owns them as (host, pid, start time). Pids are reused: after a crash (or a
reboot) the pid of the dead owner may belong to any live process, and state kept
alive by it would never be collected, a ``running`` run would never be seen as crashed
and its diff never captured. Each record below names a live process (a ``sleep`` of
this test) with a start time that is not its own, as a reused pid does: it must be
judged dead. The same record with the true start time is alive (the control).
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from sbx_support import OpenSandbox, backends, make_repo

from executor.ledger import FanoutRecord, RunRecord, RunStatus, fanout_status, run_status
from sandbox.gc import gc
from sandbox.workspaces.snapshot import SNAPSHOTS, acquire_snapshot, release_snapshot

#: How much earlier the dead owner started than the process that now has its pid.
EARLIER = 120.0


@pytest.fixture
def stranger(marker: str) -> Iterator[psutil.Process]:
    """A live process that is not the owner: the one that got the dead owner's pid."""
    proc = subprocess.Popen(["sleep", marker])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def _owner(process: psutil.Process, *, reused: bool) -> dict[str, Any]:
    started = process.create_time() - (EARLIER if reused else 0.0)
    return {"host": socket.gethostname(), "pid": process.pid, "started": started}


def _actions(state_root: Path, name: str) -> list[str]:
    return [e.action for e in gc(state_root).entries if e.sandbox_id == name]


@pytest.mark.parametrize("backend", backends(only=("host",), overlay=True), indirect=True)
def test_gc_collects_a_sandbox_whose_owner_pid_was_reused(
        open_sb: OpenSandbox, state_root: Path, stranger: psutil.Process) -> None:
    sb = open_sb()
    sb.files.write_text("work.txt", "done before the owner died\n")
    meta = sb.state.read_meta()
    alive = _owner(stranger, reused=False)
    sb.state.write_meta(meta.model_copy(update={
        "owner_pid": alive["pid"], "owner_started": alive["started"]}))
    assert _actions(state_root, sb.id) == ["in_use"]  # the control: that process owns it
    reused = _owner(stranger, reused=True)
    sb.state.write_meta(meta.model_copy(update={
        "owner_pid": reused["pid"], "owner_started": reused["started"]}))
    [entry] = [e for e in gc(state_root).entries if e.sandbox_id == sb.id]
    assert entry.action == "cleaned", entry
    assert entry.patch_path is not None and b"+done before" in entry.patch_path.read_bytes()
    assert not sb.root.exists()


def _rewrite(path: Path, owner: dict[str, Any]) -> None:
    data = json.loads(path.read_text())
    data.update(owner_host=owner["host"], owner_pid=owner["pid"], owner_started=owner["started"])
    path.write_text(json.dumps(data))


def test_gc_removes_snapshots_held_by_a_reused_pid(tmp_path: Path,
                                                   stranger: psutil.Process) -> None:
    """A process's lease on a snapshot, and the owner of a snapshot left half made."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    ref = acquire_snapshot(repo, state_root=state_root)
    [lease] = (ref.path / "leases").glob("*.json")
    half_made = state_root / SNAPSHOTS / ".new-crashed"
    half_made.mkdir()
    (half_made / "owner.json").write_text(lease.read_text())
    try:
        for path in (lease, half_made / "owner.json"):
            _rewrite(path, _owner(stranger, reused=False))
        assert _actions(state_root, ref.id) == ["in_use"]  # the controls
        assert _actions(state_root, half_made.name) == []
        assert half_made.is_dir()
        for path in (lease, half_made / "owner.json"):
            _rewrite(path, _owner(stranger, reused=True))
        report = gc(state_root)
        actions = {(e.sandbox_id, e.action) for e in report.entries}
        assert (half_made.name, "cleaned") in actions and (ref.id, "in_use") not in actions
        assert not lease.exists() and not half_made.exists()  # idle now, kept for reuse
        actions = {(e.sandbox_id, e.action) for e in gc(state_root, snapshot_max_idle=0).entries}
        assert (ref.id, "cleaned") in actions, actions
        assert not ref.path.exists()
    finally:
        release_snapshot(ref)


def test_a_running_run_or_fanout_whose_owner_pid_was_reused_has_crashed(
        stranger: psutil.Process) -> None:
    for reused, run, fanout in ((False, RunStatus.RUNNING, "running"),
                                (True, RunStatus.CRASHED, "crashed")):
        owner = _owner(stranger, reused=reused)
        record = RunRecord.model_construct(status=RunStatus.RUNNING, owner=owner)
        assert run_status(record) is run
        assert fanout_status(FanoutRecord.model_construct(status="running", owner=owner)) \
            == fanout
