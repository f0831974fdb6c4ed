"""zuno-custom-agents.md: the agents map and Markdown agents, every field of the table,
the capability ceiling, per-agent permissions, model routing and related keys.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_support import run_in

from policies.capability import (
    DEFAULT_SUBAGENT_DEPTH,
    Capability,
    DelegationDenied,
    check_delegation,
    derive_child,
    restrict,
)
from policies.config import UserConfig
from policies.contract import AgentContract, AgentFormat, SandboxMode, Scope
from policies.loader import Options, Severity
from policies.permissions import Action, PermissionMode, PermissionPolicy, PermissionRule
from policies.tools import is_side_effecting

Z = AgentFormat.ZUNO

#: The JSON example of the spec, verbatim.
REVIEWER = {
    "description": "Reviews a diff and reports findings without editing",
    "mode": "subagent",
    "tools": ["read", "grep", "glob"],
    "permission": {"rules": {"shell": "deny"}},
}


def _agents(fs, agents: dict[str, Any], *, rel: str = ".zuno/zuno.json",
            options: Options | None = None, **top: Any):
    """Load a zuno.json holding ``agents``; return the outcome."""
    path = fs.json(rel, {**top, "agents": agents})
    return fs.load(path, Z, options=options)


def _one(fs, entry: dict[str, Any], name: str = "a", *,
         options: Options | None = None) -> AgentContract:
    outcome = _agents(fs, {name: entry}, options=options)
    assert outcome.status.value == "loaded", [d.render() for d in outcome.diagnostics]
    assert not fs.errors(outcome.diagnostics)
    return outcome.agents[0]


def _rejected(fs, entry: dict[str, Any], field: str, name: str = "a") -> None:
    outcome = _agents(fs, {name: entry})
    assert outcome.agents == []
    found = fs.errors(outcome.diagnostics, f"agents.{name}.{field}")
    assert found, [d.render() for d in outcome.diagnostics]
    assert found[0].file == ".zuno/zuno.json"


def _target(fs, name: str = "helper", **entry: Any) -> AgentContract:
    return _one(fs, {"description": "target", **entry}, name)


# --- Contracts only narrow -----------------------------------------------------------------


def test_allow_all_cannot_restore_what_the_parent_never_had(fs) -> None:
    """Spec (zuno-custom-agents.md): The rule that governs everything below: an agent contract
    can only narrow. A configured allow, including permission.mode: "allow_all", cannot restore a
    capability the parent attempt never had."""
    parent = restrict(Capability.root(), _one(fs, {"tools": ["read", "grep"]}, "parent"))
    child_contract = _one(fs, {
        "tools": ["read", "bash", "edit"],
        "permission": {"mode": "allow_all", "rules": {"bash": "allow", "edit": "allow"}},
    }, "child")
    child = derive_child(parent, child_contract)
    assert child.tools == frozenset({"read_file"})
    assert child.is_within(parent)
    assert child.decide("shell", "ls") is Action.DENY
    assert child.decide("edit", "a.py") is Action.DENY


# --- Two definition surfaces ---------------------------------------------------------------


def test_agents_map_keyed_by_name(fs) -> None:
    """Spec (zuno-custom-agents.md): Agents live in the agents map, keyed by agent name:"""
    fs.json(".zuno/zuno.json", {"agents": {"reviewer": REVIEWER}})
    result = fs.discover(trust_project=True, personal=False)
    contract = result.agents["reviewer"]
    assert contract.origin.format is Z
    assert contract.description == REVIEWER["description"]
    assert contract.tools == frozenset({"read_file", "search", "find"})
    child = restrict(Capability.root(), contract)
    assert child.decide("shell", "ls") is Action.DENY
    assert (contract.user_invocable, contract.subagent_available) == (False, True)


def test_markdown_discovered_under_agent_dirs(fs) -> None:
    """Spec (zuno-custom-agents.md): Or as Markdown with frontmatter, discovered under
    {agent,agents}/**/*.md in the global config directory and every project .zuno directory."""
    for rel in (".zuno/agent/one.md", ".zuno/agents/two.md", ".zuno/agents/team/three.md",
                ".zuno/agent/a/b/four.md"):
        fs.md(rel, "description: project")
    xdg = fs.env.xdg_config
    for rel in ("zuno/agent/five.md", "zuno/agents/deep/six.md"):
        fs.md(xdg / rel, "description: global")
    result = fs.discover(trust_project=True)
    sources = {c.origin.source for c in result.agents.values()}
    assert sources == {".zuno/agent/one.md", ".zuno/agents/two.md", ".zuno/agents/team/three.md",
                       ".zuno/agent/a/b/four.md", "~/.config/zuno/agent/five.md",
                       "~/.config/zuno/agents/deep/six.md"}
    assert {"one", "two", "five"} <= set(result.agents)
    assert {c.origin.format for c in result.agents.values()} == {Z}


def test_markdown_example_matches_json_entry(fs) -> None:
    """Spec (zuno-custom-agents.md): The frontmatter accepts the same fields as one agents map
    entry; the body is the system prompt."""
    body = "Report findings as a list. Do not edit files."
    markdown = fs.agent(fs.md(".zuno/agents/reviewer.md", """
        description: Reviews a diff and reports findings without editing
        mode: subagent
        tools: [read, grep, glob]
        permission:
          rules:
            shell: deny
    """, "\n" + body + "\n"), Z)
    entry = _one(fs, {**REVIEWER, "prompt": body}, "reviewer")
    assert markdown.instructions == body
    assert markdown.digest() == entry.digest()


def test_markdown_prompt_is_the_body_not_a_field(fs) -> None:
    """Spec (zuno-custom-agents.md): The frontmatter accepts the same fields as one agents map
    entry; the body is the system prompt.

    Documented choice (``zuno.py``): a ``prompt`` field in Markdown is rejected, since
    the body is the prompt.
    """
    outcome = fs.load(fs.md(".zuno/agents/r.md", "prompt: other"), Z)
    fs.rejected_with(outcome, "prompt")


# --- Every field ---------------------------------------------------------------------------

FIELDS = ["color", "delegates", "description", "disable", "hidden", "mode", "model", "options",
          "permission", "prompt", "reasoning", "requiredSkills", "steps", "temperature", "tools",
          "top_p", "variant"]


def test_every_field_accepts_null(fs) -> None:
    """Spec (zuno-custom-agents.md): Key Type Default Description

    Every row's type includes ``null``; a null field means its default.
    """
    contract = _one(fs, dict.fromkeys(FIELDS))
    assert contract.tools is None
    assert contract.delegates is None
    assert contract.steps is None
    assert contract.color is None
    assert contract.required_skills == ()
    assert (contract.hidden, contract.disabled) == (False, False)
    assert (contract.user_invocable, contract.subagent_available) == (True, True)
    assert contract.permission == PermissionPolicy()
    assert contract.model.inherit


def test_every_field_is_read(fs) -> None:
    """Spec (zuno-custom-agents.md): Key Type Default Description

    Every row of the table, set, ends up in the contract.
    """
    contract = _one(fs, {
        "color": "accent", "delegates": ["helper"], "description": "When to use it",
        "disable": False, "hidden": True, "mode": "all", "model": "openai/gpt-4o",
        "options": {"seed": 7}, "permission": {"mode": "strict", "rules": {"bash": "ask"}},
        "prompt": "System prompt.", "reasoning": "high", "requiredSkills": ["codegraph"],
        "steps": 12, "temperature": 0.3, "tools": ["read", "bash"], "top_p": 0.9,
        "variant": "fast",
    })
    assert contract.color == "accent"
    assert contract.delegates == frozenset({"helper"})
    assert contract.description == "When to use it"
    assert contract.hidden is True
    assert contract.disabled is False
    assert [str(r) for r in contract.model.candidates] == ["openai/gpt-4o"]
    assert contract.options == {"seed": 7}
    assert contract.permission.mode is PermissionMode.STRICT
    assert contract.permission.rules == (PermissionRule(tool="shell", action=Action.ASK),)
    assert contract.instructions == "System prompt."
    assert contract.reasoning == "high"
    assert contract.required_skills == ("codegraph",)
    assert contract.steps == 12
    assert contract.temperature == 0.3
    assert contract.tools == frozenset({"read_file", "shell"})
    assert contract.top_p == 0.9
    assert contract.variant == "fast"


@pytest.mark.parametrize("colour", ["primary", "secondary", "accent", "success", "warning",
                                    "error", "info", "#a1B2c3", "#000000"])
def test_color_theme_names_and_hex(fs, colour: str) -> None:
    """Spec (zuno-custom-agents.md): The named theme colours are primary, secondary, accent,
    success, warning, error, and info. A hex code is validated on the way in."""
    assert _one(fs, {"color": colour}).color == colour


@pytest.mark.parametrize("colour", ["red", "#fff", "#12345g", "#1234567", "a1b2c3", "Primary",
                                    5])
def test_color_other_values_rejected(fs, colour: object) -> None:
    """Spec (zuno-custom-agents.md): The named theme colours are primary, secondary, accent,
    success, warning, error, and info. A hex code is validated on the way in."""
    _rejected(fs, {"color": colour}, "color")


@pytest.mark.parametrize("value", ["off", "low", "medium", "high", "xhigh", "max"])
def test_reasoning_levels(fs, value: str) -> None:
    """Spec (zuno-custom-agents.md): off | low | medium | high | xhigh | max | null"""
    assert _one(fs, {"reasoning": value}).reasoning == value


@pytest.mark.parametrize("value", ["minimal", "HIGH", "extreme", 3])
def test_reasoning_other_values_rejected(fs, value: object) -> None:
    """Spec (zuno-custom-agents.md): off | low | medium | high | xhigh | max | null"""
    _rejected(fs, {"reasoning": value}, "reasoning")


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3"])
def test_steps_positive_integer(fs, value: object) -> None:
    """Spec (zuno-custom-agents.md): positive integer | null unbounded Maximum tool-capable
    iterations before one text-only finalization request"""
    _rejected(fs, {"steps": value}, "steps")
    assert _one(fs, {"steps": 1}).steps == 1


def test_steps_omitted_is_unbounded(fs) -> None:
    """Spec (zuno-custom-agents.md): Omit the field for the default unbounded behavior."""
    assert _one(fs, {"description": "d"}).steps is None


@pytest.mark.parametrize(("field", "value"), [
    ("temperature", "hot"), ("top_p", "all"), ("variant", 3), ("description", ["a"]),
    ("model", 4), ("prompt", {"file": "x"}), ("hidden", "yes"), ("disable", 1),
    ("options", ["a"]), ("permission", "deny-all"), ("tools", "read, grep"),
    ("delegates", "helper"), ("requiredSkills", "codegraph"),
])
def test_field_types_enforced(fs, field: str, value: object) -> None:
    """Spec (zuno-custom-agents.md): Key Type Default Description

    A value of the wrong type for its row rejects the agent, naming the field.
    """
    _rejected(fs, {field: value}, field)


def test_unknown_keys_swept_into_options_verbatim(fs) -> None:
    """Spec (zuno-custom-agents.md): Unknown keys are not rejected here. The agents map sweeps any
    key it does not name into options and keeps it verbatim, which is how provider-specific
    settings reach the SDK without the schema having to enumerate them."""
    nested = {"a": [1, 2.5, {"b": None, "c": "x"}], "d": True}
    outcome = _agents(fs, {"a": {"options": {"seed": 7}, "reasoningEffort": "high",
                                 "providerThing": nested}})
    assert outcome.status.value == "loaded"
    assert not fs.errors(outcome.diagnostics)
    assert outcome.agents[0].options == {"seed": 7, "reasoningEffort": "high",
                                         "providerThing": nested}


def test_unknown_keys_swept_in_markdown_too(fs) -> None:
    """Spec (zuno-custom-agents.md): The frontmatter accepts the same fields as one agents map
    entry; the body is the system prompt.

    Unknown Markdown keys are swept into options exactly like map entries.
    """
    contract = fs.agent(fs.md(".zuno/agents/r.md", "description: d\nreasoningEffort: high"), Z)
    assert contract.options == {"reasoningEffort": "high"}


def test_typo_is_not_an_error_and_restricts_nothing(fs) -> None:
    """Spec (zuno-custom-agents.md): This is the one place in the configuration where a typo does
    not produce an error, so check zuno debug agent after adding an unusual key."""
    outcome = _agents(fs, {"a": {"tool": ["read"], "Tools": ["read"], "step": 2}})
    assert outcome.status.value == "loaded"
    assert not fs.errors(outcome.diagnostics)
    contract = outcome.agents[0]
    assert contract.tools is None
    assert contract.steps is None
    assert contract.options == {"tool": ["read"], "Tools": ["read"], "step": 2}


# --- Fields with non-obvious behavior ------------------------------------------------------


def test_tools_is_an_exact_allowlist(fs) -> None:
    """Spec (zuno-custom-agents.md): tools is an exact allowlist, not an addition. Setting it
    replaces whatever the role would otherwise expose"""
    root = Capability.root(custom_tools=["mcp__gh__query"])
    contract = _one(fs, {"tools": ["read"]})
    assert restrict(root, contract).tools == frozenset({"read_file"})
    empty = _one(fs, {"tools": []}, "b")
    assert restrict(root, empty).tools == frozenset()


@pytest.mark.parametrize(("field", "global_value", "project_value", "attribute", "expected"), [
    ("tools", ["read", "grep"], ["glob"], "tools", frozenset({"find"})),
    ("delegates", ["a", "b"], ["c"], "delegates", frozenset({"c"})),
    ("requiredSkills", ["x", "y"], ["z"], "required_skills", ("z",)),
])
def test_project_layer_arrays_replace_global(fs, field: str, global_value: list[str],
                                             project_value: list[str], attribute: str,
                                             expected: object) -> None:
    """Spec (zuno-custom-agents.md): because arrays replace across configuration layers, a project
    layer setting tools discards the global list entirely. The same applies to delegates and
    requiredSkills."""
    fs.json(fs.env.xdg_config / "zuno/zuno.json", {"agents": {"r": {field: global_value}}})
    fs.json(".zuno/zuno.json", {"agents": {"r": {field: project_value}}})
    result = fs.discover(trust_project=True)
    contract = result.agents["r"]
    assert contract.origin.scope is Scope.PROJECT
    assert getattr(contract, attribute) == expected


@pytest.mark.parametrize(("mode", "top_level", "delegable"), [
    ("subagent", False, True), ("primary", True, False), ("all", True, True),
])
def test_mode_decides_reachability(fs, mode: str, top_level: bool, delegable: bool) -> None:
    """Spec (zuno-custom-agents.md): mode decides reachability. subagent means the agent is only
    available as a delegation target and never as a top-level session agent; primary is the
    reverse; all is both."""
    contract = _one(fs, {"mode": mode})
    assert contract.user_invocable is top_level
    assert contract.subagent_available is delegable
    if delegable:
        check_delegation(Capability.root(), contract)
    else:
        with pytest.raises(DelegationDenied):
            check_delegation(Capability.root(), contract)


def test_mode_other_values_rejected(fs) -> None:
    """Spec (zuno-custom-agents.md): subagent | primary | all | null"""
    _rejected(fs, {"mode": "both"}, "mode")


def test_default_agent_must_be_primary(fs) -> None:
    """Spec (zuno-custom-agents.md): A default_agent must be a primary agent.

    It is checked once every layer is loaded (the agent may be Markdown): an error on
    ``default_agent``, which is then not used; the file's agents still load.
    """
    fs.json(".zuno/zuno.json", {"default_agent": "rev", "agents": {"rev": {"mode": "subagent"}}})
    result = fs.discover(trust_project=True, personal=False)
    assert fs.errors(result.diagnostics, "default_agent")
    assert result.default_agent is None
    assert "rev" in result.agents


def test_required_skills_grant_no_tools(fs) -> None:
    """Spec (zuno-custom-agents.md): The field does not copy a Skill into configuration and does
    not grant tools — so "requiredSkills": ["codegraph"] guarantees CodeGraph instructions, not
    CodeGraph execution authority."""
    root = Capability.root(custom_tools=["codegraph"])
    contract = _one(fs, {"tools": ["read"], "requiredSkills": ["codegraph"]})
    assert contract.required_skills == ("codegraph",)
    child = restrict(root, contract)
    assert "codegraph" not in child.tools
    assert child.decide("codegraph") is Action.DENY
    inheriting = _one(fs, {"requiredSkills": ["codegraph"]}, "b")
    assert restrict(Capability.root(), inheriting).decide("codegraph") is Action.DENY


def test_reasoning_and_variant_without_model_not_an_error(fs) -> None:
    """Spec (zuno-custom-agents.md): reasoning and variant apply only with the agent's configured
    model. Setting either without a model is not an error, but it has no effect on a route
    selected elsewhere."""
    outcome = _agents(fs, {"a": {"reasoning": "high", "variant": "fast"}})
    assert outcome.status.value == "loaded"
    assert not fs.problems(outcome.diagnostics)
    assert outcome.agents[0].model.inherit


def test_disable_removes_the_agent(fs) -> None:
    """Spec (zuno-custom-agents.md): disable removes a built-in agent from the roster. That is the
    intended way to drop a role you do not want available, rather than trying to strip its tools
    one by one."""
    fs.minimal(AgentFormat.CLAUDE, fs.home / ".claude/agents", "general")
    fs.json(".zuno/zuno.json", {"agents": {"general": {"disable": True}}})
    result = fs.discover(trust_project=True)
    contract = result.agents["general"]
    assert contract.disabled is True
    with pytest.raises(DelegationDenied):
        check_delegation(Capability.root(), contract)


def test_hidden_still_delegable_and_reachable(fs) -> None:
    """Spec (zuno-custom-agents.md): hidden only affects the @ autocomplete menu. A hidden agent is
    still delegable and still reachable by name."""
    fs.json(".zuno/zuno.json", {"agents": {"quiet": {"hidden": True, "description": "d"}}})
    result = fs.discover(trust_project=True, personal=False)
    contract = result.get("quiet")
    assert contract is not None
    assert contract.hidden is True
    assert contract.user_invocable is True
    assert contract.subagent_available is True
    check_delegation(Capability.root(), contract)


# --- The capability ceiling ----------------------------------------------------------------


def test_parent_visible_tools_are_the_upper_bound(fs) -> None:
    """Spec (zuno-custom-agents.md): For a delegated turn, the parent attempt's actual
    provider-visible tool schemas form an immutable upper bound."""
    no_shell = PermissionPolicy(rules=(PermissionRule(tool="shell", action=Action.DENY),))
    parent = Capability.root(policy=no_shell)
    assert "shell" not in parent.visible_tools()
    child = derive_child(parent, _one(fs, {
        "tools": ["bash", "read"],
        "permission": {"mode": "allow_all", "rules": {"bash": "allow"}}}))
    assert "shell" not in child.visible_tools()
    assert child.decide("shell", "ls") is Action.DENY


@pytest.mark.parametrize("entry", [
    {}, {"tools": ["read", "bash"]}, {"tools": []}, {"permission": {"rules": {"*": "deny"}}},
    {"permission": {"mode": "allow_all"}}, {"tools": ["mcp__gh__query", "edit"]},
    {"delegates": ["x"], "tools": ["task"]},
])
def test_allowlist_and_rules_only_narrow(fs, entry: dict[str, Any]) -> None:
    """Spec (zuno-custom-agents.md): The target role, its MCP and extension inheritance policy,
    the agent's exact tools allowlist, and effective permission rules can only narrow that set."""
    parent = restrict(Capability.root(custom_tools=["mcp__gh__query"]),
                      _one(fs, {"tools": ["read", "bash", "mcp__gh__query"]}, "parent"))
    child = derive_child(parent, _one(fs, entry, "child"))
    assert set(child.visible_tools()) <= set(parent.visible_tools())
    assert child.is_within(parent)


