"""Anthropic Messages API with tool use.

One request is ``POST {base_url}/v1/messages`` (``base_url`` is the host,
``https://api.anthropic.com``) with the headers ``x-api-key`` (when a key is
configured) and ``anthropic-version: 2023-06-01``. The conversation maps as:

- every ``system`` message joins the top-level ``system`` field (the API has
  no system role), in order, separated by blank lines;
- ``user`` text -> a ``user`` message of ``text`` blocks;
- ``assistant`` -> ``text`` then ``tool_use`` blocks (``{id, name, input}``);
- consecutive ``tool`` results -> ONE ``user`` message of ``tool_result``
  blocks (``{tool_use_id, content, is_error}``), placed before any text that
  follows them, as the API requires;
- consecutive messages of the same role merge (the API wants alternation),
  and empty text blocks are dropped (the API refuses them);
- a message of text alone is sent as a plain string, the shape every reader
  of the protocol takes: LiteLLM's proxy passes a list of blocks on as content
  parts, which llama-cpp-python's server renders into the prompt as a Python
  list (measured: the model then answers its repr).

Tools are ``{name, description, input_schema}`` with an explicit ``tool_choice``
(``{type: auto}``, ``{type: any}`` for ``required``, ``{type: none}``, or
``{type: tool, name}`` for a named tool: a translating proxy such as LiteLLM's passes
it on, and a local OpenAI-compatible server behind it may offer no tools without
it); ``max_tokens`` is always
sent (the API requires it); ``temperature`` and ``top_p`` only when set. The
reasoning level is not sent: extended thinking would have to replay signed
thinking blocks in every tool-use turn, which the provider-neutral
:class:`~executor.models.base.Message` does not carry.

The answer's ``text`` blocks join into the text, ``tool_use`` blocks become
tool calls (an ``input`` that is not an object is kept in
``raw_arguments``), ``stop_reason`` ``tool_use`` -> ``tool_calls``,
``end_turn``/``stop_sequence`` -> ``end``, ``max_tokens`` -> ``length``,
anything else (``refusal``, ``pause_turn``) -> ``other``; usage is
``input_tokens`` (plus the cache's written and read tokens, which the API counts apart)
and ``output_tokens``, and ``cache_read_input_tokens`` as the cached part. With
``prompt_cache`` the system prompt and the newest message carry ``cache_control``
(:func:`_mark_cache`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from executor.models._wire import (
    MAX_DEPTH,
    HttpModel,
    decode_arguments,
    nonneg_int,
    protocol_error,
    too_deep,
)
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

__all__ = ["ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_VERSION = "2023-06-01"

StopReason = Literal["tool_calls", "end", "length", "other"]
_STOP: dict[str, StopReason] = {"tool_use": "tool_calls", "end_turn": "end",
                                "stop_sequence": "end", "max_tokens": "length"}


class AnthropicModel(HttpModel):
    """One model behind the Anthropic Messages API.

    ``api_key`` may be ``None`` (local servers). ``retry``, when given, replaces the
    policy built from ``max_retries``; ``sleep`` is the wait between attempts
    (tests inject a recorder).
    """

    def __init__(self, *, model: str, base_url: str = "https://api.anthropic.com",
                 api_key: str | None = None, provider: str = "anthropic",
                 timeout: float = 120.0, max_retries: int = 3,
                 retry: RetryPolicy | None = None, sleep: Sleep = time.sleep,
                 defaults: Mapping[str, Any] | None = None,
                 tool_choice: str | None = None, limits: ModelLimits | None = None,
                 prompt_cache: bool | None = None) -> None:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        #: Whether requests mark cache breakpoints (``None``: only on Anthropic's own API).
        self.prompt_cache = (urlsplit(base_url).hostname == "api.anthropic.com"
                             if prompt_cache is None else prompt_cache)
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(
            model=model, url=base_url.rstrip("/") + "/v1/messages", provider=provider,
            api_key=api_key, headers=headers, timeout=timeout, max_retries=max_retries,
            retry=retry, sleep=sleep, defaults=defaults, tool_choice=tool_choice, limits=limits)

    def _body(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              sampling: Sampling) -> dict[str, Any]:
        system = [m.content for m in messages if m.role == "system" and m.content]
        body: dict[str, Any] = {"model": self._model, "max_tokens": sampling.max_tokens,
                                "messages": _conversation(messages)}
        if system:
            body["system"] = "\n\n".join(system)
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description,
                              "input_schema": t.parameters} for t in tools]
        if self.prompt_cache:
            _mark_cache(body)
            # tool_choice is set by HttpModel.complete, explicit even for auto (the API's
            # default): a proxy that translates to an OpenAI-compatible server passes it
            # on, and llama-cpp-python's server offers no tools to the model at all
            # without it (LiteLLM's /v1/messages, measured).
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        return body

    def _choice(self, choice: str) -> object:
        if choice == "required":
            return {"type": "any"}
        if choice in ("auto", "none"):
            return {"type": choice}
        return {"type": "tool", "name": choice}

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        content = data.get("content")
        if not isinstance(content, list):
            raise protocol_error(self._provider, "no content list", data, secrets=self._secrets)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use":
                calls.append(self._tool_call(len(calls), block, data))
        reason = data.get("stop_reason")
        stop: StopReason = _STOP.get(reason, "other") if isinstance(reason, str) else "end"
        if calls and stop == "end":
            stop = "tool_calls"
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        model = data.get("model")
        return ModelResponse(
            text="".join(texts), tool_calls=tuple(calls), stop_reason=stop,
            usage=Usage(nonneg_int(usage.get("input_tokens"))
                        + nonneg_int(usage.get("cache_creation_input_tokens"))
                        + nonneg_int(usage.get("cache_read_input_tokens")),
                        nonneg_int(usage.get("output_tokens")),
                        nonneg_int(usage.get("cache_read_input_tokens"))),
            model=model if isinstance(model, str) and model else self._model)

    def _tool_call(self, index: int, block: dict[str, Any], data: dict[str, Any]) -> ToolCall:
        name = block.get("name")
        if not isinstance(name, str):
            raise protocol_error(self._provider, "a tool_use block without a name", data,
                                 secrets=self._secrets)
        given = block.get("input")
        if isinstance(given, dict) and not too_deep(given):
            arguments, raw = given, None
        elif isinstance(given, dict):
            arguments, raw = {}, f"(arguments nested deeper than {MAX_DEPTH} levels)"
        elif isinstance(given, str):
            arguments, raw = decode_arguments(given)
        else:
            arguments, raw = {}, json.dumps(given)
        block_id = block.get("id")
        return ToolCall(id=block_id if isinstance(block_id, str) and block_id else
                        f"toolu_{index}", name=name, arguments=arguments, raw_arguments=raw)


_EPHEMERAL = {"type": "ephemeral"}


def _mark_cache(body: dict[str, Any]) -> None:
    """Two cache breakpoints: the end of the stable prefix (the system prompt, or the last
    tool without one), which later runs of the agent reuse, and the newest message, which
    this run's next turn reuses."""
    if "system" in body:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": _EPHEMERAL}]
    elif body.get("tools"):
        body["tools"][-1]["cache_control"] = _EPHEMERAL
    if body["messages"]:
        last = body["messages"][-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        last["content"][-1]["cache_control"] = _EPHEMERAL


def _conversation(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages -> alternating ``user``/``assistant`` messages of content blocks."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            merged: list[dict[str, Any]] = out[-1]["content"]
            if blocks[0]["type"] == "tool_result":  # results lead their user message
                split = sum(1 for block in merged if block["type"] == "tool_result")
                merged[split:split] = blocks
            else:
                merged.extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:  # text alone goes as a string: see the module docstring
        if all(block["type"] == "text" for block in entry["content"]):
            entry["content"] = "\n\n".join(block["text"] for block in entry["content"])
    return out


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                                 "content": message.content}
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls if message.role == "assistant" else ():
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": call.arguments})
    return blocks
