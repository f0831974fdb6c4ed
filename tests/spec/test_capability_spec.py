"""The capability rules: intersection, hidden tools, reviewer restrictions, approvals,
explicit denies, the delegation allowlist and depth.

Sentences come from ngn-agent-definitions.md and zuno-custom-agents.md (and, where
the design states the same rule for corral, DESIGN.md). Contracts are loaded from
real files in ``tmp_path``; capabilities come from :class:`Capability.root`,
:func:`restrict` and :func:`derive_child`.
"""

from __future__ import annotations

import pytest

from policies.capability import (
    Capability,
    DelegationDenied,
    check_delegation,
    derive_child,
    restrict,
)
from policies.contract import AgentContract, AgentFormat, SandboxMode
from policies.loader import Options
from policies.permissions import (
    Action,
    PermissionMode,
    PermissionPolicy,
    PermissionRule,
    decide_layers,
)

NGN = AgentFormat.NGN
WRITE_TOOLS = {"edit", "write_file", "apply_patch"}


def _ngn(fs, name: str, header: str = "") -> AgentContract:
    text = f"description: {name}\n{header}".strip()
    return fs.agent(fs.md(f".ngn/agents/{name}.md", text), NGN)


def _zuno(fs, name: str, entry: dict) -> AgentContract:
    path = fs.json(f".zuno/{name}.json", {"agents": {name: entry}})
    outcome = fs.load(path, AgentFormat.ZUNO)
    assert outcome.status.value == "loaded", [d.render() for d in outcome.diagnostics]
    return outcome.agents[0]


def _policy(*rules: tuple[str, str | None, Action],
            mode: PermissionMode = PermissionMode.STANDARD) -> PermissionPolicy:
    return PermissionPolicy(mode=mode, rules=tuple(
        PermissionRule(tool=tool, pattern=pattern, action=action)
        for tool, pattern, action in rules))


# --- Intersection --------------------------------------------------------------------------


def test_child_gets_intersection_of_own_restrictions(fs) -> None:
    """Spec (ngn-agent-definitions.md): Every child receives the intersection of its own
    restrictions, the parent's permissions at creation, subsequent ancestor restrictions, and
    workspace tool selections."""
    parent = restrict(Capability.root(), _ngn(fs, "parent", "tools: [read_file, search, shell]"))
    child = derive_child(parent, _ngn(fs, "child", "tools: [read_file, edit, web_fetch]"))
    assert child.tools == frozenset({"read_file"})
    assert child.decide("edit", "a.py") is Action.DENY
    assert child.decide("web_fetch", "https://example.com") is Action.DENY
    assert child.is_within(parent)


def test_child_keeps_parent_permissions_at_creation(fs) -> None:
    """Spec (ngn-agent-definitions.md): Every child receives the intersection of its own
    restrictions, the parent's permissions at creation, subsequent ancestor restrictions, and
    workspace tool selections."""
    rules = _policy(("shell", None, Action.ASK), ("shell", "git *", Action.ALLOW),
                    ("shell", "rm *", Action.DENY))
    parent = Capability.root(policy=rules)
    child = derive_child(parent, _zuno(fs, "child", {"permission": {
        "mode": "allow_all", "rules": {"bash": "allow"}}}))
    assert child.decide("shell", "git status") is Action.ALLOW
    assert child.decide("shell", "make") is Action.ASK
    assert child.decide("shell", "rm -rf /") is Action.DENY
    assert rules in child.layers


def test_child_narrowed_by_subsequent_ancestor_restrictions(fs) -> None:
    """Spec (ngn-agent-definitions.md): Every child receives the intersection of its own
    restrictions, the parent's permissions at creation, subsequent ancestor restrictions, and
    workspace tool selections.

    A restriction an ancestor receives after the child exists is applied to the child's
    capability too, and only removes.
    """
    root = Capability.root()
    parent = derive_child(root, _ngn(fs, "parent"))
    child = derive_child(parent, _ngn(fs, "child", "tools: [read_file, shell, edit]"))
    later = _ngn(fs, "later", "denied_tools: [shell]\nmode: reviewer")
    narrowed = restrict(child, later)
    assert narrowed.tools == frozenset({"read_file"})
    assert narrowed.sandbox is SandboxMode.READ_ONLY
    assert narrowed.is_within(child)
    assert restrict(narrowed, later) == narrowed


