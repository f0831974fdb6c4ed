"""The agents a :class:`~executor.api.Corral` can run: discovered, listed, shown.

Light on purpose: listing agents loads the loader and the contracts, never
the run machinery (``corral agents list`` starts fast; ``tests/test_startup.py``
pins it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from executor.agents.registry import Sources, find_agent, load
from executor.agents.views import (
    agent_diagnostics,
    agent_json,
    diagnostics_json,
    list_json,
    runnable,
)

if TYPE_CHECKING:
    from pathlib import Path

    from policies.capability import Capability
    from policies.contract import AgentContract, ModelRoute
    from policies.loader import Diagnostic, Environment, LoadResult
    from policies.mcp import McpServerConfig
    from policies.network import NetworkGrant

__all__ = ["AgentView", "Agents", "NewAgent", "discover", "new", "runnable", "show",
           "show_all", "skill_views"]


@dataclass(frozen=True)
class Agents:
    """What discovery found: the agents that won (by name), every diagnostic, and the zuno
    ``default_agent``. ``result`` is the loader's whole answer."""

    result: LoadResult

    @property
    def agents(self) -> Mapping[str, AgentContract]:
        return self.result.agents

    @property
    def names(self) -> list[str]:
        """The agents' names, sorted."""
        return sorted(self.result.agents)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.result.diagnostics

    @property
    def default_agent(self) -> str | None:
        return self.result.default_agent

    @property
    def rejected(self) -> bool:
        """Whether a definition was rejected (``corral agents check`` exits 1)."""
        return self.result.rejected

    def runnable(self, name: str) -> dict[str, Any]:
        """Whether agent ``name`` can run now, by you and as a subagent, and why not
        (:func:`executor.agents.views.runnable`: the answer the CLI, the web page and MCP
        show); ``KeyError`` for a name discovery did not find."""
        return runnable(self.result.agents[name])

    def to_json(self) -> dict[str, Any]:
        """The ``corral agents list --json`` object."""
        return list_json(self.result)

    def diagnostics_json(self) -> list[dict[str, object]]:
        """Every diagnostic as a JSON object."""
        return diagnostics_json(self.result.diagnostics)


@dataclass(frozen=True)
class AgentView:
    """One agent as ``corral agents show`` prints it: its contract, and what it would be
    offered under the user's root capability (``effective``), among ``agents`` with the
    user's MCP ``servers``; its own loading ``diagnostics`` and its required ``skills`` as
    a run resolves them (:func:`skill_views`)."""

    contract: AgentContract
    effective: Capability
    agents: Mapping[str, AgentContract]
    servers: Mapping[str, McpServerConfig]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skills: list[dict[str, Any]] = field(default_factory=list)
    #: The hosts ``web_fetch`` may reach (your ``[network]``, ``--allow-net``).
    network: NetworkGrant | None = None

    # Its JSON is its contract's (``view.contract.<key>``), and these, read from it:

    @property
    def name(self) -> str:
        return self.contract.name

    @property
    def format(self) -> str:
        """The format of its definition file (``claude``, ``ngn``, ...)."""
        return self.contract.origin.format.value

    @property
    def source(self) -> str:
        """Its definition file."""
        return self.contract.origin.source

    @property
    def scope(self) -> str:
        return self.contract.origin.scope.value

    @property
    def model_route(self) -> ModelRoute:
        """Its model route (the JSON's ``model_route``; ``model`` is its first candidate)."""
        return self.contract.model

    @property
    def runnable(self) -> dict[str, Any]:
        """Whether it can run now, by you and as a subagent, and why not (the CLI's, the web
        page's and MCP's one answer: :func:`executor.agents.views.runnable`)."""
        return runnable(self.contract)

    def to_json(self) -> dict[str, Any]:
        """The ``corral agents show --json`` object."""
        return agent_json(self.contract, effective=self.effective, agents=self.agents,
                          servers=self.servers, diagnostics=self.diagnostics,
                          skills=self.skills, network=self.network)


def discover(sources: Sources) -> Agents:
    """Every agent of ``sources``."""
    return Agents(load(sources))


def show(sources: Sources, name: str) -> AgentView:
    """Agent ``name`` (a user error with close names when there is none)."""
    # The tool implementations (and their argument models) only for `agents show`.
    from executor.agents.offer import root_capability  # noqa: PLC0415
    from policies.config import load_user_config  # noqa: PLC0415
    from policies.loader import Environment  # noqa: PLC0415

    result = load(sources)
    contract = find_agent(name, result, sources)
    config = load_user_config()
    return AgentView(contract, root_capability(config, result), result.agents,
                     config.mcp_servers, agent_diagnostics(contract, result.diagnostics),
                     skill_views(contract, root=sources.root, env=Environment.from_env(),
                                 trust_project=sources.trust_project),
                     network=config.network.grant(sources.allow_net))


