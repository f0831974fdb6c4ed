"""pi-subagent-format.md at run time: what the loader reads must also happen.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped); the tests run real agents (host backend, scripted model) or the
real model routing, and look at what the model was sent and what ran.
"""

from __future__ import annotations

import pytest
from runtime_support import make_repo, run_in

from executor.errors import ModelError, RunError
from executor.ledger import find_run, ledger_dir
from executor.models import ScriptedModel, resolve_model
from executor.models.routing import expand_candidates
from executor.run.prepare import agent_model
from policies.config import UserConfig, load_user_config
from policies.contract import AgentFormat, MemoryKind, ModelRef

PI = AgentFormat.PI
READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}


def _pi(fs, name: str, header: str = "", body: str = "Do the work.\n") -> None:
    fs.md(f".pi/agents/{name}.md", f"name: {name}\ndescription: a pi agent\n{header}", body)


def test_read_only_overrides_the_tools_field(fs) -> None:
    """Spec (pi-subagent-format.md): `read-only`: Restricts tools to the read-only allowlist
    (`read`, `grep`, `find`, `ls` plus read-only extension tools when inherited — `web_*`,
    `serena_*`, `munin_*`, `fff*`, …). Overrides any `tools` field.

    ``tools: read, write, bash`` with ``sandbox: read-only`` runs with read, grep, find
    and ls (not just read): the model is offered exactly those, and a write is denied.
    """
    _pi(fs, "scout", "tools: read, write, bash\nsandbox: read-only")
    write = {"tool_calls": [{"name": "write_file", "arguments": {"path": "x", "content": "x"}}]}
    ran = run_in(fs, "scout", [write, {"text": "looked"}])
    assert {s.name for s in ran.requests[0].tools} == {"read_file", "search", "find",
                                                       "list_files"}
    assert ran.record.mode == "read-only"
    assert ran.record.denied_calls[0]["tool"] == "write_file"
    outcome = fs.load(fs.repo / ".pi/agents/scout.md", PI)
    assert any(d.code == "read_only_override" for d in outcome.diagnostics)


def test_no_compaction(fs) -> None:
    """Spec (pi-subagent-format.md): **No compaction**: avoids compaction token cost

    A pi agent keeps the whole conversation in every request, however long (other
    formats' default window would summarize steps older than eight).
    """
    _pi(fs, "worker")
    ran = run_in(fs, "worker", [READ] * 12 + [{"text": "done"}])
    assert ran.registry.agents["worker"].memory.kind is MemoryKind.FULL
    sizes = [len(r.messages) for r in ran.requests]
    assert sizes == [2 + 2 * n for n in range(13)]
    last = ran.requests[-1].messages
    assert not any("Summary of" in m.content for m in last)


def test_parent_model_is_the_last_fallback(fs) -> None:
    """Spec (pi-subagent-format.md): Resolution order is legacy `model`, then each `models`
    entry, then the authenticated parent model. Duplicate candidates are ignored.

    No candidate is available here (no such provider, a role whose only model has no
    provider): the agent runs on its parent's model instead of failing.
    """
    _pi(fs, "worker", 'model: nosuch/model\nmodels: ["@fast"]')
    contract = fs.agent(fs.repo / ".pi/agents/worker.md", PI)
    parent = ScriptedModel([{"text": "x"}], source="parent")
    config = UserConfig.model_validate({"roles": {"fast": "gone/tiny"}})
    assert resolve_model(contract.model, config=config, parent=parent) is parent


def test_no_candidate_error_lists_every_attempt_and_the_parent(fs) -> None:
    """Spec (pi-subagent-format.md): If no candidate is available, the error lists every
    attempted model."""
    _pi(fs, "worker", 'model: nosuch/model\nmodels: ["@fast"]')
    contract = fs.agent(fs.repo / ".pi/agents/worker.md", PI)
    config = UserConfig.model_validate({"roles": {"fast": "gone/tiny"}})
    with pytest.raises(ModelError) as raised:
        resolve_model(contract.model, config=config, parent=None)
    attempts = raised.value.context["attempts"]
    assert [a.split(":")[0] for a in attempts] == ["nosuch/model", "@fast -> gone/tiny",
                                                   "the parent's model"]


def test_role_chain_as_a_comma_string(fs) -> None:
    """Spec (pi-subagent-format.md): A role expands to an ordered fallback chain (string with
    commas, or array).

    A role in the user's config may be one comma-separated string; it expands in order,
    exactly like the array form.
    """
    path = fs.write(fs.tmp / "config.toml", '[roles]\nfast = "local/a, local/b:low"\n'
                    'smart = ["local/c"]\n')
    config = load_user_config(path)
    assert config.roles["fast"] == ("local/a", "local/b:low")
    expanded = expand_candidates([ModelRef(id="@fast")], roles=config.roles)
    assert [str(c).split(" -> ")[-1] for c in expanded] == ["local/a", "local/b:low"]


def test_instructions_task_contract_reaches_the_child(fs) -> None:
    """Spec (pi-subagent-format.md): Children do not automatically load repository
    instructions. Callers may pass an `instructions` task contract, truncated to 16 KB.

    The delegate tool takes ``instructions``; the child's first message carries them
    before its task. Its system prompt stays its body alone (pi: "the entire system
    prompt ... only what you write here").
    """
    _pi(fs, "reviewer", "", "Review only what you are asked.\n")
    fs.json(".zuno/zuno.json", {"agents": {"lead": {"description": "leads"}}})
    call = {"tool_calls": [{"name": "delegate", "arguments": {
        "agent": "reviewer", "prompt": "review src/", "instructions": "Never approve TODOs."}}]}
    ran = run_in(fs, "lead", [call, {"text": "reviewed"}, {"text": "lead done"}])
    delegate = next(s for s in ran.requests[0].tools if s.name == "delegate")
    assert "instructions" in delegate.parameters["properties"]
    child = ran.transcript(ran.record.children[0])
    assert child[0]["content"] == "Review only what you are asked."
    assert child[1]["role"] == "user"
    assert "Never approve TODOs." in child[1]["content"]
    assert child[1]["content"].endswith("\n\nreview src/")


