"""agent-definition-json.md: one JSON file per agent under initial-data/agent-definitions/,
every field, memoryConfig, toolSearch and tools[] bindings.

Each test's docstring opens with the spec sentence (or table row) it checks, verbatim
(only re-wrapped).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.capability import Capability, DelegationDenied, check_delegation, restrict
from policies.contract import (
    AgentContract,
    AgentFormat,
    AgentStatus,
    MemoryConfig,
    MemoryKind,
    ToolBinding,
)
from policies.loader import Severity, Status
from policies.permissions import Action, PermissionMode, PermissionPolicy

CAT = AgentFormat.CATALOG
DIR = "initial-data/agent-definitions"
AGENT_ID = "00000002-0000-0000-0000-000000000025"

#: The spec's example, verbatim.
EXAMPLE: dict[str, Any] = {
    "id": AGENT_ID,
    "namespace": {"value": "local"},
    "name": "research-lead",
    "description": "Research orchestrator. Breaks a question into sub-topics…",
    "systemPrompt": "You are a research lead. …",
    "welcomeMessage": "Hi! I'm a research lead. Give me a research question…",
    "llmConfigName": "agent-default",
    "maxIterations": 10,
    "status": "ACTIVE",
    "memoryConfig": {
        "kind": "auto_compact",
        "compactAtRatio": 0.8,
        "summaryPlacement": "USER_MESSAGE",
        "toolResultEviction": {"afterTurns": 2, "aboveTokens": 800},
    },
    "responseReviewers": [],
    "tools": [
        {
            "id": "00000003-0000-0000-0000-000000000250",
            "agentDefinitionId": AGENT_ID,
            "name": "list_agents",
            "description": "Lists all available agents in the current namespace.",
            "enabled": True,
        }
    ],
    "createdAt": "2025-01-01T00:00:00Z",
    "updatedAt": "2025-01-01T00:00:00Z",
}

MINIMAL: dict[str, Any] = {
    "id": AGENT_ID, "name": "research-lead", "description": "d", "systemPrompt": "p",
    "llmConfigName": "agent-default",
}


def _binding(name: str, index: int = 1, **flags: Any) -> dict[str, Any]:
    return {"id": f"00000003-0000-0000-0000-{index:012}", "agentDefinitionId": AGENT_ID,
            "name": name, **flags}


def _load(fs, data: dict[str, Any], file: str = "research-lead.json"):
    return fs.load(fs.json(f"{DIR}/{file}", data), CAT)


def _agent(fs, **changes: Any) -> AgentContract:
    data = {**MINIMAL, **changes}
    outcome = _load(fs, {k: v for k, v in data.items() if v is not _DROP})
    assert outcome.status is Status.LOADED, [d.render() for d in outcome.diagnostics]
    assert not fs.errors(outcome.diagnostics)
    return outcome.agents[0]


_DROP = object()


def _rejected(fs, field: str, **changes: Any) -> None:
    data = {**MINIMAL, **changes}
    outcome = _load(fs, {k: v for k, v in data.items() if v is not _DROP})
    fs.rejected_with(outcome, field)



# --- The file ------------------------------------------------------------------------------


def test_one_file_per_agent_in_initial_data(fs) -> None:
    """Spec (agent-definition-json.md): The format of a file in initial-data/agent-definitions/.
    One file per agent."""
    fs.json(f"{DIR}/research-lead.json", EXAMPLE)
    fs.json(f"{DIR}/helper.json", {**MINIMAL, "id": "00000002-0000-0000-0000-000000000026",
                                   "name": "helper"})
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"research-lead", "helper"}
    assert {c.origin.format for c in result.agents.values()} == {CAT}
    assert [len(o.agents) for o in result.outcomes] == [1, 1]
    many = fs.json(f"{DIR}/many.json", [MINIMAL, MINIMAL])
    assert fs.load(many, CAT).status is Status.REJECTED


def test_spec_example_loads(fs) -> None:
    """Spec (agent-definition-json.md): Example (trimmed)"""
    outcome = _load(fs, EXAMPLE)
    assert outcome.status is Status.LOADED
    assert not fs.problems(outcome.diagnostics)
    contract = outcome.agents[0]
    assert contract.name == "research-lead"
    assert contract.tools == frozenset({"list_agents"})


# --- Fields --------------------------------------------------------------------------------


def test_id_is_a_stable_uuid(fs) -> None:
    """Spec (agent-definition-json.md): id UUID Stable identifier. Use a fresh UUID for a new
    agent."""
    assert _agent(fs).id == AGENT_ID
    _rejected(fs, "id", id="research-lead-1")
    _rejected(fs, "id", id=_DROP)


def test_namespace_object(fs) -> None:
    """Spec (agent-definition-json.md): namespace object Tenant scope, e.g. { "value": "local" }.
    Identity is name + namespace."""
    assert _agent(fs, namespace={"value": "local"}).namespace == "local"
    _rejected(fs, "namespace", namespace="local")
    _rejected(fs, "namespace", namespace={"name": "local"})


def test_identity_is_name_plus_namespace(fs) -> None:
    """Spec (agent-definition-json.md): namespace object Tenant scope, e.g. { "value": "local" }.
    Identity is name + namespace."""
    fs.json(f"{DIR}/a.json", {**MINIMAL, "namespace": {"value": "local"}})
    fs.json(f"{DIR}/b.json", {**MINIMAL, "id": "00000002-0000-0000-0000-000000000026",
                              "namespace": {"value": "team"}})
    result = fs.discover(trust_project=True, personal=False)
    assert not [d for d in result.diagnostics if d.code == "collision"]
    assert sorted(c.namespace or "" for c in result.agents.values()) == ["local", "team"]


def test_name_unique_and_referenced_by_run_agent(fs) -> None:
    """Spec (agent-definition-json.md): name string Unique agent name; referenced by
    run_agent("<name>", …)."""
    lead = _agent(fs, tools=[_binding("run_agent")])
    assert lead.tools == frozenset({"delegate"})
    helper = _agent(fs, id="00000002-0000-0000-0000-000000000026", name="helper")
    check_delegation(restrict(Capability.root(), lead), helper)
    _rejected(fs, "name", name="research lead")
    _rejected(fs, "name", name=_DROP)


def test_description_shown_in_lists(fs) -> None:
    """Spec (agent-definition-json.md): description string Short summary shown in lists and to
    orchestrators."""
    assert _agent(fs, description="Short summary.").description == "Short summary."
    _rejected(fs, "description", description=_DROP)


def test_system_prompt_kept_with_template_vars(fs) -> None:
    """Spec (agent-definition-json.md): systemPrompt string The agent's role and instructions.
    Supports template vars like {{ current_date }}."""
    prompt = "You are a research lead. Today is {{ current_date }}."
    assert _agent(fs, systemPrompt=prompt).instructions == prompt
    _rejected(fs, "systemPrompt", systemPrompt=_DROP)


def test_welcome_message_optional(fs) -> None:
    """Spec (agent-definition-json.md): welcomeMessage string? Optional greeting shown when a
    session starts."""
    assert _agent(fs).welcome_message is None
    assert _agent(fs, welcomeMessage="Hi!").welcome_message == "Hi!"
    _rejected(fs, "welcomeMessage", welcomeMessage=["Hi"])


def test_llm_config_name_selects_config(fs) -> None:
    """Spec (agent-definition-json.md): llmConfigName string Which LLM config to use (e.g.
    agent-default).

    Documented choice (``catalog.py``): the config name is a model role ``@<name>``
    resolved by the user's config.
    """
    route = _agent(fs, llmConfigName="agent-default").model
    assert [str(r) for r in route.candidates] == ["@agent-default"]
    assert route.candidates[0].is_role
    _rejected(fs, "llmConfigName", llmConfigName=_DROP)
    _rejected(fs, "llmConfigName", llmConfigName="agent default!")


def test_max_iterations_is_the_step_limit(fs) -> None:
    """Spec (agent-definition-json.md): maxIterations int Max tool-loop rounds per turn."""
    assert _agent(fs, maxIterations=10).steps == 10
    assert _agent(fs).steps is None
    for bad in (0, -1, 2.5, "10", True):
        _rejected(fs, "maxIterations", maxIterations=bad)


@pytest.mark.parametrize("status", ["DRAFT", "ACTIVE", "DEPRECATED"])
def test_status_values(fs, status: str) -> None:
    """Spec (agent-definition-json.md): status enum DRAFT, ACTIVE (usable) or DEPRECATED."""
    outcome = _load(fs, {**MINIMAL, "status": status})
    assert outcome.status is Status.LOADED
    assert outcome.agents[0].status is AgentStatus(status)


@pytest.mark.parametrize("status", [
    "active", "RETIRED", 1,
    pytest.param(""),
])
def test_status_other_values_rejected(fs, status: object) -> None:
    """Spec (agent-definition-json.md): status enum DRAFT, ACTIVE (usable) or DEPRECATED."""
    _rejected(fs, "status", status=status)


def test_active_agent_is_usable(fs) -> None:
    """Spec (agent-definition-json.md): status enum DRAFT, ACTIVE (usable) or DEPRECATED."""
    active = _agent(fs, status="ACTIVE")
    assert active.user_invocable
    check_delegation(Capability.root(), active)


@pytest.mark.parametrize("status", ["DRAFT", "DEPRECATED"])
def test_only_active_agents_are_usable(fs, status: str) -> None:
    """Spec (agent-definition-json.md): status enum DRAFT, ACTIVE (usable) or DEPRECATED.

    ``AgentStatus`` documents "only ``ACTIVE`` agents are usable by default": neither the
    user nor another agent may start a DRAFT or DEPRECATED one.
    """
    contract = fs.agent(fs.json(f"{DIR}/x.json", {**MINIMAL, "status": status}), CAT)
    assert not contract.user_invocable
    with pytest.raises(DelegationDenied):
        check_delegation(Capability.root(), contract)


def test_deprecated_status_is_reported(fs) -> None:
    """Spec (agent-definition-json.md): status enum DRAFT, ACTIVE (usable) or DEPRECATED."""
    outcome = _load(fs, {**MINIMAL, "status": "DEPRECATED"})
    assert fs.problems(outcome.diagnostics, "status")


def test_response_reviewers_optional_empty_for_none(fs) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none."""
    assert _agent(fs).response_reviewers == ()
    assert _agent(fs, responseReviewers=[]).response_reviewers == ()
    reviewed = _agent(fs, responseReviewers=["answer-relevance-checker"])
    assert reviewed.response_reviewers == ("answer-relevance-checker",)
    _rejected(fs, "responseReviewers", responseReviewers="answer-relevance-checker")


