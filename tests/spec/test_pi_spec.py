"""pi-subagent-format.md: locations, frontmatter fields, model roles, sandbox modes,
colours, the body, the fixed tool allowlist, tool inheritance and model resolution.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped; a field's line in the YAML example is quoted with its comment).
"""

from __future__ import annotations

import pytest

from policies.capability import Capability, DelegationDenied, check_delegation, restrict
from policies.contract import AgentContract, AgentFormat, SandboxMode, Scope
from policies.loader import Environment, Options, Severity
from policies.permissions import Action
from policies.tools import ToolGroup, group_of

PI = AgentFormat.PI


def _pi(fs, header: str, body: str = "Do the work.\n", *, name: str = "a",
        options: Options | None = None) -> AgentContract:
    return fs.agent(fs.md(f".pi/agents/{name}.md", header, body), PI, options=options)


def _rejected(fs, header: str, field: str) -> None:
    fs.rejected_with(fs.load(fs.md(".pi/agents/bad.md", header), PI), field)


# --- File location -------------------------------------------------------------------------


def test_user_level_location(fs) -> None:
    """Spec (pi-subagent-format.md): | `~/.pi/agent/agents/*.md` | User-level (all projects) |

    ``$PI_CODING_AGENT_DIR`` overrides ``~/.pi/agent`` (``shared/formats.md`` §1h).
    """
    fs.minimal(PI, fs.home / ".pi/agent/agents", "scout")
    result = fs.discover()
    assert result.agents["scout"].origin.scope is Scope.PERSONAL
    assert result.agents["scout"].origin.source == "~/.pi/agent/agents/scout.md"
    fs.minimal(PI, fs.tmp / "pi-dir/agents", "moved")
    env = Environment.from_env({"HOME": str(fs.home), "PI_CODING_AGENT_DIR": str(
        fs.tmp / "pi-dir")})
    assert set(fs.discover(env=env).agents) == {"moved"}


def test_project_level_location(fs) -> None:
    """Spec (pi-subagent-format.md): | `.pi/agents/*.md` | Project-level |"""
    fs.minimal(PI, ".pi/agents", "scout")
    assert fs.discover(personal=False).agents == {}
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents["scout"].origin.scope is Scope.PROJECT
    assert result.agents["scout"].origin.format is PI


def test_project_agents_override_user_agents(fs) -> None:
    """Spec (pi-subagent-format.md): Project agents override user agents with the same name when
    `agentScope: "both"`."""
    fs.md(fs.home / ".pi/agent/agents/scout.md", "name: scout\ndescription: user")
    fs.md(".pi/agents/scout.md", "name: scout\ndescription: project")
    result = fs.discover(trust_project=True)
    assert result.agents["scout"].description == "project"
    assert [d for d in result.diagnostics if d.code == "collision"]


# --- Frontmatter fields --------------------------------------------------------------------


def test_name_required(fs) -> None:
    """Spec (pi-subagent-format.md): name: my-agent # Required. Unique identifier (kebab-case)."""
    _rejected(fs, "description: d", "name")
    _rejected(fs, "name: ''\ndescription: d", "name")
    assert _pi(fs, "name: my-agent\ndescription: d").name == "my-agent"


def test_name_is_a_unique_identifier(fs) -> None:
    """Spec (pi-subagent-format.md): name: my-agent # Required. Unique identifier (kebab-case).

    Two files of one scope claiming one name are reported with both paths (the later
    path wins, as files are sorted by path).
    """
    fs.md(".pi/agents/a.md", "name: scout\ndescription: first")
    fs.md(".pi/agents/b.md", "name: scout\ndescription: second")
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents["scout"].description == "second"
    clash = [d for d in result.diagnostics if d.code == "collision"]
    assert len(clash) == 1
    assert clash[0].severity is Severity.WARNING
    assert ".pi/agents/a.md" in clash[0].reason
    assert ".pi/agents/b.md" in clash[0].reason


def test_description_required(fs) -> None:
    """Spec (pi-subagent-format.md): description: ... # Required. When to use this agent."""
    _rejected(fs, "name: a", "description")
    _rejected(fs, "name: a\ndescription: ' '", "description")


def test_only_name_and_description_required(fs) -> None:
    """Spec (pi-subagent-format.md): Only `name` and `description` are required."""
    outcome = fs.load(fs.md(".pi/agents/a.md", "name: a\ndescription: d", ""), PI)
    assert outcome.status.value == "loaded"
    assert not fs.problems(outcome.diagnostics)
    contract = outcome.agents[0]
    assert contract.tools is None
    assert contract.model.inherit
    assert contract.sandbox is None


