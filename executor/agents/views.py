"""JSON views of contracts and diagnostics (what ``agents list/show --json`` print, and MCP's
``list_agents``); their text is the CLI's (:mod:`executor.cli.agent_views`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from executor.agents.offer import make_offer
from policies.capability import READ_ONLY_REMOVED_GROUPS, Capability, restrict
from policies.contract import AgentContract
from policies.loader import Diagnostic, LoadResult
from policies.mcp import McpServerConfig
from policies.tools import group_of, tool_matches

__all__ = ["agent_json", "diagnostics_json", "list_json", "own_tools"]


def own_tools(contract: AgentContract) -> list[str] | None:
    """The agent's own allowlist after its denied tools and its mode; None = inherits."""
    if contract.tools is None:
        return None
    tools = {t for t in contract.tools
             if not any(tool_matches(denied, t) for denied in contract.denied_tools)}
    if contract.is_read_only:
        tools = {t for t in tools if group_of(t) not in READ_ONLY_REMOVED_GROUPS}
    return sorted(tools)


def agent_json(contract: AgentContract, *, effective: Capability | None = None,
               agents: Mapping[str, AgentContract] | None = None,
               servers: Mapping[str, McpServerConfig] | None = None) -> dict[str, Any]:
    """The ``agents show --json`` object; ``effective`` is the root capability, and the
    ``effective`` tools are exactly what a run's model is offered (:mod:`executor.agents.offer`)."""
    route = contract.model
    data: dict[str, Any] = {
        "name": contract.name,
        "id": contract.id,
        "display_name": contract.display_name,
        "description": contract.description,
        "format": contract.origin.format.value,
        "source": contract.origin.source,
        "scope": contract.origin.scope.value,
        "mode": contract.mode.value,
        "sandbox": contract.sandbox.value if contract.sandbox else None,
        "tools": own_tools(contract),
        "denied_tools": sorted(contract.denied_tools),
        "delegates": sorted(contract.delegates) if contract.delegates is not None else None,
        "model": route.display,
        "model_route": {
            "candidates": [str(ref) for ref in route.candidates],
            "provider": route.provider,
            "inherit": route.inherit,
            "foreign": route.foreign,
            "needs_override": route.needs_override,
            "parent_fallback": route.parent_fallback,
        },
        "user_invocable": contract.user_invocable,
        "subagent_available": contract.subagent_available,
        "hidden": contract.hidden,
        "disabled": contract.disabled,
        "steps": contract.steps,
        "timeout_seconds": contract.timeout_seconds,
        "reasoning": contract.reasoning,
        "temperature": contract.temperature,
        "top_p": contract.top_p,
        "variant": contract.variant,
        "permission": contract.permission.model_dump(mode="json"),
        "required_skills": list(contract.required_skills),
        "memory": contract.memory.model_dump(mode="json"),
        "tool_bindings": [b.model_dump(mode="json") for b in contract.tool_bindings],
        "status": contract.status.value if contract.status else None,
        "namespace": contract.namespace,
        "welcome_message": contract.welcome_message,
        "response_reviewers": list(contract.response_reviewers),
        "color": contract.color,
        "extras": contract.extras,
        "digest": contract.digest(),
        "instructions": contract.instructions,
    }
    if effective is not None:
        narrowed = restrict(effective, contract)
        data["effective"] = {
            **make_offer(narrowed, contract, agents or {}, servers=servers).to_json(),
            "sandbox": narrowed.sandbox.value,
            "read_only": narrowed.read_only,
            "approval_required": sorted(narrowed.approval_required),
        }
    return data


def diagnostics_json(diagnostics: list[Diagnostic]) -> list[dict[str, object]]:
    """Diagnostics as JSON objects."""
    return [d.to_json() for d in diagnostics]


def list_json(result: LoadResult) -> dict[str, Any]:
    """The ``agents list --json`` object."""
    return {
        "agents": [agent_json(c) for _, c in sorted(result.agents.items())],
        "diagnostics": diagnostics_json(result.diagnostics),
        "default_agent": result.default_agent,
    }
