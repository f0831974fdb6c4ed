"""What the model is offered: one computation for runs and for ``agents show``.

A run builds its dispatcher from :func:`make_offer`, and ``agents show``
prints the same object's ``effective`` view, so the two cannot disagree: a
tool is listed as effective exactly when the first request of a run offers
it. From the capability's visible tools (held, not denied outright) the offer
removes what no run can call, each with its reason in ``unavailable``:

- ``web_fetch`` without a network grant (``[network] allow``, ``--allow-net``:
  :mod:`policies.network`), and tools corral does not implement: ``web_search``
  (no search provider), and custom or MCP tools no installed server provides, or
  whose server did not start or does not list them (a run passes its
  servers' ``listing``; ``agents show`` starts nothing, and names the servers
  a run would start in ``mcp``);
- ``delegate`` when no delegation depth is left, or no agent of the caller's
  namespace may be delegated to (its schema lists the targets);
- deferred tools (catalog ``deferred: true``) stay out of the first request;
  those ``tool_search`` can activate (it is offered, and a ``toolSearch``
  group selects them) are ``deferred``, the others ``unavailable``.

The offer also carries the names the model sees (a catalog binding named
``run_agent`` offers ``delegate`` as ``run_agent``) and the descriptions a
binding overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from policies.capability import Capability
from policies.config import UserConfig
from policies.contract import AgentContract, SandboxMode
from policies.loader import LoadResult
from policies.mcp import McpServerConfig, could_hold, providers, read_only_ids
from policies.network import NO_GRANT, NetworkGrant
from policies.permissions import Action
from policies.scoping import delegation_targets, local_name
from policies.tools import in_search_group, tool_matches, why_unrunnable

if TYPE_CHECKING:
    from executor.mcpclient import McpServers

__all__ = ["Offer", "egress_refusal", "make_offer", "root_capability", "servers_to_start"]


@dataclass(frozen=True)
class Offer:
    """The tools one agent's model is offered, by canonical name."""

    #: In the first request, sorted.
    tools: tuple[str, ...]
    #: Out of the first request; ``tool_search`` can activate them.
    deferred: tuple[str, ...] = ()
    #: canonical -> the name the model sees, where they differ.
    names: Mapping[str, str] = field(default_factory=dict)
    #: canonical -> the description a binding gives it.
    descriptions: Mapping[str, str] = field(default_factory=dict)
    #: Held but never offered -> why.
    unavailable: Mapping[str, str] = field(default_factory=dict)
    #: The agents ``delegate`` may start, as (name the caller uses, description).
    targets: tuple[tuple[str, str], ...] = ()
    #: The MCP servers a run of this agent starts (their tools are listed then).
    mcp_servers: tuple[str, ...] = ()
    #: The grant ``web_fetch`` fetches under, when it is offered (its rules narrow it).
    network: Mapping[str, Any] | None = None

    def wire(self, tool: str) -> str:
        """The name the model sees for ``tool``."""
        return self.names.get(tool, tool)

    def to_json(self) -> dict[str, Any]:
        """The ``effective`` tool view of ``agents show --json``."""
        return {"tools": list(self.tools), "deferred": list(self.deferred),
                "names": dict(sorted(self.names.items())),
                "unavailable": dict(sorted(self.unavailable.items())),
                "delegates_to": [name for name, _ in self.targets],
                "mcp_servers": list(self.mcp_servers), "network": self.network}


