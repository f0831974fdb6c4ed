"""A read-only child's throwaway layer (:mod:`sandbox.workspaces.scratch`) at the sandbox seam.

Its mounts never outlive the child: teardown drops them and counts what they held; a
crash leaves them to gc, which drops a dead sandbox's and never a live one's. The host
backend, whose commands run on the checkout itself, refuses the layer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sbx_support import TEST_LIMITS, backend_config, backends, sh

from policies.contract import SandboxMode
from sandbox.errors import SandboxConfigError
from sandbox.factory import open_sandbox
from sandbox.gc import gc
from sandbox.workspaces.overlay import is_mountpoint
from sandbox.workspaces.scratch import scratch_mounts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="throwaway layers need root here")
SIZE = 16 << 20


@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_teardown_drops_the_layer_and_counts_it(backend: str, repo: Path,
                                                state_root: Path) -> None:
    before = sorted(p.name for p in repo.iterdir())
    sb = open_sandbox(backend_config(backend, TEST_LIMITS), repo=repo,
                      mode=SandboxMode.READ_ONLY, state_root=state_root, scratch_size=SIZE)
    try:
        sh(sb, "printf 12345 > five && mkdir d && ln -s five d/link && rm README.md").check()
        assert sb.files.read_text("five") == "12345"  # the file API reads the layer
        found = sb.discarded_writes()
        assert found is not None and (found.files, found.bytes) == (3, 5)  # + a whiteout
    finally:
        report = sb.teardown()
    assert any(item.startswith("scratch:") for item in report.removed)
    assert sorted(p.name for p in repo.iterdir()) == before
    assert not (state_root / "worktrees" / sb.id).exists()
    assert sb.discarded_writes() == found  # what it held when it was dropped


@pytest.mark.bubblewrap
def test_gc_drops_a_crashed_childs_layer_and_never_a_live_one(repo: Path,
                                                              state_root: Path) -> None:
    from tests.backends import require_backend

    require_backend("bubblewrap")
    config = backend_config("bubblewrap", TEST_LIMITS)
    live = open_sandbox(config, repo=repo, mode=SandboxMode.READ_ONLY, state_root=state_root,
                        scratch_size=SIZE)
    dead = open_sandbox(config, repo=repo, mode=SandboxMode.READ_ONLY, state_root=state_root,
                        scratch_size=SIZE)
    try:
        sh(live, "echo live > mine").check()
        sh(dead, "echo dead > mine").check()
        meta = dead.state.read_meta()
        dead.state.write_meta(meta.model_copy(update={"owner_pid": None}))  # it crashed
        dead._close()
        gc(state_root)
        mounts = scratch_mounts(state_root / "worktrees")
        assert live.id in mounts and dead.id not in mounts
        assert not is_mountpoint(state_root / "worktrees" / dead.id / "merged")
        assert sh(live, "cat mine").stdout == b"live\n"  # untouched by gc
        assert not (repo / "mine").exists()
    finally:
        live.teardown()


def test_the_host_backend_refuses_the_layer(repo: Path, state_root: Path) -> None:
    with pytest.raises(SandboxConfigError, match="isolating backend") as caught:
        open_sandbox(backend_config("host", TEST_LIMITS), repo=repo,
                     mode=SandboxMode.READ_ONLY, state_root=state_root, scratch_size=SIZE)
    assert caught.value.code == "scratch_unavailable"
    assert scratch_mounts(state_root / "worktrees") == {}
