"""Helpers for the spec-sentence tests: real files in ``tmp_path``, never the user's home.

Every test gets an ``fs`` fixture: a repository root and a personal home under
``tmp_path``, an :class:`Environment` pointing into them, and small writers for
definition files. ``cli`` runs ``corral`` through click's runner with ``HOME``,
``XDG_CONFIG_HOME``, ``PI_CODING_AGENT_DIR`` and ``CORRAL_CONFIG`` set to
temporary paths, so nothing outside ``tmp_path`` is ever read.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from executor.cli import cli as corral_cli
from policies.contract import AgentContract, AgentFormat, Scope
from policies.loader import (
    Diagnostic,
    Environment,
    FileOutcome,
    LoadResult,
    Options,
    Severity,
    discover,
    load_file,
)

#: A minimal valid definition per format, as (relative file name, text) for agent ``{name}``.
MINIMAL: dict[AgentFormat, tuple[str, str]] = {
    AgentFormat.NGN: ("{name}.md", "---\ndescription: An ngn agent.\n---\nDo the work.\n"),
    AgentFormat.CLAUDE: (
        "{name}.md", "---\nname: {name}\ndescription: A Claude agent.\n---\nDo the work.\n"),
    AgentFormat.COPILOT: ("{name}.agent.md", "---\ndescription: A Copilot agent.\n---\nDo it.\n"),
    AgentFormat.OPENCODE: ("{name}.md", "---\ndescription: An OpenCode agent.\n---\nDo it.\n"),
    AgentFormat.CODEX: (
        "{name}.toml",
        'name = "{name}"\ndescription = "A Codex role."\ndeveloper_instructions = "Do it."\n',
    ),
    AgentFormat.CURSOR: (
        "{name}.md", "---\nname: {name}\ndescription: A Cursor agent.\n---\nDo the work.\n"),
    AgentFormat.GEMINI: (
        "{name}.md", "---\nname: {name}\ndescription: A Gemini agent.\n---\nDo the work.\n"),
    AgentFormat.ANTIGRAVITY: (
        "{name}.md", "---\nname: {name}\ndescription: An Antigravity agent.\n---\nDo it.\n"),
    AgentFormat.PI: ("{name}.md", "---\nname: {name}\ndescription: A pi agent.\n---\nDo it.\n"),
    AgentFormat.ZUNO: ("{name}.md", "---\ndescription: A zuno agent.\n---\nDo the work.\n"),
}


def md_text(header: str, body: str = "Do the work.\n") -> str:
    """A Markdown definition: ``---``, the (dedented) YAML header, ``---``, the body."""
    return "---\n" + textwrap.dedent(header).strip("\n") + "\n---\n" + body


def errors(diagnostics: Iterable[Diagnostic], field: str | None = None) -> list[Diagnostic]:
    """The error diagnostics (of one field, when given)."""
    return [d for d in diagnostics
            if d.severity is Severity.ERROR and (field is None or d.field == field)]


def problems(diagnostics: Iterable[Diagnostic], field: str | None = None) -> list[Diagnostic]:
    """Warnings and errors (of one field, when given)."""
    return [d for d in diagnostics
            if d.severity is not Severity.INFO and (field is None or d.field == field)]


def rejected_with(outcome: FileOutcome, field: str) -> Diagnostic:
    """Assert ``outcome`` was rejected with an error on ``field``; return that error."""
    assert outcome.status.value == "rejected", [d.render() for d in outcome.diagnostics]
    found = errors(outcome.diagnostics, field)
    assert found, f"no error on {field!r}: {[d.render() for d in outcome.diagnostics]}"
    assert found[0].file == outcome.display
    return found[0]


@dataclass
class Files:
    """A repository root and a personal home under ``tmp_path``."""

    tmp: Path
    repo: Path
    home: Path
    env: Environment

    def write(self, path: Path | str, text: str | bytes, *, base: Path | None = None) -> Path:
        """Write ``text`` at ``path`` (relative to ``base``, default the repo root)."""
        target = Path(path) if Path(path).is_absolute() else (base or self.repo) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_bytes(text.encode("utf-8"))
        return target

    def md(self, path: Path | str, header: str, body: str = "Do the work.\n", *,
           base: Path | None = None) -> Path:
        """Write a Markdown definition (see :func:`md_text`)."""
        return self.write(path, md_text(header, body), base=base)

    def json(self, path: Path | str, data: Any, *, base: Path | None = None) -> Path:
        """Write ``data`` as JSON."""
        return self.write(path, json.dumps(data, indent=2), base=base)

    def minimal(self, fmt: AgentFormat, directory: Path | str, name: str, *,
                base: Path | None = None) -> Path:
        """Write the minimal valid definition of ``fmt`` for agent ``name`` into ``directory``."""
        file_name, text = MINIMAL[fmt]
        return self.write(Path(directory) / file_name.format(name=name), text.format(name=name),
                          base=base)

    def discover(self, **kwargs: Any) -> LoadResult:
        """``discover(repo, env=...)`` with the temporary environment."""
        kwargs.setdefault("env", self.env)
        return discover(self.repo, **kwargs)

    def load(self, path: Path, fmt: AgentFormat, *, scope: Scope = Scope.PROJECT,
             options: Options | None = None, display: str | None = None,
             skip_non_agents: bool | None = None) -> FileOutcome:
        """``load_file`` with a display name relative to the repo (or the tmp dir)."""
        if display is None:
            try:
                display = path.relative_to(self.repo).as_posix()
            except ValueError:
                display = path.relative_to(self.tmp).as_posix()
        if skip_non_agents is None:  # config files holding agent maps are read by name
            skip_non_agents = path.suffix not in {".json", ".jsonc"} or fmt is AgentFormat.CATALOG
        return load_file(path, fmt, scope=scope, display=display, options=options,
                         skip_non_agents=skip_non_agents)

    errors = staticmethod(errors)
    problems = staticmethod(problems)
    rejected_with = staticmethod(rejected_with)
    text = staticmethod(md_text)

    def agent(self, path: Path, fmt: AgentFormat, **kwargs: Any) -> AgentContract:
        """Load ``path`` and return its single contract, failing with the diagnostics if not."""
        outcome = self.load(path, fmt, **kwargs)
        assert outcome.status.value == "loaded", [d.render() for d in outcome.diagnostics]
        assert len(outcome.agents) == 1
        return outcome.agents[0]


@pytest.fixture
def fs(tmp_path: Path) -> Files:
    """A repo at ``tmp_path/repo`` and a home at ``tmp_path/home`` (XDG config inside it)."""
    repo = tmp_path / "repo"
    home = tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    env = Environment(home=home, xdg_config=home / ".config", pi_dir=home / ".pi" / "agent")
    return Files(tmp=tmp_path, repo=repo, home=home, env=env)


@pytest.fixture
def cli(fs: Files) -> Callable[..., Result]:
    """Run ``corral`` with HOME, XDG_CONFIG_HOME, PI_CODING_AGENT_DIR and CORRAL_CONFIG in tmp."""

    def run(*args: str, corral_config: Path | None = None) -> Result:
        runner = CliRunner()
        env = {
            "HOME": str(fs.home),
            "XDG_CONFIG_HOME": str(fs.env.xdg_config),
            "PI_CODING_AGENT_DIR": str(fs.env.pi_dir),
            "CORRAL_CONFIG": str(corral_config or fs.tmp / "corral-config.toml"),
        }
        return runner.invoke(corral_cli, list(args), env=env, catch_exceptions=True)

    return run


__all__ = ["MINIMAL", "Files"]
