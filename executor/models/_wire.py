"""Small helpers shared by the HTTP providers (internal)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from executor.errors import ModelError
from executor.models.base import (
    Message,
    ModelLimits,
    ModelResponse,
    Sampling,
    ToolSchema,
    effective_tool_choice,
)
from executor.models.http import HttpClient, RetryPolicy, Sleep
from policies.contract import RESERVED_OPTION_KEYS

__all__ = ["MAX_DEPTH", "HttpModel", "decode_arguments", "merge_options", "nonneg_int",
           "protocol_error", "too_deep"]


class HttpModel:
    """What both HTTP providers share: the client, the name, one request per turn.

    Subclasses build the request body (:meth:`_body`) and read the answer
    (:meth:`_parse`) in their protocol.
    """

    def __init__(self, *, model: str, url: str, provider: str, api_key: str | None,
                 headers: Mapping[str, str], timeout: float, max_retries: int,
                 retry: RetryPolicy | None, sleep: Sleep = time.sleep,
                 defaults: Mapping[str, Any] | None = None,
                 tool_choice: str | None = None, limits: ModelLimits | None = None) -> None:
        self._model = model
        #: The provider's token limits (the session sizes its requests by them).
        self.limits = limits or ModelLimits()
        #: The provider's configured ``tool_choice`` (a request's own wins).
        self._tool_choice = tool_choice
        #: Request fields of the model's variant (below the agent's own options).
        self._defaults = dict(defaults or {})
        self._provider = provider
        self._url = url
        self._secrets = (api_key,) if api_key else ()
        self._http = HttpClient(provider=provider, timeout=timeout,
                                retry=retry or RetryPolicy(max_retries=max_retries),
                                headers=dict(headers), secrets=self._secrets, sleep=sleep)

    @property
    def name(self) -> str:
        """``provider/model``."""
        return f"{self._provider}/{self._model}"

    def close(self) -> None:
        """Close the provider's pooled connections (the run that made the model ends)."""
        self._http.close()

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema], *,
                 sampling: Sampling) -> ModelResponse:
        """One request in the provider's protocol, with the provider options."""
        body = self._body(messages, tools, sampling)
        if tools:
            body["tool_choice"] = self._choice(self.tool_choice(messages, tools, sampling))
        merge_options(body, sampling.options, self._defaults)
        return self._parse(self._http.post_json(self._url, body))

    def tool_choice(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
                    sampling: Sampling) -> str:
        """The request's ``tool_choice`` (:func:`~executor.models.base.effective_tool_choice`);
        a named tool that is not offered in this request is a config error, before the
        request is sent."""
        choice = effective_tool_choice(sampling, messages, self._tool_choice)
        if choice not in ("auto", "none", "required") and choice not in {t.name for t in tools}:
            offered = ", ".join(sorted(t.name for t in tools))
            raise ModelError(
                f"provider {self._provider!r}: tool_choice names {choice!r}, which is not a "
                f"tool this agent is offered (offered: {offered})", code="config",
                operation="model_request", context={"provider": self._provider,
                                                    "tool_choice": choice},
                hint="set tool_choice to auto, required, none or one of the offered tools")
        return choice

    def _choice(self, choice: str) -> object:
        """``tool_choice`` in the provider's protocol."""
        raise NotImplementedError

    def _body(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              sampling: Sampling) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError


def merge_options(body: dict[str, Any], *layers: Mapping[str, Any]) -> None:
    """Add provider options to a request ``body``, the first layer winning: never a field
    corral alone sets (:data:`~policies.contract.RESERVED_OPTION_KEYS`), never over an
    explicit setting (temperature, top_p, reasoning); ``max_tokens`` is only a default."""
    taken = set(body) - {"max_tokens"}
    for layer in layers:
        for key, value in layer.items():
            if key in RESERVED_OPTION_KEYS or key in taken:
                continue
            body[key] = value
            taken.add(key)


#: Tool arguments nested deeper than this are refused (kept as raw text): every layer
#: below (validation, the audit, the record) must be able to walk them.
MAX_DEPTH = 64


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON value nests deeper than ``limit`` (checked without recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def decode_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments text -> (object, None), or ({}, text) when it is no JSON object."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past any sane depth
        return {}, text
    if isinstance(value, dict) and not too_deep(value):
        return value, None
    return {}, text[:4096]


def nonneg_int(value: object) -> int:
    """A token count from a response; anything that is not a non-negative int is 0."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def protocol_error(provider: str, what: str, data: object, *,
                   secrets: tuple[str, ...] = ()) -> ModelError:
    """The answer was JSON but not the shape this protocol promises."""
    excerpt = json.dumps(data, ensure_ascii=False, default=str)
    for secret in secrets:
        if secret:
            excerpt = excerpt.replace(secret, "***")
    excerpt = excerpt[:300]
    return ModelError(f"provider {provider!r}: unexpected answer: {what}", code="protocol",
                      operation="model_request",
                      context={"provider": provider, "body": excerpt},
                      hint="base_url may point at a server that speaks another protocol")