_MCP = "mcp__gh__query"
_INSTALLED = Options(custom_tools=frozenset({_MCP, "mcp__gh__delete_repo"}))


def test_mcp_tools_need_every_condition(fs) -> None:
    """Spec (zuno-custom-agents.md): All of these must hold: the exact schema was visible in the
    parent attempt, the target role either inherits extension tools automatically or carries an
    exact per-agent permission.rules grant, the allowlist retains the wire id, and no later
    explicit rule denies it.

    The MCP tool is installed (declared in the user's config), as it is when a parent
    attempt can see it.
    """
    with_tool = Capability.root(custom_tools=[_MCP])
    without_tool = Capability.root()
    inherits = _one(fs, {"description": "inherits"}, "inherits", options=_INSTALLED)
    listed = _one(fs, {"tools": ["read", _MCP]}, "listed", options=_INSTALLED)
    not_listed = _one(fs, {"tools": ["read"]}, "not_listed", options=_INSTALLED)
    denied = _one(fs, {"tools": [_MCP], "permission": {"rules": {_MCP: "deny"}}}, "denied",
                  options=_INSTALLED)
    assert restrict(with_tool, inherits).decide(_MCP) is Action.ALLOW
    assert restrict(with_tool, listed).decide(_MCP) is Action.ALLOW
    assert restrict(without_tool, listed).decide(_MCP) is Action.DENY
    assert restrict(with_tool, not_listed).decide(_MCP) is Action.DENY
    assert restrict(with_tool, denied).decide(_MCP) is Action.DENY
    assert _MCP not in restrict(with_tool, denied).visible_tools()
    read_only = Capability.root(custom_tools=[_MCP], sandbox=SandboxMode.READ_ONLY)
    assert restrict(read_only, listed).decide(_MCP) is Action.DENY