def test_child_limited_to_workspace_tool_selections(fs) -> None:
    """Spec (ngn-agent-definitions.md): Every child receives the intersection of its own
    restrictions, the parent's permissions at creation, subsequent ancestor restrictions, and
    workspace tool selections.

    The workspace selects the installed custom tools; a child cannot name its way to one
    that is not selected.
    """
    selected = Capability.root(custom_tools=["github_search"])
    installed = Options(custom_tools=frozenset({"github_search", "jira_lookup"}))
    contract = fs.agent(fs.md(".ngn/agents/c.md", "description: d\n"
                              "tools: [read_file, github_search, jira_lookup]"), NGN,
                        options=installed)
    child = derive_child(selected, contract)
    assert child.tools == frozenset({"read_file", "github_search"})
    assert child.decide("jira_lookup") is Action.DENY


def test_nothing_a_definition_says_can_widen(fs) -> None:
    """Spec (DESIGN.md): Nothing a definition says (`allow_all`, an allowlist naming a tool the
    parent never had) can widen it."""
    parent = derive_child(Capability.root(depth=3), _ngn(fs, "parent", "mode: reviewer"))
    wide = _zuno(fs, "wide", {"tools": ["read", "edit", "bash"],
                              "permission": {"mode": "allow_all", "rules": {"*": "allow"}}})
    child = derive_child(parent, wide)
    assert child.is_within(parent)
    assert child.read_only
    assert child.tools == frozenset({"read_file"})
    assert child.depth == parent.depth - 1


# --- Hidden tools --------------------------------------------------------------------------


def test_direct_call_to_hidden_tool_is_denied(fs) -> None:
    """Spec (ngn-agent-definitions.md): Tool schemas and the executor both enforce the policy; a
    direct call to a hidden tool is denied."""
    outright = _policy(("web_fetch", None, Action.DENY))
    child = derive_child(Capability.root(policy=outright),
                         _ngn(fs, "child", "tools: [read_file, web_fetch, search]"))
    visible = child.visible_tools()
    assert visible == ["read_file", "search"]
    for hidden in ("web_fetch", "shell", "edit", "delegate"):
        assert hidden not in visible
        assert child.decide(hidden, "x") is Action.DENY


@pytest.mark.parametrize("name", ["Read_File", "read_file ", "read-file", "readfile",
                                  "re\u0430d_file", "read_file\u200b", "*", "read_*", ""])
def test_misspelled_or_pattern_calls_are_denied(fs, name: str) -> None:
    """Spec (ngn-agent-definitions.md): Tool schemas and the executor both enforce the policy; a
    direct call to a hidden tool is denied.

    A call must name a held tool exactly: case variants, homoglyphs, invisible
    characters and patterns never match.
    """
    child = derive_child(Capability.root(), _ngn(fs, "child", "tools: [read_file]"))
    assert child.decide(name, "a.py") is Action.DENY


def test_tool_denied_by_pattern_rule_stays_visible_but_calls_are_judged(fs) -> None:
    """Spec (ngn-agent-definitions.md): Tool schemas and the executor both enforce the policy; a
    direct call to a hidden tool is denied.

    A tool only partly denied (by argument pattern) is shown, and the dispatcher judges
    each call.
    """
    partial = _policy(("shell", "rm *", Action.DENY))
    child = derive_child(Capability.root(policy=partial), _ngn(fs, "child"))
    assert "shell" in child.visible_tools()
    assert child.decide("shell", "rm -rf .") is Action.DENY
    assert child.decide("shell", "ls; rm -rf .") is Action.DENY
    assert child.decide("shell", "ls") is Action.ALLOW


# --- Reviewer ------------------------------------------------------------------------------


def test_reviewer_prohibits_writes_shell_custom_tools(fs) -> None:
    """Spec (ngn-agent-definitions.md): build (default) or reviewer. Reviewer prohibits writes,
    shell, and custom tools."""
    root = Capability.root(custom_tools=["github_search", "mcp__gh__create_issue"],
                           sandbox=SandboxMode.WORKSPACE_WRITE)
    contract = fs.agent(fs.md(".ngn/agents/r.md", "description: d\nmode: reviewer\n"
                              "tools: [read_file, search, edit, write_file, apply_patch, shell, "
                              "github_search]"), NGN,
                        options=Options(custom_tools=frozenset({"github_search"})))
    child = restrict(root, contract)
    assert child.tools == frozenset({"read_file", "search"})
    assert child.sandbox is SandboxMode.READ_ONLY
    assert child.read_only
    for tool in (*WRITE_TOOLS, "shell", "github_search", "mcp__gh__create_issue"):
        assert child.decide(tool, "x") is Action.DENY
    inheriting = restrict(root, _ngn(fs, "inheriting", "mode: reviewer"))
    assert not (WRITE_TOOLS | {"shell", "github_search", "mcp__gh__create_issue"}) & (
        inheriting.tools)


