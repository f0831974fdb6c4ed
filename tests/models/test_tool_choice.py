"""``tool_choice`` per provider and per agent (issue 31, D3), on the wire of both protocols.

The strict local protocol servers accept exactly what the real APIs document (OpenAI:
``auto``/``required``/``none``/``{type: function, function: {name}}``; Anthropic:
``{type: auto|any|tool|none}``, ``tool`` with a defined ``name``). A forcing choice is
released to ``auto`` once the conversation ends in a tool result, so a model told
``required`` can still give its final answer; whole runs show the order of choices.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from model_support import Harness
from pydantic import ValidationError
from servers import KEY

from executor.errors import ModelError
from executor.ledger import RunRecord, RunStatus
from executor.models import (
    AnthropicModel,
    Message,
    OpenAIChatModel,
    Sampling,
    ToolCall,
    ToolSchema,
)
from executor.run import run_agent
from policies.config import AgentSettings, ProviderConfig, UserConfig
from tests.timescale import scaled

READ = ToolSchema("read", "Read a file.", {"type": "object", "properties": {
    "path": {"type": "string"}}, "required": ["path"]})
START = [Message("system", "Be brief."), Message("user", "Read README.md")]
WIRE = {
    "openai": {"auto": "auto", "required": "required", "none": "none",
               "read": {"type": "function", "function": {"name": "read"}}},
    "anthropic": {"auto": {"type": "auto"}, "required": {"type": "any"},
                  "none": {"type": "none"}, "read": {"type": "tool", "name": "read"}},
}


def _model(harness: Harness, tool_choice: str | None = None) -> Any:
    cls = OpenAIChatModel if harness.protocol == "openai" else AnthropicModel
    return cls(model="test-model", base_url=harness.server.base_url, api_key=KEY,
               provider="local", timeout=scaled(5.0), max_retries=0, tool_choice=tool_choice)


@pytest.mark.parametrize("choice", ["auto", "required", "none", "read"])
def test_each_choice_goes_on_the_wire_as_the_api_documents(harness: Harness,
                                                            choice: str) -> None:
    harness.server.reply(harness.dialect.text("ok"))
    _model(harness).complete(START, [READ], sampling=Sampling(tool_choice=choice))
    assert harness.body(0)["tool_choice"] == WIRE[harness.protocol][choice]


def test_the_providers_choice_applies_and_a_requests_own_wins(harness: Harness) -> None:
    harness.server.reply(harness.dialect.text("a"), harness.dialect.text("b"))
    model = _model(harness, "required")
    model.complete(START, [READ], sampling=Sampling())
    model.complete(START, [READ], sampling=Sampling(tool_choice="read"))
    assert harness.body(0)["tool_choice"] == WIRE[harness.protocol]["required"]
    assert harness.body(1)["tool_choice"] == WIRE[harness.protocol]["read"]


def test_a_forcing_choice_is_released_after_a_tool_result(harness: Harness) -> None:
    harness.server.reply(harness.dialect.text("It says hi."))
    model = _model(harness, "required")
    read = ToolCall("call_1", "read", {"path": "README.md"})
    conversation = [*START, Message("assistant", "", (read,)),
                    Message("tool", "# Hi", tool_call_id="call_1", name="read")]
    model.complete(conversation, [READ], sampling=Sampling())
    assert harness.body(0)["tool_choice"] == WIRE[harness.protocol]["auto"]


def test_no_tools_no_choice(harness: Harness) -> None:
    harness.server.reply(harness.dialect.text("ok"))
    _model(harness, "required").complete(START, [], sampling=Sampling())
    assert "tool_choice" not in harness.body(0)


def test_a_named_tool_that_is_not_offered_fails_before_anything_is_sent(
        harness: Harness) -> None:
    with pytest.raises(ModelError) as caught:
        _model(harness, "shell").complete(START, [READ], sampling=Sampling())
    assert caught.value.code == "config" and "'shell'" in caught.value.message
    assert "offered: read" in caught.value.message
    assert harness.server.received == []


@pytest.mark.parametrize("value", ["", "Auto ", "any", "read file", "../x"])
def test_a_bad_tool_choice_in_the_config_is_refused_naming_the_forms(value: str) -> None:
    with pytest.raises(ValidationError, match="auto, required, none"):
        ProviderConfig(type="openai", base_url="http://127.0.0.1:1/v1", tool_choice=value)
    with pytest.raises(ValidationError, match="auto, required, none"):
        AgentSettings(tool_choice=value)


def test_the_config_file_reads_both_places() -> None:
    config = UserConfig.model_validate({
        "providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:1/v1",
                                "tool_choice": "required"}},
        "agents": {"scribe": {"tool_choice": "write_file"}}})
    assert config.providers["local"].tool_choice == "required"
    assert config.agents["scribe"].tool_choice == "write_file"
    assert replace(Sampling(), tool_choice=None).tool_choice is None


# -- whole runs ------------------------------------------------------------------------------

def _run(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
         provider_choice: str = "auto", agent_choice: str | None = None) -> RunRecord:
    settings = harness.run_settings(tmp_path, monkeypatch, tool_choice=provider_choice,
                                    agents={"a": AgentSettings(tool_choice=agent_choice)})
    return run_agent(settings, "a", "Read the README")


def test_a_required_model_calls_a_tool_first_and_can_still_finish(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness.server.reply(harness.dialect.tool_calls([("c1", "read_file",
                                                      {"path": "README.md"})]),
                         harness.dialect.text("It is a project."))
    record = _run(harness, tmp_path, monkeypatch, provider_choice="required")
    assert record.status is RunStatus.COMPLETED, record.error
    assert record.final_text == "It is a project."
    wire = WIRE[harness.protocol]
    assert [harness.body(n)["tool_choice"] for n in range(2)] == [wire["required"],
                                                                  wire["auto"]]


def test_the_agents_choice_wins_over_the_providers(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness.server.reply(harness.dialect.tool_calls([("c1", "read_file",
                                                      {"path": "README.md"})]),
                         harness.dialect.text("Read it."))
    _run(harness, tmp_path, monkeypatch, provider_choice="required", agent_choice="read_file")
    first = harness.body(0)["tool_choice"]
    named = json.dumps(first)
    assert "read_file" in named and first != WIRE[harness.protocol]["required"]
