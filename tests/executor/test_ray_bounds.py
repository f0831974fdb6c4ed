"""The Ray scheduler's bounds (issue 33): what a node's job may pile up in the driver's flag
actor, how many jobs the cluster runs at once, how often a lost job is tried.

The flag's bounds are those of :class:`executor.scheduling.raytask.Flag` (the actor's
class) and of the node's relay; the scheduler's are tested on a real local Ray cluster bound
to 127.0.0.1 (one head with no sandbox resource, one worker offering more units than the
jobs bound), with jobs whose ``there`` waits on files this test creates.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.errors import ExecutorError
from executor.scheduling import Job
from executor.scheduling.cluster import RayScheduler
from executor.scheduling.node import RESOURCE
from executor.scheduling.raytask import MAX_PENDING, Flag, _Relay
from tests.backends import require
from tests.procs import wait_for
from tests.ray_jobs import FileJob, never_here

# Read when Ray is imported: without it a driver's 127.0.0.1 becomes the machine's own
# address and ray.init waits forever (DESIGN.md). Set before anything imports ray.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def test_the_flag_keeps_at_most_max_pending_events_of_a_job() -> None:
    """A job that reports without end (a child printing in a loop) fills neither the
    driver's actor nor its node's relay past MAX_PENDING; other jobs keep their own room."""
    flag = Flag()
    flag.post("s", "a", list(range(MAX_PENDING + 10)))
    flag.post("s", "a", ["more"])
    flag.post("s", "b", ["b's"])
    taken = flag.take("s")
    assert taken["a"] == list(range(MAX_PENDING)) and taken["b"] == ["b's"]
    assert flag.take("s") == {}
    relay = _Relay(flag, "s", "a")
    for n in range(MAX_PENDING + 10):
        relay.report(n)
    assert relay.events == list(range(MAX_PENDING))


REPO = Path(__file__).resolve().parents[2]
WAIT = 120.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A head with no sandbox resource and one worker offering 6 units (more than the jobs
    bound below), bound to 127.0.0.1; the driver connected to the head."""
    require("ray")
    import ray
    from ray.cluster_utils import Cluster

    places = tmp_path_factory.mktemp("ray-places")
    small = {"num_cpus": 1, "object_store_memory": 80 << 20, "node_ip_address": "127.0.0.1"}
    made = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False})
    try:
        ray.init(address=made.address, log_to_driver=False, runtime_env={"env_vars": {
            "PYTHONPATH": str(REPO), "CORRAL_RAY_DIR": str(places)}})
        made.add_node(**small, resources={RESOURCE: 6})
        made.wait_for_nodes()
        yield made
    finally:
        ray.shutdown()
        made.shutdown()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name in ("running", "seen", "release", "attempts"):
        (tmp_path / name).mkdir()
    return tmp_path


def _job(files: Path, key: str, mode: str) -> Job[Any]:
    return Job(key=key, run=never_here, remote=FileJob(files, key, mode))


def _running(files: Path) -> set[str]:
    return {p.name for p in (files / "running").iterdir()}


@pytest.mark.requires("ray")
@pytest.mark.timeout(600)
def test_jobs_bounds_the_whole_cluster_and_the_rest_wait_in_order(
        cluster: Any, files: Path) -> None:
    """The node runs 6 jobs at once when the scheduler allows 6 (so its workers are up);
    under ``--jobs 2`` two run, the third starts only when one ended, and so on, in order;
    none ever saw more than two running."""
    _hold_all(files, [f"w{n}" for n in range(6)], jobs=6)
    keys = [f"j{n}" for n in range(5)]
    scheduler = RayScheduler(jobs=2)
    try:
        handles = [scheduler.submit(_job(files, key, "hold")) for key in keys]
        assert wait_for(lambda: _running(files) == {"j0", "j1"}, WAIT), _running(files)
        # A negative, so a window, not a state: an unbounded scheduler has 5 tasks on warm
        # workers and starts a third within it; a bounded one never does, however long.
        assert not wait_for(lambda: len(_running(files)) > 2, 5.0), _running(files)
        for n, key in enumerate(keys):
            expected = set(keys[n:n + 2])
            assert wait_for(lambda e=expected: _running(files) == e, WAIT), (
                key, _running(files))
            (files / "release" / key).touch()
            assert handles[n].result(timeout=WAIT) == key
    finally:
        for key in keys:
            (files / "release" / key).touch()
        scheduler.close()
    seen = {key: int((files / "seen" / key).read_text()) for key in keys}
    assert max(seen.values()) <= 2, seen


def _hold_all(files: Path, keys: list[str], *, jobs: int) -> None:
    """Run ``keys`` at once (``jobs`` of them), all running together before any ends."""
    scheduler = RayScheduler(jobs=jobs)
    try:
        handles = [scheduler.submit(_job(files, key, "hold")) for key in keys]
        assert wait_for(lambda: _running(files) == set(keys), WAIT), _running(files)
        for key in keys:
            (files / "release" / key).touch()
        assert [h.result(timeout=WAIT) for h in handles] == keys
    finally:
        for key in keys:
            (files / "release" / key).touch()
        scheduler.close()


@pytest.mark.requires("ray")
@pytest.mark.timeout(600)
def test_a_job_lost_twice_is_failed_never_tried_a_third_time(
        cluster: Any, files: Path) -> None:
    """A job whose worker dies under it is tried once more; lost again, it fails, saying
    so: two attempts, never three."""
    scheduler = RayScheduler(jobs=1)
    try:
        handle = scheduler.submit(_job(files, "lost", "die"))
        with pytest.raises(ExecutorError, match="after a retry") as caught:
            handle.result(timeout=WAIT)
        assert caught.value.code == "node_lost"
    finally:
        scheduler.close()
    assert len(list((files / "attempts").iterdir())) == 2


@pytest.mark.requires("ray")
def test_the_drivers_flag_actor_holds_at_most_max_pending_events_of_a_job(
        cluster: Any) -> None:
    """The same bound in the real actor a scheduler posts to, across posts."""
    import ray

    from executor.scheduling.raytask import driver_flag

    flag = driver_flag(ray)
    scope = "bounds-test"
    ray.get(flag.post.remote(scope, "a", list(range(MAX_PENDING - 1))))
    ray.get(flag.post.remote(scope, "a", ["last", "one too many"]))
    taken = ray.get(flag.take.remote(scope))
    assert len(taken["a"]) == MAX_PENDING and taken["a"][-1] == "last"
    ray.get(flag.forget.remote(scope))