def test_reviewer_restriction_is_inherited_by_children(fs) -> None:
    """Spec (ngn-agent-definitions.md): build (default) or reviewer. Reviewer prohibits writes,
    shell, and custom tools.

    A build child of a reviewer is still read-only; documented in
    ``policies/capability.py``: a read-only agent may delegate only to read-only agents.
    """
    reviewer = derive_child(Capability.root(depth=3), _ngn(fs, "reviewer", "mode: reviewer"))
    builder = _ngn(fs, "builder", "mode: build")
    with pytest.raises(DelegationDenied):
        check_delegation(reviewer, builder)
    grandchild = derive_child(reviewer, builder)
    assert grandchild.read_only
    assert not (WRITE_TOOLS | {"shell"}) & grandchild.tools
    check_delegation(reviewer, _ngn(fs, "other_reviewer", "mode: reviewer"))


# --- Permissions ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(PermissionMode))
def test_explicit_deny_terminal_across_layers(fs, mode: PermissionMode) -> None:
    """Spec (zuno-custom-agents.md): Explicit denies remain terminal in every mode, including
    allow_all. That asymmetry is the whole point: allow_all removes prompts, not restrictions."""
    parent_layer = _policy(("shell", "git push *", Action.DENY), ("web_fetch", None, Action.ASK))
    child_layer = _policy(("shell", None, Action.ALLOW), ("web_fetch", None, Action.ALLOW),
                          mode=mode)
    layers = [parent_layer, child_layer]
    assert decide_layers(layers, "shell", "git push origin main") is Action.DENY
    assert decide_layers(layers, "web_fetch", "https://x") is Action.ASK
    child = derive_child(Capability.root(policy=parent_layer), _zuno(fs, "c", {
        "permission": {"mode": mode.value, "rules": {"bash": "allow", "webfetch": "allow"}}}))
    assert child.decide("shell", "git push origin main") is Action.DENY
    assert child.decide("shell", "git status") is Action.ALLOW
    assert child.decide("web_fetch", "https://x") is Action.ASK


@pytest.mark.parametrize("command", [
    "rm -rf build", "ls; rm -rf build", "ls && rm -rf build", "ls | rm -rf build",
    "ls\nrm -rf build", "true || rm -rf build", "sleep 1 & rm -rf build",
    pytest.param("(rm -rf build)"),
    pytest.param("{ rm -rf build; }"),
    pytest.param("if true; then rm -rf build; fi"),
    pytest.param("for f in a; do rm -rf build; done"),
])
def test_shell_deny_pattern_terminal_in_compound_commands(fs, command: str) -> None:
    """Spec (zuno-custom-agents.md): Explicit denies remain terminal in every mode, including
    allow_all.

    ``policies/permissions.py`` documents that a deny pattern denies the call when it
    matches *any* simple command of the line; compound-command syntax around a simple
    command must not hide it from an allow_all agent.
    """
    contract = _zuno(fs, "c", {"permission": {"mode": "allow_all", "rules": {
        "bash": {"*": "allow", "rm *": "deny"}}}})
    child = derive_child(Capability.root(), contract)
    assert child.decide("shell", command) is Action.DENY


def test_allow_all_removes_own_prompts_only(fs) -> None:
    """Spec (zuno-custom-agents.md): allow_all removes prompts, not restrictions."""
    own = _policy(("shell", None, Action.ASK), ("edit", None, Action.DENY),
                  mode=PermissionMode.ALLOW_ALL)
    assert own.decide("shell", "make") is Action.ALLOW
    assert own.decide("edit", "a.py") is Action.DENY
    strict = _policy(mode=PermissionMode.STRICT)
    assert strict.decide("shell", "make") is Action.DENY
    assert strict.decide("read_file", "a.py") is Action.ALLOW
    assert decide_layers([strict, own], "shell", "make") is Action.DENY