def test_tools_are_the_tools_it_may_call(fs) -> None:
    """Spec (agent-definition-json.md): tools array The tools this agent may call (see below)."""
    contract = _agent(fs, tools=[_binding("file_read", 1), _binding("web_search", 2),
                                 _binding("run_agent", 3)])
    assert contract.tools == frozenset({"read_file", "web_search", "delegate"})
    child = restrict(Capability.root(), contract)
    assert child.tools == contract.tools
    assert child.decide("shell", "ls") is Action.DENY
    assert _agent(fs).tools == frozenset()
    _rejected(fs, "tools", tools={"name": "file_read"})


def test_created_updated_are_bookkeeping(fs) -> None:
    """Spec (agent-definition-json.md): createdAt / updatedAt timestamp Bookkeeping."""
    stamps = {"createdAt": "2025-01-01T00:00:00Z", "updatedAt": "2025-02-01T00:00:00Z"}
    contract = _agent(fs, **stamps)
    assert contract.extras == stamps
    root = Capability.root()
    assert restrict(root, contract) == restrict(root, _agent(fs))


def test_unknown_top_level_field_reported(fs) -> None:
    """Spec (agent-definition-json.md): Field Type Description

    A field outside the table is reported (never silently dropped); a misspelling of a
    restricting field rejects.
    """
    outcome = _load(fs, {**MINIMAL, "owner": "team-a"})
    assert fs.problems(outcome.diagnostics, "owner")
    _rejected(fs, "max_iterations", max_iterations=3)


