"""zuno-custom-agents.md at run time: what the loader reads must also happen.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped); the tests run real agents (host backend, scripted model) and look
at what the model was sent and what the run recorded.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from runtime_support import run_in

from executor.cli.watch import watch_definitions
from executor.errors import RunError
from executor.ledger import RunStatus, find_run, ledger_dir
from executor.run.prepare import agent_model
from executor.run.session import FINALIZE_PROMPT
from policies.config import UserConfig
from policies.contract import AgentFormat
from tests.timescale import scaled

READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}


def _zuno(fs, agents: dict[str, Any], rel: str = ".zuno/zuno.json", **top: Any) -> None:
    fs.json(rel, {**top, "agents": agents})


# --- steps ---------------------------------------------------------------------------------


def test_step_limit_sends_one_request_with_no_tools(fs) -> None:
    """Spec (zuno-custom-agents.md): When the limit is exhausted and the model still requests
    continuation, Zuno sends one additional text-only request with no tools, asking for a
    concise account of completed work, remaining work, evidence, and blockers.

    The last request defines no tools at all (not tools with a "none" choice), and its
    messages carry no tool-call blocks, which a provider would refuse without tools.
    """
    _zuno(fs, {"a": {"steps": 2}})
    ran = run_in(fs, "a", [READ, READ, {"text": "Done: read it twice. Left: nothing."}])
    *working, last = ran.requests
    assert [len(r.tools) > 0 for r in working] == [True, True]
    assert last.tools == ()
    assert all(not m.tool_calls and m.role != "tool" for m in last.messages)
    assert last.messages[-1].role == "user" and last.messages[-1].content.endswith(
        FINALIZE_PROMPT)
    assert "[tool call read_file" in last.messages[2].content
    assert "# Project" in last.messages[3].content  # the tool result, as text
    assert ran.record.final_text.startswith("Done")


def test_step_limit_is_not_reported_as_completed(fs) -> None:
    """Spec (zuno-custom-agents.md): It does not silently raise or reset the limit.

    A run stopped by its limit says so: its status is ``step_limit``, not ``completed``
    (the summary is not the answer to the task).
    """
    _zuno(fs, {"a": {"steps": 1}})
    ran = run_in(fs, "a", [READ, {"text": "Done: one read. Left: the rest."}])
    assert ran.record.status is RunStatus.STEP_LIMIT
    assert ran.record.steps == 1 and len(ran.record.audit) == 1
    answered = run_in(fs, "a", [{"text": "no tools needed"}])
    assert answered.record.status is RunStatus.COMPLETED


# --- configuration layers ------------------------------------------------------------------

GLOBAL_RV = {"description": "Reviews a diff.", "prompt": "Review like a hawk.", "steps": 3,
             "tools": ["read", "grep"], "permission": {"rules": {"shell": "deny"}}}


def test_project_layer_merges_over_the_global_entry(fs) -> None:
    """Spec (zuno-custom-agents.md): tools is an exact allowlist, not an addition. Setting it
    replaces whatever the role would otherwise expose, and because arrays replace across
    configuration layers, a project layer setting tools discards the global list entirely.

    Only the array is replaced: the project entry ``{"rv": {"tools": ["read"]}}`` keeps
    the global entry's description, prompt and steps (objects merge), and a run shows it.
    """
    fs.json(fs.env.xdg_config / "zuno/zuno.json", {"agents": {"rv": GLOBAL_RV}})
    _zuno(fs, {"rv": {"tools": ["read"]}})
    ran = run_in(fs, "rv", [READ, READ, READ, {"text": "summary"}], personal=True)
    contract = ran.registry.agents["rv"]
    assert contract.tools == frozenset({"read_file"})
    assert (contract.description, contract.instructions, contract.steps) == (
        "Reviews a diff.", "Review like a hawk.", 3)
    assert contract.origin.source == ".zuno/zuno.json"
    assert contract.origin.layers == ("~/.config/zuno/zuno.json",)
    assert ran.requests[0].messages[0].content.startswith("Review like a hawk.")
    assert ran.record.steps == 3 and ran.record.status is RunStatus.STEP_LIMIT


def test_project_layer_cannot_drop_a_global_restriction_by_omission(fs) -> None:
    """Spec (zuno-custom-agents.md): because arrays replace across configuration layers, a
    project layer setting tools discards the global list entirely.

    Attack: a repository redefines the user's ``rv`` with only a description, hoping the
    user's ``permission`` deny and ``tools`` allowlist go with the rest of the entry.
    Objects merge, so they stay: the shell stays denied, the write tools absent.
    """
    fs.json(fs.env.xdg_config / "zuno/zuno.json", {"agents": {"rv": GLOBAL_RV}})
    _zuno(fs, {"rv": {"description": "Now does everything.", "permission": {"mode": "allow_all"}}})
    attack = [{"tool_calls": [{"name": "shell", "arguments": {"command": "id"}}]},
              {"tool_calls": [{"name": "write_file", "arguments": {"path": "x", "content": "x"}}]},
              {"text": "tried"}]
    ran = run_in(fs, "rv", attack, personal=True)
    contract = ran.registry.agents["rv"]
    assert contract.description == "Now does everything."
    assert contract.tools == frozenset({"read_file", "search"})
    assert [d["tool"] for d in ran.record.denied_calls] == ["shell", "write_file"]
    assert {s.name for s in ran.requests[0].tools} == {"read_file", "search"}


def test_markdown_layers_and_nested_project_directories(fs) -> None:
    """Spec (zuno-custom-agents.md): Or as Markdown with frontmatter, discovered under
    {agent,agents}/**/*.md in the global config directory and every project .zuno directory.

    Nested ``.zuno`` directories are project layers too (shallower first, so a deeper one
    merges over it); within a directory the Markdown agent merges over the ``zuno.json``
    entry of the same name. Hidden directories and ``node_modules`` are not searched.
    """
    _zuno(fs, {"svc": {"description": "root map", "steps": 4, "tools": ["read"]}})
    fs.md(".zuno/agents/svc.md", "description: root markdown", "Root prompt.\n")
    fs.md("packages/api/.zuno/agents/svc.md", "tools: [read, grep]", "API prompt.\n")
    fs.md("packages/api/.zuno/agents/only-nested.md", "description: deep")
    fs.md("node_modules/dep/.zuno/agents/evil.md", "description: a dependency's agent")
    fs.md(".cache/.zuno/agents/hidden.md", "description: hidden")
    result = fs.discover(trust_project=True, personal=False)
    svc = result.agents["svc"]
    assert (svc.description, svc.steps, svc.instructions) == ("root markdown", 4, "API prompt.")
    assert svc.tools == frozenset({"read_file", "search"})
    assert svc.origin.source == "packages/api/.zuno/agents/svc.md"
    assert svc.origin.layers == (".zuno/zuno.json", ".zuno/agents/svc.md")
    assert "only-nested" in result.agents
    assert "evil" not in result.agents and "hidden" not in result.agents
    untrusted = fs.discover(trust_project=False, personal=False)
    assert "only-nested" not in untrusted.agents


def test_an_invalid_project_layer_never_replaces_a_valid_one(fs) -> None:
    """Spec (zuno-custom-agents.md): because arrays replace across configuration layers, a
    project layer setting tools discards the global list entirely.

    A layer is checked on its own before it merges: a project entry with a bad field is
    rejected with its error, and the global definition stays as it was.
    """
    fs.json(fs.env.xdg_config / "zuno/zuno.json", {"agents": {"rv": GLOBAL_RV}})
    _zuno(fs, {"rv": {"tools": ["read", "no_such_tool"]}})
    result = fs.discover(trust_project=True)
    assert fs.errors(result.diagnostics, "agents.rv.tools")
    assert result.agents["rv"].tools == frozenset({"read_file", "search"})
    assert result.agents["rv"].origin.scope.value == "personal"


# --- related top-level keys ----------------------------------------------------------------


def test_a_disabled_agent_is_not_listed_as_runnable(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): disable removes a built-in agent from the roster. That is the
    intended way to drop a role you do not want available, rather than trying to strip its tools
    one by one.

    A run refuses a disabled agent, as the top-level agent and as a delegation target;
    ``agents list`` says the same (no ``u``, no ``s``, and why), as text and as JSON, and
    it is not offered to a delegating agent.
    """
    _zuno(fs, {"gone": {"description": "dropped", "disable": True},
               "boss": {"description": "delegates"}})
    with pytest.raises(RunError, match="disabled"):
        run_in(fs, "gone", [{"text": "x"}])
    ran = run_in(fs, "boss", [{"tool_calls": [{"name": "delegate", "arguments": {
        "agent": "gone", "prompt": "go"}}]}, {"text": "alone"}])
    assert ran.record.children == [] and ran.record.denied_calls
    offered = next(s for s in ran.requests[0].tools if s.name == "delegate")
    assert "gone" not in offered.parameters["properties"]["agent"]["enum"]
    args = ("--root", str(fs.repo), "--trust-project", "--no-personal")
    listed = cli("agents", "list", *args).stdout.splitlines()
    at = next(i for i, line in enumerate(listed) if line.startswith("gone "))
    assert listed[at].split()[1] == "---"
    assert listed[at + 1] == "    [not runnable: it is disabled]"
    assert next(line for line in listed if line.startswith("boss ")).split()[1] == "-us"
    data = json.loads(cli("agents", "list", "--json", *args).output)
    gone = next(a for a in data["agents"] if a["name"] == "gone")
    assert gone["runnable"] == {"user": False, "subagent": False, "why_not": "it is disabled"}


