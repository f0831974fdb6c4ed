"""Small helpers shared by the HTTP providers (internal)."""

from __future__ import annotations

import json
from typing import Any

from executor.errors import ModelError

__all__ = ["decode_arguments", "nonneg_int", "protocol_error"]


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