def show_all(sources: Sources) -> list[AgentView]:
    """Every agent that won discovery as :func:`show` gives it, by name, from one load of
    the definitions and the user's config (``corral serve``'s agents page)."""
    from executor.agents.offer import root_capability  # noqa: PLC0415
    from policies.config import load_user_config  # noqa: PLC0415
    from policies.loader import Environment  # noqa: PLC0415

    result = load(sources)
    config = load_user_config()
    root = root_capability(config, result)
    env = Environment.from_env()
    network = config.network.grant(sources.allow_net)
    return [AgentView(contract, root, result.agents, config.mcp_servers,
                      agent_diagnostics(contract, result.diagnostics),
                      skill_views(contract, root=sources.root, env=env,
                                  trust_project=sources.trust_project), network=network)
            for _, contract in sorted(result.agents.items())]


def skill_views(contract: AgentContract, *, root: Path, env: Environment,
                trust_project: bool) -> list[dict[str, Any]]:
    """Each required skill as a run resolves it (:func:`executor.run.skills.resolve_skills`):
    its source, its metadata (the SKILL.md header's ``name`` and ``description``) and
    its body budget (a run sends the whole body; a SKILL.md over 256 KiB is refused), or
    why a run cannot start with it."""
    if not contract.required_skills:
        return []
    # The skill resolver (the run's own) only when an agent requires skills.
    from executor.errors import RunError  # noqa: PLC0415
    from executor.run.skills import resolve_skills  # noqa: PLC0415
    from policies.loader.diagnostics import DefinitionRejected  # noqa: PLC0415
    from policies.loader.files import MAX_FILE_BYTES  # noqa: PLC0415
    from policies.loader.frontmatter import split_frontmatter  # noqa: PLC0415

    views: list[dict[str, Any]] = []
    for name in contract.required_skills:
        try:
            (skill,) = resolve_skills((name,), root=root, env=env, trust_project=trust_project)
        except RunError as exc:
            views.append({"name": name, "status": exc.code, "reason": exc.message,
                          "context": {k: str(v) for k, v in exc.context.items()}})
            continue
        metadata: dict[str, Any] = {}
        try:
            header = split_frontmatter(skill.path.read_text(encoding="utf-8"), lenient=True)
            metadata = {key: header.fields[key] for key in ("name", "description")
                        if isinstance(header.fields.get(key), str)}
        except (DefinitionRejected, OSError, UnicodeDecodeError):
            pass
        body = skill.instructions.encode("utf-8")
        views.append({"name": name, "status": "resolved", "source": str(skill.path),
                      "metadata": metadata,
                      "budget": {"body_bytes": len(body), "sent": len(body),
                                 "limit_bytes": MAX_FILE_BYTES}})
    return views


@dataclass(frozen=True)
class NewAgent:
    """What ``corral agents new`` wrote: the file, its format, the agent's name and mode
    (reachability: ``all``, ``primary`` or ``subagent``), and whether discovery (with the
    project trusted) finds it there: ``discovered`` is False for a file outside every
    agent directory (an ``agent_imports`` entry of a ``--config`` file reads it), and
    ``shadowed_by`` names the definition that wins over it under the same name."""

    path: Path
    format: str
    name: str
    mode: str
    discovered: bool
    shadowed_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``corral agents new --json`` object."""
        return {"path": str(self.path), "format": self.format, "name": self.name,
                "mode": self.mode, "discovered": self.discovered,
                "shadowed_by": self.shadowed_by}


def new(sources: Sources, name: str, *, format: str, mode: str = "all",
        path: str | Path | None = None, description: str | None = None) -> NewAgent:
    """Write a valid, minimal definition of agent ``name`` in ``format``
    (:func:`executor.agents.scaffold.scaffold`: never over an existing file), then run
    discovery as ``corral agents check --trust-project`` would, to say whether it is found."""
    from pathlib import Path  # noqa: PLC0415

    from executor.agents.scaffold import scaffold  # noqa: PLC0415
    from policies.loader import Environment  # noqa: PLC0415
    from policies.loader.discovery import personal_candidates, project_candidates  # noqa: PLC0415

    written = scaffold(sources.root, name, format, mode=mode,
                       path=Path(path) if path is not None else None, description=description)
    here = written.path.resolve()
    found = project_candidates(sources.root.resolve())[0]
    if sources.personal:
        found += personal_candidates(Environment.from_env())[0]
    discovered = any(candidate.path.resolve() == here for candidate in found)
    winner = load(replace(sources, trust_project=True)).agents.get(name) if discovered else None
    shadowed = (winner.origin.source if winner is not None
                and Path(winner.origin.file).resolve() != here else None)
    return NewAgent(path=written.path, format=written.format.value, name=name, mode=mode,
                    discovered=discovered, shadowed_by=shadowed)