def test_mcp_wire_id_in_permission_rules(fs) -> None:
    """Spec (zuno-custom-agents.md): All of these must hold: the exact schema was visible in the
    parent attempt, the target role either inherits extension tools automatically or carries an
    exact per-agent permission.rules grant, the allowlist retains the wire id, and no later
    explicit rule denies it.

    A zuno file names MCP tools by their wire id in ``tools`` and in ``permission.rules``
    alike; a rule must not be rejected where the allowlist entry is accepted.
    """
    listed = _agents(fs, {"a": {"tools": [_MCP]}})
    assert listed.status.value == "loaded"
    ruled = _agents(fs, {"a": {"tools": [_MCP], "permission": {"rules": {_MCP: "deny"}}}})
    assert ruled.status.value == "loaded", [d.render() for d in ruled.diagnostics]
    child = restrict(Capability.root(custom_tools=[_MCP]), ruled.agents[0])
    assert child.decide(_MCP) is Action.DENY


def test_unknown_mcp_tools_side_effecting_by_default(fs) -> None:
    """Spec (zuno-custom-agents.md): Unknown MCP tools remain side-effecting by default, so
    granting one audited query tool does not opt the agent into every MCP tool."""
    assert is_side_effecting("mcp__gh__delete_repo")
    parent = Capability.root(custom_tools=[_MCP, "mcp__gh__delete_repo"])
    strict = _one(fs, {"permission": {"mode": "strict", "rules": {_MCP: "allow"}}},
                  options=_INSTALLED)
    child = restrict(parent, strict)
    assert child.decide(_MCP) is Action.ALLOW
    assert child.decide("mcp__gh__delete_repo") is Action.DENY
    assert child.decide("read_file", "a.py") is Action.ALLOW
    listed = restrict(parent, _one(fs, {"tools": [_MCP]}, "b"))
    assert listed.decide(_MCP) is Action.ALLOW
    assert listed.decide("mcp__gh__delete_repo") is Action.DENY


