"""Provider-specific mapping the conformance suite does not share: sampling, reasoning, quirks."""

from __future__ import annotations

from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import pytest
from model_support import Harness
from servers import ProtocolServer, Reply

from executor.errors import ModelError
from executor.models import Message, Sampling, ToolCall, ToolSchema, with_level
from executor.models.http import redact_url

Factory = Callable[..., ProtocolServer]
START = [Message("user", "Go.")]


def _harness(make_server: Factory, protocol: str) -> Harness:
    return Harness(protocol, make_server(protocol))


@pytest.mark.parametrize(("level", "effort"), [("off", "none"), ("minimal", "minimal"),
                                               ("high", "high"), ("max", "xhigh")])
def test_openai_sampling_and_reasoning_effort(make_server: Factory, level: str,
                                              effort: str) -> None:
    h = _harness(make_server, "openai")
    h.server.reply(h.dialect.text("ok"))
    h.model().complete(START, [], sampling=Sampling(temperature=0.2, top_p=0.9,
                                                    reasoning=level, max_tokens=64))
    body = h.body(0)
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.2, 0.9, 64)
    assert body["reasoning_effort"] == effort


def test_a_level_suffix_wins_over_the_contracts_reasoning(make_server: Factory) -> None:
    h = _harness(make_server, "openai")
    h.server.reply(h.dialect.text("ok"))
    model = with_level(h.model(), "high")
    assert model.name == "local/test-model:high"
    model.complete(START, [], sampling=Sampling(reasoning="low"))
    assert h.body(0)["reasoning_effort"] == "high"


def test_anthropic_sampling_without_reasoning(make_server: Factory) -> None:
    h = _harness(make_server, "anthropic")
    h.server.reply(h.dialect.text("ok"))
    h.model().complete(START, [], sampling=Sampling(temperature=0.5, top_p=0.8,
                                                    reasoning="high", max_tokens=64))
    body = h.body(0)
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.5, 0.8, 64)
    assert "thinking" not in body and "reasoning_effort" not in body


def test_anthropic_system_messages_and_user_text_after_results(make_server: Factory) -> None:
    h = _harness(make_server, "anthropic")
    h.server.reply(h.dialect.text("ok"))
    call = ToolCall("t1", "read", {"path": "x"})
    h.model().complete([Message("system", "Rule one."), Message("user", "Go."),
                        Message("system", "Rule two."), Message("assistant", "", (call,)),
                        Message("tool", "data", tool_call_id="t1"),
                        Message("user", "Also check y.")],
                       [ToolSchema("read", "Read.", {"type": "object", "properties": {}})],
                       sampling=Sampling())
    body = h.body(0)
    assert body["system"] == "Rule one.\n\nRule two."
    assert body["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "data"},
        {"type": "text", "text": "Also check y."}]}


def test_anthropic_overloaded_error_type_in_context(make_server: Factory) -> None:
    h = _harness(make_server, "anthropic")
    h.server.reply(h.dialect.error(529, "Overloaded"))
    with pytest.raises(ModelError) as caught:
        h.model(max_retries=0).complete(START, [], sampling=Sampling())
    assert caught.value.code == "server" and caught.value.retryable
    assert caught.value.context["error_type"] == "overloaded_error"
    assert caught.value.context["status"] == 529


@pytest.mark.parametrize(("protocol", "body", "stop"), [
    ("openai", {"choices": [{"message": {"content": "cut"}, "finish_reason": "length"}]},
     "length"),
    ("openai", {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        "finish_reason": "stop"}]}, "tool_calls"),
    ("openai", {"choices": [{"message": {"content": "x"}, "finish_reason": "content_filter"}]},
     "other"),
    ("anthropic", {"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"},
     "length"),
    ("anthropic", {"content": [], "stop_reason": "refusal"}, "other"),
    ("anthropic", {"content": [{"type": "text", "text": "x"}], "stop_reason": "stop_sequence"},
     "end"),
])
def test_stop_reasons_are_normalized(make_server: Factory, protocol: str,
                                     body: dict[str, Any], stop: str) -> None:
    h = _harness(make_server, protocol)
    h.server.reply(Reply(body=body))
    response = h.model().complete(START, [], sampling=Sampling())
    assert response.stop_reason == stop
    assert response.model == "test-model"  # the configured name when the answer has none


def test_retry_after_as_http_date_and_ms(make_server: Factory) -> None:
    h = _harness(make_server, "openai")
    h.server.reply(h.dialect.error(429, "a", headers={"retry-after-ms": "1500"}),
                   h.dialect.error(503, "b", headers={"Retry-After": formatdate(usegmt=True)}),
                   h.dialect.text("ok"))
    assert h.model().complete(START, [], sampling=Sampling()).text == "ok"
    assert h.sleeps[0] == 1.5
    assert 0 <= h.sleeps[1] <= 1  # a date in the past or now: no wait


def test_redact_url_drops_credentials() -> None:
    assert redact_url("https://user:pw@example.com:8443/v1/x?key=abc#f") == (
        "https://example.com:8443/v1/x")
    assert redact_url("http://[::1]:80/v1") == "http://[::1]:80/v1"
