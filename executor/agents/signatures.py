"""A tool's arguments in one line (``agents show``), from the JSON schema its model is sent.

``edit(path: string, old_string: string, new_string: string, replace_all?: boolean = false)``:
``?`` marks an optional argument, ``= V`` its default, ``a|b`` choices or alternatives,
``T[]`` a list, ``{...}`` an object's own fields. Enough to write a replay's ``arguments``
without reading the source; ``agents show --json`` carries each whole schema too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["signature"]

_MAX_DEPTH = 3


def signature(name: str, schema: Mapping[str, Any]) -> str:
    """``name(arg: type, opt?: type = default, ...)`` for an object schema."""
    return f"{name}({_fields(schema, schema.get('$defs') or {}, 0)})"


def _fields(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> str:
    required = set(schema.get("required") or ())
    parts = []
    for field, spec in (schema.get("properties") or {}).items():
        text = f"{field}{'' if field in required else '?'}: {_type(spec, defs, depth)}"
        if "default" in spec and spec["default"] is not None:
            text += f" = {json.dumps(spec['default'])}"
        parts.append(text)
    return ", ".join(parts)


def _type(spec: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> str:
    if "$ref" in spec:
        target = defs.get(str(spec["$ref"]).rsplit("/", 1)[-1], {})
        return _type(target, defs, depth)
    if "enum" in spec:
        return "|".join(str(value) for value in spec["enum"])
    options = spec.get("anyOf") or spec.get("oneOf")
    if options:
        kinds = [_type(option, defs, depth) for option in options
                 if option.get("type") != "null"]
        return "|".join(dict.fromkeys(kinds)) or "null"
    kind = spec.get("type")
    if kind == "array":
        inner = _type(spec.get("items") or {}, defs, depth)
        alternatives = "|" in inner and not inner.startswith("{")
        return f"({inner})[]" if alternatives else f"{inner}[]"
    if kind == "object" or "properties" in spec:
        if depth >= _MAX_DEPTH or not spec.get("properties"):
            return "object"
        return "{" + _fields(spec, defs, depth + 1) + "}"
    return str(kind) if isinstance(kind, str) else "any"
