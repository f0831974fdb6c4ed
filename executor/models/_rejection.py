"""Read a server's refusal of a request: was the request invalid, and which field? (internal)

Servers say "your request is invalid" in several shapes, and not always with a 4xx:

- OpenAI and LiteLLM: ``{"error": {"message", "type": "invalid_request_error", "param"}}``;
- vLLM: ``{"object": "error", "message", "type": "BadRequestError", "param"}``;
- Anthropic: ``{"type": "error", "error": {"type": "invalid_request_error", "message":
  "messages.1.content.0.text: ..."}}`` (the field leads the message);
- FastAPI's own 422: ``{"detail": [{"loc": [...], "msg": ...}]}``;
- llama-cpp-python's server answers **500** ``internal_server_error`` to a request its
  pydantic model refuses, with the validation errors as text in the message
  (``7 validation errors: {'type': 'string_type', 'loc': ('body', 'messages', 2,
  'ChatCompletionRequestAssistantMessage', 'content'), 'msg': ...}``), one error per
  member of its message union.

:func:`rejection` finds the field and the reason in any of them. A 5xx counts as a
rejection only when its body says so (a validation error, or an invalid-request type):
then the same request would fail the same way, and retrying it cannot help.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Rejection", "rejection"]

#: Error types that mean "the request is invalid", whatever the status.
_INVALID_TYPES = frozenset({"invalid_request_error", "invalid_request", "badrequesterror",
                            "validation_error", "requestvalidationerror", "validationerror"})
#: Text that says a request failed validation (pydantic, FastAPI, jsonschema).
_VALIDATION = re.compile(r"\b\d+ validation errors?\b|\bvalidation errors? for\b|"
                         r"\bRequestValidationError\b", re.IGNORECASE)
#: One pydantic error as its repr: the loc tuple, then the msg.
_PYDANTIC = re.compile(
    r"""'type':\s*'(?P<type>[^']*)',\s*'loc':\s*\((?P<loc>[^)]*)\),\s*"""
    r"""'msg':\s*(?P<q>['"])(?P<msg>.*?)(?P=q)""")
#: A field path leading a message (Anthropic): ``messages.1.content.0.text: ...``.
_LEADING_FIELD = re.compile(r"^(?P<field>[A-Za-z_][\w]*(?:\.[\w]+|\[\d+\])+):\s+(?P<rest>.+)$",
                            re.DOTALL)
#: Parsing is bounded: a huge error body is cut before any pattern runs over it.
_MAX_TEXT = 64 * 1024


@dataclass(frozen=True)
class Rejection:
    """The server refused the request itself: the field it named (if any) and its reason."""

    reason: str
    field: str | None = None


def rejection(status: int, text: str) -> Rejection | None:
    """The invalid-request verdict of an error answer, or None when it is not one.

    A 4xx other than 401, 403, 408 and 429 is always one (with the field when the
    body names it); a 5xx only when its body says the request was invalid.
    """
    text = text[:_MAX_TEXT]
    message, kind, param, detail = _fields(text)
    found = _from_detail(detail) or _from_pydantic(message or text)
    invalid = (found is not None or (kind or "").lower() in _INVALID_TYPES
               or bool(_VALIDATION.search(message or text)))
    if status >= 500 and not invalid:
        return None
    if not (400 <= status < 600) or status in (401, 403, 408, 429):
        return None
    if found is not None:
        return found
    field = _field_path(param) if param else None
    reason = message or text.strip()
    leading = _LEADING_FIELD.match(reason)
    if leading:
        field = field or _field_path(leading["field"])
        reason = leading["rest"]
    return Rejection(reason=" ".join(reason.split())[:300], field=field)


def _fields(text: str) -> tuple[str, str | None, str | None, object]:
    """(message, error type, param, FastAPI detail) of a JSON error body."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return "", None, None, None
    if not isinstance(data, dict):
        return "", None, None, None
    error = data.get("error")
    if isinstance(error, str):
        return error, None, None, None
    source: dict[str, Any] = error if isinstance(error, dict) else data
    message, kind, param = source.get("message"), source.get("type"), source.get("param")
    return (message if isinstance(message, str) else "",
            kind if isinstance(kind, str) else None,
            param if isinstance(param, str) else None,
            data.get("detail"))


def _from_detail(detail: object) -> Rejection | None:
    """FastAPI's 422 ``detail`` list."""
    if not isinstance(detail, list):
        return None
    errors = [(tuple(item["loc"]), str(item.get("msg", "")), str(item.get("type", "")))
              for item in detail
              if isinstance(item, dict) and isinstance(item.get("loc"), list)]
    return _pick(errors)


def _from_pydantic(text: str) -> Rejection | None:
    """Pydantic errors printed as their repr (llama-cpp-python's 500, vLLM's 400)."""
    errors = []
    for match in _PYDANTIC.finditer(text):
        loc = tuple(_loc_part(part) for part in match["loc"].split(",") if part.strip())
        errors.append((loc, match["msg"], match["type"]))
    return _pick(errors)


def _loc_part(part: str) -> object:
    part = part.strip().strip("'\"")
    return int(part) if part.isdigit() else part


def _pick(errors: list[tuple[tuple[object, ...], str, str]]) -> Rejection | None:
    """The error that names the field: a value refused by a union member whose
    discriminator (``role``, ``type``) matched, not the members that never applied."""
    if not errors:
        return None
    mismatched = {loc[:-1] for loc, _, kind in errors
                  if kind == "literal_error" and loc and loc[-1] in ("role", "type")}
    relevant = [error for error in errors
                if not any(error[0][:len(prefix)] == prefix for prefix in mismatched)]
    loc, msg, _ = (relevant or errors)[0]
    more = len(relevant) - 1
    reason = msg + (f" (and {more} more)" if more > 0 else "")
    return Rejection(reason=reason, field=_render(loc))


def _render(loc: tuple[object, ...]) -> str | None:
    """``('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content')`` ->
    ``messages[2].content``: the request's own path, without pydantic's type tags."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif isinstance(part, str) and part and not _is_tag(part):
            path += f".{part}" if path else part
    return path or None


def _is_tag(part: str) -> bool:
    """A pydantic type tag in a loc (``typed-dict``, ``function-after[...]``, a class name)."""
    return part[0].isupper() or any(char in part for char in "-[](), ")


def _field_path(text: str) -> str:
    """``messages.1.content`` / ``messages.[1].content`` -> ``messages[1].content``."""
    return re.sub(r"\.\[?(\d+)\]?", r"[\1]", text.strip())
