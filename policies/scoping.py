"""Namespaces: which agents an agent can see and name.

The catalog format scopes agents by tenant: "namespace: Tenant scope, e.g. {
"value": "local" }. Identity is name + namespace." (agent-definition-json.md),
and its ``list_agents`` tool "Lists all available agents in the current
namespace." corral applies that scope to listing, delegation and response
reviewers alike:

- every agent lives in one namespace: a catalog agent in its own (``local``
  when the file names none), every other format in ``local``;
- an agent sees, lists and delegates to agents of its own namespace only;
- inside a namespace an agent is named by its bare name (``run_agent("<name>",
  …)``); the registry knows agents of another namespace as
  ``<namespace>/<name>``, and a qualified name resolves only inside the
  caller's own namespace.

The user is not scoped: ``corral run --agent team/writer`` runs any agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policies.capability import Capability, DelegationDenied, check_delegation
from policies.contract import AgentContract

__all__ = ["DEFAULT_NAMESPACE", "delegation_targets", "local_name", "namespace_of",
           "resolve_agent", "same_namespace"]

#: The namespace of every agent whose definition names none (and of every non-catalog one).
DEFAULT_NAMESPACE = "local"


def namespace_of(contract: AgentContract) -> str:
    """The namespace ``contract`` lives in."""
    return contract.namespace or DEFAULT_NAMESPACE


def same_namespace(a: AgentContract, b: AgentContract) -> bool:
    """Whether two agents share a namespace (and so may see each other)."""
    return namespace_of(a) == namespace_of(b)


def local_name(contract: AgentContract) -> str:
    """The name an agent is known by inside its namespace (``writer``, not ``team/writer``)."""
    namespace = namespace_of(contract)
    prefix = f"{namespace}/"
    if namespace != DEFAULT_NAMESPACE and contract.name.startswith(prefix):
        return contract.name[len(prefix):]
    return contract.name


def resolve_agent(caller: AgentContract, name: str,
                  agents: Mapping[str, AgentContract]) -> AgentContract | None:
    """The agent ``caller`` means by ``name``: its bare name inside the caller's namespace,
    or its exact registry name when that agent is in the caller's namespace; ``None``
    when no agent of the caller's namespace has that name."""
    namespace = namespace_of(caller)
    if namespace != DEFAULT_NAMESPACE:
        found = agents.get(f"{namespace}/{name}")
        if found is not None and same_namespace(found, caller):
            return found
    found = agents.get(name)
    if found is not None and same_namespace(found, caller):
        return found
    return None


def delegation_targets(capability: Capability, caller: AgentContract,
                       agents: Iterable[AgentContract]) -> list[AgentContract]:
    """The agents ``caller`` (holding ``capability``) may delegate to right now, by name."""
    out: list[AgentContract] = []
    for contract in sorted(agents, key=lambda c: c.name):
        if not same_namespace(contract, caller):
            continue
        try:
            check_delegation(capability, contract)
        except DelegationDenied:
            continue
        out.append(contract)
    return out
