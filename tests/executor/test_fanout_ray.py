"""``corral fanout --on ray``: children on the sandboxing nodes of a real local Ray cluster.

One cluster for the module, bound to 127.0.0.1: a head node that advertises no
``corral_sandbox`` (a node whose sandbox probe failed: it must never get a
child) and two worker nodes that do (bubblewrap, two slots each), 1 CPU and an
80 MB object store each, no dashboard. Each node keeps its state under its own
directory of ``CORRAL_RAY_DIR`` (nothing is shared with the driver's state dir).

Every wait is a bounded poll on state (a child started on a node, a record
landed); nothing sleeps for a fixed time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file, call, git, script
from test_remote_records import CASES, FANOUT, RUN, packed

from executor.api import CancelToken, Corral, FanoutResult
from executor.cli import cli
from executor.ledger import find_run, ledger_dir
from executor.ledger.imports import RemoteRecordRefused, land_run
from executor.scheduling import Cancellation, Deadline, Job, JobContext, Scheduler
from tests.backends import require
from tests.timescale import scaled

# Read when Ray is imported: without it a driver's 127.0.0.1 becomes the machine's own
# address and ray.init waits forever (DESIGN.md). Set before anything imports ray.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
REPO = Path(__file__).resolve().parents[2]
WAIT = scaled(90.0)
MB = 1 << 20
pytestmark = [pytest.mark.requires("ray"), pytest.mark.timeout(300)]


@dataclass
class RayCluster:
    cluster: Any
    head: str
    workers: dict[str, Any]  # node id -> its node handle (to remove it)
    places: Path


def _node_id(node: Any) -> str:
    return str(node.node_id)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    require("ray")
    import ray
    from ray.cluster_utils import Cluster

    from executor.scheduling.node import node_resources

    places = tmp_path_factory.mktemp("ray-nodes")
    small = {"num_cpus": 1, "object_store_memory": 80 * MB, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={
        **small, "include_dashboard": False, "_system_config": {
            "health_check_period_ms": 1000, "health_check_failure_threshold": 10}})
    try:
        resources = node_resources(backend="bubblewrap", slots=2)
        assert resources == {"corral_sandbox": 2.0}
        # Connected before the workers exist, the driver is the head's (as on a real
        # cluster, where a worker that dies is never the driver's own node).
        ray.init(address=cluster.address, log_to_driver=False, runtime_env={"env_vars": {
            "PYTHONPATH": str(REPO), "CORRAL_RAY_DIR": str(places)}})
        workers = [cluster.add_node(**small, resources=resources) for _ in range(2)]
        cluster.wait_for_nodes()
        assert ray.get_runtime_context().get_node_id() == _node_id(cluster.head_node)
        yield RayCluster(cluster, _node_id(cluster.head_node),
                         {_node_id(node): node for node in workers}, places)
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / "big.py").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    agent_file(repo, "w", "tools: [write_file, edit, shell, read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "big")
    (repo / "dirty.txt").write_text("uncommitted, in the snapshot\n")  # not in HEAD
    return repo


def corral_of(project: Path) -> Corral:
    return Corral(project, trust_project=True, personal=False, backend="bubblewrap")


def nodes_of(result: FanoutResult, project: Path) -> dict[int, list[str]]:
    """Child index -> the notes of its record that name Ray nodes."""
    ledger = ledger_dir(project)
    return {run.index: [n for n in find_run(ledger, run.run_id).notes if "node" in n]
            for run in result.children}


def ran_on(notes: list[str]) -> str:
    return next(n for n in notes if n.startswith("ran on Ray node ")).split()[-1]


def comparable(result: FanoutResult) -> list[dict[str, Any]]:
    """What must not depend on where the children ran."""
    rows = []
    for row in result.to_json()["runs"]:
        check = dict(row["check"] or {})
        check.pop("duration_seconds", None)
        rows.append({"index": row["index"], "status": row["status"], "diff": row["diff"],
                     "lines": (row["lines_added"], row["lines_removed"]), "check": check,
                     "steps": row["steps"], "usage": row["usage"]})
    return rows


def test_results_are_those_of_the_local_fanout_and_the_ledger_works_the_same(
        ray_cluster: RayCluster, project: Path, tmp_path: Path) -> None:
    a = script(tmp_path, "a", call("write_file", path="notes.txt", content="a\n"),
               {"text": "a", "usage": {"input_tokens": 10, "output_tokens": 2}})
    b = script(tmp_path, "b", call("edit", path="big.py", old_string="line 2\n",
                                   new_string="LINE 2\nline 2b\n"), {"text": "b"})
    c = script(tmp_path, "c", call("shell", command="cat dirty.txt > notes.txt"),
               {"text": "c"})
    corral = corral_of(project)
    kwargs: dict[str, Any] = {"agents": ["w"], "scripts": [a, b, c], "jobs": 3,
                              "check": "test -f notes.txt && echo ok"}
    local = corral.fanout("Write notes", **kwargs)
    events: list[Any] = []
    remote = corral.fanout("Write notes", on="ray", progress=events.append, **kwargs)
    assert comparable(remote) == comparable(local)
    # What the children reported on their nodes reached this display, each its own line.
    ended = {e.run_id: e.detail for e in events if e.kind == "phase"
             and e.detail.startswith("done ")}
    assert ended.keys() == {c.run_id for c in remote.children}
    assert all(detail.startswith("done completed") for detail in ended.values())
    assert {e.kind for e in events} >= {"step", "tool", "tool_done", "phase"}
    assert [r.status for r in remote.children] == ["completed"] * 3
    assert "+uncommitted, in the snapshot" in comparable(remote)[2]["diff"]  # not HEAD
    to_index = {r.run_id: r.index for r in remote.children}
    local_index = {r.run_id: r.index for r in local.children}
    assert ([[to_index[x], to_index[y], files] for x, y, files in remote.to_json()["conflicts"]]
            == [[local_index[x], local_index[y], files]
                for x, y, files in local.to_json()["conflicts"]])
    assert list(remote.to_json()["bases"]) == list(local.to_json()["bases"])  # one commit
    placed = {index: ran_on(notes) for index, notes in nodes_of(remote, project).items()}
    workers = {node[:12] for node in ray_cluster.workers}
    assert set(placed.values()) <= workers and ray_cluster.head[:12] not in placed.values()
    # The parent's ledger serves the remote children as it serves local ones.
    run_id = remote.children[1].run_id
    runner = CliRunner()
    shown = runner.invoke(cli, ["show", run_id, "--root", str(project)])
    assert shown.exit_code == 0 and f"fanout: {remote.fanout_id}" in shown.stderr
    diff = runner.invoke(cli, ["diff", run_id, "--root", str(project)])
    assert "+LINE 2" in diff.stdout
    logs = runner.invoke(cli, ["logs", run_id, "--root", str(project)])
    assert logs.exit_code == 0 and "edit" in logs.stdout
    listed = runner.invoke(cli, ["runs", "--root", str(project), "--json"])
    assert run_id in listed.stdout
    applied = runner.invoke(cli, ["apply", run_id, "--root", str(project), "--yes"])
    assert applied.exit_code == 0, applied.stderr
    assert "LINE 2\nline 2b\n" in (project / "big.py").read_text()


def _capture(into: list[Any]) -> Callable[[int, Deadline, Cancellation], Scheduler]:
    from executor.scheduling.cluster import RayScheduler

    def make(jobs: int, deadline: Deadline, cancellation: Cancellation) -> Scheduler:
        scheduler = RayScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation)
        into.append(scheduler)
        return scheduler

    return make


def _poll(what: str, ready: Callable[[], bool]) -> None:
    end = time.monotonic() + WAIT
    while not ready():
        assert time.monotonic() < end, f"waited {WAIT}s for {what}"
        time.sleep(0.05)


def _in_thread(work: Callable[[], FanoutResult]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _detach_mounts_under(path: Path) -> None:
    """What a killed node left mounted (its sandboxes' overlays): the machine of a real
    node is gone with it; here it is this machine."""
    points = [line.split(" ")[4] for line in
              Path("/proc/self/mountinfo").read_text().splitlines()
              if line.split(" ")[4].startswith(str(path))]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def test_a_cancel_reaches_every_node_and_children_not_started_never_start(
        ray_cluster: RayCluster, project: Path, tmp_path: Path) -> None:
    long = script(tmp_path, "long", call("write_file", path="started.txt", content="s\n"),
                  call("shell", command="sleep 120"), {"text": "never"})
    schedulers: list[Any] = []
    token = CancelToken()
    slots = 2 * len(ray_cluster.workers)
    corral = corral_of(project)
    # One child more than the cluster's slots (it waits in Ray), one more than --jobs.
    thread, out = _in_thread(lambda: corral.fanout(
        "go", agents=["w"], scripts=[long], n=slots + 2, jobs=slots + 1, cancel=token,
        scheduler=_capture(schedulers)))
    _poll("the scheduler", lambda: bool(schedulers))
    scheduler = schedulers[0]
    _poll("a child running on every slot", lambda: len(scheduler.placements()) == slots)
    assert set(scheduler.placements().values()) == set(ray_cluster.workers)

    ledger = ledger_dir(project)

    def sleeping() -> list[str]:  # the parent's ledger follows each remote child's journal
        return [path.parent.name for path in ledger.glob("*/journal.jsonl")
                if "sleep 120" in path.read_text(errors="replace")]

    _poll("every running child in its command, here", lambda: len(sleeping()) == slots)
    for run_id in sleeping():  # what `corral runs` and `corral logs` show of it meanwhile
        assert find_run(ledger, run_id).status.value == "running"
        logs = CliRunner().invoke(cli, ["logs", run_id, "--root", str(project)])
        assert logs.exit_code == 0 and "sleep 120" in logs.stdout
    followed: list[str] = []  # `corral logs -f` of one of them, until it ends
    follower = threading.Thread(target=lambda: followed.extend(
        e.kind for e in corral.follow(sleeping()[0], poll=0.05)))
    follower.start()
    token.cancel("the test cancels")
    thread.join(WAIT)
    follower.join(WAIT)
    assert not thread.is_alive() and not follower.is_alive()
    assert "tool_call" in followed and followed[-1] == "end"  # to its end, then it stopped
    result = out[0]
    assert isinstance(result, FanoutResult), result
    assert result.status == "cancelled"
    records = [find_run(ledger, r.run_id) for r in result.children]
    assert [r.status.value for r in records] == ["cancelled"] * (slots + 2)
    ran = [r for r in records if any(n.startswith("ran on Ray node") for n in r.notes)]
    assert len(ran) == slots  # the children that ran, on both nodes, stopped and recorded
    assert {ran_on(r.notes) for r in ran} == {n[:12] for n in ray_cluster.workers}
    assert all("+++ b/started.txt" in r.diff for r in ran)  # their diffs recorded
    never = [r for r in records if r not in ran]
    assert all((r.error or {}).get("code") == "not_started_cancelled" for r in never)


def test_the_deadline_holds_on_every_node(ray_cluster: RayCluster, project: Path,
                                         tmp_path: Path) -> None:
    long = script(tmp_path, "long", call("write_file", path="started.txt", content="s\n"),
                  call("shell", command="sleep 120"), {"text": "never"})
    slots = 2 * len(ray_cluster.workers)
    result = corral_of(project).fanout("go", agents=["w"], scripts=[long], n=slots + 2,
                                       jobs=slots + 1, timeout=scaled(20), on="ray")
    records = [find_run(ledger_dir(project), r.run_id) for r in result.children]
    assert [r.status.value for r in records] == ["timeout"] * (slots + 2)
    ran = [r for r in records if any(n.startswith("ran on Ray node") for n in r.notes)]
    assert {ran_on(r.notes) for r in ran} == {n[:12] for n in ray_cluster.workers}
    assert len(ran) == slots and all("+++ b/started.txt" in r.diff for r in ran)
    never = [r for r in records if r not in ran]  # one waited in Ray, one on the driver
    assert [(r.error or {}).get("code") for r in never] == ["not_started_expired"] * 2


def test_a_remote_childs_delegated_children_come_back_with_it(
        ray_cluster: RayCluster, project: Path, tmp_path: Path) -> None:
    zuno = project / ".zuno" / "zuno.json"
    zuno.parent.mkdir()
    zuno.write_text(json.dumps({"agents": {"boss": {"delegates": ["helper"]},
                                           "helper": {"tools": ["write_file"]}}}))
    git(project, "add", "-A")
    git(project, "commit", "-qm", "agents")
    boss = script(tmp_path, "boss", call("delegate", agent="helper", prompt="write it"),
                  call("write_file", path="helper.txt", content="h\n"), {"text": "written"},
                  {"text": "boss done"})
    corral = corral_of(project)
    ledger = ledger_dir(project)
    trees = []
    for on in ("local", "ray"):
        result = corral.fanout("go", agents=["boss"], scripts=[boss], n=1, on=on)
        top = find_run(ledger, result.children[0].run_id)
        assert top.status.value == "completed" and len(top.children) == 1, on
        child = find_run(ledger, top.children[0])  # in the parent's ledger, either way
        trees.append((top.final_text, child.parent_run == top.run_id, child.agent,
                      child.final_text, child.diff))
    assert trees[0] == trees[1] and trees[1][1] is True


def test_the_environment_is_built_on_each_node_once_and_never_here(
        ray_cluster: RayCluster, project: Path, tmp_path: Path) -> None:
    described = project / ".corral" / "environment.toml"
    described.parent.mkdir()
    described.write_text('[environment]\nsetup = ["mkdir -p deps && echo built > deps/m"]\n')
    (project / ".gitignore").write_text("deps/\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "environment")
    quick = script(tmp_path, "q", call("write_file", path="x.txt", content="x\n"),
                   {"text": "x"})
    slots = 2 * len(ray_cluster.workers)
    result = corral_of(project).fanout("go", agents=["w"], scripts=[quick], n=2 * slots,
                                       jobs=slots, check="cat deps/m", on="ray")
    checks = [child.run.record.check if child.run else None for child in result.children]
    # On a failure, each child's status, error and whole check: which of them went wrong.
    seen = [(child.run.record.status.value, child.run.record.error, check) if child.run
            else None for child, check in zip(result.children, checks, strict=True)]
    assert [(c or {}).get("output_tail") for c in checks] == ["built\n"] * (2 * slots), \
        json.dumps(seen, indent=1, default=str)
    built = {place.name: sorted(p.parent.name for p in
                                place.glob("state/environments/*/env.json"))
             for place in ray_cluster.places.iterdir() if (place / "state").is_dir()}
    used = {ran_on(n)[:12] for n in nodes_of(result, project).values()}
    assert {name[:12] for name, keys in built.items() if keys} == used
    assert all(len(keys) == 1 for keys in built.values() if keys)  # once per node and key
    assert not (Path.home() / ".local" / "state" / "corral" / "environments").exists()


def test_the_cli_and_the_mcp_server_run_a_fanout_on_the_cluster(
        ray_cluster: RayCluster, project: Path, tmp_path: Path) -> None:
    import anyio

    from executor.mcpserver.arguments import FanoutArgs
    from executor.mcpserver.handlers import ServerOptions, fanout_tool

    a = script(tmp_path, "a", call("write_file", path="a.txt", content="a\n"), {"text": "a"})
    result = CliRunner().invoke(cli, [
        "fanout", "--root", str(project), "--trust-project", "--no-personal", "--backend",
        "bubblewrap", "--agent", "w", "--script", a, "-n", "2", "--on", "ray", "--json", "go"])
    assert result.exit_code == 0, result.output
    ledger = ledger_dir(project)
    runs = json.loads(result.stdout)["runs"]
    assert all(ran_on(find_run(ledger, r["run_id"]).notes) for r in runs)
    options = ServerOptions(root=project.resolve(), trust_project=True, no_personal=True,
                            backend="bubblewrap", fanout_on="ray")
    replay = yaml.safe_dump([call("write_file", path="m.txt", content="m\n"), {"text": "m"}])
    args = FanoutArgs(prompt="go", agents=["w"], n=2, script_texts=[replay])
    answer = anyio.run(lambda: fanout_tool(options, args))
    assert answer["exit_code"] == 0
    assert all(ran_on(find_run(ledger, r["run_id"]).notes) for r in answer["runs"])


def test_a_node_whose_sandbox_fails_its_probe_offers_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "executor.scheduling.node", "--backend",
                           "bubblewrap", "--bwrap", "/nonexistent/bwrap"],
                          capture_output=True, text=True, cwd=REPO, check=False, timeout=scaled(60),
                          env={"PATH": os.defpath, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}  # `ray start --resources '{}'`: no child comes
    assert "no isolating backend works here" in done.stderr
    from executor.scheduling.node import node_resources
    assert node_resources(backend="host") == {}  # host never counts as a sandbox
    assert node_resources(backend="auto", slots=3) == {"corral_sandbox": 3.0}


@dataclass(frozen=True)
class Hostile:
    """A remote that returns what a compromised node could: a record that names a path."""

    ledger: Path
    packed: dict[str, Any]

    def cargo_key(self) -> str:
        return "hostile"

    def cargo(self) -> bytes:
        return b""

    def there(self, context: JobContext, cargo: bytes, place: Path) -> Any:
        return self.packed

    def relayed(self, event: Any) -> Any:
        return event

    def land(self, returned: Any, notes: list[str]) -> str:
        land_run(self.ledger, returned, run_id=RUN, fanout=FANOUT)
        return "landed"


def test_a_hostile_record_from_a_node_is_refused_before_anything_is_written(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    import ray.cloudpickle

    from executor.scheduling.cluster import RayScheduler
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ledger = tmp_path / "ledger"
    cases = CASES  # the packs test_remote_records.py refuses without a cluster
    with RayScheduler(jobs=2) as scheduler:
        handles = {name: scheduler.submit(Job(key=name, run=lambda c: None,
                                              remote=Hostile(ledger, pack)))
                   for name, pack in cases.items()}
        for name, handle in handles.items():
            with pytest.raises(RemoteRecordRefused, match="was refused"):
                handle.result(WAIT)
            assert handle.outcome() == "failed", name
        # What a compromised node's task could return instead of corral's result tuple.
        from executor.errors import ExecutorError
        some = next(iter(handles.values()))
        for shape in [("done",), ["done", {}, "n"], ("done", {}, 7), ("weird", 1, "n")]:
            with pytest.raises(ExecutorError, match="returned"):
                scheduler._judge(some, shape)
        outcome, _, error = scheduler._judge(some, ("error", {"context": [1], "code": 3}, "n"))
        assert outcome == "failed" and isinstance(error, ExecutorError)
        assert error.context == {} and error.code == "3"
        outcome, _, error = scheduler._judge(some, ("bug", 12345, "\x1b[2Jnode"))
        assert outcome == "failed" and "12345" in str(error)
    written = sorted(p.name for p in ledger.rglob("*")) if ledger.exists() else []
    assert written == []
    assert not list(tmp_path.rglob("escape*"))
    good = Hostile(ledger, packed())
    assert good.land(good.packed, []) == "landed"  # the same pack, untampered, lands
    assert (ledger / RUN / "record.json").is_file()


# Last: it takes a node away from the module's cluster.
def test_a_lost_node_loses_no_captured_diff_and_its_children_are_retried_elsewhere(
        ray_cluster: RayCluster, project: Path, tmp_path: Path) -> None:
    quick = [script(tmp_path, f"q{i}", call("write_file", path=f"quick{i}.txt",
                                            content=f"{i}\n"), {"text": "quick"})
             for i in (1, 2)]
    slow = [script(tmp_path, f"s{i}", call("write_file", path=f"slow{i}.txt", content="s\n"),
                   call("shell", command="sleep 15"), {"text": "slow"}) for i in (3, 4)]
    schedulers: list[Any] = []
    corral = corral_of(project)
    thread, out = _in_thread(lambda: corral.fanout(
        "go", agents=["w"], scripts=[*quick, *slow], jobs=4, scheduler=_capture(schedulers)))
    _poll("the scheduler", lambda: bool(schedulers))
    scheduler = schedulers[0]
    ledger = ledger_dir(project)

    def landed() -> bool:  # a remote child is in the parent's ledger once it ended
        return any(json.loads(p.read_text())["final_text"] == "quick"
                   for p in ledger.glob("*/record.json"))

    _poll("every child to start", lambda: len(scheduler.placements()) == 4)
    _poll("a quick child to land", landed)
    placements = scheduler.placements()
    victim = placements[next(key for key in placements if key.startswith("child 3"))]
    ray_cluster.cluster.remove_node(ray_cluster.workers.pop(victim))
    thread.join(WAIT)
    assert not thread.is_alive()
    result = out[0]
    assert isinstance(result, FanoutResult), result
    assert [r.status for r in result.children] == ["completed"] * 4
    ledger = ledger_dir(project)
    for run, name in zip(result.children, ["quick1", "quick2", "slow3", "slow4"], strict=True):
        assert f"+++ b/{name}.txt" in find_run(ledger, run.run_id).diff  # every diff is here
    notes = nodes_of(result, project)
    retried = [i for i, n in notes.items() if any(x.startswith("retried once") for x in n)]
    assert 3 in retried and all(victim[:12] in " ".join(notes[i]) for i in retried)
    assert all(ran_on(notes[i]) != victim[:12] for i in retried)  # elsewhere
    assert [n for n in result.record.notes if "retried once" in n]  # the fanout says so
    _detach_mounts_under(ray_cluster.places / victim[:16])
