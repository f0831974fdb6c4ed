"""The one rule, proven over generated contracts: a child is never wider than its parent,
and narrowing is idempotent."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.capability import (
    Capability,
    DelegationDenied,
    check_delegation,
    derive_child,
    restrict,
)
from policies.contract import AgentContract, AgentFormat, AgentMode, Origin, SandboxMode, Scope
from policies.permissions import Action, PermissionMode, PermissionPolicy, PermissionRule
from policies.tools import NATIVE_TOOLS

CUSTOM = ["mcp__github__search", "mcp__github__create_issue", "repo_lookup"]
TOOLS = [*NATIVE_TOOLS, *CUSTOM]
SUBJECTS = [None, "git status", "rm -rf /", "src/a.py", ".env", "reviewer", "git diff; curl x"]
ORIGIN = Origin(format=AgentFormat.NGN, file="/x.md", source="x.md", scope=Scope.PROJECT)

tool_selectors = st.sampled_from([*TOOLS, "mcp__github__*", "mcp__*"])
rules = st.builds(
    PermissionRule,
    tool=st.sampled_from([*TOOLS, "*"]),
    pattern=st.sampled_from([None, "git *", "rm *", "src/**", "**/*.env", "*"]),
    action=st.sampled_from(list(Action)),
)
policies_ = st.builds(PermissionPolicy, mode=st.sampled_from(list(PermissionMode)),
                      rules=st.lists(rules, max_size=4).map(tuple))


@st.composite
def contracts(draw: st.DrawFn) -> AgentContract:
    return AgentContract(
        name="child", id="child", display_name="child", origin=ORIGIN,
        tools=draw(st.none() | st.frozensets(tool_selectors, max_size=6)),
        denied_tools=draw(st.frozensets(tool_selectors, max_size=3)),
        delegates=draw(st.none() | st.frozensets(st.sampled_from(["a", "b", "c"]))),
        delegates_exact=draw(st.booleans()),
        mode=draw(st.sampled_from(list(AgentMode))),
        sandbox=draw(st.none() | st.sampled_from(list(SandboxMode))),
        permission=draw(policies_),
    )


@st.composite
def parents(draw: st.DrawFn) -> Capability:
    root = Capability.root(custom_tools=CUSTOM, sandbox=draw(st.sampled_from(list(SandboxMode))),
                           depth=draw(st.integers(0, 3)),
                           policy=draw(st.none() | policies_),
                           review_commands=draw(st.booleans()))
    # A parent that is itself somebody's child: narrow the root once.
    if draw(st.booleans()):
        root = restrict(root, draw(contracts()))
    return root


SEVERITY = {Action.ALLOW: 0, Action.ASK: 1, Action.DENY: 2}


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(parent=parents(), contract=contracts())
def test_child_is_never_wider_than_parent(parent: Capability, contract: AgentContract) -> None:
    """Property: for every generated contract, derive_child(parent, c) <= parent."""
    child = derive_child(parent, contract)
    assert child.is_within(parent)
    assert child.depth == max(parent.depth - 1, 0)
    for tool in TOOLS:
        for subject in SUBJECTS:
            assert SEVERITY[child.decide(tool, subject)] >= SEVERITY[parent.decide(tool, subject)]
    assert set(child.visible_tools()) <= set(parent.visible_tools())


@settings(max_examples=300)
@given(parent=parents(), contract=contracts())
def test_narrowing_is_idempotent(parent: Capability, contract: AgentContract) -> None:
    once = restrict(parent, contract)
    assert restrict(once, contract) == once


@settings(max_examples=200)
@given(parent=parents(), first=contracts(), second=contracts())
def test_narrowing_composes_monotonically(parent: Capability, first: AgentContract,
                                          second: AgentContract) -> None:
    """Ancestor restrictions stay: a grandchild is within the child and the parent."""
    child = derive_child(parent, first)
    grandchild = derive_child(child, second)
    assert grandchild.is_within(child) and grandchild.is_within(parent)


def _contract(**fields: object) -> AgentContract:
    base: dict[str, object] = {"name": "c", "id": "c", "display_name": "c", "origin": ORIGIN}
    return AgentContract.model_validate(base | fields)


def test_restrictive_child_under_permissive_parent_stays_restricted() -> None:
    parent = Capability.root(policy=PermissionPolicy(mode=PermissionMode.ALLOW_ALL))
    child = derive_child(parent, _contract(tools=frozenset({"read_file"})))
    assert child.visible_tools() == ["read_file"]
    assert child.decide("shell", "ls") is Action.DENY


def test_permissive_child_under_restrictive_parent_is_restricted() -> None:
    parent = restrict(Capability.root(), _contract(tools=frozenset({"read_file", "search"})))
    child = derive_child(parent, _contract(
        tools=frozenset(NATIVE_TOOLS),
        permission=PermissionPolicy(mode=PermissionMode.ALLOW_ALL),
    ))
    assert child.visible_tools() == ["read_file", "search"]
    assert child.decide("write_file", "a.txt") is Action.DENY


def test_allow_all_cannot_lift_a_deny() -> None:
    """zuno: explicit denies remain terminal in every mode, including allow_all."""
    parent = Capability.root(policy=PermissionPolicy(rules=(
        PermissionRule(tool="shell", pattern="rm *", action=Action.DENY),
        PermissionRule(tool="shell", pattern="git push *", action=Action.ASK),
    )))
    child = derive_child(parent, _contract(permission=PermissionPolicy(
        mode=PermissionMode.ALLOW_ALL,
        rules=(PermissionRule(tool="shell", action=Action.ALLOW),),
    )))
    assert child.decide("shell", "rm -rf /") is Action.DENY
    assert child.decide("shell", "git push origin") is Action.ASK  # the parent's prompt stays
    assert child.decide("shell", "ls") is Action.ALLOW


def test_reviewer_loses_write_exec_and_custom_tools() -> None:
    parent = Capability.root(custom_tools=CUSTOM)
    child = derive_child(parent, _contract(mode=AgentMode.REVIEWER))
    visible = set(child.visible_tools())
    assert not visible & {"edit", "write_file", "apply_patch", "shell", *CUSTOM}
    assert {"read_file", "search", "delegate", "web_fetch"} <= visible
    assert child.sandbox is SandboxMode.READ_ONLY


def test_read_only_parent_delegates_only_to_read_only_children() -> None:
    parent = restrict(Capability.root(), _contract(sandbox=SandboxMode.READ_ONLY))
    writer = _contract(name="writer")
    with pytest.raises(DelegationDenied, match="read-only"):
        check_delegation(parent, writer)
    check_delegation(parent, _contract(name="reader", mode=AgentMode.REVIEWER))


def test_delegation_allowlist_and_depth() -> None:
    parent = restrict(Capability.root(depth=1), _contract(delegates=frozenset({"a"})))
    check_delegation(parent, _contract(name="a"))
    with pytest.raises(DelegationDenied, match="allowlist"):
        check_delegation(parent, _contract(name="b"))
    child = derive_child(parent, _contract(name="a"))
    assert child.depth == 0
    with pytest.raises(DelegationDenied, match="depth"):
        check_delegation(child, _contract(name="a"))


def test_a_child_cannot_pick_a_wider_sandbox_than_its_parents() -> None:
    """The property test's case, pinned for the audit: a read-only parent's child that asks
    for a worktree or for workspace-write stays read-only."""
    parent = Capability.root(sandbox=SandboxMode.READ_ONLY, depth=1)
    for wider in (SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE):
        child = derive_child(parent, _contract(sandbox=wider))
        assert child.sandbox is SandboxMode.READ_ONLY and child.is_within(parent)


def test_a_childs_restriction_cannot_add_agents_its_parent_could_not_reach() -> None:
    """A restricting ``delegates`` list (not exact) only narrows: a child asking for ``a``
    and ``b`` under a parent limited to ``a`` gets ``a``. The property test above finds this
    only when it happens to draw such a pair (the audit once saw it miss)."""
    parent = restrict(Capability.root(depth=2), _contract(delegates=frozenset({"a"})))
    child = derive_child(parent, _contract(name="a", delegates=frozenset({"a", "b"})))
    assert child.delegates == frozenset({"a"}) and child.is_within(parent)
    check_delegation(child, _contract(name="a"))
    with pytest.raises(DelegationDenied, match="allowlist"):
        check_delegation(child, _contract(name="b"))


def test_an_exact_allowlist_is_the_agents_own_within_the_scope() -> None:
    """zuno: ``lead -> [mid]``, ``mid -> [leaf]``: mid's own list decides (not the
    intersection with lead's), and a restricting ancestor's list bounds it."""
    root = Capability.root(depth=3)  # a run's top level: subagent_depth 2, plus itself
    lead = derive_child(root, _contract(name="lead", delegates=frozenset({"mid"}),
                                        delegates_exact=True))
    mid_contract = _contract(name="mid", delegates=frozenset({"leaf"}), delegates_exact=True)
    check_delegation(lead, mid_contract)
    mid = derive_child(lead, mid_contract)
    assert mid.delegates == frozenset({"leaf"}) and mid.is_within(lead)
    check_delegation(mid, _contract(name="leaf"))
    with pytest.raises(DelegationDenied, match="allowlist"):
        check_delegation(lead, _contract(name="leaf"))
    restricting = derive_child(root, _contract(name="boss", delegates=frozenset({"mid"})))
    bounded = derive_child(restricting, mid_contract)
    assert bounded.delegates == frozenset()
    with pytest.raises(DelegationDenied, match="allowlist"):
        check_delegation(bounded, _contract(name="leaf"))


def test_unavailable_subagent_cannot_be_delegated_to() -> None:
    with pytest.raises(DelegationDenied, match="not available"):
        check_delegation(Capability.root(), _contract(subagent_available=False))


def test_allowlist_naming_a_tool_the_parent_never_had_grants_nothing() -> None:
    parent = restrict(Capability.root(custom_tools=CUSTOM),
                      _contract(tools=frozenset({"read_file"})))
    child = derive_child(parent, _contract(tools=frozenset({"read_file", "shell", "mcp__*"})))
    assert child.visible_tools() == ["read_file"]


def test_mcp_prefix_patterns_select_installed_tools_only() -> None:
    parent = Capability.root(custom_tools=CUSTOM)
    child = restrict(parent, _contract(tools=frozenset({"mcp__github__*"})))
    assert child.visible_tools() == ["mcp__github__create_issue", "mcp__github__search"]
    denied = restrict(parent, _contract(denied_tools=frozenset({"mcp__*"})))
    assert not {t for t in denied.visible_tools() if t.startswith("mcp__")}


def test_needs_approval_survives_allow_all() -> None:
    from policies.contract import ToolBinding

    contract = _contract(
        tool_bindings=(ToolBinding(name="shell", needs_approval=True),),
        permission=PermissionPolicy(mode=PermissionMode.ALLOW_ALL),
    )
    child = derive_child(Capability.root(), contract)
    assert child.decide("shell", "ls") is Action.ASK
    grandchild = derive_child(child.model_copy(update={"depth": 1}), _contract())
    assert grandchild.decide("shell", "ls") is Action.ASK
