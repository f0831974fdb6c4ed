"""JSON views of contracts and diagnostics (what ``agents list/show --json`` print, and MCP's
``list_agents``); their text is the CLI's (:mod:`executor.cli.agent_views`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from executor.agents.offer import Offer, egress_refusal, make_offer
from policies.capability import READ_ONLY_REMOVED_GROUPS, Capability, refusal, restrict
from policies.contract import AgentContract
from policies.loader import Diagnostic, LoadResult
from policies.loader.models import foreign_fix
from policies.mcp import McpServerConfig
from policies.network import NetworkGrant
from policies.tools import group_of, tool_matches

__all__ = ["agent_diagnostics", "agent_json", "diagnostics_json", "list_json", "own_tools",
           "runnable"]


def own_tools(contract: AgentContract) -> list[str] | None:
    """The agent's own allowlist after its denied tools and its mode; None = inherits."""
    if contract.tools is None:
        return None
    tools = {t for t in contract.tools
             if not any(tool_matches(denied, t) for denied in contract.denied_tools)}
    if contract.is_read_only:
        tools = {t for t in tools if group_of(t) not in READ_ONLY_REMOVED_GROUPS}
    return sorted(tools)


def runnable(contract: AgentContract) -> dict[str, Any]:
    """Whether the agent can run at the top level (``corral run``: ``user``) and as a
    delegated child (``subagent``), and why not when it can run neither way
    (``why_not``). The one answer every front door shows: the CLI's ``u``/``s`` flags and
    ``[not runnable: ...]``, the web page's "you: yes", MCP ``list_agents``'
    ``runnable``. What a run refuses (:func:`policies.capability.refusal`), and a model
    name of another harness that nothing maps (a run needs ``--model``), a listing never
    offers as runnable."""
    user = refusal(contract, delegated=False)
    subagent = refusal(contract, delegated=True)
    route = contract.model
    if route.needs_override and route.foreign is not None:
        fix = foreign_fix(route.foreign, route.foreign_format)
        missing = f"no model for {route.foreign!r}: {fix}"
        user = user or missing
        subagent = subagent or missing
    return {"user": user is None, "subagent": subagent is None,
            "why_not": subagent if user is not None and subagent is not None else None}


def agent_json(contract: AgentContract, *, effective: Capability | None = None,
               agents: Mapping[str, AgentContract] | None = None,
               servers: Mapping[str, McpServerConfig] | None = None,
               diagnostics: Sequence[Diagnostic] | None = None,
               skills: Sequence[Mapping[str, Any]] | None = None,
               network: NetworkGrant | None = None) -> dict[str, Any]:
    """The ``agents show --json`` object; ``effective`` is the root capability, and the
    ``effective`` tools are exactly what a run's model is offered (:mod:`executor.agents.offer`).
    ``diagnostics`` are the agent's own (:func:`agent_diagnostics`), ``skills`` its
    required skills as a run resolves them (:func:`executor.api.agents.skill_views`)."""
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
            "inherit_connection": route.inherit_connection,
            "preset": route.preset,
            "roles": {role: list(chain) for role, chain in sorted(route.roles.items())},
        },
        "user_invocable": contract.user_invocable,
        "subagent_available": contract.subagent_available,
        "runnable": runnable(contract),
        "hidden": contract.hidden,
        "disabled": contract.disabled,
        "steps": contract.steps,
        "timeout_seconds": contract.timeout_seconds,
        "reasoning": contract.reasoning,
        "temperature": contract.temperature,
        "top_p": contract.top_p,
        "variant": contract.variant,
        "permission": contract.permission.model_dump(mode="json"),
        "options": contract.options,
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
    if skills is not None:
        data["skills"] = [dict(skill) for skill in skills]
    if diagnostics is not None:
        data["diagnostics"] = diagnostics_json(list(diagnostics))
    if effective is not None:
        narrowed = restrict(effective, contract)
        offer = make_offer(narrowed, contract, agents or {}, servers=servers, network=network)
        data["effective"] = {
            **offer.to_json(),
            "sandbox": narrowed.sandbox.value,
            # What --net allow would open to its commands (the same grant), or why not.
            "egress": (network.to_json()["allow"] if network is not None
                       and egress_refusal(narrowed, contract, network) is None else None),
            "egress_refusal": egress_refusal(narrowed, contract, network),
            "read_only": narrowed.read_only,
            # Every tool some call of which waits for a human: needsApproval, or an ask rule.
            "approval_required": sorted(tool for tool in (*offer.tools, *offer.deferred)
                                        if narrowed.may_ask(tool)),
            # Those of them every call of which waits (the rest ask on a matching rule).
            "approval_every_call": sorted(tool for tool in (*offer.tools, *offer.deferred)
                                          if tool in narrowed.approval_required),
            **tool_arguments(offer),
        }
    return data


def tool_arguments(offer: Offer) -> dict[str, dict[str, Any]]:
    """Each offered native tool's argument schema (as its model is sent it) and that in
    one line (:func:`executor.agents.signatures.signature`), by the name the model sees:
    what a replay's ``arguments`` must match. MCP tools are listed by their servers only
    when a run starts them."""
    # The tool implementations (their argument models) only for `agents show`.
    from executor.agents.signatures import signature  # noqa: PLC0415
    from executor.tools import native_tools  # noqa: PLC0415

    tools = native_tools(delegate_targets=offer.targets)
    schemas = {offer.wire(name): tools[name].args.model_json_schema()
               for name in (*offer.tools, *offer.deferred) if name in tools}
    return {"schemas": schemas,
            "arguments": {wire: signature(wire, schema) for wire, schema in schemas.items()}}


#: A diagnostic on one entry of a file that maps names to definitions (zuno.json,
#: opencode.json, an ngn JSON file's profiles).
_ENTRY_RE = re.compile(r"^(?:agents?|profiles)\.(?P<name>[^.]+)(?:\.|$)")


def agent_diagnostics(contract: AgentContract,
                      diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics about ``contract``'s own definition: those of its source file (and
    of the zuno layers it merged), without those of other entries of a shared file."""
    files = {contract.origin.source, *contract.origin.layers}
    names = {contract.name, contract.display_name, contract.name.rsplit("/", 1)[-1]}
    out = []
    for diagnostic in diagnostics:
        if diagnostic.file not in files:
            continue
        entry = _ENTRY_RE.match(diagnostic.field)
        if entry is not None and entry.group("name") not in names:
            continue
        out.append(diagnostic)
    return out


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