# --- memoryConfig --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["none", "windowed", "summarizing_window", "auto_compact",
                                  "full"])
def test_memory_kinds(fs, kind: str) -> None:
    """Spec (agent-definition-json.md): kind One of none, windowed (sliding window),
    summarizing_window, auto_compact (summarize when full), full (keep everything)."""
    assert _agent(fs, memoryConfig={"kind": kind}).memory.kind is MemoryKind(kind)


@pytest.mark.parametrize("kind", ["sliding", "AUTO_COMPACT", "autoCompact", 1])
def test_memory_other_kinds_rejected(fs, kind: object) -> None:
    """Spec (agent-definition-json.md): kind One of none, windowed (sliding window),
    summarizing_window, auto_compact (summarize when full), full (keep everything)."""
    _rejected(fs, "memoryConfig.kind", memoryConfig={"kind": kind})


def test_memory_omitted_is_summarizing_window(fs) -> None:
    """Spec (agent-definition-json.md): When memoryConfig is omitted the runtime uses the
    summarizing_window default — not auto_compact."""
    assert _agent(fs).memory == MemoryConfig()
    assert _agent(fs).memory.kind is MemoryKind.SUMMARIZING_WINDOW
    assert _agent(fs, memoryConfig={}).memory.kind is MemoryKind.SUMMARIZING_WINDOW