def test_instructions_are_cut_at_16_kb(fs) -> None:
    """Spec (pi-subagent-format.md): Callers may pass an `instructions` task contract,
    truncated to 16 KB.

    A longer contract is cut at 16 KB (at a character boundary, multi-byte text
    included), and both the parent's tool result and the child's record say so.
    """
    _pi(fs, "reviewer")
    fs.json(".zuno/zuno.json", {"agents": {"lead": {"description": "leads"}}})
    contract = "é" * 9000 + "END"  # 18003 bytes of UTF-8
    call = {"tool_calls": [{"name": "delegate", "arguments": {
        "agent": "reviewer", "prompt": "review", "instructions": contract}}]}
    ran = run_in(fs, "lead", [call, {"text": "reviewed"}, {"text": "lead done"}])
    child_task = ran.transcript(ran.record.children[0])[1]["content"]
    kept = child_task.split("delegated to you\n\n", 1)[1].split("\n\nYou work in")[0]
    assert len(kept.encode("utf-8")) == 16 * 1024 and set(kept) == {"é"}
    assert "END" not in child_task
    result = ran.transcript()[3]["content"]
    assert "cut to 16 KB" in result
    child = find_run(ledger_dir(ran.repo), ran.record.children[0])
    assert any("cut to 16 KB" in note for note in child.notes)


@pytest.mark.parametrize("name", ["MyAgent", "my_agent", "my--agent", "-agent", "agent-"])
def test_name_is_kebab_case(fs, name: str) -> None:
    """Spec (pi-subagent-format.md): name: my-agent # Required. Unique identifier
    (kebab-case)."""
    fs.md(".pi/agents/x.md", f"name: {name}\ndescription: d")
    diagnostic = fs.rejected_with(fs.load(fs.repo / ".pi/agents/x.md", PI), "name")
    assert "kebab-case" in diagnostic.reason
    fs.md(".pi/agents/y.md", "name: my-agent-2\ndescription: d")
    assert fs.agent(fs.repo / ".pi/agents/y.md", PI).name == "my-agent-2"


# --- roles from pi's settings file ------------------------------------------------------------


LOCAL = {"providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}}}


def test_roles_defined_in_pi_settings_are_read(fs) -> None:
    """Spec (pi-subagent-format.md): `model`/`models` entries may reference *roles* instead of
    concrete models: `"@fast"`, `"@coder"`, `"@smart"`, or any role defined under
    `subagent.roles` in `~/.pi/agent/settings.json`. A role expands to an ordered fallback
    chain (string with commas, or array).

    A role of pi's own settings file expands for a pi agent, in order (nested roles
    too); the route carries the chains it names, so a run and ``agents show`` use the
    same ones. The user's corral config ``[roles]`` wins over a role of the same name.
    """
    fs.json(fs.env.pi_dir / "settings.json", {"theme": "dark", "subagent": {"roles": {
        "fast": "local/tiny, @spare", "@spare": ["local/spare"], "unused": "local/x"}}})
    _pi(fs, "worker", 'model: "@fast:low"')
    result = fs.discover(trust_project=True, personal=True)
    assert not fs.problems(result.diagnostics)
    contract = result.agents["worker"]
    assert contract.model.roles == {"fast": ("local/tiny", "@spare"), "spare": ("local/spare",)}
    model = agent_model(contract, config=UserConfig.model_validate(LOCAL), script=None,
                        override=None, parent=None)
    assert model.name == "local/tiny:low"
    mine = UserConfig.model_validate({**LOCAL, "roles": {"fast": ["local/mine"]}})
    assert agent_model(contract, config=mine, script=None, override=None,
                       parent=None).name == "local/mine:low"


def test_an_undefined_role_is_an_error_before_the_run_never_the_parent_model(fs, cli) -> None:
    """Spec (pi-subagent-format.md): `model`/`models` entries may reference *roles* instead of
    concrete models: `"@fast"`, `"@coder"`, `"@smart"`, or any role defined under
    `subagent.roles` in `~/.pi/agent/settings.json`.

    A role defined nowhere is no available model to fall back past: ``agents check``
    warns about it, and ``corral run`` stops before anything runs (exit 2, no record),
    never silently running the parent's model (pi's last fallback).
    """
    _pi(fs, "worker", 'model: "@nosuch"')
    config = fs.write(fs.tmp / "corral.toml", 'default_model = "local/qwen"\n'
                      '[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n')
    args = ("--root", str(fs.repo), "--trust-project", "--no-personal")
    checked = cli("agents", "check", *args, corral_config=config)
    assert "warning: .pi/agents/worker.md:4: model: role @nosuch is defined neither" in \
        checked.stdout
    make_repo(fs)
    ran = cli("run", "--agent", "worker", "--backend", "host", *args, "go",
              corral_config=config)
    error = ran.exception
    assert isinstance(error, RunError) and error.exit_code == 2
    assert "role @nosuch is not defined" in error.message
    assert not ledger_dir(fs.repo).exists() or not any(ledger_dir(fs.repo).iterdir())