# --- Per-agent permissions -----------------------------------------------------------------


def test_permission_defaults(fs) -> None:
    """Spec (zuno-custom-agents.md): mode standard | strict | allow_all standard How unresolved
    and side-effecting calls are admitted"""
    contract = _one(fs, {"permission": {}})
    assert contract.permission.mode is PermissionMode.STANDARD
    assert contract.permission.rules == ()
    for mode in ("standard", "strict", "allow_all"):
        assert _one(fs, {"permission": {"mode": mode}}).permission.mode.value == mode
    _rejected(fs, {"permission": {"mode": "yolo"}}, "permission")
    _rejected(fs, {"permission": {"mode": "standard", "extra": 1}}, "permission")


def test_permission_rules_are_ordered(fs) -> None:
    """Spec (zuno-custom-agents.md): Ordered per-tool rules. Explicit denies remain terminal in
    every mode

    Within one rules object the last matching rule wins (documented in
    ``policies/permissions.py``), so order changes the outcome.
    """
    only_read = restrict(Capability.root(), _one(fs, {"permission": {"rules": {
        "*": "deny", "read": "allow"}}}))
    assert only_read.decide("read_file", "a.py") is Action.ALLOW
    assert only_read.decide("shell", "ls") is Action.DENY
    reversed_ = restrict(Capability.root(), _one(fs, {"permission": {"rules": {
        "read": "allow", "*": "deny"}}}, "b"))
    assert reversed_.decide("read_file", "a.py") is Action.DENY
    patterns = restrict(Capability.root(), _one(fs, {"permission": {"rules": {
        "bash": {"*": "ask", "git *": "allow"}}}}, "c"))
    assert patterns.decide("shell", "git log") is Action.ALLOW
    assert patterns.decide("shell", "make") is Action.ASK


