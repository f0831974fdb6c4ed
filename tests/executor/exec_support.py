"""Helpers for the executor tests: backends, repositories, agent files, digests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from executor.ledger import RunRecord, ledger_dir
from executor.models import ScriptedModel
from executor.run import RunSettings, run_agent
from policies.config import UserConfig
from policies.contract import SandboxMode
from policies.loader import Environment, discover
from sandbox.config import BubblewrapConfig, DockerConfig, HostConfig, Limits
from tests.backends import git as run_git
from tests.backends import require_backend

LIMITS = Limits(timeout_seconds=60, memory_bytes=1 << 30, pids=256)
CONFIGS: dict[str, Any] = {"host": HostConfig, "bubblewrap": BubblewrapConfig,
                           "docker": DockerConfig}
BACKENDS = [pytest.param("host", id="host"),
            pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
            pytest.param("docker", id="docker", marks=pytest.mark.docker)]


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (parametrized indirectly)."""
    name = str(request.param)
    require_backend(name)
    return name


def invoke(*args: str) -> tuple[int, str, str]:
    """The ``corral`` command line in this process: exit code, stdout, stderr."""
    from click.testing import CliRunner

    from executor.cli import cli

    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def cli_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``corral ARGS`` as the command line runs it (errors rendered in one place): exit
    code, stdout, stderr."""
    from executor.cli import main

    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_config(text: str) -> None:
    """Write the user config the tests' ``CORRAL_CONFIG`` names."""
    import os

    path = Path(os.environ["CORRAL_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def git(repo: Path, *args: str) -> str:
    """Run test git in ``repo``; its stdout."""
    return run_git(repo, *args).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed repository with a few files."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Project\n\nhello\n")
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def script(tmp_path: Path, name: str, *turns: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(list(turns)))
    return str(path)


def agent_file(repo: Path, name: str, header: str, body: str = "Do the task.") -> None:
    """Write a native (.ngn) agent definition."""
    path = repo / ".ngn" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: test agent {name}\n{header}\n---\n{body}\n")


def tree_digest(path: Path, *, exclude: str | None = None) -> str:
    """A digest of every file (content, mode, symlink target) under ``path``, .git included,
    except what lies under ``exclude``."""
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        rel = item.relative_to(path).as_posix()
        if exclude and (rel == exclude or rel.startswith(exclude + "/")):
            continue
        info = item.lstat()
        digest.update(f"{rel}\0{info.st_mode}\0".encode())
        if item.is_symlink():
            digest.update(str(item.readlink()).encode())
        elif item.is_file():
            digest.update(item.read_bytes())
    return digest.hexdigest()


Runner = Callable[..., RunRecord]


@pytest.fixture
def run(repo: Path, tmp_path: Path, backend: str) -> Runner:
    """run(agent, turns, prompt=..., mode=..., config=...) -> the run record."""

    def _run(agent: str, turns: list[dict[str, Any]], *, prompt: str = "go",
             mode: SandboxMode = SandboxMode.WORKTREE, config: UserConfig | None = None,
             **settings: Any) -> RunRecord:
        env = Environment(home=tmp_path / "home", xdg_config=tmp_path / "home/.config",
                          pi_dir=tmp_path / "home/.pi/agent")
        registry = discover(repo, trust_project=True, personal=False, env=env)
        assert not [d for d in registry.diagnostics if d.severity == "error"], \
            [d.render() for d in registry.diagnostics]
        script = settings.pop("script", None) or ScriptedModel(turns, source="test")
        options = RunSettings(
            root=repo, backend=CONFIGS[backend](limits=LIMITS), config=config or UserConfig(),
            registry=registry, ledger=ledger_dir(repo), env=env, trust_project=True,
            mode_ceiling=mode, script=script, state_root=tmp_path / "state", **settings)
        return run_agent(options, agent, prompt)

    return _run