def test_tools_comma_separated_defaults_to_all(fs) -> None:
    """Spec (pi-subagent-format.md): tools: read, grep, ... # Optional. Comma-separated tool
    names. Defaults to all."""
    listed = _pi(fs, "name: a\ndescription: d\ntools: read, grep, bash")
    assert listed.tools == frozenset({"read_file", "search", "shell"})
    omitted = _pi(fs, "name: b\ndescription: d", name="b")
    assert omitted.tools is None


def test_model_role_alias_or_provider_model(fs) -> None:
    """Spec (pi-subagent-format.md): model: "@fast" # Optional. Role alias (quoted — @ is
    YAML-reserved) or provider/model."""
    role = _pi(fs, 'name: a\ndescription: d\nmodel: "@fast"').model
    assert [ref.id for ref in role.candidates] == ["@fast"]
    assert role.candidates[0].is_role
    exact = _pi(fs, "name: b\ndescription: d\nmodel: provider/backup-model", name="b").model
    assert [str(ref) for ref in exact.candidates] == ["provider/backup-model"]
    assert not exact.candidates[0].is_role
    assert not exact.needs_override


def test_model_unquoted_role_is_invalid_yaml(fs) -> None:
    """Spec (pi-subagent-format.md): model: "@fast" # Optional. Role alias (quoted — @ is
    YAML-reserved) or provider/model."""
    _rejected(fs, "name: a\ndescription: d\nmodel: @fast", "frontmatter")


def test_models_ordered_fallbacks_list_or_comma(fs) -> None:
    """Spec (pi-subagent-format.md): models: # Optional ordered fallbacks; comma form also
    accepted."""
    listed = _pi(fs, """
        name: a
        description: d
        models:
          - "@fast"
          - provider/backup-model
    """).model
    comma = _pi(fs, "name: b\ndescription: d\nmodels: '@fast, provider/backup-model'",
                name="b").model
    assert [str(r) for r in listed.candidates] == ["@fast", "provider/backup-model"]
    assert listed.candidates == comma.candidates


@pytest.mark.parametrize("level", ["off", "minimal", "low", "medium", "high", "xhigh", "max"])
def test_thinking_levels(fs, level: str) -> None:
    """Spec (pi-subagent-format.md): thinking: low # Optional:
    off|minimal|low|medium|high|xhigh|max."""
    assert _pi(fs, f"name: a\ndescription: d\nthinking: {level}").reasoning == level


@pytest.mark.parametrize("level", ["none", "High", "ultra", "2"])
def test_thinking_other_values_rejected(fs, level: str) -> None:
    """Spec (pi-subagent-format.md): thinking: low # Optional:
    off|minimal|low|medium|high|xhigh|max."""
    _rejected(fs, f"name: a\ndescription: d\nthinking: '{level}'", "thinking")


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "worktree"])
def test_sandbox_modes(fs, mode: str) -> None:
    """Spec (pi-subagent-format.md): sandbox: read-only # Optional: read-only | workspace-write |
    worktree. Auto-derives tool restrictions."""
    assert _pi(fs, f"name: a\ndescription: d\nsandbox: {mode}").sandbox is SandboxMode(mode)


@pytest.mark.parametrize("mode", ["readonly", "danger-full-access", "Read-Only", "none"])
def test_sandbox_other_values_rejected(fs, mode: str) -> None:
    """Spec (pi-subagent-format.md): sandbox: read-only # Optional: read-only | workspace-write |
    worktree. Auto-derives tool restrictions."""
    _rejected(fs, f"name: a\ndescription: d\nsandbox: {mode}", "sandbox")


@pytest.mark.parametrize("colour", ["red", "blue", "green", "yellow", "purple", "orange", "pink",
                                    "cyan"])
def test_color_values(fs, colour: str) -> None:
    """Spec (pi-subagent-format.md): Accepted values: `red`, `blue`, `green`, `yellow`, `purple`,
    `orange`, `pink`, `cyan`."""
    outcome = fs.load(fs.md(".pi/agents/a.md", f"name: a\ndescription: d\ncolor: {colour}"), PI)
    assert outcome.agents[0].color == colour
    assert not fs.problems(outcome.diagnostics)


