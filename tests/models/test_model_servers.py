"""The protocol servers themselves: they must catch malformed requests, or nothing is proven."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from servers import KEY, ProtocolServer

from tests.timescale import scaled

OPENAI_HEADERS = {"authorization": f"Bearer {KEY}"}
ANTHROPIC_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
CALL = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
USE = {"type": "tool_use", "id": "c1", "name": "read", "input": {}}


def _openai(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": messages, "max_tokens": 10, **extra}


def _anthropic(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": messages, "max_tokens": 10, **extra}


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


USER = {"role": "user", "content": "hi"}
CASES = [
    ("openai", "/v1/chat/completion", OPENAI_HEADERS, _openai([USER]), "path must be"),
    ("openai", "/v1/chat/completions", {}, _openai([USER]), "Bearer"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS, {"messages": [USER]}, "'model'"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS,
     _openai([USER, {"role": "tool", "tool_call_id": "c9", "content": "x"}]),
     "answers no pending tool call"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS,
     _openai([USER, {"role": "assistant", "content": None, "tool_calls": [CALL]}, USER]),
     "never answered"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS,
     _openai([USER], tools=[{"type": "function", "function": {
         "name": "read", "description": "", "parameters": {}}}]), "tool_choice must be"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS,
     _openai([USER, {"role": "assistant", "content": None, "tool_calls": [
         {**CALL, "function": {"name": "read", "arguments": {}}}]},
              {"role": "tool", "tool_call_id": "c1", "content": "x"}]),
     "arguments must be a JSON string"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS,
     _openai([USER, {"role": "assistant", "content": None, "tool_calls": [CALL]},
              {"role": "tool", "tool_call_id": "c1", "content": "x"}]),
     "content must be a string"),
    ("openai", "/v1/chat/completions", OPENAI_HEADERS,
     _openai([USER, {"role": "assistant", "tool_calls": [CALL]},
              {"role": "tool", "tool_call_id": "c1", "content": "x"}]), "missing 'content'"),
    ("anthropic", "/v1/messages", {"x-api-key": KEY}, _anthropic([USER]), "anthropic-version"),
    ("anthropic", "/v1/messages", {**ANTHROPIC_HEADERS, **OPENAI_HEADERS}, _anthropic([USER]),
     "not Authorization"),
    ("anthropic", "/v1/messages", ANTHROPIC_HEADERS, {"model": "m", "messages": [USER]},
     "'max_tokens'"),
    ("anthropic", "/v1/messages", ANTHROPIC_HEADERS,
     _anthropic([{"role": "system", "content": "x"}, USER]), "roles alternate"),
    ("anthropic", "/v1/messages", ANTHROPIC_HEADERS,
     _anthropic([USER, {"role": "assistant", "content": [USE]},
                 {"role": "user", "content": _text("no result")}]), "do not answer"),
    ("anthropic", "/v1/messages", ANTHROPIC_HEADERS,
     _anthropic([USER, {"role": "assistant", "content": [USE]},
                 {"role": "user", "content": [
                     *_text("first"), {"type": "tool_result", "tool_use_id": "c1",
                                       "content": "x"}]}]), "must come before text"),
    ("anthropic", "/v1/messages", ANTHROPIC_HEADERS,
     _anthropic([{"role": "user", "content": _text("")}]), "non-empty"),
]


@pytest.mark.parametrize(("protocol", "path", "headers", "body", "problem"), CASES)
def test_server_flags_malformed_requests(make_server: Callable[..., ProtocolServer],
                                         protocol: str, path: str, headers: dict[str, str],
                                         body: dict[str, Any], problem: str) -> None:
    server = make_server(protocol)
    response = httpx.post(server.url + path, json=body, headers=headers, timeout=scaled(5))
    assert response.status_code == 400
    assert any(problem in found for found in server.problems), server.problems
    server.problems.clear()  # expected here; any other test fails on them


def test_server_flags_an_unexpected_request(make_server: Callable[..., ProtocolServer]) -> None:
    server = make_server("openai")
    response = httpx.post(server.url + "/v1/chat/completions", json=_openai([USER]),
                          headers=OPENAI_HEADERS, timeout=scaled(5))
    assert response.status_code == 400
    assert server.problems == ["request 1: no reply was scripted"]
    server.problems.clear()
