"""An environment's key, and its layer while children use it (issue 33).

- The key holds the content of each input (a lock file changed between runs is built
  again), the uid setup runs as (a layer built for root is never handed to children that
  run as 1000, whose files it could not write), and never what a symlinked input points to
  (a repository cannot make the key read, or depend on, a file outside it).
- An environment a live sandbox runs in is neither built again nor pruned under it: its
  children keep seeing the layer.
- What only the layer holds (a path the workspace lacks) is read-only in a worktree child,
  bound from the layer every child shares; an overlay child writes on top of it (copy-up)
  and the layer stays as setup made it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from exec_support import git

from policies.contract import SandboxMode
from policies.environment import EnvironmentSpec
from sandbox import environment as env_module
from sandbox import factory
from sandbox.base import BaseSandbox
from sandbox.config import BubblewrapConfig, DockerConfig, HostConfig
from sandbox.environment import prepare_environment, prune_environments
from sandbox.errors import SandboxConfigError
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot
from tests.backends import require_backend

SETUP = "mkdir -p deps && echo built > deps/m"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / ".gitignore").write_text("deps/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ignore deps")
    return repo


def _key(repo: Path, state: Path, inputs: tuple[str, ...] = ("deps.lock",)) -> str:
    spec = EnvironmentSpec(inputs=inputs, env={"A": "1"})
    return prepare_environment(spec, repo=repo, config=HostConfig(), state_root=state).key


def test_the_key_follows_a_lock_files_content_never_what_a_symlink_names(
        project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    absent = _key(project, state)
    (project / "deps.lock").write_text("a==1\n")
    first = _key(project, state)
    (project / "deps.lock").write_text("a==2\n")
    assert len({absent, first, _key(project, state)}) == 3
    outside = tmp_path / "outside.txt"
    outside.write_text("a file of yours\n")
    (project / "deps.lock").unlink()
    (project / "deps.lock").symlink_to(outside)
    assert _key(project, state) == absent  # a symlinked input is no input
    outside.write_text("changed\n")
    assert _key(project, state) == absent


def test_builds_for_two_uids_never_share_a_key(project: Path) -> None:
    """A docker child as root runs as uid 1000, a bubblewrap one as you: each gets its own
    layer (one setup wrote as its uid), though everything else is the same."""
    spec = EnvironmentSpec(setup=(SETUP,))
    keys = {owner: env_module._key(spec, backend="bubblewrap", repo=project, owner=owner,
                                   image=None) for owner in ((0, 0), (1000, 1000))}
    assert keys[(0, 0)] != keys[(1000, 1000)]
    assert env_module._owner(BubblewrapConfig()) == (os.geteuid(), os.getegid())
    if os.geteuid() == 0:
        assert env_module._owner(DockerConfig()) == (1000, 1000)


def _open(project: Path, ref: env_module.EnvironmentRef, kind: str, state: Path
          ) -> BaseSandbox:
    snapshot = acquire_snapshot(project, state_root=state)
    try:
        return factory.open_sandbox(BubblewrapConfig(), repo=project, mode=SandboxMode.WORKTREE,
                                    snapshot=snapshot, environment=ref, workspace=kind,
                                    state_root=state)
    finally:
        release_snapshot(snapshot)


@pytest.mark.bubblewrap
def test_an_environment_in_use_is_neither_rebuilt_nor_pruned_under_its_child(
        project: Path, tmp_path: Path) -> None:
    require_backend("bubblewrap")
    state = tmp_path / "state"
    spec = EnvironmentSpec(setup=(SETUP,))
    ref = prepare_environment(spec, repo=project, config=BubblewrapConfig(), state_root=state)
    assert ref.layer is not None
    sandbox = _open(project, ref, "worktree", state)
    try:
        with pytest.raises(SandboxConfigError, match="in use by a running sandbox"):
            prepare_environment(spec, repo=project, config=BubblewrapConfig(), rebuild=True,
                                state_root=state)
        assert prune_environments(state) == []
        assert (ref.layer / "deps" / "m").read_text() == "built\n"
        done = sandbox.exec(["cat", "deps/m"])
        assert done.ok and done.stdout == b"built\n", done.stderr
    finally:
        sandbox.teardown(discard=True)
    assert [info.key for info in prune_environments(state)] == [ref.key]  # unused: it goes
    assert not ref.layer.exists()


@pytest.mark.bubblewrap
@pytest.mark.parametrize("kind", ["worktree", "overlay"])
def test_a_path_only_the_layer_holds_never_changes_the_layer(project: Path, kind: str,
                                                            tmp_path: Path) -> None:
    """``deps/`` is the layer's alone. A worktree child cannot write it (it is bound
    read-only from the layer all children share); an overlay child writes on top of it, so
    only its own view changes. Either way the layer stays as setup made it."""
    require_backend("bubblewrap")
    if kind == "overlay" and factory.overlays_unusable(None) is not None:
        pytest.skip(f"overlays are unusable here: {factory.overlays_unusable(None)}")
    state = tmp_path / "state"
    ref = prepare_environment(EnvironmentSpec(setup=(SETUP,)), repo=project,
                              config=BubblewrapConfig(), state_root=state)
    assert ref.layer is not None
    sandbox = _open(project, ref, kind, state)
    try:
        done = sandbox.exec(["sh", "-c", "echo child > deps/m; touch deps/new; cat deps/m"])
        if kind == "worktree":
            assert done.stdout == b"built\n", (done.stdout, done.stderr)
            assert b"Read-only file system" in done.stderr
        else:
            assert done.ok and done.stdout == b"child\n", done.stderr
    finally:
        sandbox.teardown(discard=True)
    assert (ref.layer / "deps" / "m").read_text() == "built\n"
    assert sorted(p.name for p in (ref.layer / "deps").iterdir()) == ["m"]