@pytest.mark.parametrize("colour", ["magenta", "Red", "'#ff0000'", "primary"])
def test_color_other_values_rejected(fs, colour: str) -> None:
    """Spec (pi-subagent-format.md): Accepted values: `red`, `blue`, `green`, `yellow`, `purple`,
    `orange`, `pink`, `cyan`.

    Any other value is not accepted: the definition is rejected with an error naming
    the file, the field and the eight values (it only warned before), as pi's own
    strict loader refuses it.
    """
    path = fs.md(".pi/agents/a.md", f"name: a\ndescription: d\ncolor: {colour}")
    error = fs.rejected_with(fs.load(path, PI), "color")
    assert "red, blue, green, yellow, purple, orange, pink, cyan" in error.reason


# --- Model roles ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["@fast", "@coder", "@smart", "@reviewer-x"])
def test_model_entries_may_reference_roles(fs, role: str) -> None:
    """Spec (pi-subagent-format.md): `model`/`models` entries may reference *roles* instead of
    concrete models: `"@fast"`, `"@coder"`, `"@smart"`, or any role defined under
    `subagent.roles` in `~/.pi/agent/settings.json`."""
    route = _pi(fs, f"name: a\ndescription: d\nmodels: ['{role}', 'p/m']").model
    assert route.candidates[0].id == role
    assert route.candidates[0].is_role
    assert not route.candidates[1].is_role


@pytest.mark.parametrize("word", ["*", "@default"])
def test_star_and_default_mean_parent_model(fs, word: str) -> None:
    """Spec (pi-subagent-format.md): `"*"` / `"@default"` mean "use the parent model"."""
    route = _pi(fs, f"name: a\ndescription: d\nmodel: '{word}'").model
    assert route.inherit
    assert route.candidates == ()
    fallback = _pi(fs, f"name: b\ndescription: d\nmodels: ['@fast', '{word}']", name="b").model
    assert [ref.id for ref in fallback.candidates] == ["@fast", "inherit"]


def test_level_suffix_overrides_thinking_for_that_match(fs) -> None:
    """Spec (pi-subagent-format.md): A trailing `:level` (`"@smart:high"`) overrides the agent's
    `thinking` for that match."""
    contract = _pi(fs, """
        name: a
        description: d
        thinking: low
        models: ["@smart:high", "p/m", "q/n:off", "ollama/llama3:8b"]
    """)
    refs = contract.model.candidates
    assert [(r.id, r.level) for r in refs] == [
        ("@smart", "high"), ("p/m", None), ("q/n", "off"), ("ollama/llama3:8b", None)]
    assert contract.reasoning == "low"


# --- sandbox -------------------------------------------------------------------------------


def test_read_only_restricts_to_read_only_allowlist(fs) -> None:
    """Spec (pi-subagent-format.md): `read-only`: Restricts tools to the read-only allowlist
    (`read`, `grep`, `find`, `ls` plus read-only extension tools when inherited — `web_*`,
    `serena_*`, `munin_*`, `fff*`, …). Overrides any `tools` field.

    Documented choice (``policies/capability.py``): corral cannot tell a read-only
    extension tool from another, so read-only removes every custom tool.
    """
    parent = Capability.root(custom_tools=["serena_find", "munin_recall"])
    inherited = restrict(parent, _pi(fs, "name: a\ndescription: d\nsandbox: read-only"))
    assert {"read_file", "search", "find", "list_files"} <= inherited.tools
    assert not {"edit", "write_file", "apply_patch", "shell"} & inherited.tools
    assert not {"serena_find", "munin_recall"} & inherited.tools
    assert inherited.sandbox is SandboxMode.READ_ONLY
    listed = restrict(parent, _pi(fs, "name: b\ndescription: d\nsandbox: read-only\n"
                                  "tools: read, bash, edit, write, grep", name="b"))
    assert listed.tools == frozenset({"read_file", "search", "find", "list_files"})
    assert listed.decide("shell", "ls") is Action.DENY


def test_workspace_write_default_uses_tools_list(fs) -> None:
    """Spec (pi-subagent-format.md): `workspace-write` (default): Uses the agent's `tools` list or
    defaults to all tools."""
    parent = Capability.root(sandbox=SandboxMode.WORKSPACE_WRITE)
    listed = restrict(parent, _pi(fs, "name: a\ndescription: d\nsandbox: workspace-write\n"
                                  "tools: read, edit"))
    assert listed.tools == frozenset({"read_file", "edit"})
    assert listed.sandbox is SandboxMode.WORKSPACE_WRITE
    default = restrict(parent, _pi(fs, "name: b\ndescription: d", name="b"))
    assert default.sandbox is SandboxMode.WORKSPACE_WRITE
    assert {"edit", "write_file", "shell"} <= default.tools


