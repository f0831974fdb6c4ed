"""The conversation conformance suite: the definition of "an HTTP provider works".

Every test runs twice, against the OpenAI-compatible server and against the
Anthropic one (``harness``); the servers check every request strictly and
the fixture fails the test on any malformed request or unconsumed reply.
"""

from __future__ import annotations

import json
import socket
from dataclasses import replace

import pytest
from model_support import Harness
from servers import KEY, Reply

from executor.errors import ModelError
from executor.models import Message, RetryPolicy, Sampling, ToolCall, ToolSchema, Usage

READ = ToolSchema("read", "Read a file.", {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
GREP = ToolSchema("grep", "Search files.", {
    "type": "object", "properties": {"pattern": {"type": "string"}}})
SAMPLING = Sampling(max_tokens=512)
START = [Message("system", "Be brief."), Message("user", "Read the README.")]


def test_plain_text_answer(harness: Harness) -> None:
    harness.server.reply(harness.dialect.text("Hello.", usage=(12, 3)))
    response = harness.model().complete([Message("system", "Be brief."),
                                         Message("user", "Say hello.")], [], sampling=SAMPLING)
    assert (response.text, response.tool_calls, response.stop_reason) == ("Hello.", (), "end")
    assert response.usage == Usage(12, 3)
    assert response.model == "test-model"
    body = harness.body(0)
    assert body["model"] == "test-model" and body["max_tokens"] == 512
    assert "tools" not in body and "temperature" not in body
    if harness.protocol == "openai":
        assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Say hello."}]
    else:
        assert body["system"] == "Be brief."
        assert body["messages"] == [{"role": "user", "content": "Say hello."}]


EXPECTED_ROUND_TRIP = {
    "openai": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read the README."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "README.md"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "# Hi"},
    ],
    "anthropic": [
        {"role": "user", "content": "Read the README."},  # text alone: a plain string
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "read",
             "input": {"path": "README.md"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "# Hi"}]},
    ],
}
EXPECTED_TOOLS = {
    "openai": [{"type": "function", "function": {"name": "read", "description": "Read a file.",
                                                 "parameters": READ.parameters}}],
    "anthropic": [{"name": "read", "description": "Read a file.",
                   "input_schema": READ.parameters}],
}


def test_tool_call_round_trip(harness: Harness) -> None:
    harness.server.reply(harness.dialect.tool_calls([("call_1", "read", {"path": "README.md"})]),
                         harness.dialect.text("It says hi."))
    model = harness.model()
    first = model.complete(START, [READ], sampling=SAMPLING)
    assert first.stop_reason == "tool_calls"
    assert first.tool_calls == (ToolCall("call_1", "read", {"path": "README.md"}),)
    conversation = [*START, Message("assistant", first.text, first.tool_calls),
                    Message("tool", "# Hi", tool_call_id="call_1", name="read")]
    final = model.complete(conversation, [READ], sampling=SAMPLING)
    assert (final.text, final.stop_reason) == ("It says hi.", "end")
    sent = harness.body(1)
    assert sent["messages"] == EXPECTED_ROUND_TRIP[harness.protocol]
    assert sent["tools"] == EXPECTED_TOOLS[harness.protocol]
    if harness.protocol == "openai":
        assert sent["tool_choice"] == "auto"
    else:  # explicit: a translating proxy passes it on (LiteLLM to llama-cpp-python)
        assert sent["tool_choice"] == {"type": "auto"}
        assert sent["system"] == "Be brief."


def test_text_only_finalization_keeps_tools_and_forbids_calls(harness: Harness) -> None:
    """The session's last request after a step limit: the conversation holds tool calls,
    so the tools stay defined (Anthropic rejects tool blocks without them), and
    tool_choice none forbids new calls."""
    harness.server.reply(harness.dialect.text("Done: read README; nothing left."))
    model = harness.model()
    call = ToolCall("call_1", "read", {"path": "README.md"})
    conversation = [*START, Message("assistant", "", (call,)),
                    Message("tool", "# Hi", tool_call_id="call_1", name="read"),
                    Message("user", "Step limit reached: answer in text only.")]
    final = model.complete(conversation, [READ],
                           sampling=replace(SAMPLING, tool_choice="none"))
    assert final.text.startswith("Done") and not final.tool_calls
    sent = harness.body(0)
    assert sent["tools"] == EXPECTED_TOOLS[harness.protocol]
    expected = "none" if harness.protocol == "openai" else {"type": "none"}
    assert sent["tool_choice"] == expected