@pytest.mark.parametrize("mode", ["standard", "strict", "allow_all"])
def test_explicit_denies_terminal_in_every_mode(fs, mode: str) -> None:
    """Spec (zuno-custom-agents.md): Explicit denies remain terminal in every mode, including
    allow_all. That asymmetry is the whole point: allow_all removes prompts, not restrictions."""
    contract = _one(fs, {"permission": {"mode": mode, "rules": {
        "bash": {"*": "allow", "rm *": "deny"}, "edit": "deny", "webfetch": "ask"}}})
    child = restrict(Capability.root(), contract)
    assert child.decide("shell", "rm -rf build") is Action.DENY
    assert child.decide("shell", "ls && rm x") is Action.DENY
    assert child.decide("edit", "a.py") is Action.DENY
    expected = Action.ALLOW if mode == "allow_all" else Action.ASK
    assert child.decide("web_fetch", "https://example.com") is expected


# --- Model routing -------------------------------------------------------------------------


def test_agent_model_is_most_specific_route(fs) -> None:
    """Spec (zuno-custom-agents.md): An agent's model is the most specific route. When it is
    absent, the active preset's agent route applies, then the parent session model.

    Without a preset, an absent model inherits the parent's (presets:
    ``test_zuno_runtime.py``).
    """
    chosen = _one(fs, {"model": "anthropic/claude-sonnet-4-5"})
    assert [str(r) for r in chosen.model.candidates] == ["anthropic/claude-sonnet-4-5"]
    assert not chosen.model.needs_override
    assert _one(fs, {"description": "d"}, "b").model.inherit


