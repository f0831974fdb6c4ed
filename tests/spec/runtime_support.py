"""Runtime helpers for the spec tests: what the loader reads must also happen in a run.

``run_in(fs, agent, turns)`` turns the ``fs`` repository into a real git
repository (once), discovers its definitions with the test environment, and
runs ``agent`` end to end on the host backend with a scripted model; it
returns the run record and the scripted model, whose recorded requests show
exactly what the model was sent (messages, tool schemas, sampling).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.ledger import RunRecord, ledger_dir, load_transcript
from executor.models import ScriptedModel, ScriptedRequest
from executor.run import RunSettings, run_agent
from policies.config import UserConfig
from policies.contract import SandboxMode
from policies.loader import LoadResult, Options, Severity
from sandbox.config import HostConfig, Limits
from tests.backends import git

__all__ = ["Ran", "make_repo", "run_in", "settings_for"]

LIMITS = Limits(timeout_seconds=60, memory_bytes=1 << 30, pids=256)


@dataclass
class Ran:
    """A finished run: its record, the replay (with every request), the registry used."""

    record: RunRecord
    script: ScriptedModel
    registry: LoadResult
    repo: Path

    @property
    def requests(self) -> tuple[ScriptedRequest, ...]:
        return self.script.requests

    def transcript(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return load_transcript(ledger_dir(self.repo), run_id or self.record.run_id)


def make_repo(fs: Any) -> Path:
    """Make ``fs.repo`` a committed git repository (idempotent); return it."""
    repo: Path = fs.repo
    if not (repo / ".git").exists():
        (repo / "README.md").write_text("# Project\n\nhello\n")
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "init")
    return repo


def settings_for(fs: Any, *, config: UserConfig | None = None, personal: bool = False,
                 script: ScriptedModel | None = None, mode: SandboxMode = SandboxMode.WORKTREE,
                 allow_errors: bool = False, **extra: Any) -> RunSettings:
    """Run settings over the ``fs`` repository (discovered with the test environment)."""
    repo = make_repo(fs)
    config = config or UserConfig()
    options = Options(custom_tools=frozenset(config.custom_tools), model_map=config.model_map)
    registry = fs.discover(trust_project=True, personal=personal, options=options)
    if not allow_errors:
        errors = [d.render() for d in registry.diagnostics if d.severity is Severity.ERROR]
        assert not errors, errors
    return RunSettings(
        root=repo, backend=HostConfig(limits=LIMITS), config=config,
        registry=registry, ledger=ledger_dir(repo), env=fs.env, trust_project=True,
        mode_ceiling=mode, script=script, state_root=fs.tmp / "state", **extra)


def run_in(fs: Any, agent: str | None, turns: list[dict[str, Any]], *, prompt: str = "go",
           **options: Any) -> Ran:
    """Run ``agent`` (``None``: the default agent) on ``prompt`` with a scripted model."""
    script = ScriptedModel(turns, source="test")
    settings = settings_for(fs, script=script, **options)
    record = run_agent(settings, agent, prompt)
    return Ran(record, script, settings.registry, settings.root)
