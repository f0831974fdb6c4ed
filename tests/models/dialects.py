"""The two protocols the local servers speak: request checks and answer builders.

Each :class:`Dialect` validates a request strictly (path, method, headers,
body keys, message shapes, tool results answering the tool calls of the
message just before) and builds answers in the provider's exact shape:
successes with text or tool calls, and error bodies (OpenAI's ``{"error":
{message, type, param, code}}``, Anthropic's ``{"type": "error", "error":
{type, message}}`` with its 529 ``overloaded_error``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MODEL = "test-model"
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Reply:
    """One scripted answer; ``body`` is JSON-encoded unless it is ``str``."""

    status: int = 200
    body: object = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    #: The client's (address, port): one per TCP connection.
    peer: tuple[str, int] = ("", 0)


Args = Mapping[str, Any] | str  # a str is sent as is: invalid JSON on purpose


class Dialect:
    """What one protocol expects and answers (base class)."""

    name = ""
    path = ""
    prefix = ""  # what base_url adds to the server's root URL

    def check(self, req: Received, api_key: str | None) -> list[str]:
        raise NotImplementedError

    def text(self, text: str, *, usage: tuple[int, int] = (11, 7)) -> Reply:
        raise NotImplementedError

    def tool_calls(self, calls: Sequence[tuple[str, str, Args]], *, text: str = "",
                   usage: tuple[int, int] = (11, 7)) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str, *,
              headers: Mapping[str, str] | None = None) -> Reply:
        raise NotImplementedError


def _keys(where: str, data: Mapping[str, Any], required: set[str],
          optional: frozenset[str] | set[str] = frozenset()) -> list[str]:
    problems = [f"{where}: missing {key!r}" for key in sorted(required - set(data))]
    problems += [f"{where}: unexpected key {key!r}" for key in
                 sorted(set(data) - required - optional)]
    return problems


def _common(req: Received, path: str) -> list[str]:
    problems = []
    if req.method != "POST":
        problems.append(f"method must be POST, got {req.method}")
    if req.path != path:
        problems.append(f"path must be {path}, got {req.path}")
    if not req.headers.get("content-type", "").startswith("application/json"):
        problems.append("content-type must be application/json")
    return problems


def _number(body: Mapping[str, Any], key: str, high: float) -> list[str]:
    value = body.get(key)
    if key in body and not (isinstance(value, (int, float)) and 0 <= value <= high):
        return [f"{key} must be a number in [0, {high}]"]
    return []


class OpenAIDialect(Dialect):
    """OpenAI chat completions."""

    name = "openai"
    path = "/v1/chat/completions"
    prefix = "/v1"
    EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})

    def check(self, req: Received, api_key: str | None) -> list[str]:
        problems = _common(req, self.path)
        auth = req.headers.get("authorization")
        if api_key is None and auth is not None:
            problems.append("an Authorization header was sent although no key is configured")
        if api_key is not None and auth != f"Bearer {api_key}":
            problems.append("Authorization must be 'Bearer <key>'")
        body = req.body
        if not isinstance(body, dict):
            return [*problems, "the body is not a JSON object"]
        problems += _keys("body", body, {"model", "messages"},
                          {"tools", "tool_choice", "temperature", "top_p", "max_tokens",
                           "reasoning_effort", "seed"})
        if not isinstance(body.get("model"), str) or not body.get("model"):
            problems.append("model must be a non-empty string")
        max_tokens = body.get("max_tokens", 1)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            problems.append("max_tokens must be a positive integer")
        problems += _number(body, "temperature", 2) + _number(body, "top_p", 1)
        if "reasoning_effort" in body and body["reasoning_effort"] not in self.EFFORTS:
            problems.append(f"reasoning_effort {body['reasoning_effort']!r} is not valid")
        problems += self._tools(body)
        return problems + self._messages(body.get("messages"))

    def _tools(self, body: Mapping[str, Any]) -> list[str]:
        if "tools" not in body:
            return ["tool_choice without tools"] if "tool_choice" in body else []
        tools = body["tools"]
        if not isinstance(tools, list) or not tools:
            return ["tools must be a non-empty list (omit it when there are none)"]
        choice = body.get("tool_choice")
        names = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)
                 and isinstance(t.get("function"), dict)]
        named = (isinstance(choice, dict) and choice.get("type") == "function"
                 and isinstance(choice.get("function"), dict)
                 and set(choice["function"]) == {"name"} and choice["function"]["name"] in names)
        problems = [] if choice in ("auto", "none", "required") or named else [
            "tool_choice must be 'auto', 'none', 'required' or {type: function, function: "
            "{name}} naming a defined tool"]
        for n, tool in enumerate(tools):
            if not isinstance(tool, dict) or tool.get("type") != "function":
                problems.append(f"tools[{n}] must be a function tool")
                continue
            problems += _keys(f"tools[{n}]", tool, {"type", "function"})
            function = tool.get("function")
            if not isinstance(function, dict):
                problems.append(f"tools[{n}].function must be an object")
                continue
            problems += _keys(f"tools[{n}].function", function,
                              {"name", "description", "parameters"})
            if not TOOL_NAME.match(str(function.get("name"))):
                problems.append(f"tools[{n}].function.name is not a valid name")
            if not isinstance(function.get("parameters"), dict):
                problems.append(f"tools[{n}].function.parameters must be a JSON schema")
        return problems

    def _messages(self, messages: object) -> list[str]:
        if not isinstance(messages, list) or not messages:
            return ["messages must be a non-empty list"]
        problems: list[str] = []
        pending: list[str] = []
        for n, message in enumerate(messages):
            where = f"messages[{n}]"
            role = message.get("role") if isinstance(message, dict) else None
            if not isinstance(message, dict) or role not in {"system", "user", "assistant",
                                                             "tool"}:
                problems.append(f"{where}: not a message with a known role")
                continue
            if role == "tool":
                problems += _keys(where, message, {"role", "tool_call_id", "content"})
                if message.get("tool_call_id") not in pending:
                    problems.append(f"{where}: tool result {message.get('tool_call_id')!r} "
                                    "answers no pending tool call")
                else:
                    pending.remove(message["tool_call_id"])
                if not isinstance(message.get("content"), str):
                    problems.append(f"{where}: content must be a string")
                continue
            if pending:
                problems.append(f"{where}: tool calls {pending} were never answered")
                pending = []
            if role != "assistant":
                problems += _keys(where, message, {"role", "content"})
                if not isinstance(message.get("content"), str):
                    problems.append(f"{where}: content must be a string")
                continue
            problems += _keys(where, message, {"role", "content"}, {"tool_calls"})
            calls = message.get("tool_calls")
            content = message.get("content")
            if not isinstance(content, str):
                # OpenAI allows null with tool_calls; llama-cpp-python's server refuses null
                # and a missing key (HTTP 500), so the widest accepted shape is a string.
                problems.append(f"{where}: content must be a string (\"\" beside tool_calls)")
            if calls is not None:
                problems += self._calls(where, calls, pending)
        if pending:
            problems.append(f"the conversation ends with unanswered tool calls {pending}")
        return problems

    @staticmethod
    def _calls(where: str, calls: object, pending: list[str]) -> list[str]:
        if not isinstance(calls, list) or not calls:
            return [f"{where}: tool_calls must be a non-empty list"]
        problems: list[str] = []
        for n, call in enumerate(calls):
            at = f"{where}.tool_calls[{n}]"
            if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                problems.append(f"{at}: not a function call")
                continue
            problems += _keys(at, call, {"id", "type", "function"})
            problems += _keys(f"{at}.function", call["function"], {"name", "arguments"})
            if call.get("type") != "function":
                problems.append(f"{at}: type must be 'function'")
            if not isinstance(call["function"].get("arguments"), str):
                problems.append(f"{at}: arguments must be a JSON string")
            if not isinstance(call.get("id"), str) or call["id"] in pending:
                problems.append(f"{at}: id must be a unique string")
            else:
                pending.append(call["id"])
        return problems

    def text(self, text: str, *, usage: tuple[int, int] = (11, 7)) -> Reply:
        return self._completion({"role": "assistant", "content": text}, "stop", usage)

    def tool_calls(self, calls: Sequence[tuple[str, str, Args]], *, text: str = "",
                   usage: tuple[int, int] = (11, 7)) -> Reply:
        message = {"role": "assistant", "content": text or None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name,
                          "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for call_id, name, args in calls]}
        return self._completion(message, "tool_calls", usage)

    @staticmethod
    def _completion(message: dict[str, Any], finish: str, usage: tuple[int, int]) -> Reply:
        return Reply(body={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": sum(usage)}})

    def error(self, status: int, message: str, *,
              headers: Mapping[str, str] | None = None) -> Reply:
        kind, code = {401: ("invalid_request_error", "invalid_api_key"),
                      429: ("requests", "rate_limit_exceeded")}.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None))
        return Reply(status, {"error": {"message": message, "type": kind, "param": None,
                                        "code": code}}, headers or {})


class AnthropicDialect(Dialect):
    """Anthropic messages."""

    name = "anthropic"
    path = "/v1/messages"
    prefix = ""
    VERSION = "2023-06-01"

    def check(self, req: Received, api_key: str | None) -> list[str]:
        problems = _common(req, self.path)
        if req.headers.get("x-api-key") != api_key:
            problems.append("x-api-key must carry the key (and only when one is configured)")
        if req.headers.get("anthropic-version") != self.VERSION:
            problems.append(f"anthropic-version must be {self.VERSION}")
        if "authorization" in req.headers:
            problems.append("Anthropic takes x-api-key, not Authorization")
        body = req.body
        if not isinstance(body, dict):
            return [*problems, "the body is not a JSON object"]
        problems += _keys("body", body, {"model", "messages", "max_tokens"},
                          {"system", "tools", "tool_choice", "temperature", "top_p", "top_k"})
        if not isinstance(body.get("model"), str) or not body.get("model"):
            problems.append("model must be a non-empty string")
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            problems.append("max_tokens must be a positive integer")
        problems += self._system(body["system"]) if "system" in body else []
        problems += _breakpoints(body)
        problems += _number(body, "temperature", 1) + _number(body, "top_p", 1)
        problems += self._tools(body.get("tools")) if "tools" in body else []
        if "tool_choice" in body:
            choice = body["tool_choice"]
            if "tools" not in body:
                problems.append("tool_choice without tools")
            elif not isinstance(choice, dict) or choice.get("type") not in {
                    "auto", "any", "tool", "none"}:
                problems.append("tool_choice must be {type: auto|any|tool|none}")
            elif choice["type"] == "tool" and choice.get("name") not in [
                    t.get("name") for t in body["tools"] if isinstance(t, dict)]:
                problems.append("tool_choice {type: tool} must name a defined tool")
            elif set(choice) - {"type", "name", "disable_parallel_tool_use"} or (
                    "name" in choice) != (choice["type"] == "tool"):
                problems.append("tool_choice has unexpected keys")
        if "tools" not in body and _has_tool_blocks(body.get("messages")):
            # The real API: "Requests which include `tool_use` or `tool_result` blocks
            # must define tools."
            problems.append("tool_use/tool_result blocks need tools defined")
        return problems + self._messages(body.get("messages"))

    @staticmethod
    def _system(system: object) -> list[str]:
        """A non-empty string, or a non-empty list of text blocks (which may carry
        ``cache_control``), as the real API takes."""
        if isinstance(system, str):
            return [] if system else ["system must be non-empty"]
        if not isinstance(system, list) or not system:
            return ["system must be a non-empty string or list of text blocks"]
        problems: list[str] = []
        for n, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                problems.append(f"system[{n}] must be a text block")
                continue
            problems += _keys(f"system[{n}]", block, {"type", "text"}, {"cache_control"})
            if not isinstance(block.get("text"), str) or not block["text"]:
                problems.append(f"system[{n}]: text blocks must be non-empty")
        return problems

    @staticmethod
    def _tools(tools: object) -> list[str]:
        if not isinstance(tools, list) or not tools:
            return ["tools must be a non-empty list (omit it when there are none)"]
        problems: list[str] = []
        for n, tool in enumerate(tools):
            if not isinstance(tool, dict):
                problems.append(f"tools[{n}] must be an object")
                continue
            problems += _keys(f"tools[{n}]", tool, {"name", "description", "input_schema"},
                              {"cache_control"})
            if not TOOL_NAME.match(str(tool.get("name"))):
                problems.append(f"tools[{n}].name is not a valid name")
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                problems.append(f"tools[{n}].input_schema must be an object schema")
        return problems

    def _messages(self, messages: object) -> list[str]:
        if not isinstance(messages, list) or not messages:
            return ["messages must be a non-empty list"]
        problems: list[str] = []
        pending: set[str] = set()
        for n, message in enumerate(messages):
            where = f"messages[{n}]"
            if not isinstance(message, dict):
                problems.append(f"{where}: not an object")
                continue
            problems += _keys(where, message, {"role", "content"})
            role = message.get("role")
            expected = "user" if n % 2 == 0 else "assistant"
            if role != expected:
                problems.append(f"{where}: role must be {expected} (roles alternate, user first)")
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list) or not content:
                problems.append(f"{where}: content must be a non-empty list of blocks")
                continue
            answered, used, seen_text = set(), set(), False
            for b, block in enumerate(content):
                at = f"{where}.content[{b}]"
                kind = block.get("type") if isinstance(block, dict) else None
                if kind == "text":
                    problems += _keys(at, block, {"type", "text"}, {"cache_control"})
                    if not isinstance(block.get("text"), str) or not block["text"]:
                        problems.append(f"{at}: text blocks must be non-empty")
                    seen_text = True
                elif kind == "tool_use" and role == "assistant":
                    problems += _keys(at, block, {"type", "id", "name", "input"})
                    if not isinstance(block.get("input"), dict):
                        problems.append(f"{at}: input must be an object")
                    used.add(block.get("id"))
                elif kind == "tool_result" and role == "user":
                    problems += _keys(at, block, {"type", "tool_use_id", "content"},
                                      {"is_error", "cache_control"})
                    if seen_text:
                        problems.append(f"{at}: tool_result blocks must come before text")
                    if not isinstance(block.get("content"), str):
                        problems.append(f"{at}: content must be a string here")
                    if "is_error" in block and not isinstance(block["is_error"], bool):
                        problems.append(f"{at}: is_error must be a boolean")
                    answered.add(block.get("tool_use_id"))
                else:
                    problems.append(f"{at}: a {kind!r} block is not allowed in a {role} "
                                    "message")
            if role == "user" and answered != pending:
                problems.append(f"{where}: tool results {sorted(map(str, answered))} do not "
                                f"answer the tool calls {sorted(pending)} just before")
            pending = used if role == "assistant" else set()
        if pending:
            problems.append(f"the conversation ends with unanswered tool calls {sorted(pending)}")
        return problems

    def text(self, text: str, *, usage: tuple[int, int] = (11, 7)) -> Reply:
        return self._message([{"type": "text", "text": text}], "end_turn", usage)

    def tool_calls(self, calls: Sequence[tuple[str, str, Args]], *, text: str = "",
                   usage: tuple[int, int] = (11, 7)) -> Reply:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [{"type": "tool_use", "id": call_id, "name": name, "input": args}
                   for call_id, name, args in calls]
        return self._message(blocks, "tool_use", usage)

    @staticmethod
    def _message(content: list[dict[str, Any]], stop: str, usage: tuple[int, int]) -> Reply:
        return Reply(body={"id": "msg_1", "type": "message", "role": "assistant",
                           "model": MODEL, "content": content, "stop_reason": stop,
                           "stop_sequence": None,
                           "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}})

    def error(self, status: int, message: str, *,
              headers: Mapping[str, str] | None = None) -> Reply:
        kind = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(status, "api_error")
        return Reply(status, {"type": "error", "error": {"type": kind, "message": message},
                              "request_id": "req_1"}, headers or {})


DIALECTS: dict[str, Dialect] = {"openai": OpenAIDialect(), "anthropic": AnthropicDialect()}


def _breakpoints(body: Mapping[str, Any]) -> list[str]:
    """The real API's rules for ``cache_control``: ``{type: ephemeral}`` (``ttl`` optional),
    at most 4 in a request."""
    marks: list[object] = []
    for part in ("system", "tools"):
        if isinstance(body.get(part), list):
            marks += [b["cache_control"] for b in body[part]
                      if isinstance(b, dict) and "cache_control" in b]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            marks += [b["cache_control"] for b in content
                      if isinstance(b, dict) and "cache_control" in b]
    problems = [f"cache_control must be {{type: ephemeral}}, not {mark!r}" for mark in marks
                if not isinstance(mark, dict) or mark.get("type") != "ephemeral"
                or set(mark) - {"type", "ttl"}]
    if len(marks) > 4:
        problems.append(f"at most 4 cache_control breakpoints, not {len(marks)}")
    return problems


def _has_tool_blocks(messages: object) -> bool:
    """Whether any message holds a tool_use or tool_result content block."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
                isinstance(block, dict) and block.get("type") in {"tool_use", "tool_result"}
                for block in content):
            return True
    return False
