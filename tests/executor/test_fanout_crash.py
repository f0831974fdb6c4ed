"""Killing ``corral fanout`` at any point, then ``corral gc``: no lost diff, no leftover.

The executor is a real process, killed with SIGKILL (nothing of it runs after:
no ``finally``, no teardown) at four points, each waited for on state, never
on time: while its first sandbox is being made (start), while a child's
command runs (mid-command), while a child's diff is being computed (mid-diff)
and while a child's check command runs (mid-check). Then ``corral gc`` must
leave no sandbox directory, worktree, container, cgroup or process of the
state dir, no held snapshot (an idle one stays for reuse), and every diff the
children made before the kill must be in their records, where ``corral
show/diff/apply`` find it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file

from executor.cli import cli
from executor.ledger import RunStatus, find_run, ledger_dir, scan_fanouts
from sandbox.backends.limits import cgroup_group, find_pids_hierarchy
from sandbox.config import DockerConfig
from sandbox.errors import SandboxError
from sandbox.gc import gc
from sandbox.state import default_state_root
from tests.backends import require_backend
from tests.timescale import scaled

POINTS = ["start", "mid-command", "mid-diff", "mid-check"]
MANY = 20_000  # files the mid-diff child makes, so its diff takes long enough to be caught


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def corral(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def victim_turns(point: str) -> list[dict[str, Any]]:
    """What the child killed halfway does, by the point it is killed at."""
    turns = [call("write_file", path="victim.txt", content="made before the kill\n")]
    if point in ("start", "mid-command"):
        turns.append(call("shell", command="touch .up-command && exec sleep 600"))
    elif point == "mid-diff":
        turns.append(call("shell", command=f"mkdir many && cd many && seq 1 {MANY} | "
                                           "xargs touch"))
    return [*turns, {"text": "victim done"}]


def wait_for(process: subprocess.Popen[bytes], what: str,
             found: Callable[[], bool]) -> None:
    """Poll the state dir until ``found`` (the executor must still be running)."""
    deadline = time.monotonic() + scaled(240)
    while not found():
        assert process.poll() is None, f"the fanout ended before {what}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.002)


def _idle(snapshot: Path) -> bool:
    """A finished snapshot no one holds (the next run on its state reuses it)."""
    leases = snapshot / "leases"
    return not snapshot.name.startswith(".") and not (leases.is_dir() and any(leases.iterdir()))


def leftovers(state: Path, backend: str) -> list[str]:
    """Everything of the state dir that should be gone after gc."""
    found = [f"dir {p}" for name in ("sandboxes", "worktrees", "snapshots")
             if (state / name).is_dir() for p in (state / name).iterdir()
             if p.name != ".lock"  # the snapshots' lock file stays (it holds nothing)
             and not (name == "snapshots" and _idle(p))]  # idle: kept for reuse
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    found += [f"mount {line.split()[4]}" for line in mounts if str(state) in line]
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(state) in cmdline and process.pid != os.getpid():
            found.append(f"process {process.pid}: {cmdline[:120]}")
    hierarchy = find_pids_hierarchy()
    group = hierarchy[1] / "corral" / cgroup_group(state) if hierarchy else None
    if group is not None and group.is_dir():
        found += [f"cgroup {p}" for p in group.iterdir() if p.name.startswith("corral-")]
    if backend == "docker":
        from sandbox.backends.docker import list_corral_containers

        found += [f"container {n}" for n in list_corral_containers(DockerConfig(),
                                                                   state_root=state)]
    return found


@pytest.fixture
def state() -> Iterator[Path]:
    """The state dir (under the test's HOME); whatever a failing test leaves in it (the
    killed fanout's mounts, containers, processes) gc removes afterwards."""
    root = default_state_root()
    yield root
    with contextlib.suppress(SandboxError):
        gc(root)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("backend", [pytest.param("bubblewrap", marks=pytest.mark.bubblewrap),
                                     pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.timeout(600)
def test_killing_a_fanout_then_gc_loses_no_diff_and_leaves_nothing(
        repo: Path, tmp_path: Path, state: Path, backend: str, point: str) -> None:
    require_backend(backend)
    agent_file(repo, "w", "tools: [write_file, shell]")
    scripts = []
    for name, turns in (("done", [call("write_file", path="done.txt", content="done\n"),
                                  {"text": "done"}]), ("victim", victim_turns(point))):
        scripts += ["--script", str(tmp_path / f"{name}.yaml")]
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(turns))
    check = "touch .up-check && exec sleep 600" if point == "mid-check" else "true"
    process = subprocess.Popen(
        [sys.executable, "-m", "executor", "fanout", "--root", str(repo), "--trust-project",
         "--no-personal", "--agent", "w", *scripts, "--backend", backend, "--jobs", "2",
         "--check-cmd", check, "go"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if point == "start":
            wait_for(process, "a sandbox being made",
                     lambda: any((state / "sandboxes").glob("*/meta.json")))
        elif point == "mid-diff":  # the victim's own diff: begun, not saved yet
            wait_for(process, "the victim's diff being computed", lambda: any(
                (state / "sandboxes" / many.parent.name / "collect.index").exists()
                and not (state / "results" / many.parent.name / "diff.patch").exists()
                for many in (state / "worktrees").glob("*/many")))
        else:
            # The victim's own marker: the other child runs the same check, and its marker
            # alone would let the kill land while the victim is still running.
            marker = ".up-command" if point == "mid-command" else ".up-check"
            wait_for(process, f"the victim's {point}", lambda: any(
                (found.parent / "victim.txt").exists()
                for found in (state / "worktrees").glob(f"*/{marker}")))
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(scaled(60))
    ledger = ledger_dir(repo)
    [fanout] = scan_fanouts(ledger)[0]
    done_id, victim_id = (child.run_id for child in fanout.children)
    code, out = corral("gc")
    assert code == 0, out
    assert leftovers(state, backend) == [], out
    assert scan_fanouts(ledger)[0][0].status == "crashed"
    code, listed = corral("runs", "--root", str(repo))
    assert code == 0 and f"fanout {fanout.fanout_id}  crashed" in listed
    if point == "start":
        return  # whatever was made is gone; whatever a child wrote is in its record
    victim = find_run(ledger, victim_id)
    paths = [change["path"] for change in victim.changed_files]
    assert "victim.txt" in paths, (point, victim.status, paths)
    if point == "mid-check":  # its run had ended, its record was final: the check is not
        assert victim.status is RunStatus.COMPLETED and victim.check is None  # in its diff
        assert ".up-check" not in paths
    else:  # its process died with it: gc captured the diff and finalised the record
        assert victim.status is RunStatus.CRASHED
    if point == "mid-diff":
        assert len(paths) == MANY + 1
    else:
        code, out = corral("apply", victim_id, "--root", str(repo), "--check")
        assert code == 0, out
    done = find_run(ledger, done_id)
    if done.status is RunStatus.COMPLETED:  # it finished before the kill
        assert [change["path"] for change in done.changed_files] == ["done.txt"]
    code, out = corral("gc", "--json")
    assert json.loads(out)["entries"] == []  # nothing left for a second pass