def test_worktree_runs_isolated(fs) -> None:
    """Spec (pi-subagent-format.md): `worktree`: Runs the agent in an isolated git worktree
    (`.pi-worktrees/<id>` under the repo root)."""
    contract = _pi(fs, "name: a\ndescription: d\nsandbox: worktree")
    child = restrict(Capability.root(sandbox=SandboxMode.WORKSPACE_WRITE), contract)
    assert child.sandbox is SandboxMode.WORKTREE
    assert not child.read_only


def test_sandbox_never_widens_the_parent(fs) -> None:
    """Spec (pi-subagent-format.md): sandbox: read-only # Optional: read-only | workspace-write |
    worktree. Auto-derives tool restrictions.

    The derived restriction composes with the parent's: ``workspace-write`` under a
    worktree parent stays in the worktree.
    """
    contract = _pi(fs, "name: a\ndescription: d\nsandbox: workspace-write")
    assert restrict(Capability.root(), contract).sandbox is SandboxMode.WORKTREE


# --- Body ----------------------------------------------------------------------------------


def test_body_is_the_entire_system_prompt(fs) -> None:
    """Spec (pi-subagent-format.md): The body after frontmatter becomes the agent's **entire
    system prompt**. No pi defaults, no AGENTS.md files, no skills — only what you write here."""
    fs.write("AGENTS.md", "Repository rule: always run make lint.\n")
    fs.write(".pi/AGENTS.md", "More rules.\n")
    body = "You are a scout.\n\nReport files, not opinions.\n"
    fs.md(".pi/agents/scout.md", "name: scout\ndescription: d", body)
    contract = fs.discover(trust_project=True, personal=False).agents["scout"]
    assert contract.instructions == body.strip()
    assert contract.required_skills == ()


# --- Available tools -----------------------------------------------------------------------


def test_fixed_allowlist_maps_to_native_tools(fs) -> None:
    """Spec (pi-subagent-format.md): Child agent tools are validated against a fixed allowlist:"""
    expected = {"read": "read_file", "grep": "search", "find": "find", "ls": "list_files",
                "edit": "edit", "write": "write_file", "bash": "shell"}
    for pi_name, native in expected.items():
        contract = _pi(fs, f"name: a\ndescription: d\ntools: {pi_name}")
        assert contract.tools == frozenset({native}), pi_name
    groups = {pi: group_of(native) for pi, native in expected.items()}
    assert {groups[n] for n in ("read", "grep", "find", "ls")} == {ToolGroup.READ}
    assert {groups[n] for n in ("edit", "write")} == {ToolGroup.WRITE}
    assert groups["bash"] is ToolGroup.EXEC


@pytest.mark.parametrize("tools", ["read, subagent", "subagent", "[read, subagent]"])
def test_subagent_tool_always_rejected(fs, tools: str) -> None:
    """Spec (pi-subagent-format.md): The `subagent` tool is always rejected to prevent recursive
    delegation."""
    diag = fs.rejected_with(fs.load(fs.md(".pi/agents/a.md", f"name: a\ndescription: d\n"
                                          f"tools: {tools}"), PI), "tools")
    assert "subagent" in diag.reason


def test_pi_agent_can_never_delegate(fs) -> None:
    """Spec (pi-subagent-format.md): The `subagent` tool is always rejected to prevent recursive
    delegation."""
    target = _pi(fs, "name: t\ndescription: d", name="t")
    for index, header in enumerate(("name: a\ndescription: d", "name: b\ndescription: d\n"
                                                               "tools: read")):
        child = restrict(Capability.root(depth=4), _pi(fs, header, name=f"x{index}"))
        with pytest.raises(DelegationDenied):
            check_delegation(child, target)


def test_inheriting_agent_gets_everything_minus_subagent(fs) -> None:
    """Spec (pi-subagent-format.md): **Tool inheritance:** an agent WITHOUT an explicit `tools:`
    line inherits every tool the parent session has (minus `subagent`), including extension
    tools like `web_search`, `serena_*`, `munin_*`, `obsidian`, and `notebooklm`, and runs with
    the parent's extensions loaded.

    The delegate tool is neither shown to the model nor admitted by the dispatcher.
    """
    child = restrict(Capability.root(), _pi(fs, "name: a\ndescription: d"))
    assert "delegate" not in child.visible_tools()
    assert child.decide("delegate", "helper") is Action.DENY


