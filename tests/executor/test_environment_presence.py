"""A child or a check never runs without the environment its run asked for.

A check that ran without the project's environment (its dependencies) would fail for a
reason that is not the candidate's, and the candidate would be recorded as wrong. So a
sandbox with an environment layer looks, from inside, for what the layer adds before
anything runs in it (:func:`sandbox.environment.verify_layer`), and a check whose sandbox
cannot have it is an ``error`` (its record says why), never a ``failed``.

Here: the layer taken away between a child and its check, the layer's binds or overlay
layer left out of a sandbox (a fault forced by replacing the step that makes them), and
children started together on one node (the node's own code, in threads released at once
by a barrier: every one unpacks, prepares the environment, mounts it and checks at the
same moment), each check seeing the layer.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from exec_support import agent_file, call, git, script

from executor.api import Corral, ProgressEvent, RunStatus, check_verdict
from executor.scheduling import Cancellation, Deadline, Handle, Job, JobContext, Scheduler
from executor.scheduling.local import LocalScheduler
from policies.contract import SandboxMode
from policies.environment import EnvironmentSpec
from sandbox import factory
from sandbox.config import BubblewrapConfig
from sandbox.environment import prepare_environment
from sandbox.errors import SandboxError
from sandbox.state import default_state_root
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot
from tests.timescale import scaled

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]
SETUP = "mkdir -p deps && echo built > deps/m"
WAIT = scaled(120.0)
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def project(repo: Path) -> Path:
    """A repository whose environment (committed, so a trusted run builds it) writes an
    ignored ``deps/m``, and an agent that writes a file."""
    (repo / ".corral").mkdir()
    (repo / ".corral" / "environment.toml").write_text(
        f'[environment]\nsetup = ["{SETUP}"]\n')
    (repo / ".gitignore").write_text("deps/\n")
    agent_file(repo, "w", "tools: [write_file, read_file, shell]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "environment")
    return repo


def layers(state: Path) -> list[Path]:
    return sorted(state.glob("environments/*/layer"))


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_check_whose_layer_went_is_an_error_never_a_failure(
        project: Path, tmp_path: Path, backend: str) -> None:
    """The layer removed between a child and its check (a prune by another process): the
    check does not run without it; the record says so and the fanout exits 3, not 1."""
    corral = Corral(project, trust_project=True, personal=False, backend=backend)
    quick = script(tmp_path, "q", call("write_file", path="x.txt", content="x\n"),
                   {"text": "x"})
    taken: list[Path] = []

    def progress(event: ProgressEvent) -> None:  # in the child's thread, before its check
        if event.kind == "phase" and event.detail == "check" and not taken:
            [layer] = layers(default_state_root())
            taken.append(layer.rename(tmp_path / "taken-layer"))

    result = corral.fanout("go", agents=["w"], scripts=[quick], n=1, check="cat deps/m",
                           progress=progress)
    [child] = result.children
    assert taken and child.run is not None
    record = child.run.record
    check = record.check
    assert record.status is RunStatus.COMPLETED  # the candidate itself did its work
    assert check is not None and check_verdict(check) == "error", check
    assert check["error"]["code"] == "environment_missing", check
    assert "is not under this sandbox" in check["error"]["message"]
    assert check["exit_code"] is None and check["skipped"] is None
    assert child.check_passed is None and result.passed == ()
    assert result.exit_code == 3
    # The layer back, the same candidate's check passes: the error was the layer's alone.
    taken[0].rename(layers_dir(default_state_root()) / "layer")
    again = corral.fanout("go", agents=["w"], scripts=[quick], n=1, check="cat deps/m")
    [child] = again.children
    assert child.run is not None and child.run.record.check is not None
    assert child.run.record.check["output_tail"] == "built\n", child.run.record.check
    assert again.exit_code == 0


def layers_dir(state: Path) -> Path:
    [directory] = [p.parent for p in state.glob("environments/*/env.json")]
    return directory


def _dropping_below(real: Callable[..., Any]) -> Callable[..., Any]:
    def overlay_layers(checkout: Path, state: Any, below: tuple[Path, ...] = ()) -> Any:
        return real(checkout, state, ())  # the fault: the layer is not under the overlay

    return overlay_layers


@pytest.mark.bubblewrap
@pytest.mark.parametrize("kind", ["overlay", "worktree"])
def test_a_sandbox_its_layer_is_not_mounted_in_never_opens(
        project: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """The step that puts the layer under the sandbox left out (the overlay's lower layer,
    or a worktree's read-only binds): the sandbox does not open, says which paths it
    lacks, and leaves nothing mounted (the suite's mount check) nor running."""
    if kind == "overlay" and factory.overlays_unusable(None) is not None:
        pytest.skip(f"overlays are unusable here: {factory.overlays_unusable(None)}")
    config = BubblewrapConfig()
    spec = EnvironmentSpec(setup=(SETUP,))
    ref = prepare_environment(spec, repo=project, config=config)
    assert ref.layer is not None and (ref.layer / "deps" / "m").is_file()
    opened = factory.open_sandbox(config, repo=project, mode=SandboxMode.WORKTREE,
                                  snapshot=(snap := acquire_snapshot(project)),
                                  environment=ref, workspace=kind)
    try:
        assert opened.exec(["cat", "deps/m"]).stdout == b"built\n"  # the real steps: there
    finally:
        opened.teardown(discard=True)
    if kind == "overlay":
        monkeypatch.setattr(factory, "overlay_layers", _dropping_below(factory.overlay_layers))
    else:
        monkeypatch.setattr(factory, "environment_mounts", lambda *a, **k: [])
    with pytest.raises(SandboxError) as caught:
        factory.open_sandbox(config, repo=project, mode=SandboxMode.WORKTREE, snapshot=snap,
                             environment=ref, workspace=kind)
    release_snapshot(snap)
    assert caught.value.code == "environment_missing"
    assert "deps of its layer not in the workspace" in caught.value.message
    assert not list((default_state_root() / "sandboxes").glob("*/worktree/*"))


class OneNode:
    """A scheduler whose jobs all run as on one Ray node: the node's own code
    (``Remote.there`` at one ``place``, then ``land`` here), each job in a thread of
    :class:`LocalScheduler`, all of them released at once by one barrier."""

    def __init__(self, jobs: int, deadline: Deadline, cancellation: Cancellation,
                 place: Path, barrier: threading.Barrier) -> None:
        self.local = LocalScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation)
        self.place, self.barrier = place, barrier
        self.cargo: dict[str, bytes] = {}
        self.lock = threading.Lock()

    @property
    def deadline(self) -> Deadline:
        return self.local.deadline

    @property
    def cancellation(self) -> Cancellation:
        return self.local.cancellation

    def submit(self, job: Job[Any], *, report: Callable[[Any], None] | None = None
               ) -> Handle[Any]:
        remote = job.remote
        assert remote is not None, "a fanout child always has its remote form"
        with self.lock:
            cargo = self.cargo.setdefault(remote.cargo_key(), remote.cargo())

        def run(context: JobContext) -> Any:
            def relay(event: Any) -> None:
                shown = remote.relayed(event)
                if shown is not None and report is not None:
                    report(shown)

            there = JobContext(key=context.key, deadline=context.deadline,
                               cancellation=context.cancellation, report=relay)
            self.barrier.wait(WAIT)  # every child starts at once
            return remote.land(remote.there(there, cargo, self.place), ["ran on one node"])

        return self.local.submit(Job(key=job.key, run=run), report=report)

    def as_completed(self, handles: Iterable[Handle[Any]]) -> Iterator[Handle[Any]]:
        return self.local.as_completed(handles)

    def cancel(self, reason: str) -> None:
        self.local.cancel(reason)

    def close(self) -> None:
        self.local.close()


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_children_started_together_on_one_node_all_see_the_layer(
        project: Path, tmp_path: Path, backend: str) -> None:
    """Four children of a fanout released at once on one node with nothing there yet:
    they unpack the snapshot, prepare the environment (one builds it, the others wait for
    that key and use it), mount it and run their checks together; every check sees the
    layer, it was built once there, and never here."""
    n = 4
    place = tmp_path / "node"
    barrier = threading.Barrier(n)
    made: list[Scheduler] = []

    def one_node(jobs: int, deadline: Deadline, cancellation: Cancellation) -> Scheduler:
        made.append(OneNode(n, deadline, cancellation, place, barrier))
        return made[-1]

    quick = script(tmp_path, "q", call("write_file", path="x.txt", content="x\n"),
                   {"text": "x"})
    corral = Corral(project, trust_project=True, personal=False, backend=backend)
    result = corral.fanout("go", agents=["w"], scripts=[quick], n=n, jobs=n,
                           check="cat deps/m", scheduler=one_node, on="ray")
    assert made and barrier.n_waiting == 0 and not barrier.broken
    checks = [child.run.record.check if child.run else None for child in result.children]
    assert [(c or {}).get("output_tail") for c in checks] == ["built\n"] * n, checks
    assert result.exit_code == 0
    assert len(list(place.glob("state/environments/*/layer"))) == 1  # once, for the key
    assert not (default_state_root() / "environments").exists()  # never here
    shutil.rmtree(place / "repos", ignore_errors=True)