# --- Creating and inspecting ---------------------------------------------------------------


def test_show_prints_the_effective_resolved_contract(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): zuno debug agent <name> prints the effective resolved
    contract: model route, tool visibility, permission ruleset, and the agent-filtered Skill view
    with metadata and selected-body budgets.

    corral's equivalent is ``agents show``.
    """
    fs.json(".zuno/zuno.json", {"agents": {"reviewer": {
        **REVIEWER, "model": "openai/gpt-4o", "requiredSkills": ["codegraph"],
        "prompt": "Review."}}})
    out = cli("agents", "show", "reviewer", "--root", str(fs.repo), "--trust-project",
              "--no-personal")
    assert out.exit_code == 0, out.output
    lines = {line.split(None, 1)[0]: line for line in out.output.splitlines() if line.strip()}
    assert "openai/gpt-4o" in lines["model"]
    assert lines["effective"].split(None, 1)[1] == "find, read_file, search"
    assert "deny  shell" in out.output
    assert "codegraph" in lines["skills"]
    as_json = json.loads(cli("agents", "show", "reviewer", "--root", str(fs.repo),
                             "--trust-project", "--no-personal", "--json").output)
    assert as_json["effective"]["tools"] == ["find", "read_file", "search"]
    assert as_json["permission"]["rules"] == [
        {"tool": "shell", "pattern": None, "action": "deny"}]


def test_show_prints_options_skills_with_budgets_and_the_agents_diagnostics(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): zuno debug agent <name> prints the effective resolved
    contract: model route, tool visibility, permission ruleset, and the agent-filtered Skill view
    with metadata and selected-body budgets. ... This is the one place in the configuration where
    a typo does not produce an error, so check zuno debug agent after adding an unusual key.

    ``agents show`` prints the swept ``options`` (the typo included, with its warning
    among the agent's own diagnostics, not a sibling's), each required skill with its
    source, metadata and body budget, and the tools a call of which waits for approval
    (an ``ask`` rule too); a run sends exactly that body and asks exactly there.
    """
    fs.write(".zuno/skills/codegraph/SKILL.md", "---\nname: codegraph\ndescription: Query the "
             "code graph.\n---\nUse the code graph for callers.\n")
    fs.json(".zuno/zuno.json", {"agents": {
        "reviewer": {"description": "reviews", "requiredSkills": ["codegraph"],
                     "tool": ["read"], "top_k": 40,
                     "permission": {"rules": {"bash": {"git push *": "ask"}}}},
        "sibling": {"description": "other", "allowedTools": ["read"]}}})
    args = ("--root", str(fs.repo), "--trust-project", "--no-personal")
    out = cli("agents", "show", "reviewer", *args)
    assert out.exit_code == 0, out.output
    text = out.output
    assert 'options      tool=["read"], top_k=40 (sent with every request)' in text
    assert "approval     shell (ask rule)" in text
    skill = fs.repo / ".zuno/skills/codegraph/SKILL.md"
    assert (f'  codegraph: {skill} "Query the code graph."; body 31 bytes, sent whole'
            in text)
    assert "diagnostics  1" in text
    assert "  warning: .zuno/zuno.json:" in text and "agents.reviewer.tool" in text
    assert "allowedTools" not in text  # the sibling's diagnostic is not this agent's
    data = json.loads(cli("agents", "show", "reviewer", "--json", *args).output)
    assert data["options"] == {"tool": ["read"], "top_k": 40}
    assert data["skills"][0]["metadata"] == {"name": "codegraph",
                                             "description": "Query the code graph."}
    assert data["effective"]["approval_required"] == ["shell"]
    assert [d["field"] for d in data["diagnostics"]] == ["agents.reviewer.tool"]
    # What a run does: the body it sends is the budget shown, and the ask rule asks.
    push = {"tool_calls": [{"name": "shell", "arguments": {"command": "git push origin"}}]}
    ran = run_in(fs, "reviewer", [push, {"text": "done"}])
    system = ran.requests[0].messages[0].content
    assert "Use the code graph for callers." in system
    assert data["skills"][0]["budget"]["body_bytes"] == len(
        b"Use the code graph for callers.")
    assert "needs approval" in ran.record.denied_calls[0]["reason"]