def test_inheriting_agent_gets_extension_tools(fs) -> None:
    """Spec (pi-subagent-format.md): **Tool inheritance:** an agent WITHOUT an explicit `tools:`
    line inherits every tool the parent session has (minus `subagent`), including extension
    tools like `web_search`, `serena_*`, `munin_*`, `obsidian`, and `notebooklm`, and runs with
    the parent's extensions loaded."""
    extensions = ["serena_find", "munin_recall", "obsidian", "notebooklm"]
    parent = Capability.root(custom_tools=extensions)
    child = restrict(parent, _pi(fs, "name: a\ndescription: d"))
    assert set(extensions) | {"web_search", "read_file", "shell"} <= child.tools


def test_explicit_tools_validated_against_builtins_and_inherited(fs) -> None:
    """Spec (pi-subagent-format.md): An agent WITH an explicit `tools:` list is validated against
    built-ins ∪ the inherited set and, when the list contains only built-ins, runs in a lean
    loader with no extensions/skills loaded."""
    header = "name: a\ndescription: d\ntools: read, serena_find, web_search"
    fs.rejected_with(fs.load(fs.md(".pi/agents/a.md", header), PI), "tools")
    installed = Options(custom_tools=frozenset({"serena_find"}))
    contract = _pi(fs, header, options=installed)
    assert contract.tools == frozenset({"read_file", "serena_find", "web_search"})


def test_force_lean_tool_list(fs) -> None:
    """Spec (pi-subagent-format.md): To force an inheriting agent lean, set `tools: read, bash,
    edit, write, grep, find, ls`."""
    contract = _pi(fs, "name: a\ndescription: d\ntools: read, bash, edit, write, grep, find, ls")
    assert contract.tools == frozenset({"read_file", "shell", "edit", "write_file", "search",
                                        "find", "list_files"})


@pytest.mark.parametrize(("tools", "needle"), [
    ("read, grpe", "grpe"), ("Read", "case"), ("read, web-search", "web-search"),
    ("read, glob", "glob"), ("mcp__x__y", "mcp__x__y"),
])
def test_unknown_or_misspelled_tools_clear_error(fs, tools: str, needle: str) -> None:
    """Spec (pi-subagent-format.md): Unknown or misspelled tool names produce a clear error."""
    diag = fs.rejected_with(fs.load(fs.md(".pi/agents/a.md", f"name: a\ndescription: d\n"
                                          f"tools: {tools}"), PI), "tools")
    assert diag.severity is Severity.ERROR
    assert needle in diag.reason
    assert diag.line == 4


def test_duplicate_tool_names_deduplicated(fs) -> None:
    """Spec (pi-subagent-format.md): Duplicate names are deduplicated automatically."""
    outcome = fs.load(fs.md(".pi/agents/a.md", "name: a\ndescription: d\n"
                            "tools: read, grep, read , grep,read"), PI)
    assert outcome.status.value == "loaded"
    assert not fs.problems(outcome.diagnostics)
    assert outcome.agents[0].tools == frozenset({"read_file", "search"})


def test_read_only_service_execution(fs) -> None:
    """Spec (pi-subagent-format.md): Read-only service execution (used by `pi-review`) restricts
    tools to the read-only allowlist (including read-only extension tools when inherited)."""
    service = Capability.root(sandbox=SandboxMode.READ_ONLY)
    child = restrict(service, _pi(fs, "name: a\ndescription: d\ntools: read, grep, bash, edit"))
    assert child.tools == frozenset({"read_file", "search"})
    assert child.read_only


# --- Model resolution ----------------------------------------------------------------------


def test_resolution_order_model_then_models(fs) -> None:
    """Spec (pi-subagent-format.md): Resolution order is legacy `model`, then each `models` entry,
    then the authenticated parent model."""
    route = _pi(fs, """
        name: a
        description: d
        model: zai-coding-cn/glm-5.2
        models:
          - opencode-go/deepseek-v4-flash
          - nvidia/moonshotai/kimi-k2.6
    """).model
    assert [str(r) for r in route.candidates] == [
        "zai-coding-cn/glm-5.2", "opencode-go/deepseek-v4-flash", "nvidia/moonshotai/kimi-k2.6"]


def test_duplicate_candidates_ignored(fs) -> None:
    """Spec (pi-subagent-format.md): Duplicate candidates are ignored."""
    route = _pi(fs, """
        name: a
        description: d
        model: "@fast"
        models: ["@fast", "p/m", "@fast", "p/m"]
    """).model
    assert [str(r) for r in route.candidates] == ["@fast", "p/m"]