def test_several_tool_calls_in_one_turn(harness: Harness) -> None:
    harness.server.reply(
        harness.dialect.tool_calls([("c1", "read", {"path": "a.py"}),
                                    ("c2", "grep", {"pattern": "TODO"})], text="Looking."),
        harness.dialect.text("Done."))
    model = harness.model()
    first = model.complete(START, [READ, GREP], sampling=SAMPLING)
    assert first.text == "Looking."
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("c1", "read", {"path": "a.py"}), ("c2", "grep", {"pattern": "TODO"})]
    conversation = [*START, Message("assistant", first.text, first.tool_calls),
                    Message("tool", "print()", tool_call_id="c1", name="read"),
                    Message("tool", "denied: grep", tool_call_id="c2", name="grep",
                            is_error=True)]
    assert model.complete(conversation, [READ, GREP], sampling=SAMPLING).text == "Done."
    messages = harness.body(1)["messages"]
    if harness.protocol == "openai":
        assert messages[2]["content"] == "Looking."
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
        assert [m["tool_call_id"] for m in messages[3:]] == ["c1", "c2"]
    else:  # both results in ONE user message, the failure flagged
        assert messages[1]["content"][0] == {"type": "text", "text": "Looking."}
        assert messages[2] == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "print()"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "denied: grep",
             "is_error": True}]}


def test_invalid_tool_arguments_are_kept_raw(harness: Harness) -> None:
    harness.server.reply(harness.dialect.tool_calls([("c1", "read", '{"path": "a.py"')]),
                         harness.dialect.text("Sorry."))
    model = harness.model()
    first = model.complete(START, [READ], sampling=SAMPLING)
    assert first.tool_calls == (ToolCall("c1", "read", {}, raw_arguments='{"path": "a.py"'),)
    # the broken call goes back in the history, answered by a tool error: still well formed
    conversation = [*START, Message("assistant", "", first.tool_calls),
                    Message("tool", "arguments are not JSON", tool_call_id="c1", name="read",
                            is_error=True)]
    assert model.complete(conversation, [READ], sampling=SAMPLING).text == "Sorry."


def test_bad_request_is_not_retried(harness: Harness) -> None:
    harness.server.reply(harness.dialect.error(400, "max_tokens: too large"))
    with pytest.raises(ModelError) as caught:
        harness.model().complete(START, [], sampling=SAMPLING)
    error = caught.value
    assert (error.code, error.retryable) == ("bad_request", False)
    assert "max_tokens: too large" in error.message
    assert error.context["status"] == 400 and error.context["provider"] == "local"
    assert len(harness.server.received) == 1 and harness.sleeps == []


def test_auth_error_never_shows_the_key(harness: Harness) -> None:
    harness.server.reply(harness.dialect.error(401, f"Incorrect API key provided: {KEY}"))
    with pytest.raises(ModelError) as caught:
        harness.model().complete(START, [], sampling=SAMPLING)
    error = caught.value
    assert (error.code, error.retryable) == ("auth", False)
    rendered = [str(error), repr(error), json.dumps(error.to_dict()), repr(error.context),
                str(error.hint)]
    assert all(KEY not in text for text in rendered)
    assert "Incorrect API key provided: ***" in error.message
    assert error.context["url"] == harness.server.base_url + harness.dialect.path[
        len(harness.dialect.prefix):]


def test_a_key_cut_by_the_excerpt_leaves_no_trace(harness: Harness) -> None:
    harness.server.reply(harness.dialect.error(400, "x" * 290 + KEY + "y" * 400))
    with pytest.raises(ModelError) as caught:
        harness.model().complete(START, [], sampling=SAMPLING)
    rendered = json.dumps(caught.value.to_dict())
    assert KEY[:8] not in rendered and "***" in rendered