# --- Related top-level keys ----------------------------------------------------------------


def test_subagent_depth_defaults_to_one(fs) -> None:
    """Spec (zuno-custom-agents.md): subagent_depth integer | null 1 Maximum subagent nesting
    depth"""
    assert DEFAULT_SUBAGENT_DEPTH == 1
    assert UserConfig().subagent_depth == 1
    root = Capability.root()
    target = _target(fs)
    check_delegation(root, target)
    child = derive_child(root, target)
    assert child.depth == 0
    with pytest.raises(DelegationDenied):
        check_delegation(child, target)


def test_project_zuno_json_cannot_raise_subagent_depth(fs) -> None:
    """Spec (zuno-custom-agents.md): subagent_depth integer | null 1 Maximum subagent nesting
    depth

    Documented choice (``policies/config.py``): the depth comes from the user's config,
    never from a repository, so a project ``zuno.json`` cannot widen it.
    """
    fs.json(".zuno/zuno.json", {"subagent_depth": 5, "agents": {"helper": {"description": "d"}}})
    result = fs.discover(trust_project=True, personal=False)
    contract = result.agents["helper"]
    child = derive_child(Capability.root(), contract)
    with pytest.raises(DelegationDenied):
        check_delegation(child, contract)
    assert not [d for d in result.diagnostics if d.severity is Severity.ERROR]
