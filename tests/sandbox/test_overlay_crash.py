"""Killing corral in the middle of a fanout, then ``gc``: no diff lost, nothing left behind.

A process acquires one snapshot and opens three overlay children on it (bubblewrap
or docker), as ``corral fanout`` does, and is killed with SIGKILL at a point of
its work: while opening the children, while their commands run, and while a
child's diff is being computed. ``gc`` must then leave no overlay mount, no
container, no cgroup, no process of any child, no sandbox, worktree or snapshot
state, and hold every child's diff under ``results/`` with what the child wrote.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sbx_support import backend_config, held_snapshots, make_repo, overlay_backends

import sandbox.backends.docker
from sandbox.backends.limits import PidsCgroup, cgroup_group
from sandbox.errors import SandboxError
from sandbox.gc import gc
from sandbox.workspaces.overlay import overlay_mounts
from tests.procs import pids_matching, wait_for
from tests.timescale import scaled

WIDE = 4000  # files the diffed child writes, so its diff takes a while

_FANOUT = r"""
import json, os, signal, sys, threading
from pathlib import Path
from pydantic import TypeAdapter
from policies.contract import SandboxMode
from sandbox.config import BackendConfig
from sandbox.factory import open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot

config = TypeAdapter(BackendConfig).validate_python(json.loads(sys.argv[1]))
repo, state, point, marker, wide = (Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4],
                                    sys.argv[5], int(sys.argv[6]))

def say(*words):
    print(*words, flush=True)

ref = acquire_snapshot(repo, state_root=state)
children = []
for i in range(3):
    sb = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE, state_root=state,
                      snapshot=ref)
    assert sb.workspace_kind == "overlay", sb.workspace_fallback
    children.append(sb)
    say("opened", sb.id)
    sb.files.write_text(f"child-{i}.txt", f"work of child {i}\n")
    if point == "start" and i == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # the third child is never opened
if point == "command":
    script = f"echo running > running.txt; exec sleep {marker}"
    for sb in children:
        threading.Thread(target=sb.exec, args=(["sh", "-c", script],), daemon=True).start()
    while not all(sb.files.exists("running.txt") for sb in children):
        threading.Event().wait(0.02)
    say("running")
    os.kill(os.getpid(), signal.SIGKILL)
if point == "diff":
    children[0].exec(["sh", "-c", f"mkdir wide && cd wide && for i in $(seq {wide}); do "
                                  "echo line $i > f$i; done"]).check()
    say("collecting")
    children[0].collect_diff()
    say("collected")