def test_shell_stays_subject_to_approval_policy(fs) -> None:
    """Spec (ngn-agent-definitions.md): Shell remains subject to ngn's approval policy and is not
    an OS sandbox."""
    host = _policy(("shell", None, Action.ASK))
    for contract in (
        _zuno(fs, "z", {"permission": {"mode": "allow_all", "rules": {"bash": "allow"}}}),
        fs.agent(fs.md(".claude/agents/c.md", "name: c\ndescription: d\ntools: Bash\n"
                       "permissionMode: bypassPermissions"), AgentFormat.CLAUDE),
        fs.agent(fs.write(".codex/agents/x.toml", 'name = "x"\ndescription = "d"\n'
                          'developer_instructions = "x"\napproval_policy = "never"\n'),
                 AgentFormat.CODEX),
    ):
        child = derive_child(Capability.root(policy=host), contract)
        assert child.decide("shell", "make") is Action.ASK, contract.origin.format


# --- Delegation ----------------------------------------------------------------------------


def test_delegation_allowlist_intersects(fs) -> None:
    """Spec (ngn-agent-definitions.md): Permitted delegation targets. Omitted inherits; []
    disables delegation.

    Across generations the allowlists intersect: a child cannot reach a target its
    parent could not.
    """
    root = Capability.root(depth=3)
    targets = {name: _ngn(fs, name) for name in ("a", "b", "c")}
    parent = derive_child(root, _ngn(fs, "parent", "allowed_agents: [a, b]"))
    narrowing = derive_child(parent, _ngn(fs, "narrowing", "allowed_agents: [b, c]"))
    inheriting = derive_child(parent, _ngn(fs, "inheriting"))
    assert narrowing.delegates == frozenset({"b"})
    assert inheriting.delegates == frozenset({"a", "b"})
    check_delegation(narrowing, targets["b"])
    for name in ("a", "c"):
        with pytest.raises(DelegationDenied):
            check_delegation(narrowing, targets[name])
    with pytest.raises(DelegationDenied):
        check_delegation(inheriting, targets["c"])


def test_delegation_needs_the_delegate_tool(fs) -> None:
    """Spec (ngn-agent-definitions.md): Permitted delegation targets. Omitted inherits; []
    disables delegation.

    A target list grants no tool: without ``delegate`` no delegation happens.
    """
    child = derive_child(Capability.root(depth=3),
                         _ngn(fs, "child", "tools: [read_file]\nallowed_agents: [t]"))
    with pytest.raises(DelegationDenied):
        check_delegation(child, _ngn(fs, "t"))


def test_delegation_eligibility_checked_by_backend(fs) -> None:
    """Spec (ngn-agent-definitions.md): User selection and delegation eligibility are checked by
    the backend as well as the picker.

    The backend check (``check_delegation``) refuses a target that is not available as a
    subagent, whatever the caller's allowlist says.
    """
    parent = derive_child(Capability.root(depth=3), _ngn(fs, "p", "allowed_agents: [private]"))
    private = _ngn(fs, "private", "subagent_available: false")
    with pytest.raises(DelegationDenied):
        check_delegation(parent, private)
    zuno_primary = _zuno(fs, "primary_only", {"mode": "primary"})
    with pytest.raises(DelegationDenied):
        check_delegation(Capability.root(), zuno_primary)


def test_subagent_depth_limits_nesting(fs) -> None:
    """Spec (zuno-custom-agents.md): subagent_depth integer | null 1 Maximum subagent nesting
    depth"""
    target = _ngn(fs, "t")
    default = Capability.root()
    assert default.depth == 1
    check_delegation(default, target)
    with pytest.raises(DelegationDenied):
        check_delegation(derive_child(default, target), target)
    two = Capability.root(depth=2)
    child = derive_child(two, target)
    check_delegation(child, target)
    grandchild = derive_child(child, target)
    assert grandchild.depth == 0
    with pytest.raises(DelegationDenied):
        check_delegation(grandchild, target)


def test_restrict_is_idempotent(fs) -> None:
    """Spec (DESIGN.md): A contract can only narrow.

    Applying the same contract twice changes nothing (narrowing is idempotent).
    """
    contract = _zuno(fs, "c", {"tools": ["read", "bash"], "delegates": ["x"],
                               "permission": {"mode": "strict", "rules": {"bash": "ask"}}})
    once = restrict(Capability.root(custom_tools=["mcp__a__b"]), contract)
    assert restrict(once, contract) == once
