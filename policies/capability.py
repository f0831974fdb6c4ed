"""Capabilities: what a running agent may actually do, and how a child's is derived.

The one rule: a contract can only narrow. :func:`restrict` intersects a
parent's capability with a contract in a fixed order of small steps, each of
which can only remove:

1. the contract's allowlist (``None`` keeps the parent's tools);
2. the contract's denied tools;
3. the mode: ``reviewer`` and ``read-only`` remove write, exec and custom
   tools (an MCP or custom tool the user vouched for in ``read_only_tools``
   stays only when the contract grants it by exact name: zuno's explicit
   grant), and a read-only agent may delegate only to read-only agents. The
   shell the steps before left a read-only agent stays only when the user
   granted review commands (``[review] commands = true``, ``--review-commands``:
   :attr:`Capability.review_commands`, never a definition's to give): its
   commands then run in a throwaway copy-on-write layer over the checkout
   (:mod:`sandbox.workspaces.scratch`), and :func:`shell_removed` says what the
   mode removed without it;
4. the sandbox: the strictest of the parent's and the contract's;
5. the permission layers: the contract's layer is appended to the parent's,
   and decisions combine strictest-first (see :mod:`policies.permissions`);
6. delegation: the *scope* (every agent anything below may start) is
   intersected with a restricting allowlist (ngn ``allowed_agents``, Claude
   ``Agent(...)``, ...), and the agent's own allowlist is the parent's narrowed
   by it; an exact per-agent allowlist (zuno ``delegates``: "Exact child-agent
   allowlist for direct delegation") is the agent's own, within the scope, and
   narrows no descendant's;
7. approvals: the union of the parent's and the contract's ``needsApproval``.

:func:`derive_child` is :func:`restrict` plus one level of delegation depth;
:func:`check_delegation` decides whether a parent may start a given child at
all. Nothing a definition says (``allow_all``, an allowlist naming a tool the
parent never had) can widen the result.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from policies.contract import AgentContract, AgentMode, AgentStatus, SandboxMode
from policies.errors import PolicyError
from policies.mcp import explicitly_granted
from policies.permissions import Action, PermissionPolicy, decide_layers
from policies.tools import NATIVE_TOOLS, ToolGroup, check_tool_name, group_of, tool_matches

__all__ = [
    "DEFAULT_SUBAGENT_DEPTH",
    "GRANT_NOTE",
    "READ_ONLY_REMOVED_GROUPS",
    "REVIEW_COMMAND_GROUPS",
    "Capability",
    "DelegationDenied",
    "admit_listed",
    "check_delegation",
    "derive_child",
    "refusal",
    "restrict",
    "shell_removed",
]

#: zuno's ``subagent_depth`` default: the root may delegate, its children may not.
DEFAULT_SUBAGENT_DEPTH = 1
#: Groups a reviewer or read-only agent never holds.
READ_ONLY_REMOVED_GROUPS = frozenset({ToolGroup.WRITE, ToolGroup.EXEC, ToolGroup.CUSTOM})
#: What a read-only agent keeps of them when the user granted review commands: the shell,
#: whose writes land in a throwaway layer (never the file tools' writes).
REVIEW_COMMAND_GROUPS = frozenset({ToolGroup.EXEC})
#: The note a read-only run's record carries when its mode removed a shell it was given.
GRANT_NOTE = ("shell removed: read-only; grant `[review] commands = true` or "
              "--review-commands to let it run commands in a throwaway layer")


class DelegationDenied(PolicyError):
    """A parent may not start this child (allowlist, reachability, depth, mode)."""

    code = "delegation_denied"
    exit_code = 4


class Capability(BaseModel):
    """The effective authority of one running agent.

    ``tools`` holds exact names only (never patterns). ``delegates`` are the
    agents this agent may start (``None``: any agent the registry offers);
    ``delegate_scope`` the agents anything below it may ever start (``None``:
    any), which only narrows down a tree and always holds ``delegates``;
    ``depth`` is how many more levels of delegation may be started below this
    agent.
    """

    #: The schema is built on first use: listing agents validates no capability.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tools: frozenset[str]
    layers: tuple[PermissionPolicy, ...] = ()
    delegates: frozenset[str] | None = None
    delegate_scope: frozenset[str] | None = None
    depth: int = Field(default=DEFAULT_SUBAGENT_DEPTH, ge=0)
    sandbox: SandboxMode = SandboxMode.WORKTREE
    read_only: bool = False
    approval_required: frozenset[str] = frozenset()
    #: Custom and MCP tools the user vouched never change anything (``read_only_tools``).
    read_only_tools: frozenset[str] = frozenset()
    #: The user granted review commands: a read-only agent keeps the shell it is given,
    #: and its commands run in a throwaway layer (only the user's config or flag sets it).
    review_commands: bool = False

    @field_serializer("tools", "approval_required", "read_only_tools")
    def _dump_set(self, value: frozenset[str]) -> list[str]:
        return sorted(value)

    @field_serializer("delegates", "delegate_scope")
    def _dump_optional(self, value: frozenset[str] | None) -> list[str] | None:
        return None if value is None else sorted(value)

    @classmethod
    def root(
        cls,
        *,
        custom_tools: Iterable[str] = (),
        sandbox: SandboxMode = SandboxMode.WORKTREE,
        depth: int = DEFAULT_SUBAGENT_DEPTH,
        policy: PermissionPolicy | None = None,
        read_only_tools: Iterable[str] = (),
        review_commands: bool = False,
    ) -> Capability:
        """The capability of the session's top level: every native tool plus
        the installed custom tools, in the given sandbox mode. (The tools of the
        user's MCP servers join a top-level run's capability when its server
        lists them: :func:`admit_listed`.)"""
        tools = set(NATIVE_TOOLS) | {check_tool_name(name) for name in custom_tools}
        read_only = sandbox is SandboxMode.READ_ONLY
        if read_only:
            tools = {t for t in tools if not _removed_read_only(t, review_commands)}
        return cls(
            tools=frozenset(tools),
            layers=(policy,) if policy is not None else (),
            depth=depth,
            sandbox=sandbox,
            read_only=read_only,
            read_only_tools=frozenset(read_only_tools),
            review_commands=review_commands,
        )

    def visible_tools(self) -> list[str]:
        """The tools the model is shown: held, and not denied outright by a layer."""
        return sorted(
            t for t in self.tools if not any(layer.denies_outright(t) for layer in self.layers)
        )

    def decide(self, tool: str, subject: str | None = None) -> Action:
        """The permission decision for one call. A tool not held is denied."""
        if tool not in self.tools:
            return Action.DENY
        decision = decide_layers(self.layers, tool, subject)
        if decision is Action.ALLOW and tool in self.approval_required:
            return Action.ASK
        return decision

    def may_ask(self, tool: str) -> bool:
        """Whether some call of ``tool`` needs a human's approval: every call
        (``needsApproval``), or the calls an ``ask`` rule of a layer may decide."""
        return tool in self.tools and (
            tool in self.approval_required or any(layer.may_ask(tool) for layer in self.layers))

    def is_within(self, parent: Capability) -> bool:
        """Whether this capability is no wider than ``parent`` in every dimension.

        Delegation: the scope only narrows, and this agent's own allowlist lies within
        the parent's scope (an exact per-agent allowlist need not lie within the
        parent's own: zuno's ``lead -> [mid]``, ``mid -> [leaf]``)."""
        return (
            self.tools <= parent.tools
            and self.sandbox.rank <= parent.sandbox.rank
            and self.depth <= parent.depth
            and _within(self.delegate_scope, parent.delegate_scope)
            and _within(self.delegates, parent.delegate_scope)
            and _within(self.delegates, self.delegate_scope)
            and (self.read_only or not parent.read_only)
            and self.approval_required >= parent.approval_required
            and self.read_only_tools <= parent.read_only_tools
            and (parent.review_commands or not self.review_commands)
            and all(layer in self.layers for layer in parent.layers)
        )


def _removed_read_only(tool: str, review_commands: bool) -> bool:
    """Whether a read-only agent loses ``tool`` (before any vouched grant)."""
    group = group_of(tool)
    if review_commands and group in REVIEW_COMMAND_GROUPS:
        return False
    return group in READ_ONLY_REMOVED_GROUPS


def _within(inner: frozenset[str] | None, outer: frozenset[str] | None) -> bool:
    """``inner`` is a subset of ``outer`` (``None``: every agent)."""
    return outer is None or (inner is not None and inner <= outer)


def _meet(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The intersection of two allowlists (``None``: every agent)."""
    return b if a is None else a if b is None else a & b