"""


def _run_until_killed(backend: str, repo: Path, state_root: Path, point: str,
                      marker: str) -> list[str]:
    """Run the fanout script (``marker``: the argument of every long-running child command);
    SIGKILL it at ``point``; the ids of the children it opened."""
    config = backend_config(backend)
    opened: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-c", _FANOUT, config.model_dump_json(), str(repo), str(state_root),
         point, marker, str(WIDE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            words = line.split()
            if words[:1] == ["opened"]:
                opened.append(words[1])
            if words[:1] == ["collecting"]:
                os.kill(proc.pid, signal.SIGKILL)  # while the child's diff is computed
                break
        proc.wait(scaled(60))
        stderr = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, stderr
    return opened


def _containers(state_root: Path) -> list[str]:
    listed = subprocess.run(["docker", "ps", "-aq", "--filter",
                             f"label=org.corral.state-root={state_root}"],
                            capture_output=True, text=True, check=True)
    return listed.stdout.split()


@pytest.mark.parametrize("backend", overlay_backends(only=("bubblewrap", "docker")),
                         indirect=True)
@pytest.mark.parametrize("point", ["start", "command", "diff"])
def test_killed_fanout_then_gc_loses_nothing_and_leaves_nothing(
    backend: str, point: str, tmp_path: Path, marker: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    opened = _run_until_killed(backend, repo, state_root, point, marker)
    assert len(opened) == (2 if point == "start" else 3)
    assert overlay_mounts(state_root)  # the killed process left its mounts behind
    if point == "diff":  # killed before the diff it was computing was stored
        assert not (state_root / "results" / opened[0]).exists()

    report = gc(state_root)

    cleaned = {e.sandbox_id: e for e in report.by_action("cleaned")}
    for i, sandbox_id in enumerate(opened):
        patch = (state_root / "results" / sandbox_id / "diff.patch").read_bytes()
        assert cleaned[sandbox_id].patch_path is not None
        assert f"+work of child {i}".encode() in patch
        if point == "command":
            assert b"+running" in patch
        if point == "diff" and i == 0:
            assert patch.count(b"\nnew file mode") == WIDE + 1
        changed = json.loads((state_root / "results" / sandbox_id / "diff.json").read_text())
        assert f"child-{i}.txt" in {c["path"] for c in changed["changed"]}
    assert not overlay_mounts(state_root)
    for directory in ("sandboxes", "worktrees"):
        assert not list((state_root / directory).iterdir())
    assert held_snapshots(state_root) == []  # the snapshot stays idle, for reuse
    assert wait_for(lambda: not pids_matching(f"sleep {marker}"), timeout=scaled(10))
    assert not list(Path("/sys/fs/cgroup").glob(f"**/corral/{cgroup_group(state_root)}/*"))
    if backend == "docker":
        assert _containers(state_root) == []
    assert not gc(state_root).entries  # nothing left to do


@pytest.mark.parametrize("backend", overlay_backends(only=("bubblewrap", "docker")),
                         indirect=True)
def test_gc_that_cannot_stop_one_child_leaves_no_mount_and_cleans_the_others(
    backend: str, tmp_path: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in CI: a fanout killed mid-teardown, then ``gc``: the engine refused to remove
    one child's container (most likely a 409: its removal already in progress), the error
    escaped gc, and every child's overlay stayed mounted (the next pytest run could not
    remove the tmp dir: EBUSY). A child gc cannot stop is now kept and reported, its overlay
    unmounted (the next gc mounts it again), and gc goes on with the others; the next gc
    loses nothing."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    opened = _run_until_killed(backend, repo, state_root, "command", marker)
    try:
        stuck = opened[0]
        if backend == "docker":
            remove_container = sandbox.backends.docker.remove_container

            def refuse(config: object, name: str) -> bool:
                if name == stuck:
                    raise SandboxError(f"cannot remove container {name}: 409 Conflict (removal "
                                       "already in progress)", code="docker_failed",
                                       operation="remove_container")
                return remove_container(config, name)  # type: ignore[arg-type]

            monkeypatch.setattr(sandbox.backends.docker, "remove_container", refuse)
        else:
            remove = PidsCgroup.remove

            def busy(self: PidsCgroup) -> None:
                if self.path.name == stuck:
                    raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(self.path))
                remove(self)

            monkeypatch.setattr(PidsCgroup, "remove", busy)

        report = gc(state_root)

        [kept] = report.by_action("kept")
        assert kept.sandbox_id == stuck and "not stopped" in kept.detail
        assert sorted(e.sandbox_id for e in report.by_action("cleaned")) == sorted(opened[1:])
        assert not overlay_mounts(state_root)
        assert not (state_root / "results" / stuck).exists()  # not diffed while it may run

        monkeypatch.undo()
        report = gc(state_root)

        [cleaned] = report.entries
        assert cleaned.sandbox_id == stuck and cleaned.action == "cleaned"
        patch = (state_root / "results" / stuck / "diff.patch").read_bytes()
        assert b"+work of child 0" in patch and b"+running" in patch
        assert not overlay_mounts(state_root)
        assert not list((state_root / "sandboxes").iterdir())
        assert wait_for(lambda: not pids_matching(f"sleep {marker}"), timeout=scaled(10))
        if backend == "docker":
            assert _containers(state_root) == []
    finally:  # a failure here leaves no container or mount (gc raised, or kept one)
        monkeypatch.undo()
        with contextlib.suppress(SandboxError):
            gc(state_root)