def test_compact_at_ratio_for_auto_compact(fs) -> None:
    """Spec (agent-definition-json.md): compactAtRatio For auto_compact: compact when the window
    reaches this fraction of the budget (e.g. 0.8)."""
    memory = _agent(fs, memoryConfig={"kind": "auto_compact", "compactAtRatio": 0.8}).memory
    assert memory.compact_at_ratio == 0.8
    for bad in (1.5, -0.1, "0.8"):
        _rejected(fs, "memoryConfig.compactAtRatio",
                  memoryConfig={"kind": "auto_compact", "compactAtRatio": bad})
    elsewhere = _load(fs, {**MINIMAL, "memoryConfig": {"kind": "full", "compactAtRatio": 0.5}})
    assert fs.problems(elsewhere.diagnostics, "memoryConfig.compactAtRatio")


@pytest.mark.parametrize("placement", ["USER_MESSAGE", "SYSTEM_PROMPT"])
def test_summary_placement_values(fs, placement: str) -> None:
    """Spec (agent-definition-json.md): summaryPlacement Where the summary goes — USER_MESSAGE
    (auto-compact default) or SYSTEM_PROMPT (summarizing-window default)."""
    memory = _agent(fs, memoryConfig={"kind": "auto_compact",
                                      "summaryPlacement": placement}).memory
    assert memory.summary_placement == placement
    _rejected(fs, "memoryConfig.summaryPlacement",
              memoryConfig={"kind": "auto_compact", "summaryPlacement": placement.lower()})