def _select(allowlist: frozenset[str], available: Iterable[str]) -> set[str]:
    return {tool for tool in available if any(tool_matches(sel, tool) for sel in allowlist)}


def restrict(parent: Capability, contract: AgentContract) -> Capability:
    """Narrow ``parent`` by ``contract``. Idempotent: applying it twice is a no-op."""
    tools = set(parent.tools)
    if contract.tools is not None:  # 1. allowlist
        tools = _select(contract.tools, tools)
    tools -= _select(contract.denied_tools, tools)  # 2. deny list

    sandbox = SandboxMode.strictest(parent.sandbox, contract.sandbox) or parent.sandbox
    if contract.mode is AgentMode.REVIEWER:  # 3./4. mode and sandbox
        sandbox = SandboxMode.READ_ONLY
    read_only = parent.read_only or sandbox is SandboxMode.READ_ONLY
    if read_only:
        allow_rules = [rule.tool for rule in contract.permission.rules
                       if rule.action is Action.ALLOW and rule.pattern is None]
        tools = {t for t in tools if not _removed_read_only(t, parent.review_commands) or (
            t in parent.read_only_tools
            and explicitly_granted(t, contract.tools, allow_rules))}

    layers = parent.layers  # 5. permission layers (deduplicated: idempotence)
    if contract.permission != PermissionPolicy() and contract.permission not in layers:
        layers = (*layers, contract.permission)

    delegates = parent.delegates  # 6. delegation allowlist, within the scope
    scope = parent.delegate_scope
    if contract.delegates_exact:  # the agent's own list (none: any agent of the scope)
        delegates = _meet(contract.delegates, scope)
    elif contract.delegates is not None:  # a restriction every descendant inherits
        delegates = contract.delegates if delegates is None else delegates & contract.delegates
        scope = _meet(scope, contract.delegates)

    return Capability(
        tools=frozenset(tools),
        layers=layers,
        delegates=delegates,
        delegate_scope=scope,
        depth=parent.depth,
        sandbox=sandbox,
        read_only=read_only,
        approval_required=parent.approval_required | contract.approval_required,  # 7.
        read_only_tools=parent.read_only_tools,
        review_commands=parent.review_commands,
    )


