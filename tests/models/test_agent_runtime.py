"""What an agent definition says reaches the provider's wire, through a whole run.

A zuno agent runs end to end (host backend) against the strict local protocol
servers of both providers; the servers refuse anything malformed (a tool
block without tool definitions, an unexpected body key), and each test reads
the JSON bodies they received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from model_support import Harness
from servers import KEY

from executor.ledger import RunRecord, RunStatus, ledger_dir
from executor.run import RunSettings, run_agent
from policies.config import ProviderConfig, UserConfig
from policies.loader import Environment, discover
from sandbox.config import HostConfig, Limits
from tests.backends import git


def _run(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         agents: dict[str, Any], agent: str = "a", *, model: str | None = None,
         variants: dict[str, dict[str, Any]] | None = None, **top: Any) -> RunRecord:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# Project\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    (repo / ".zuno").mkdir()
    (repo / ".zuno/zuno.json").write_text(json.dumps({**top, "agents": agents}))
    monkeypatch.setenv("CORRAL_TEST_KEY", KEY)
    provider = ProviderConfig(type=harness.protocol, base_url=harness.server.base_url,  # type: ignore[arg-type]
                              api_key_env="CORRAL_TEST_KEY", max_retries=0,
                              **({"variants": variants} if variants else {}))
    config = UserConfig(providers={"local": provider}, default_model="local/test-model")
    env = Environment(home=tmp_path / "home", xdg_config=tmp_path / "home/.config",
                      pi_dir=tmp_path / "home/.pi/agent")
    registry = discover(repo, trust_project=True, personal=False, env=env)
    settings = RunSettings(root=repo, backend=HostConfig(limits=Limits(timeout_seconds=60)),
                           config=config, registry=registry, ledger=ledger_dir(repo), env=env,
                           trust_project=True, state_root=tmp_path / "state",
                           model_override=model)
    return run_agent(settings, agent, "go")


READ_CALL = [("c1", "read_file", {"path": "README.md"})]


def test_finalization_request_defines_no_tools(harness: Harness, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec (zuno-custom-agents.md): When the limit is exhausted and the model still requests
    continuation, Zuno sends one additional text-only request with no tools, asking for a
    concise account of completed work, remaining work, evidence, and blockers.

    Both providers accept it: the conversation's tool calls are sent as text (Anthropic
    refuses tool blocks in a request without tools), and neither ``tools`` nor
    ``tool_choice`` is in the body.
    """
    harness.server.reply(harness.dialect.tool_calls(READ_CALL),
                         harness.dialect.text("Done: read README. Left: nothing."))
    record = _run(harness, tmp_path, monkeypatch, {"a": {"steps": 1,
                                                         "model": "local/test-model"}})
    assert record.status is RunStatus.STEP_LIMIT, record.error
    first, last = harness.body(0), harness.body(1)
    assert "tools" in first
    assert "tools" not in last and "tool_choice" not in last
    assert "read_file" in json.dumps(last["messages"])  # the call, written out as text


#: A request field each protocol takes, for options and variants.
OPTION = {"openai": ("seed", 7), "anthropic": ("top_k", 40)}
#: A variant per protocol: fields a named variant sends.
VARIANT = {"openai": {"reasoning_effort": "low", "seed": 1},
           "anthropic": {"top_k": 5, "temperature": 0.1}}


def test_options_reach_the_provider(harness: Harness, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec (zuno-custom-agents.md): Unknown keys are not rejected here. The agents map sweeps any
    key it does not name into options and keeps it verbatim, which is how provider-specific
    settings reach the SDK without the schema having to enumerate them.

    Explicit options and a swept key both reach the request body; an explicit setting
    (``temperature``) wins over the same option.
    """
    key, value = OPTION[harness.protocol]
    harness.server.reply(harness.dialect.text("ok"))
    record = _run(harness, tmp_path, monkeypatch, {"a": {
        "model": "local/test-model", "temperature": 0.5,
        "options": {"temperature": 0.9}, key: value}})
    assert record.status is RunStatus.COMPLETED, record.error
    body = harness.body(0)
    assert body[key] == value
    assert body["temperature"] == 0.5


def test_variant_applies_with_the_configured_model(harness: Harness, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec (zuno-custom-agents.md): variant string | null none Default model variant, applied
    only with the agent's configured model

    A variant is a named set of request fields in the provider's config
    (``[providers.P.variants.NAME]``); the agent's own options win over it.
    """
    harness.server.reply(harness.dialect.text("ok"))
    key, value = OPTION[harness.protocol]
    record = _run(harness, tmp_path, monkeypatch, {"a": {
        "model": "local/test-model", "variant": "fast", "options": {key: value}}},
        variants={"fast": VARIANT[harness.protocol]})
    assert record.status is RunStatus.COMPLETED, record.error
    body = harness.body(0)
    for field, expected in VARIANT[harness.protocol].items():
        assert body[field] == (value if field == key else expected)


def test_variant_and_reasoning_have_no_effect_on_a_route_selected_elsewhere(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec (zuno-custom-agents.md): reasoning and variant apply only with the agent's
    configured model. Setting either without a model is not an error, but it has no effect on a
    route selected elsewhere.

    Without a model the agent runs on the user's default model, and with ``--model`` on
    the override: neither request carries the variant's fields or the reasoning level.
    """
    harness.server.reply(harness.dialect.text("ok"), harness.dialect.text("ok"))
    variants = {"fast": VARIANT[harness.protocol]}
    agents = {"bare": {"variant": "fast", "reasoning": "high"},
              "modelled": {"model": "local/other", "variant": "fast", "reasoning": "high"}}
    first = _run(harness, tmp_path, monkeypatch, agents, "bare", variants=variants)
    assert first.status is RunStatus.COMPLETED, first.error
    second = _run(harness, tmp_path / "2", monkeypatch, agents, "modelled", variants=variants,
                  model="local/test-model")
    assert second.status is RunStatus.COMPLETED, second.error
    for n in (0, 1):
        body = harness.body(n)
        assert not set(VARIANT[harness.protocol]) & set(body)
        assert "reasoning_effort" not in body


def test_an_undefined_variant_fails_before_the_run(harness: Harness, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec (zuno-custom-agents.md): variant string | null none Default model variant, applied
    only with the agent's configured model

    A variant the provider does not define is a user error naming the config table to
    add; no request is sent.
    """
    from executor.errors import RunError
    with pytest.raises(RunError, match="variant 'turbo' is not defined") as raised:
        _run(harness, tmp_path, monkeypatch, {"a": {"model": "local/test-model",
                                                    "variant": "turbo"}})
    assert "[providers.local.variants.turbo]" in (raised.value.hint or "")
    assert harness.server.received == []