def test_tool_result_eviction(fs) -> None:
    """Spec (agent-definition-json.md): toolResultEviction Drop bulky tool results: afterTurns
    (age) and aboveTokens (size)."""
    memory = _agent(fs, memoryConfig={"kind": "auto_compact", "toolResultEviction": {
        "afterTurns": 2, "aboveTokens": 800}}).memory
    assert memory.tool_result_eviction is not None
    assert (memory.tool_result_eviction.after_turns,
            memory.tool_result_eviction.above_tokens) == (2, 800)
    _rejected(fs, "memoryConfig.toolResultEviction.afterTurns",
              memoryConfig={"toolResultEviction": {"afterTurns": -1}})
    _rejected(fs, "memoryConfig.toolResultEviction.age",
              memoryConfig={"toolResultEviction": {"age": 2}})


# --- toolSearch ----------------------------------------------------------------------------


def test_tool_search_grants_tool_search_for_groups(fs) -> None:
    """Spec (agent-definition-json.md): toolSearch object? Optional: { "enabled": true, "groups":
    ["web", …] } — gives the agent the tool_search tool so it can activate deferred tools from the
    listed groups on demand."""
    contract = _agent(fs, toolSearch={"enabled": True, "groups": ["web", "github"]},
                      tools=[_binding("web_search", 1, deferred=True)])
    assert "tool_search" in contract.tools
    assert contract.tool_search_groups == ("web", "github")
    assert restrict(Capability.root(), contract).decide("tool_search") is Action.ALLOW
    disabled = _agent(fs, toolSearch={"enabled": False, "groups": ["web"]})
    assert "tool_search" not in disabled.tools
    assert "tool_search" not in _agent(fs).tools
    _rejected(fs, "toolSearch", toolSearch={"enabled": "yes"})
    _rejected(fs, "toolSearch", toolSearch={"enabled": True, "groups": "web"})


# --- tools[] -------------------------------------------------------------------------------


def test_each_entry_grants_one_tool(fs) -> None:
    """Spec (agent-definition-json.md): Each entry grants the agent one tool."""
    contract = _agent(fs, tools=[_binding("file_read", 1), _binding("file_write", 2)])
    assert contract.tools == frozenset({"read_file", "write_file"})
    assert [b.name for b in contract.tool_bindings] == ["read_file", "write_file"]


def test_binding_name_mapping_and_unknown_names(fs) -> None:
    """Spec (agent-definition-json.md): name Tool name, e.g. web_search, run_agent, file_read."""
    contract = _agent(fs, tools=[_binding("web_search", 1), _binding("run_agent", 2),
                                 _binding("file_read", 3)])
    assert contract.tools == frozenset({"web_search", "delegate", "read_file"})
    _rejected(fs, "tools", tools=[_binding("file_raed")])
    _rejected(fs, "tools", tools=[_binding("File_Read")])
    _rejected(fs, "tools", tools=[{"id": "00000003-0000-0000-0000-000000000001"}])


def test_binding_agent_definition_id_is_the_owner(fs) -> None:
    """Spec (agent-definition-json.md): agentDefinitionId The owning agent's id."""
    other = {**_binding("file_read"), "agentDefinitionId": "00000002-0000-0000-0000-000000000099"}
    _rejected(fs, "tools", tools=[other])


def test_binding_id_is_a_uuid(fs) -> None:
    """Spec (agent-definition-json.md): id UUID for this tool binding."""
    _rejected(fs, "tools", tools=[{**_binding("file_read"), "id": "binding-1"}])


def test_binding_description_overrides_default(fs) -> None:
    """Spec (agent-definition-json.md): description Shown to the model; can override the default
    description."""
    contract = _agent(fs, tools=[_binding("web_search", description="Search the news only.")])
    assert contract.tool_bindings[0].description == "Search the news only."
    assert _agent(fs, tools=[_binding("web_search")]).tool_bindings[0].description is None


def test_binding_enabled_makes_tool_callable(fs) -> None:
    """Spec (agent-definition-json.md): enabled true to make the tool callable."""
    contract = _agent(fs, tools=[_binding("file_read", 1, enabled=True),
                                 _binding("file_write", 2, enabled=False)])
    assert contract.tools == frozenset({"read_file"})
    child = restrict(Capability.root(), contract)
    assert child.decide("read_file", "a.py") is Action.ALLOW
    assert child.decide("write_file", "a.py") is Action.DENY
    assert "write_file" not in child.visible_tools()
    _rejected(fs, "tools", tools=[_binding("file_read", enabled="true")])