def shell_removed(capability: Capability, contract: AgentContract) -> frozenset[str]:
    """The exec tools (the shell) a read-only agent of ``contract`` running under
    ``capability`` lost to its mode alone: what the user's review-commands grant would have
    kept it (its allowlist and deny list still apply). Nothing when it holds them, or
    when it is not read-only. A run's record says how to grant it (:data:`GRANT_NOTE`)."""
    if not capability.read_only or capability.review_commands:
        return frozenset()
    granted = restrict(Capability.root(sandbox=capability.sandbox, review_commands=True),
                       contract)
    return frozenset(t for t in granted.tools
                     if group_of(t) in REVIEW_COMMAND_GROUPS and t not in capability.tools)


def admit_listed(capability: Capability, contract: AgentContract,
                 listed: Iterable[str]) -> Capability:
    """A top-level run's capability plus the MCP tools its servers listed, as far as
    ``contract`` admits them (the user's root holds every tool of every server they
    installed, so this is :func:`restrict` of the listed tools alone, joined).

    Each step of :func:`restrict` removes tools one by one, so restricting the listed
    tools on their own and adding them gives what restricting the root with them would.
    """
    base = Capability(tools=frozenset(listed), sandbox=capability.sandbox,
                      read_only=capability.read_only,
                      read_only_tools=capability.read_only_tools,
                      review_commands=capability.review_commands)
    extra = restrict(base, contract).tools
    return capability.model_copy(update={"tools": capability.tools | extra})


def derive_child(parent: Capability, contract: AgentContract) -> Capability:
    """The capability of a child started by ``parent`` under ``contract``.

    It is :func:`restrict` one delegation level down; it does not decide
    whether the delegation is allowed (see :func:`check_delegation`).
    """
    narrowed = restrict(parent, contract)
    return narrowed.model_copy(update={"depth": max(parent.depth - 1, 0)})


def refusal(contract: AgentContract, *, delegated: bool) -> str | None:
    """Why ``contract`` can never run at the top level (``delegated=False``: what
    ``corral run`` refuses) or as a delegated child (what :func:`check_delegation`
    refuses whoever the parent is), or ``None`` when it can. Listings say the same."""
    if contract.disabled:
        return "it is disabled"
    if contract.status is not None and contract.status is not AgentStatus.ACTIVE:
        return f"its status is {contract.status.value}; only ACTIVE agents are usable"
    if delegated and not contract.subagent_available:
        return "it is not available as a subagent (a top-level agent only)"
    if not delegated and not contract.user_invocable:
        return "it is not user-invocable (a subagent only)"
    return None


def check_delegation(parent: Capability, contract: AgentContract) -> None:
    """Raise :class:`DelegationDenied` unless ``parent`` may start ``contract``."""
    name = contract.name
    context = {"agent": name}
    if "delegate" not in parent.tools:
        raise DelegationDenied(
            f"delegating to {name!r} needs the delegate tool, which this agent does not hold",
            operation="delegate",
            context=context,
        )
    if parent.depth <= 0:
        raise DelegationDenied(
            f"delegating to {name!r} would exceed the subagent depth limit",
            operation="delegate",
            context=context,
            hint="raise subagent_depth in your corral config if nesting is intended",
        )
    if parent.delegates is not None and name not in parent.delegates:
        allowed = ", ".join(sorted(parent.delegates)) or "none"
        raise DelegationDenied(
            f"agent {name!r} is not in this agent's delegation allowlist (allowed: {allowed})",
            operation="delegate",
            context=context,
        )
    if contract.status is not None and contract.status is not AgentStatus.ACTIVE:
        raise DelegationDenied(
            f"agent {name!r} is {contract.status.value}; only ACTIVE agents are usable",
            operation="delegate",
            context=context,
        )
    if not contract.subagent_available or contract.disabled:
        raise DelegationDenied(
            f"agent {name!r} is not available as a subagent",
            operation="delegate",
            context=context,
        )
    if parent.read_only and not contract.is_read_only:
        raise DelegationDenied(
            f"a read-only agent may delegate only to read-only agents; {name!r} may write",
            operation="delegate",
            context=context,
            hint="give the target mode: reviewer or sandbox: read-only",
        )
