"""A server's "your request is invalid" is reported once, never retried, and names the field.

Each answer below is in the shape a real server sends (llama-cpp-python's is recorded
verbatim from the server: ``llama_cpp_validation_500.json``); the strict protocol
servers play them back. Failures that do not say the request was invalid stay
retryable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from model_support import Harness
from servers import ProtocolServer, Reply

from executor.errors import ModelError
from executor.models import Message, Sampling
from executor.models._rejection import rejection

Factory = Callable[..., ProtocolServer]
START = [Message("user", "Go.")]
LLAMA_500 = json.loads((Path(__file__).parent / "llama_cpp_validation_500.json").read_text())

REFUSED = [
    # llama-cpp-python: its pydantic validation fails, it answers 500 with the errors as text
    pytest.param("openai", 500, LLAMA_500, "messages[2].content",
                 "Input should be a valid string", id="llama-cpp-python-500"),
    # FastAPI's own 422 (a server that lets FastAPI answer)
    pytest.param("openai", 422, {"detail": [
        {"type": "string_type", "loc": ["body", "messages", 2, "content"],
         "msg": "Input should be a valid string", "input": None}]},
        "messages[2].content", "Input should be a valid string", id="fastapi-422"),
    # OpenAI: param names the field
    pytest.param("openai", 400, {"error": {
        "message": "Invalid value for 'content': expected a string, got null.",
        "type": "invalid_request_error", "param": "messages.[2].content", "code": None}},
        "messages[2].content", "Invalid value for 'content': expected a string, got null.",
        id="openai-400"),
    # vLLM: pydantic errors as text in a 400 BadRequestError
    pytest.param("openai", 400, {
        "object": "error", "type": "BadRequestError", "param": None, "code": 400,
        "message": "[{'type': 'missing', 'loc': ('body', 'messages', 2, 'typed-dict', "
                   "'content'), 'msg': 'Field required', 'input': {'role': 'assistant'}}]"},
        "messages[2].content", "Field required", id="vllm-400"),
    # LiteLLM's proxy wrapping the llama-cpp-python refusal in its own 500
    pytest.param("openai", 500, {"error": {
        "message": "litellm.InternalServerError: InternalServerError: OpenAIException - "
                   + LLAMA_500["error"]["message"], "type": None, "param": None,
        "code": "500"}}, "messages[2].content", "Input should be a valid string",
        id="litellm-500"),
    # Anthropic: the field leads the message
    pytest.param("anthropic", 400, {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "messages.1.content.0.text: text content blocks must be non-empty"}},
        "messages[1].content[0].text", "text content blocks must be non-empty",
        id="anthropic-400"),
    # A 5xx that says invalid_request_error, without a field
    pytest.param("anthropic", 500, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "tool_choice is not supported"}},
        None, "tool_choice is not supported", id="invalid-type-500"),
]


@pytest.mark.parametrize(("protocol", "status", "body", "field", "reason"), REFUSED)
def test_an_invalid_request_is_reported_once_with_the_field(
        make_server: Factory, protocol: str, status: int, body: object, field: str | None,
        reason: str) -> None:
    h = Harness(protocol, make_server(protocol))
    h.server.reply(Reply(status, body))
    with pytest.raises(ModelError) as caught:
        h.model(max_retries=3).complete(START, [], sampling=Sampling())
    error = caught.value
    assert (error.code, error.retryable) == ("bad_request", False)
    assert len(h.server.received) == 1 and h.sleeps == []
    assert error.context["attempts"] == 1 and error.context["status"] == status
    assert error.context.get("field") == field
    assert error.context["reason"] == reason
    assert f"{field}: {reason}" in error.message if field else reason in error.message
    assert "refused the request as invalid" in error.message


TRANSIENT = [
    pytest.param(500, {"error": {"message": "The server had an error while processing your "
                                 "request.", "type": "server_error", "param": None,
                                 "code": None}}, id="openai-server-error"),
    # llama-cpp-python's answer to an assistant message without content: a template error
    # that does not say the request was invalid (corral never sends one)
    pytest.param(500, {"error": {"message": "'dict object' has no attribute 'content'",
                                 "type": "internal_server_error", "param": None,
                                 "code": None}}, id="llama-template-error"),
    pytest.param(502, "<html><body>502 Bad Gateway</body></html>", id="proxy-502"),
    pytest.param(503, {"error": "model is loading"}, id="ollama-loading"),
]


@pytest.mark.parametrize(("status", "body"), TRANSIENT)
def test_a_failure_that_does_not_say_invalid_is_still_retried(
        make_server: Factory, status: int, body: object) -> None:
    h = Harness("openai", make_server("openai"))
    h.server.reply(Reply(status, body), h.dialect.text("Hello."))
    assert h.model(max_retries=1).complete(START, [], sampling=Sampling()).text == "Hello."
    assert len(h.server.received) == 2 and len(h.sleeps) == 1


def test_pydantic_union_noise_is_skipped_for_the_member_that_applied() -> None:
    """Of llama-cpp-python's seven errors (one per member of its message union), six are
    members whose role never matched; the one left names the field."""
    found = rejection(500, json.dumps(LLAMA_500))
    assert found is not None
    assert (found.field, found.reason) == ("messages[2].content",
                                           "Input should be a valid string")


def test_a_huge_error_body_is_bounded() -> None:
    body = json.dumps({"error": {"message": "1 validation error: " + "x" * 2_000_000,
                                 "type": "server_error"}})
    found = rejection(500, body)
    assert found is not None and len(found.reason) <= 300