def test_binding_overrides_kept_per_agent(fs) -> None:
    """Spec (agent-definition-json.md): overrides Optional per-agent config map for the tool, e.g.
    { "baseDir": "/tmp" }. Which keys a tool accepts is shown in the Admin UI tool catalog.

    The overrides a tool accepts (``policies/overrides.py``) are kept per binding; what
    they do at run time is tested in ``test_catalog_runtime.py``.
    """
    contract = _agent(fs, tools=[_binding("file_read", overrides={"baseDir": "src",
                                                                  "maxResultChars": 100})])
    assert contract.tool_bindings[0].overrides == {"baseDir": "src", "maxResultChars": 100}
    _rejected(fs, "tools", tools=[_binding("file_read", overrides=["baseDir"])])


def test_binding_deferred_default_false(fs) -> None:
    """Spec (agent-definition-json.md): deferred true keeps the tool out of the prompt until the
    agent's tool_search activates it — for large tool sets like MCP bundles. Default false."""
    plain, deferred = _agent(fs, tools=[_binding("web_search", 1),
                                        _binding("web_fetch", 2, deferred=True)]).tool_bindings
    assert plain.deferred is False
    assert deferred.deferred is True
    _rejected(fs, "tools", tools=[_binding("web_fetch", deferred=1)])


def test_binding_needs_approval_requires_a_human(fs) -> None:
    """Spec (agent-definition-json.md): needsApproval true requires a human to approve every call
    before it runs (the turn waits for approval). Default false."""
    contract = _agent(fs, tools=[_binding("file_write", 1, needsApproval=True),
                                 _binding("file_read", 2)])
    assert contract.approval_required == frozenset({"write_file"})
    child = restrict(Capability.root(), contract)
    assert child.decide("write_file", "a.py") is Action.ASK
    assert child.decide("read_file", "a.py") is Action.ALLOW
    allow_all = Capability.root(policy=PermissionPolicy(mode=PermissionMode.ALLOW_ALL))
    assert restrict(allow_all, contract).decide("write_file", "b.py") is Action.ASK
    _rejected(fs, "tools", tools=[_binding("file_write", needsApproval="yes")])


def test_needs_approval_survives_delegation(fs) -> None:
    """Spec (agent-definition-json.md): needsApproval true requires a human to approve every call
    before it runs (the turn waits for approval). Default false.

    A child of an agent whose binding needs approval keeps needing it.
    """
    parent_contract = _agent(fs, tools=[_binding("file_write", 1, needsApproval=True)])
    parent = restrict(Capability.root(), parent_contract)
    child_id = "00000002-0000-0000-0000-000000000026"
    child_contract = _agent(fs, id=child_id, name="child", tools=[
        {**_binding("file_write", 1), "agentDefinitionId": child_id}])
    child = restrict(parent, child_contract)
    assert child.decide("write_file", "a.py") is Action.ASK


def test_binding_defaults(fs) -> None:
    """Spec (agent-definition-json.md): Field Description

    Per-binding defaults: ``deferred`` and ``needsApproval`` false (as stated), ``enabled``
    true when omitted (the documented choice of ``ToolBinding``).
    """
    binding = _agent(fs, tools=[_binding("file_read")]).tool_bindings[0]
    assert binding == ToolBinding(name="read_file", wire_name="file_read")
    data = copy.deepcopy(EXAMPLE)
    data["tools"][0]["extra"] = True
    outcome = _load(fs, data)
    assert outcome.status is Status.REJECTED
    assert any(d.severity is Severity.ERROR and "extra" in d.reason
               for d in outcome.diagnostics)