def test_default_agent_may_be_markdown_and_is_used_when_none_is_named(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): default_agent string | null none Agent to use when none is
    named. Must be a primary agent

    It may name a Markdown agent (the zuno.json's own agents still load), and a run that
    names no agent runs it, through the library and the CLI.
    """
    _zuno(fs, {"helper": {"description": "helps", "mode": "subagent"}}, default_agent="main")
    fs.md(".zuno/agents/main.md", "description: the main agent\nmode: primary", "Be main.\n")
    ran = run_in(fs, None, [{"text": "main here"}])
    assert ran.record.agent == "main" and ran.record.final_text == "main here"
    assert "helper" in ran.registry.agents
    script = fs.write(fs.tmp / "s.yaml", "- text: from the cli\n")
    out = cli("run", "--root", str(fs.repo), "--trust-project", "--no-personal",
              "--backend", "host", "--script", str(script), "--json", "go")
    assert out.exit_code == 0, out.output
    assert '"agent": "main"' in out.output
    listed = cli("agents", "list", "--json", "--root", str(fs.repo), "--trust-project",
                 "--no-personal")
    assert json.loads(listed.output)["default_agent"] == "main"


def test_no_agent_and_no_default_is_a_clear_error(fs) -> None:
    """Spec (zuno-custom-agents.md): default_agent string | null none Agent to use when none is
    named. Must be a primary agent"""
    _zuno(fs, {"a": {}})
    with pytest.raises(RunError, match="no default_agent"):
        run_in(fs, None, [{"text": "x"}])


def _two_levels(fs, **top: Any) -> None:
    _zuno(fs, {"boss": {"description": "delegates"}, "helper": {"description": "helps"}}, **top)


DELEGATE = {"tool_calls": [{"name": "delegate", "arguments": {"agent": "helper",
                                                              "prompt": "help"}}]}


def test_subagent_depth_in_zuno_json_lowers_the_limit(fs) -> None:
    """Spec (zuno-custom-agents.md): subagent_depth integer | null 1 Maximum subagent nesting
    depth

    ``subagent_depth: 0`` in a zuno.json is not ignored: no agent may delegate (the tool
    is not even offered), although the user's config allows one level.
    """
    _two_levels(fs, subagent_depth=0)
    ran = run_in(fs, "boss", [DELEGATE, {"text": "alone"}])
    assert ran.registry.subagent_depth == 0
    assert "delegate" not in {s.name for s in ran.requests[0].tools}
    assert ran.record.children == []
    assert "depth" in ran.record.denied_calls[0]["reason"]


def test_subagent_depth_that_is_not_a_number_fails_closed(fs) -> None:
    """Spec (zuno-custom-agents.md): subagent_depth integer | null 1 Maximum subagent nesting
    depth

    A value that is not an integer >= 0 is an error on that key, and delegation is off
    until it is fixed (never the user's default).
    """
    _two_levels(fs, subagent_depth="two")
    result = fs.discover(trust_project=True, personal=False)
    assert fs.errors(result.diagnostics, "subagent_depth")
    assert result.subagent_depth == 0
    assert {"boss", "helper"} <= set(result.agents)


# --- model settings ------------------------------------------------------------------------


def test_reasoning_applies_only_with_the_configured_model(fs) -> None:
    """Spec (zuno-custom-agents.md): reasoning and variant apply only with the agent's
    configured model. Setting either without a model is not an error, but it has no effect on a
    route selected elsewhere."""
    _zuno(fs, {"bare": {"reasoning": "high"},
               "modelled": {"reasoning": "high", "model": "local/m"}})
    bare = run_in(fs, "bare", [{"text": "x"}])
    assert bare.requests[0].sampling.reasoning is None
    modelled = run_in(fs, "modelled", [{"text": "x"}])
    assert modelled.requests[0].sampling.reasoning == "high"


def test_options_reach_the_request(fs) -> None:
    """Spec (zuno-custom-agents.md): Unknown keys are not rejected here. The agents map sweeps any
    key it does not name into options and keeps it verbatim, which is how provider-specific
    settings reach the SDK without the schema having to enumerate them."""
    _zuno(fs, {"a": {"options": {"seed": 7}, "top_k": 40}})
    ran = run_in(fs, "a", [{"text": "x"}])
    assert dict(ran.requests[0].sampling.options) == {"seed": 7, "top_k": 40}


def test_options_cannot_set_what_corral_alone_sends(fs) -> None:
    """Spec (zuno-custom-agents.md): options object | null none Provider options, including every
    swept unknown key

    Attack: options that would replace the conversation, the tools or the model
    (``tools``, ``messages``, ``model``, ``stream``) are refused by name when the agent
    loads; they never reach a request.
    """
    for entry, field in (({"options": {"tools": []}}, "agents.a.options"),
                         ({"options": {"model": "other/expensive"}}, "agents.a.options"),
                         ({"messages": []}, "agents.a.messages"),
                         ({"stream": True}, "agents.a.stream")):
        outcome = fs.load(fs.json(".zuno/zuno.json", {"agents": {"a": entry}}), AgentFormat.ZUNO)
        assert outcome.agents == [], entry
        assert fs.errors(outcome.diagnostics, field), [d.render() for d in outcome.diagnostics]


def test_check_watch_sees_a_nested_zuno_layer(fs) -> None:
    """Spec (zuno-custom-agents.md): Or as Markdown with frontmatter, discovered under
    {agent,agents}/**/*.md in the global config directory and every project .zuno directory.

    ``agents check --watch`` re-checks when a definition in a nested ``.zuno`` directory
    changes (waits on state, not sleeps).
    """
    fs.md("packages/api/.zuno/agents/svc.md", "description: before")
    runs: list[int] = []
    ran = threading.Condition()
    stop = threading.Event()

    def check() -> None:
        with ran:
            runs.append(len(runs))
            ran.notify_all()

    thread = threading.Thread(target=watch_definitions, args=(fs.repo, fs.env, check),
                              kwargs={"stop": stop, "personal": False}, daemon=True)
    thread.start()
    with ran:
        assert ran.wait_for(lambda: len(runs) >= 1, timeout=scaled(10))
    fs.md("packages/api/.zuno/agents/svc.md", "description: after")
    with ran:
        assert ran.wait_for(lambda: len(runs) >= 2, timeout=scaled(10))
    stop.set()
    thread.join(timeout=scaled(10))
    assert not thread.is_alive()


# --- delegates: each agent's own exact allowlist --------------------------------------------


def _chain(fs, **top: Any) -> None:
    _zuno(fs, {"lead": {"description": "leads", "delegates": ["mid"]},
               "mid": {"description": "middle", "delegates": ["leaf"]},
               "leaf": {"description": "leaf"},
               "other": {"description": "not on mid's list"}}, **top)


def _to(agent: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "delegate", "arguments": {"agent": agent, "prompt": "go"}}]}


def test_delegates_is_each_agents_own_exact_allowlist(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): delegates string[] | null none Exact child-agent allowlist
    for direct delegation and workflows

    With ``lead -> [mid]``, ``mid -> [leaf]`` and two levels of nesting, mid delegates to
    leaf: its own list decides, not the intersection of every ancestor's (which was
    empty). Within its own list only: mid cannot reach ``other``, and lead cannot reach
    leaf directly. ``agents show mid`` says exactly what mid may do in the run.
    """
    _chain(fs, subagent_depth=2)
    ran = run_in(fs, "lead", [_to("mid"), _to("leaf"), {"text": "leaf done"},
                              _to("other"), {"text": "mid done"},
                              _to("leaf"), {"text": "lead done"}],
                 config=UserConfig(subagent_depth=2))
    ledger = ledger_dir(ran.repo)
    mid = find_run(ledger, ran.record.children[0])
    assert mid.agent == "mid" and len(mid.children) == 1
    leaf = find_run(ledger, mid.children[0])
    assert leaf.agent == "leaf" and leaf.final_text == "leaf done"
    assert [d["tool"] for d in mid.denied_calls] == ["delegate"]
    assert "allowed: leaf" in mid.denied_calls[0]["reason"]
    assert "allowed: mid" in ran.record.denied_calls[0]["reason"]
    # What mid's model was offered is what `agents show mid` says it may do.
    offered = next(s for s in ran.requests[1].tools if s.name == "delegate")
    assert offered.parameters["properties"]["agent"]["enum"] == ["leaf"]
    fs.write(fs.tmp / "corral-config.toml", "subagent_depth = 2\n")
    shown = json.loads(cli("agents", "show", "mid", "--json", "--root", str(fs.repo),
                           "--trust-project", "--no-personal").output)
    assert shown["effective"]["delegates_to"] == ["leaf"]
    assert "delegate" in shown["effective"]["tools"]


def test_an_exact_allowlist_never_widens_the_parents_capability(fs) -> None:
    """Spec (zuno-custom-agents.md): The rule that governs everything below: an agent contract
    can only narrow.

    mid's own list names leaf, but mid runs under an ngn lead whose ``allowed_agents:
    [mid]`` restricts every descendant (ngn: "the intersection of its own restrictions,
    the parent's permissions at creation, subsequent ancestor restrictions"): the exact
    list cannot reach past it. And with the user's default depth (1) mid delegates to
    nobody, whatever its list says.
    """
    _chain(fs, subagent_depth=2)
    fs.md(".ngn/agents/boss.md", "description: an ngn lead\nallowed_agents: [mid]")
    ran = run_in(fs, "boss", [_to("mid"), _to("leaf"), {"text": "mid done"},
                              {"text": "boss done"}], config=UserConfig(subagent_depth=2))
    mid = find_run(ledger_dir(ran.repo), ran.record.children[0])
    assert mid.children == [] and "no agent may be delegated to" in \
        mid.denied_calls[0]["reason"]
    assert "delegate" not in {s.name for s in ran.requests[1].tools}
    shallow = run_in(fs, "lead", [_to("mid"), _to("leaf"), {"text": "mid done"},
                                  {"text": "lead done"}])
    mid = find_run(ledger_dir(shallow.repo), shallow.record.children[0])
    assert mid.children == [] and "depth" in mid.denied_calls[0]["reason"]


# --- model routing: presets ------------------------------------------------------------------

PROVIDERS = {"providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}}}


def _model_of(contract: Any, parent: str | None = "local/parent") -> str:
    config = UserConfig.model_validate({**PROVIDERS, "default_model": parent})
    return agent_model(contract, config=config, script=None, override=None, parent=None).name


def test_the_active_presets_agent_route_applies_when_the_agent_has_no_model(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): An agent's model is the most specific route. When it is
    absent, the active preset's agent route applies, then the parent session model.

    ``explorer`` (no model) runs the active preset's route, with the route's reasoning;
    ``deep`` keeps its own model; ``plain`` (not in the preset) runs the parent's. The
    agent's own ``reasoning`` does not apply on a preset's route (it goes with its
    configured model only), and ``agents show`` prints the route a run takes.
    """
    _zuno(fs, {"explorer": {"description": "explores", "reasoning": "low"},
               "deep": {"description": "thinks", "model": "local/own"},
               "plain": {"description": "inherits"}},
          preset="house",
          presets={"house": {"agents": {"explorer": {"model": "local/fast", "reasoning": "high"},
                                        "deep": "local/big"}},
                   "other": {"agents": {"plain": "local/other"}}})
    result = fs.discover(trust_project=True, personal=False)
    assert not fs.problems(result.diagnostics)
    agents = result.agents
    assert _model_of(agents["explorer"]) == "local/fast:high"
    assert _model_of(agents["deep"]) == "local/own"
    assert _model_of(agents["plain"]) == "local/parent"
    ran = run_in(fs, "explorer", [{"text": "x"}])
    assert ran.requests[0].sampling.reasoning is None  # its own "low" is not sent
    shown = cli("agents", "show", "explorer", "--root", str(fs.repo), "--trust-project",
                "--no-personal")
    assert "model        local/fast:high (preset house)" in shown.output
    as_json = json.loads(cli("agents", "show", "explorer", "--json", "--root", str(fs.repo),
                             "--trust-project", "--no-personal").output)
    assert as_json["model_route"]["preset"] == "house"


@pytest.mark.parametrize(("top", "field"), [
    ({"preset": "nosuch", "presets": {"house": {"agents": {}}}}, "preset"),
    ({"preset": "house", "presets": {"house": {"explorer": "local/fast"}}},
     "presets.house.explorer"),
    ({"preset": "house", "presets": {"house": {"agents": {}, "variant": "fast"}}},
     "presets.house.variant"),
    ({"preset": "house", "presets": {"house": {"agents": {"explorer": {
        "model": "local/fast", "variant": "x"}}}}}, "presets.house.agents.explorer"),
    ({"presets": ["house"]}, "presets"),
], ids=["unknown-active", "flat-form", "variant", "choice-variant", "not-a-map"])
def test_a_preset_that_cannot_apply_is_an_error_never_ignored(fs, top: dict[str, Any],
                                                               field: str) -> None:
    """Spec (zuno-custom-agents.md): When it is absent, the active preset's agent route
    applies, then the parent session model. Presets are the better tool for routing a whole
    team — see Model routing — because they keep model choices in one place instead of
    scattered across agent definitions.

    A ``presets`` key no longer loads silently: a preset that cannot route (an unknown
    active preset, a flat body, a provider-specific ``variant``) is an error on its key,
    and the agents still load, inheriting.
    """
    _zuno(fs, {"explorer": {"description": "explores"}}, **top)
    result = fs.discover(trust_project=True, personal=False)
    found = fs.errors(result.diagnostics, field)
    assert found and found[0].file == ".zuno/zuno.json", [d.render() for d in
                                                          result.diagnostics]
    assert result.agents["explorer"].model.inherit
