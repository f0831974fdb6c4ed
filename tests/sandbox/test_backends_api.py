"""Configs, the factory, the fake's script checks, and argument validation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError
from sbx_support import OpenSandbox, backend_config, git

from policies.contract import SandboxMode
from sandbox.backends.docker import plan_users
from sandbox.backends.fake import FakeSandbox, FakeScriptError
from sandbox.config import (
    HOST_WARNING,
    AutoConfig,
    BackendConfig,
    BubblewrapConfig,
    DockerConfig,
    HostConfig,
)
from sandbox.errors import BackendUnavailable, PathDenied, SandboxConfigError, SandboxStateError
from sandbox.factory import open_sandbox, resolve_backend
from sandbox.protocol import Sandbox

ADAPTER: TypeAdapter[BackendConfig] = TypeAdapter(BackendConfig)


def test_configs_are_discriminated_and_strict() -> None:
    assert isinstance(ADAPTER.validate_python({"type": "bubblewrap"}), BubblewrapConfig)
    docker = ADAPTER.validate_python({"type": "docker", "image": "x:1", "limits": {"pids": 9}})
    assert isinstance(docker, DockerConfig) and docker.limits.pids == 9
    with pytest.raises(ValidationError):
        ADAPTER.validate_python({"type": "docker", "imag": "typo"})
    with pytest.raises(ValidationError):
        ADAPTER.validate_python({"type": "fake"})  # only reachable from code
    with pytest.raises(ValidationError):
        ADAPTER.validate_python({"type": "host", "limits": {"pids": 0}})


def test_host_backend_says_it_isolates_changes_not_processes(repo: Path, state_root: Path
                                                             ) -> None:
    assert "isolates changes, not processes" in HOST_WARNING
    assert "isolates *changes*, not *processes*" in " ".join((HostConfig.__doc__ or "").split())
    with open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.READ_ONLY,
                      state_root=state_root) as sb:
        assert sb.warning == HOST_WARNING
        assert isinstance(sb, Sandbox)


def test_auto_never_picks_host() -> None:
    bad = AutoConfig(bubblewrap=BubblewrapConfig(bwrap="/nonexistent/bwrap"),
                     docker=DockerConfig(base_url="unix:///nonexistent.sock"))
    with pytest.raises(BackendUnavailable) as raised:
        resolve_backend(bad)
    assert raised.value.code == "no_isolation_backend"


def test_fake_fails_loudly_on_unexpected_and_unconsumed_steps(repo: Path, state_root: Path
                                                              ) -> None:
    sb = open_sandbox(backend_config("fake"), repo=repo, mode=SandboxMode.WORKTREE,
                      state_root=state_root)
    assert isinstance(sb, FakeSandbox)
    with pytest.raises(FakeScriptError, match="script is empty"):
        sb.exec(["ls"])
    sb.expect(["ls"], stdout=b"README.md\n").expect(["pwd"])
    with pytest.raises(FakeScriptError, match="expects"):
        sb.exec(["cat", "x"])
    assert sb.exec(["ls"]).stdout == b"README.md\n"
    with pytest.raises(FakeScriptError, match="never ran"):
        sb.teardown(discard=True)
    assert not sb.root.exists()


def test_exec_arguments_are_validated(repo: Path, state_root: Path) -> None:
    sb = open_sandbox(backend_config("fake"), repo=repo, mode=SandboxMode.WORKTREE,
                      state_root=state_root)
    for argv in ("ls -la", [], ["ls", "a\0b"]):
        with pytest.raises(SandboxConfigError):
            sb.exec(argv)  # type: ignore[arg-type]
    with pytest.raises(SandboxConfigError):
        sb.exec(["ls"], env={"A=B": "x"})
    with pytest.raises(SandboxConfigError):
        sb.exec(["ls"], timeout=0)
    with pytest.raises(PathDenied) as denied:
        sb.exec(["ls"], cwd="../..")
    assert denied.value.code == "path_outside_workspace"
    sb.teardown(discard=True)
    with pytest.raises(SandboxStateError):
        sb.exec(["ls"])


def test_not_a_repository(tmp_path: Path, state_root: Path) -> None:
    with pytest.raises(SandboxConfigError) as raised:
        open_sandbox(backend_config("fake"), repo=tmp_path, mode=SandboxMode.WORKTREE,
                     state_root=state_root)
    assert raised.value.code == "not_a_repository" and raised.value.exit_code == 2


def test_unborn_repository_and_odd_paths(tmp_path: Path, state_root: Path) -> None:
    """B7.38: paths that look like options (``--upload-pack=...``, ``-n``) stay paths."""
    repo = tmp_path / "--upload-pack=touch pwned"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "-n").write_text("dash\n")
    with open_sandbox(backend_config("fake"), repo=repo, mode=SandboxMode.WORKTREE,
                      state_root=state_root) as sb:
        assert sb.base_commit is not None
        sb.files.write_text("--help", "x\n")
        diff = sb.collect_diff()
    assert [c.path for c in diff.changed] == ["--help"]
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(("mode", "owner", "expected"), [
    (SandboxMode.WORKTREE, (0, 0), ((1000, 1000), (1000, 1000))),
    (SandboxMode.READ_ONLY, (0, 0), ((1000, 1000), None)),
    (SandboxMode.WORKSPACE_WRITE, (1234, 1234), ((1234, 1234), None)),
])
def test_docker_users(mode: SandboxMode, owner: tuple[int, int],
                      expected: tuple[tuple[int, int], tuple[int, int] | None]) -> None:
    if os.geteuid() != 0:
        pytest.skip("the plan differs for a non-root parent")
    assert plan_users(DockerConfig(), owner, mode) == expected


def test_docker_root_commands_only_when_allowed() -> None:
    with pytest.raises(SandboxConfigError) as raised:
        plan_users(DockerConfig(allow_root_user=False), (0, 0), SandboxMode.WORKSPACE_WRITE)
    assert raised.value.code == "docker_root_user"
    assert plan_users(DockerConfig(allow_root_user=True), (0, 0),
                      SandboxMode.WORKSPACE_WRITE) == ((0, 0), None)
    auto = DockerConfig()  # allowed only when corral itself runs as root
    if os.geteuid() == 0:
        assert plan_users(auto, (0, 0), SandboxMode.WORKSPACE_WRITE) == ((0, 0), None)
    else:
        with pytest.raises(SandboxConfigError):
            plan_users(auto, (0, 0), SandboxMode.WORKSPACE_WRITE)


@pytest.mark.parametrize("backend", ["bubblewrap"], indirect=True)
def test_extra_read_only_path_under_tmp_is_visible_and_read_only(
        open_sb: OpenSandbox, tmp_path: Path) -> None:
    """``extra_ro_paths`` (a virtualenv an MCP server runs from) may live under the host's
    /tmp: it is bound after the sandbox's own /tmp, so not hidden by it, and read-only."""
    extra = tmp_path / "venv"
    extra.mkdir()
    (extra / "marker").write_text("seen\n")
    assert str(extra).startswith("/tmp/")
    sb = open_sb(extra_ro_paths=(extra,))
    shown = sb.exec(["cat", str(extra / "marker")])
    assert shown.ok and shown.stdout == b"seen\n"
    wrote = sb.exec(["sh", "-c", f"echo x > {extra}/new"])
    assert not wrote.ok and not (extra / "new").exists()
