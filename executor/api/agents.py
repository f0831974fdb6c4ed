"""The agents a :class:`~executor.api.Corral` can run: discovered, listed, shown.

Light on purpose: listing agents loads the loader and the contracts, never
the run machinery (``corral agents list`` starts fast; ``tests/test_startup.py``
pins it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor.agents.registry import Sources, find_agent, load
from executor.agents.views import agent_json, diagnostics_json, list_json

if TYPE_CHECKING:
    from policies.capability import Capability
    from policies.contract import AgentContract
    from policies.loader import Diagnostic, LoadResult
    from policies.mcp import McpServerConfig

__all__ = ["AgentView", "Agents", "discover", "show"]


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
    user's MCP ``servers``."""

    contract: AgentContract
    effective: Capability
    agents: Mapping[str, AgentContract]
    servers: Mapping[str, McpServerConfig]

    def to_json(self) -> dict[str, Any]:
        """The ``corral agents show --json`` object."""
        return agent_json(self.contract, effective=self.effective, agents=self.agents,
                          servers=self.servers)


def discover(sources: Sources) -> Agents:
    """Every agent of ``sources``."""
    return Agents(load(sources))


def show(sources: Sources, name: str) -> AgentView:
    """Agent ``name`` (a user error with close names when there is none)."""
    # The tool implementations (and their argument models) only for `agents show`.
    from executor.agents.offer import root_capability  # noqa: PLC0415
    from policies.config import load_user_config  # noqa: PLC0415

    result = load(sources)
    contract = find_agent(name, result, sources)
    config = load_user_config()
    return AgentView(contract, root_capability(config, result), result.agents,
                     config.mcp_servers)
