"""Tool calls a model wrote as text instead of as calls.

Small and local models often answer with the call spelled out in their text: a Hermes/Qwen
``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` element, a JSON object (bare or
in a fenced block) naming a tool with its ``arguments`` (or ``parameters``), or a
``functions.NAME:`` line followed by the arguments. Such an answer must never pass as a
final answer (exit 0, no calls, no diff). :func:`parse_text_calls` reads an answer and says
which of three cases it is:

- ``none``: no tool-call form in it (a real answer);
- ``calls``: the answer is *only* tool calls, every one well formed (a name and an argument
  object): the session runs them through the dispatcher like any other call, so a name
  the agent does not hold is denied there, exactly as a native call would be;
- ``ambiguous``: a tool-call form among other text, or one that cannot be read: the run
  ends failed ("the model wrote a tool call as text"), and nothing is called.

Parsing never widens the contract: a text call is at most what a native call would be.
The ``calls`` case needs the whole answer to be the calls, so a file the model quotes in a
longer answer (prompt injection included) never becomes a call. A JSON object inside prose
counts as a call form only when it names a tool the agent is offered or a native tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from executor.models.base import ToolCall

__all__ = ["TEXT_CALL_PREFIX", "TextCalls", "parse_text_calls"]

#: The id prefix of a call parsed from text (the record and the journal tell them apart).
TEXT_CALL_PREFIX = "text_call_"
#: Longer answers are not searched past this many characters (the rest is still text).
_LIMIT = 200_000

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_OPEN_TAG = re.compile(r"</?tool_call>")
_FUNCTIONS = re.compile(r"^[ \t]*functions\.([A-Za-z0-9_.:/-]+)[ \t]*:[ \t]*", re.MULTILINE)
_OBJECT_START = re.compile(r"\{\s*\"name\"\s*:")
_FENCE = re.compile(r"^[ \t]*```[A-Za-z0-9_-]*[ \t]*$", re.MULTILINE)
_DECODER = json.JSONDecoder()
_FORMS = {"<tool_call>": "<tool_call>", "functions.": "functions.NAME:", "object": "JSON"}


@dataclass(frozen=True)
class TextCalls:
    """What an answer's text holds: ``kind`` (see the module docstring), the calls of a
    ``calls`` answer, and why an ``ambiguous`` one is."""

    kind: Literal["none", "calls", "ambiguous"]
    calls: tuple[ToolCall, ...] = ()
    reason: str = ""
    #: The tool names the text called (every form found), for the error and the record.
    names: tuple[str, ...] = field(default=())


@dataclass
class _Found:
    start: int
    end: int
    name: str | None
    arguments: dict[str, Any] | None
    form: str


def parse_text_calls(text: str, *, offered: Collection[str],
                     known: Collection[str] = ()) -> TextCalls:
    """Read ``text`` for tool calls written as text (see the module docstring).

    ``offered``: the names the model was shown; ``known``: other tool names a call form in
    prose is recognised by (the native catalog)."""
    body = text[:_LIMIT]
    if not body.strip():
        return TextCalls("none")
    names = {*offered, *known}
    found = _tags(body) + _functions(body)
    taken = [(f.start, f.end) for f in found]
    for item in _objects(body):
        if any(a <= item.start < b for a, b in taken):
            continue  # inside a <tool_call> element or a functions line already
        found.append(item)
    found.sort(key=lambda f: f.start)
    whole = _only_calls(body, found) and len(text) <= _LIMIT
    # A JSON object in prose is a call form only when it names a tool this agent knows of.
    signals = [f for f in found if f.form != "object" or whole or f.name in names]
    if not signals:
        if _OPEN_TAG.search(body):
            return TextCalls("ambiguous", reason="a <tool_call> tag without a readable call")
        return TextCalls("none")
    called = tuple(f.name or "?" for f in signals)
    unreadable = [f for f in signals if f.name is None or f.arguments is None]
    if unreadable:
        return TextCalls("ambiguous", names=called,
                         reason=f"a {_FORMS[unreadable[0].form]} tool call whose name or "
                         "arguments cannot be read")
    if not whole:
        return TextCalls("ambiguous", names=called,
                         reason="a tool call written among other text")
    calls = tuple(ToolCall(id=f"{TEXT_CALL_PREFIX}{index}", name=str(f.name),
                           arguments=dict(f.arguments or {}))
                  for index, f in enumerate(signals))
    return TextCalls("calls", calls=calls, names=called)


def _only_calls(body: str, found: list[_Found]) -> bool:
    """Whether ``body`` is nothing but the call forms (and fences around them)."""
    if not found:
        return False
    rest, last = [], 0
    for item in found:
        if item.start < last:
            return False
        rest.append(body[last:item.start])
        last = item.end
    rest.append(body[last:])
    # Stray braces around the calls are not text: Qwen2.5's own chat template shows the call
    # format as {{"name": ...}}, and its models write the doubled braces back (measured).
    return not _FENCE.sub("", "".join(rest)).strip().strip("{} \t\r\n")


def _call_object(value: object) -> tuple[str | None, dict[str, Any] | None] | None:
    """``{"name": ..., "arguments": {...}}`` -> (name, arguments); ``None``: not that shape."""
    if not isinstance(value, dict) or "name" not in value:
        return None
    keys = set(value) - {"name", "type", "id"}
    if not keys <= {"arguments", "parameters"} or len(keys) != 1:
        return None
    name = value["name"] if isinstance(value["name"], str) and value["name"] else None
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):  # OpenAI's wire form: the arguments as JSON text
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            arguments = None
    return name, arguments if isinstance(arguments, dict) else None


def _decode(text: str, start: int) -> tuple[object, int] | None:
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None


def _tags(body: str) -> list[_Found]:
    found = []
    for match in _TAG.finditer(body):
        decoded = _decode(match[1], 0) if match[1] else None
        shape = _call_object(decoded[0]) if decoded and not match[1][decoded[1]:].strip() \
            else None
        name, arguments = shape if shape is not None else (None, None)
        found.append(_Found(match.start(), match.end(), name, arguments, "<tool_call>"))
    return found


def _functions(body: str) -> list[_Found]:
    found = []
    for match in _FUNCTIONS.finditer(body):
        start = match.end()
        while start < len(body) and body[start] in " \t\r\n":
            start += 1
        end, arguments = match.end(), None
        if start >= len(body):
            arguments = {}  # `functions.NAME:` and nothing after: a call without arguments
        elif body[start] == "{":
            decoded = _decode(body, start)
            if decoded is not None and isinstance(decoded[0], dict):
                arguments, end = decoded[0], decoded[1]
        found.append(_Found(match.start(), end, match[1], arguments, "functions."))
    return found


def _objects(body: str) -> list[_Found]:
    found: list[_Found] = []
    position = 0
    while (match := _OBJECT_START.search(body, position)) is not None:
        decoded = _decode(body, match.start())
        shape = _call_object(decoded[0]) if decoded is not None else None
        if decoded is None or shape is None:
            position = match.start() + 1
            continue
        found.append(_Found(match.start(), decoded[1], shape[0], shape[1], "object"))
        position = decoded[1]
    return found
