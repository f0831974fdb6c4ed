"""``agents show --json`` and the model's view agree: a tool is effective only when a run
can call it. And the delegation tool's schema names the agents it may start.

Each test runs real agents of several formats (host backend, scripted model)
and compares the tool schemas of their first request with what ``agents show
--json`` prints under the same user config.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_support import run_in

from policies.config import UserConfig
from policies.contract import AgentFormat
from policies.loader import Severity

AGENT_ID = "00000002-0000-0000-0000-000000000025"


def _binding(name: str, index: int, **flags: Any) -> dict[str, Any]:
    return {"id": f"00000003-0000-0000-0000-{index:012}", "agentDefinitionId": AGENT_ID,
            "name": name, **flags}


def _team(fs) -> None:
    """Agents of five formats, each holding something a run cannot call."""
    fs.md(".claude/agents/researcher.md", """
        name: researcher
        description: Find evidence and cite it.
        tools: Read, Grep, Bash, WebFetch
    """)
    fs.md(".pi/agents/scout.md", """
        name: scout
        description: Look around, read-only.
        tools: read, write, bash
        sandbox: read-only
    """)
    fs.json(".zuno/zuno.json", {"agents": {
        "lead": {"description": "Leads the team.", "delegates": ["researcher", "scout"]},
        "solo": {"description": "Works alone.", "tools": ["read", "task", "github_search"],
                 "delegates": []},
    }})
    fs.md(".ngn/agents/auditor.md", """
        description: Audits without writing.
        mode: reviewer
    """)
    fs.json("initial-data/agent-definitions/desk.json", {
        "id": AGENT_ID, "name": "desk", "description": "A help desk.",
        "systemPrompt": "Use run_agent to hand work on.", "llmConfigName": "x",
        "toolSearch": {"enabled": True, "groups": ["web", "read"]},
        "tools": [_binding("run_agent", 1), _binding("file_read", 2),
                  _binding("file_search", 3, deferred=True),
                  _binding("web_search", 4, deferred=True)]})


CONFIG = UserConfig(custom_tools=("github_search",))


def _show(fs, cli, name: str) -> dict[str, Any]:
    config = fs.write(fs.tmp / "corral-config.toml", 'custom_tools = ["github_search"]\n')
    out = cli("agents", "show", name, "--json", "--root", str(fs.repo), "--trust-project",
              "--no-personal", corral_config=config)
    assert out.exit_code == 0, out.output
    return dict(json.loads(out.output)["effective"])


@pytest.mark.parametrize("agent", ["researcher", "scout", "lead", "solo", "auditor", "desk"])
def test_effective_tools_are_the_first_request_schemas(fs, cli, agent: str) -> None:
    """Spec (ngn-agent-definitions.md): Tool schemas and the executor both enforce the policy; a
    direct call to a hidden tool is denied.

    Spec (zuno-custom-agents.md): zuno debug agent <name> prints the effective resolved
    contract: model route, tool visibility, permission ruleset, and the agent-filtered Skill
    view with metadata and selected-body budgets.

    ``agents show --json``'s effective tools, under the names the model sees, are exactly
    the schemas of a real run's first request; nothing it lists is uncallable.
    """
    _team(fs)
    effective = _show(fs, cli, agent)
    ran = run_in(fs, agent, [{"text": "ok"}], config=CONFIG)
    sent = {schema.name for schema in ran.requests[0].tools}
    names = effective["names"]
    assert {names.get(tool, tool) for tool in effective["tools"]} == sent
    assert not {"web_fetch", "web_search", "github_search"} & set(effective["tools"])


def test_uncallable_tools_are_named_with_their_reason(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Tool schemas and the executor both enforce the policy; a
    direct call to a hidden tool is denied.

    What an agent holds but no run can call is listed apart, with the reason: web tools
    (no network), custom tools (no provider yet), deferred tools nothing can activate,
    ``delegate`` with nowhere to go.
    """
    _team(fs)
    researcher = _show(fs, cli, "researcher")
    assert "network" in researcher["unavailable"]["web_fetch"]
    solo = _show(fs, cli, "solo")
    assert "custom" in solo["unavailable"]["github_search"]
    assert "delegate" in solo["unavailable"]  # holds delegate, but delegates: [] allows none
    desk = _show(fs, cli, "desk")
    assert desk["deferred"] == ["search"]  # the read group: activatable
    assert "web_search" in desk["unavailable"]
    assert desk["names"] == {"delegate": "run_agent", "read_file": "file_read",
                             "search": "file_search"}
    call = [{"tool_calls": [{"name": "web_fetch", "arguments": {"url": "https://x.test"}}]},
            {"text": "could not"}]
    ran = run_in(fs, "researcher", call, config=CONFIG)
    assert ran.record.denied_calls[0]["tool"] == "web_fetch"
    assert "network" in ran.record.denied_calls[0]["reason"]


