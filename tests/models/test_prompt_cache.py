"""Prompts that cache (issue 31, D5) and one connection per provider per run.

Before, the system prompt named the run's random workspace path ahead of the tool
definitions, so no server could reuse a cached prefix (``cached_tokens: 4`` on every
request of a real llama.cpp server), and every attempt opened a new ``httpx.Client``
(28.9 ms of CPU and a new handshake per model turn). The strict local protocol servers
record each request and the TCP connection it came on, so the tests read what was sent.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from model_support import Harness
from servers import KEY, ProtocolServer, Reply

from executor.ledger import RunStatus
from executor.models import AnthropicModel, Message, Sampling, ToolSchema
from executor.run import run_agent
from policies.config import ProviderConfig

READ = ToolSchema("read_file", "Read a file.", {"type": "object", "properties": {}})


def _without_task(body: dict[str, Any]) -> dict[str, Any]:
    """The request minus its last message (the task: where the run works, then the
    prompt): what a prompt cache can reuse from one run to the next."""
    prefix = copy.deepcopy(body)
    prefix["messages"] = prefix["messages"][:-1]
    return prefix


def test_two_runs_of_an_agent_send_the_same_prefix_and_only_the_task_names_the_workspace(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = harness.run_settings(tmp_path, monkeypatch, tools="read_file, write_file")
    harness.server.reply(harness.dialect.text("one"), harness.dialect.text("two"))
    first = run_agent(settings, "a", "Say what this is")
    second = run_agent(settings, "a", "Say what this is")
    assert first.status is second.status is RunStatus.COMPLETED, (first.error, second.error)
    bodies = [harness.body(0), harness.body(1)]
    assert _without_task(bodies[0]) == _without_task(bodies[1])
    assert bodies[0]["tools"] == bodies[1]["tools"] and bodies[0]["tools"]
    tasks = [body["messages"][-1]["content"] for body in bodies]
    assert tasks[0] != tasks[1]  # each names its own workspace, after the stable prefix
    for task in tasks:
        assert task.startswith("You work in /") and task.endswith("\n\nSay what this is")
    system = (bodies[0]["system"] if harness.protocol == "anthropic"
              else bodies[0]["messages"][0]["content"])
    assert system == "Work."  # the definition's body alone: no path, nothing per run


def test_a_follow_up_says_the_workspace_once(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first task carries the context; a tool loop's later requests repeat the same
    first message (a cache hit within the run), not a second copy of it."""
    settings = harness.run_settings(tmp_path, monkeypatch, tools="read_file")
    harness.server.reply(
        harness.dialect.tool_calls([("c1", "read_file", {"path": "README.md"})]),
        harness.dialect.text("done"))
    record = run_agent(settings, "a", "Read the README")
    assert record.status is RunStatus.COMPLETED, record.error
    texts = [str(m["content"]) for m in harness.body(1)["messages"]]
    assert sum("You work in" in text for text in texts) == 1
    first_user = harness.body(0)["messages"][-1]["content"]
    assert first_user in texts  # the same bytes again, now inside the longer prefix


def test_anthropic_marks_the_stable_prefix_and_the_newest_message(
        make_server: Callable[..., ProtocolServer]) -> None:
    """``cache_control`` is Anthropic's (OpenAI-compatible servers cache by themselves)."""
    harness = Harness("anthropic", make_server("anthropic"))
    model = AnthropicModel(model="test-model", base_url=harness.server.base_url,
                           api_key=KEY, provider="local", max_retries=0, prompt_cache=True)
    harness.server.reply(harness.dialect.text("hi"))
    model.complete([Message("system", "Be brief."), Message("user", "Say hi")], [READ],
                   sampling=Sampling())
    body = harness.body(0)  # the strict server checks the breakpoints as the API does
    assert body["system"] == [{"type": "text", "text": "Be brief.",
                               "cache_control": {"type": "ephemeral"}}]
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "Say hi", "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in body["tools"][-1]  # the system mark covers the tools
    model.close()


def test_prompt_cache_is_on_only_for_anthropics_own_api_unless_configured() -> None:
    """A translating proxy (LiteLLM) hands marked blocks to an OpenAI-compatible server as
    content parts, which llama-cpp-python renders as text: so not by default there."""
    assert AnthropicModel(model="m", base_url="https://api.anthropic.com").prompt_cache
    assert not AnthropicModel(model="m", base_url="http://127.0.0.1:4000").prompt_cache
    assert AnthropicModel(model="m", base_url="http://127.0.0.1:4000",
                          prompt_cache=True).prompt_cache
    assert ProviderConfig(type="anthropic", base_url="http://x", prompt_cache=False
                          ).prompt_cache is False


def _cached_reply(harness: Harness, cached: int) -> Reply:
    reply = harness.dialect.text("done", usage=(100, 5))
    body = copy.deepcopy(reply.body)
    assert isinstance(body, dict)
    if harness.protocol == "openai":
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    else:  # Anthropic counts the cache's tokens apart from input_tokens
        body["usage"] |= {"input_tokens": 100 - cached, "cache_read_input_tokens": cached,
                          "cache_creation_input_tokens": 0}
    return Reply(reply.status, body, reply.headers)


def test_cached_tokens_reach_the_record(harness: Harness, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = harness.run_settings(tmp_path, monkeypatch, tools="read_file")
    harness.server.reply(_cached_reply(harness, 60))
    record = run_agent(settings, "a", "Say what this is")
    assert record.status is RunStatus.COMPLETED, record.error
    assert record.usage["input_tokens"] == 100  # the whole prompt, cached part included
    assert record.usage["cached_tokens"] == 60


def test_one_connection_serves_every_turn_of_a_run(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = harness.run_settings(tmp_path, monkeypatch, tools="read_file")
    harness.server.reply(
        harness.dialect.tool_calls([("c1", "read_file", {"path": "README.md"})]),
        harness.dialect.tool_calls([("c2", "read_file", {"path": "README.md"})]),
        harness.dialect.text("done"))
    record = run_agent(settings, "a", "Read the README twice")
    assert record.status is RunStatus.COMPLETED, record.error
    peers = {received.peer for received in harness.server.received}
    assert len(harness.server.received) == 3 and len(peers) == 1, peers


def test_a_closed_client_opens_a_new_connection_when_asked_again(harness: Harness) -> None:
    model: Any = harness.model()
    harness.server.reply(harness.dialect.text("a"), harness.dialect.text("b"),
                         harness.dialect.text("c"))
    start = [Message("system", "Be brief."), Message("user", "Say hi")]
    model.complete(start, [], sampling=Sampling())
    model.complete(start, [], sampling=Sampling())
    model.close()
    model.close()  # idempotent
    model.complete(start, [], sampling=Sampling())
    peers = [received.peer for received in harness.server.received]
    assert peers[0] == peers[1] != peers[2]
    model.close()
