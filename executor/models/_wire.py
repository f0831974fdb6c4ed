"""Small helpers shared by the HTTP providers (internal)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from executor.errors import ModelError
from executor.models.base import Message, ModelResponse, Sampling, ToolSchema
from executor.models.http import HttpClient, RetryPolicy, Sleep

__all__ = ["HttpModel", "decode_arguments", "nonneg_int", "protocol_error"]


class HttpModel:
    """What both HTTP providers share: the client, the name, one request per turn.

    Subclasses build the request body (:meth:`_body`) and read the answer
    (:meth:`_parse`) in their protocol.
    """

    def __init__(self, *, model: str, url: str, provider: str, api_key: str | None,
                 headers: Mapping[str, str], timeout: float, max_retries: int,
                 retry: RetryPolicy | None, sleep: Sleep = time.sleep) -> None:
        self._model = model
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

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema], *,
                 sampling: Sampling) -> ModelResponse:
        """One request in the provider's protocol."""
        return self._parse(self._http.post_json(self._url, self._body(messages, tools,
                                                                       sampling)))

    def _body(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              sampling: Sampling) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError


def decode_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments text -> (object, None), or ({}, text) when it is no JSON object."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text


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