def test_loader_warns_about_tools_that_cannot_run(fs) -> None:
    """Spec (ngn-agent-definitions.md): The parser reports unmapped names rather than treating
    them as installed tools.

    A definition that grants a web tool or a custom tool loads, with a warning that says
    no run can call it and why.
    """
    path = fs.md(".claude/agents/web.md", """
        name: web
        description: Browses.
        tools: Read, WebFetch, WebSearch
    """)
    outcome = fs.load(path, AgentFormat.CLAUDE)
    assert outcome.status.value == "loaded"
    warned = {d.reason.split("'")[1]: d for d in outcome.diagnostics
              if d.code == "tool_cannot_run"}
    assert set(warned) == {"web_fetch", "web_search"}
    assert all(d.severity is Severity.WARNING and d.field == "tools" for d in warned.values())
    assert "no network" in warned["web_fetch"].reason
    from policies.loader import Options
    custom = fs.json(".zuno/zuno.json", {"agents": {"a": {"tools": ["read", "github_search"]}}})
    outcome = fs.load(custom, AgentFormat.ZUNO,
                      options=Options(custom_tools=frozenset({"github_search"})))
    assert [d.field for d in outcome.diagnostics if d.code == "tool_cannot_run"] == [
        "agents.a.tools"]


def test_delegate_schema_names_the_agents_and_their_descriptions(fs) -> None:
    """Spec (ngn-agent-definitions.md): Descriptions appear in the picker and the model's
    delegation tool schema."""
    fs.md(".ngn/agents/research.md", """
        name: research
        description: Find evidence and report it with file references.
    """)
    fs.md(".ngn/agents/fixer.md", """
        description: Fix one failing test.
    """)
    fs.md(".ngn/agents/hidden.md", """
        description: Not for delegation.
        subagent_available: false
    """)
    fs.md(".ngn/agents/lead.md", """
        description: Leads.
        allowed_agents: [research, fixer, hidden]
    """)
    ran = run_in(fs, "lead", [{"text": "ok"}])
    delegate = next(s for s in ran.requests[0].tools if s.name == "delegate")
    assert delegate.parameters["properties"]["agent"]["enum"] == ["fixer", "research"]
    assert "- research: Find evidence and report it with file references." in (
        delegate.description)
    assert "- fixer: Fix one failing test." in delegate.description
    assert "hidden" not in delegate.description



def test_approval_required_lists_every_tool_a_run_asks_for(fs, cli) -> None:
    """Spec (agent-definition-json.md): needsApproval true requires a human to approve every call
    before it runs (the turn waits for approval). Default false.

    Spec (zuno-custom-agents.md): permission object | null none Per-tool permissions for this
    agent

    ``effective.approval_required`` is every tool some call of which waits for a human:
    a catalog ``needsApproval`` binding and an ``ask`` rule alike (pattern-free or with a
    pattern; not one ``allow_all`` lifts, nor one a later pattern-free rule overrides).
    A run with no approver denies exactly those calls as needing approval.
    """
    fs.json(".zuno/zuno.json", {"agents": {
        "asker": {"description": "asks", "permission": {"rules": {
            "bash": {"git push *": "ask"}, "edit": "ask"}}},
        "lifted": {"description": "allow_all", "permission": {
            "mode": "allow_all", "rules": {"bash": "ask"}}},
        "overridden": {"description": "later rule", "permission": {"rules": {
            "bash": {"make *": "ask", "*": "allow"}}}},
    }})
    fs.json("initial-data/agent-definitions/desk.json", {
        "id": AGENT_ID, "name": "desk", "description": "A help desk.",
        "systemPrompt": "Work.", "llmConfigName": "x",
        "tools": [_binding("file_read", 1), _binding("file_write", 2, needsApproval=True)]})
    expected = {"asker": ["apply_patch", "edit", "shell", "write_file"], "lifted": [],
                "overridden": [],
                "desk": ["write_file"]}
    wire: dict[str, dict[str, str]] = {}
    for agent, tools in expected.items():
        shown = _show(fs, cli, agent)
        assert shown["approval_required"] == tools, agent
        wire[agent] = shown["names"]  # the model calls desk's write_file as file_write
    calls = {"shell": {"command": "git push origin"}, "edit": {
        "path": "README.md", "old_string": "hello", "new_string": "bye"},
        "write_file": {"path": "x.txt", "content": "x"},
        "apply_patch": {"patch": "--- /dev/null\n+++ b/y.txt\n@@ -0,0 +1 @@\n+y\n"}}
    for agent, tools in expected.items():
        names = wire[agent]
        script = [{"tool_calls": [{"name": names.get(tool, tool), "arguments": arguments}]}
                  for tool, arguments in calls.items()] + [{"text": "done"}]
        ran = run_in(fs, agent, script, config=CONFIG)
        canonical = {called: tool for tool, called in names.items()}
        asked = sorted(canonical.get(d["tool"], d["tool"]) for d in ran.record.denied_calls
                       if "needs approval" in d["reason"])
        assert asked == tools, (agent, ran.record.denied_calls)
