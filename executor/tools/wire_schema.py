"""The JSON schema a model is shown for a native tool: pydantic's, without its bulk.

Every request carries every offered tool's schema, and a small local model reads them
in its context window: pydantic's own schema spends most of its bytes on what no model
needs (a ``title`` per field, ``anyOf [X, null]`` with ``default: null`` for every
optional argument, ``$defs`` references). :func:`compact` keeps what says how to call
the tool (types, descriptions, enums, bounds, required, ``additionalProperties``) and
drops the rest; the arguments are still validated by the pydantic model itself, so a
compact schema can never admit more. ``scripts/bench_tool_schemas.py`` measures it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compact"]

_NULL = {"type": "null"}


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (pydantic's ``model_json_schema()``) made compact; see the module."""
    defs = schema.get("$defs", {})
    top = schema.get("properties", {})
    seen = {name: prop.get("description") for name, prop in top.items()
            if isinstance(prop, dict)}
    out: dict[str, Any] = _node(schema, defs, seen, depth=0, nested=False)
    out.pop("$defs", None)
    return out


def _node(node: Any, defs: dict[str, Any], seen: dict[str, Any], *, depth: int,
          nested: bool) -> Any:
    if isinstance(node, list):
        return [_node(item, defs, seen, depth=depth, nested=nested) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict):  # inlined: one level deeper, nested under another tool
            return _node({**target, **{k: v for k, v in node.items() if k != "$ref"}},
                         defs, seen, depth=depth + 1, nested=True)
    node = _unwrap_optional(node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs") or (key == "default" and value is None):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _property(name, prop, defs, seen, depth=depth, nested=nested)
                        for name, prop in value.items()}
        else:
            out[key] = _node(value, defs, seen, depth=depth, nested=nested)
    return out


def _property(name: str, prop: Any, defs: dict[str, Any], seen: dict[str, Any], *,
              depth: int, nested: bool) -> Any:
    """One argument; nested under another (a task of ``delegate``), a description the
    top level already gave for the same name is not repeated."""
    out = _node(prop, defs, seen, depth=depth, nested=nested)
    if nested and isinstance(out, dict) and out.get("description") is not None \
            and out.get("description") == seen.get(name):
        out.pop("description")
    return out


def _unwrap_optional(node: dict[str, Any]) -> dict[str, Any]:
    """``{anyOf: [X, {type: null}], default: null, ...}`` -> ``X`` with the rest: an
    optional argument is one that is not required, not one that may be null."""
    options = node.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and _NULL in options
            and "default" in node and node["default"] is None):
        return node
    [kept] = [option for option in options if option != _NULL]
    if not isinstance(kept, dict):
        return node
    rest = {key: value for key, value in node.items() if key not in ("anyOf", "default")}
    return {**kept, **rest}