def test_rate_limit_is_retried_after_the_servers_delay(harness: Harness) -> None:
    harness.server.reply(harness.dialect.error(429, "slow down", headers={"Retry-After": "3"}),
                         harness.dialect.text("Hello."))
    assert harness.model().complete(START, [], sampling=SAMPLING).text == "Hello."
    assert harness.sleeps == [3.0]
    assert len(harness.server.received) == 2


@pytest.mark.parametrize("status", [500, 529])
def test_server_error_is_retried_with_backoff(harness: Harness, status: int) -> None:
    harness.server.reply(harness.dialect.error(status, "overloaded"),
                         harness.dialect.text("Hello."))
    model = harness.model(retry=RetryPolicy(max_retries=2, backoff_base=0.25))
    assert model.complete(START, [], sampling=SAMPLING).text == "Hello."
    assert len(harness.sleeps) == 1 and 0.125 <= harness.sleeps[0] <= 0.25
    assert len(harness.server.received) == 2
    assert harness.body(0) == harness.body(1)


def test_retry_after_is_capped(harness: Harness) -> None:
    harness.server.reply(harness.dialect.error(429, "later", headers={"Retry-After": "3600"}),
                         harness.dialect.text("Hello."))
    model = harness.model(retry=RetryPolicy(max_retries=1, retry_after_max=2.5))
    assert model.complete(START, [], sampling=SAMPLING).text == "Hello."
    assert harness.sleeps == [2.5]


@pytest.mark.parametrize(("status", "code"), [(503, "server"), (429, "rate_limited")])
def test_retries_are_bounded(harness: Harness, status: int, code: str) -> None:
    harness.server.reply(*[harness.dialect.error(status, "busy")] * 3)
    with pytest.raises(ModelError) as caught:
        harness.model(max_retries=2).complete(START, [], sampling=SAMPLING)
    assert (caught.value.code, caught.value.retryable) == (code, True)
    assert caught.value.context["attempts"] == 3
    assert len(harness.server.received) == 3 and len(harness.sleeps) == 2


def test_timeout(harness: Harness) -> None:
    harness.server.reply(Reply(body={}, delay=30))
    with pytest.raises(ModelError) as caught:
        harness.model(timeout=0.2, max_retries=0).complete(START, [], sampling=SAMPLING)
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)
    assert len(harness.server.received) == 1


def test_timeout_then_success(harness: Harness) -> None:
    harness.server.reply(Reply(body={}, delay=30), harness.dialect.text("Hello."))
    model = harness.model(timeout=0.2, max_retries=1)
    assert model.complete(START, [], sampling=SAMPLING).text == "Hello."
    assert len(harness.sleeps) == 1


def test_connection_refused(harness: Harness) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelError) as caught:
        harness.model(base_url=f"http://127.0.0.1:{port}", max_retries=1).complete(
            START, [], sampling=SAMPLING)
    assert (caught.value.code, caught.value.retryable) == ("connection", True)
    assert len(harness.sleeps) == 1


@pytest.mark.parametrize("body", ["<html>not an API</html>", {"unexpected": True}, [1, 2]])
def test_unparseable_answer_is_a_protocol_error(harness: Harness, body: object) -> None:
    harness.server.reply(Reply(body=body))
    with pytest.raises(ModelError) as caught:
        harness.model().complete(START, [], sampling=SAMPLING)
    assert (caught.value.code, caught.value.retryable) == ("protocol", False)
    assert harness.sleeps == []


def test_no_key_sends_no_credentials(harness: Harness, make_server: object) -> None:
    assert callable(make_server)
    keyless = make_server(harness.protocol, api_key=None)
    keyless.reply(harness.dialect.text("Local hello."))
    model = Harness(harness.protocol, keyless).model(api_key=None)
    assert model.complete(START, [], sampling=SAMPLING).text == "Local hello."
    assert "authorization" not in keyless.received[0].headers
    assert "x-api-key" not in keyless.received[0].headers
