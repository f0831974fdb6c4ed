"""OpenAI-compatible chat completions with tool calling.

One request is ``POST {base_url}/chat/completions`` (``base_url`` ends in
``/v1``: OpenAI, vLLM, Ollama's ``/v1``, llama.cpp's server, LM Studio...),
with ``Authorization: Bearer KEY`` only when a key is configured (local
servers need none). Messages map to the chat format: ``system``, ``user``,
``assistant`` with ``tool_calls`` (``{id, type: function, function: {name,
arguments: JSON text}}``) and always a string ``content``, ``""`` when the model
said nothing (the widest accepted shape: llama-cpp-python's server refuses
``null`` and a missing key, measured), and one ``tool`` message per result with its
``tool_call_id`` (the chat format has no error flag: a failed tool's content
says so itself). Tools become ``{type: function, function: {name,
description, parameters}}`` with ``tool_choice`` (``auto``, ``required``, ``none``, or
``{type: function, function: {name}}`` for a named tool); without tools
neither key is sent. ``temperature``, ``top_p`` and the reasoning level are
sent only when set; ``max_tokens`` always.

Reasoning levels map onto ``reasoning_effort``: ``off`` -> ``none``,
``minimal``/``low``/``medium``/``high``/``xhigh`` as is, ``max`` -> ``xhigh``.

The answer is ``choices[0].message``: ``content`` may be null; each tool
call's ``arguments`` is JSON text (text that is no JSON object is kept in
``raw_arguments``); ``finish_reason`` ``tool_calls``/``function_call`` ->
``tool_calls``, ``stop`` -> ``end``, ``length`` -> ``length``, anything else
-> ``other``, except that a turn carrying tool calls is always
``tool_calls`` unless it was cut at ``length`` (local servers often say
``stop``). Usage is ``prompt_tokens``/``completion_tokens``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from executor.models._wire import HttpModel, decode_arguments, nonneg_int, protocol_error
from executor.models.base import (
    Message,
    ModelLimits,
    ModelResponse,
    Sampling,
    ToolCall,
    ToolSchema,
    Usage,
)
from executor.models.http import RetryPolicy, Sleep

__all__ = ["REASONING_EFFORT", "OpenAIChatModel"]

#: corral's reasoning levels -> ``reasoning_effort`` values.
REASONING_EFFORT = {"off": "none", "minimal": "minimal", "low": "low", "medium": "medium",
                    "high": "high", "xhigh": "xhigh", "max": "xhigh"}

StopReason = Literal["tool_calls", "end", "length", "other"]
_FINISH: dict[str, StopReason] = {"tool_calls": "tool_calls", "function_call": "tool_calls",
                                  "stop": "end", "length": "length"}


class OpenAIChatModel(HttpModel):
    """One model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``api_key`` may be ``None`` (local servers). ``retry``, when given, replaces the
    policy built from ``max_retries``; ``sleep`` is the wait between attempts
    (tests inject a recorder).
    """

    def __init__(self, *, model: str, base_url: str, api_key: str | None = None,
                 provider: str = "openai", timeout: float = 120.0, max_retries: int = 3,
                 retry: RetryPolicy | None = None, sleep: Sleep = time.sleep,
                 defaults: Mapping[str, Any] | None = None,
                 tool_choice: str | None = None, limits: ModelLimits | None = None,
                 ) -> None:
        super().__init__(
            model=model, url=base_url.rstrip("/") + "/chat/completions", provider=provider,
            api_key=api_key, headers={"authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=timeout, max_retries=max_retries, retry=retry, sleep=sleep,
            defaults=defaults, tool_choice=tool_choice, limits=limits)

    def _body(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              sampling: Sampling) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model,
                                "messages": [_message(m) for m in messages],
                                "max_tokens": sampling.max_tokens}
        if tools:
            body["tools"] = [{"type": "function",
                              "function": {"name": t.name, "description": t.description,
                                           "parameters": t.parameters}} for t in tools]
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.reasoning is not None:
            body["reasoning_effort"] = REASONING_EFFORT.get(sampling.reasoning,
                                                            sampling.reasoning)
        return body

    def _choice(self, choice: str) -> object:
        if choice in ("auto", "none", "required"):
            return choice
        return {"type": "function", "function": {"name": choice}}

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise protocol_error(self._provider, "no choices[0]", data, secrets=self._secrets)
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise protocol_error(self._provider, "choices[0] has no message", data,
                                 secrets=self._secrets)
        calls = tuple(self._tool_call(index, call, data)
                      for index, call in enumerate(message.get("tool_calls") or []))
        finish = choices[0].get("finish_reason")
        stop: StopReason = _FINISH.get(finish, "other") if isinstance(finish, str) else "end"
        if calls and stop != "length":
            stop = "tool_calls"
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        model = data.get("model")
        return ModelResponse(
            text=_text(message.get("content")), tool_calls=calls, stop_reason=stop,
            usage=Usage(nonneg_int(usage.get("prompt_tokens")),
                        nonneg_int(usage.get("completion_tokens")), _cached(usage)),
            model=model if isinstance(model, str) and model else self._model)

    def _tool_call(self, index: int, call: object, data: dict[str, Any]) -> ToolCall:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict) or not isinstance(
                function.get("name"), str):
            raise protocol_error(self._provider, "a tool call without a function name", data,
                                 secrets=self._secrets)
        raw = function.get("arguments")
        if isinstance(raw, dict):  # some local servers send the object itself
            arguments, leftover = raw, None
        else:
            arguments, leftover = decode_arguments(raw if isinstance(raw, str) else "")
        call_id = call.get("id")
        return ToolCall(id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                        name=function["name"],
                        arguments=arguments, raw_arguments=leftover)


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        # "" rather than null or no key: llama-cpp-python's server refuses both (README:
        # "A local model"), and "" is valid in the OpenAI chat format everywhere.
        return {"role": "assistant", "content": message.content,
                "tool_calls": [{"id": call.id, "type": "function",
                                "function": {"name": call.name,
                                             "arguments": _arguments_text(call)}}
                               for call in message.tool_calls]}
    return {"role": message.role, "content": message.content}


def _arguments_text(call: ToolCall) -> str:
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some compatible servers answer
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _cached(usage: dict[str, Any]) -> int:
    """Prompt tokens read from the server's cache: ``prompt_tokens_details.cached_tokens``
    (OpenAI, llama.cpp's server); 0 where it is not said."""
    details = usage.get("prompt_tokens_details")
    return nonneg_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