def make_offer(capability: Capability, contract: AgentContract,
               agents: Mapping[str, AgentContract], *,
               servers: Mapping[str, McpServerConfig] | None = None,
               listing: McpServers | None = None, top: bool = True,
               network: NetworkGrant | None = None) -> Offer:
    """What ``contract``'s model is offered when it runs under ``capability``.

    ``servers`` are the user's MCP servers; ``listing`` what the run's servers listed
    (``None``: nothing was started, as for ``agents show``); ``network`` the user's grant
    (``None`` or empty: ``web_fetch`` is not offered)."""
    servers = servers or {}
    # The tool implementations (their argument models) only once an offer is made:
    # `corral agents list` imports this module and never needs them.
    from executor.tools import IMPLEMENTED  # noqa: PLC0415

    unavailable: dict[str, str] = {}
    held = set(capability.visible_tools())
    owners = providers(servers, held)
    provided = frozenset(c for config in servers.values() for c in config.provides)
    for tool in sorted(held):
        if tool == "web_fetch" and (network is None or network.empty):
            unavailable[tool] = NO_GRANT
            continue
        if tool in IMPLEMENTED:
            continue
        if listing is not None and tool in listing.listed:
            continue
        owner = owners.get(tool)
        if owner is None:
            unavailable[tool] = why_unrunnable(tool, servers=frozenset(servers),
                                               provided=provided) or "corral does not implement it"
        elif listing is None:
            unavailable[tool] = (f"offered when a run starts MCP server {owner[0]!r} and it "
                                 f"lists {owner[1]!r}")
        elif owner[0] in listing.failures:
            unavailable[tool] = (f"MCP server {owner[0]!r} did not start: "
                                 f"{listing.failures[owner[0]]}")
        else:
            unavailable[tool] = f"MCP server {owner[0]!r} does not list a tool {owner[1]!r}"
    targets = tuple((local_name(c), c.description or "")
                    for c in delegation_targets(capability, contract, agents.values()))
    if "delegate" in held:
        if capability.depth <= 0:
            unavailable["delegate"] = ("no delegation depth is left (subagent_depth); raise "
                                       "it in your corral config if nesting is intended")
        elif not targets:
            unavailable["delegate"] = "no agent may be delegated to from here"
    offered = held - set(unavailable)
    bindings = {b.name: b for b in contract.tool_bindings if b.enabled}
    searchable = "tool_search" in offered
    groups = contract.tool_search_groups
    deferred: list[str] = []
    for tool in sorted(offered):
        binding = bindings.get(tool)
        if binding is None or not binding.deferred:
            continue
        if searchable and (not groups or any(in_search_group(g, tool) for g in groups)):
            deferred.append(tool)
        else:
            unavailable[tool] = ("deferred, and tool_search cannot activate it (toolSearch is "
                                 "not enabled, or none of its groups selects it)")
    offered -= set(unavailable)
    visible = sorted(offered - set(deferred))
    names: dict[str, str] = {}
    for tool in sorted(offered):
        binding = bindings.get(tool)
        wire = binding.wire_name if binding is not None else None
        if wire and wire != tool and wire not in offered and wire not in names.values():
            names[tool] = wire
    descriptions = {tool: b.description for tool, b in bindings.items()
                    if tool in offered and b.description}
    return Offer(tools=tuple(visible), deferred=tuple(deferred), names=names,
                 descriptions=descriptions, unavailable=unavailable,
                 targets=targets if "delegate" in offered else (),
                 mcp_servers=tuple(servers_to_start(capability, contract, servers, top=top)),
                 network=_network(network, capability) if "web_fetch" in offered else None)


def _network(grant: NetworkGrant | None, capability: Capability) -> dict[str, Any]:
    """The effective grant: the user's, and the agent's ``web_fetch`` rules that narrow it."""
    rules = [f"{rule.action.value} {rule.pattern or '*'}" for layer in capability.layers
             for rule in layer.rules if tool_matches(rule.tool, "web_fetch")]
    return {**(grant.to_json() if grant is not None else {}), "rules": rules}


def egress_refusal(capability: Capability, contract: AgentContract,
                   grant: NetworkGrant | None) -> str | None:
    """Why ``--net allow`` opens no proxy for ``contract``'s agent under ``capability``
    (``None``: it opens ``grant``): a definition only narrows the user's grant (no shell;
    ``web_fetch`` on its deny list, or denied outright by a rule), never widens it."""
    if grant is None or grant.empty:
        return "you granted no host, so its commands reach nothing"
    if "shell" not in capability.visible_tools():
        return "this agent has no shell, so no proxy is opened"
    if any(tool_matches(sel, "web_fetch") for sel in contract.denied_tools) or any(
            layer.denies_outright("web_fetch") for layer in capability.layers):
        return "this agent's rules deny web_fetch outright, so its commands stay offline"
    return None


def servers_to_start(capability: Capability, contract: AgentContract,
                     servers: Mapping[str, McpServerConfig], *, top: bool) -> list[str]:
    """The MCP servers a run of ``contract`` under ``capability`` must start to list the
    tools it could hold, decided before any process runs.

    A child (``top=False``) holds exact names already (its parent's listing, narrowed):
    the servers behind them. A top-level run's root holds every tool of every server
    the user installed, so the contract decides: its allowlist (no allowlist: every
    server), minus servers its deny list removes whole; a read-only agent only by exact,
    vouched grants.
    """
    held = set(capability.visible_tools())
    wanted = {server for server, _ in providers(servers, held).values()}
    if not top:
        return sorted(wanted)
    if capability.read_only:
        allow_rules = {r.tool for r in contract.permission.rules
                       if r.action is Action.ALLOW and r.pattern is None}
        selectors = ({*(contract.tools or ()), *allow_rules}
                     & read_only_ids(servers))
    else:
        selectors = set(contract.tools) if contract.tools is not None else {"mcp__*"}
    for server, config in servers.items():
        probe = f"mcp__{server}__"
        whole = any(sel.endswith("*") and probe.startswith(sel[:-1])
                    for sel in contract.denied_tools)
        whole = whole or any(layer.denies_outright(probe + "*") for layer in capability.layers)
        if not whole and could_hold(server, selectors, config):
            wanted.add(server)
    return sorted(wanted)


def root_capability(config: UserConfig, registry: LoadResult | None = None, *,
                    sandbox: SandboxMode = SandboxMode.WORKTREE) -> Capability:
    """The user's root capability (a run passes its mode ceiling): the user's custom tools
    and delegation depth, lowered by any ``subagent_depth`` a zuno configuration layer
    sets (it can lower the user's limit, never raise it)."""
    depth = config.subagent_depth
    if registry is not None and registry.subagent_depth is not None:
        depth = min(depth, registry.subagent_depth)
    return Capability.root(custom_tools=config.custom_tools, depth=depth, sandbox=sandbox,
                           read_only_tools=read_only_ids(config.mcp_servers),
                           review_commands=config.review.commands)
