"""A strict YAML reader for definition headers.

PyYAML's ``safe_load`` accepts things a definition must not contain, so this
loader rejects them with the line they are on:

* duplicate keys (PyYAML silently keeps the last one, so ``tools`` written
  twice would quietly change what an agent may do);
* anchors and aliases (a billion-laughs header, or one value silently shared);
* explicit tags (``!!python/...``, ``!!binary``, or any other);
* non-string mapping keys.

It also resolves scalars with YAML 1.2 core rules, not YAML 1.1: ``no`` and
``on`` stay strings (``name: no`` is the name "no"), ``1:30`` is not
sexagesimal, and dates stay strings so every value is JSON-ready.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

__all__ = ["YamlError", "load_mapping", "load_value"]


class YamlError(Exception):
    """A strict-YAML violation, with the 1-based line inside the parsed text."""

    def __init__(self, message: str, line: int | None, *, syntax: bool) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        #: True for plain syntax errors (where a lenient reader may retry),
        #: False for rule violations (duplicates, aliases, tags) that never load.
        self.syntax = syntax


class _Resolver(yaml.resolver.BaseResolver):
    pass


_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


class _StrictLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    yaml.constructor.SafeConstructor,
    _Resolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        _Resolver.__init__(self)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.events.AliasEvent):
            raise YamlError(f"YAML aliases are not allowed (*{event.anchor})", line, syntax=False)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise YamlError(f"YAML anchors are not allowed (&{anchor})", line, syntax=False)
        tag = getattr(event, "tag", None)
        implicit = getattr(event, "implicit", True)
        explicit = tag is not None and (
            tag == "!" or implicit is False
            or (isinstance(implicit, tuple) and not any(implicit))
        )
        if explicit:
            raise YamlError(f"explicit YAML tags are not allowed ({tag})", line, syntax=False)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                raise YamlError(
                    "mapping keys must be plain strings", key_node.start_mark.line + 1, syntax=False
                )
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise YamlError(
                    f"mapping key {key!r} is not a string", key_node.start_mark.line + 1,
                    syntax=False,
                )
            if key in seen:
                raise YamlError(
                    f"duplicate key {key!r} (first at line {seen[key]})",
                    key_node.start_mark.line + 1,
                    syntax=False,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=True)


def _parse(text: str) -> tuple[Any, dict[str, int]]:
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        lines: dict[str, int] = {}
        if isinstance(node, MappingNode):
            for key_node, _ in node.value:
                if isinstance(key_node, ScalarNode):
                    lines.setdefault(str(key_node.value), key_node.start_mark.line + 1)
        return loader.construct_document(node), lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlError(problem, mark.line + 1 if mark else None, syntax=True) from exc
    except yaml.YAMLError as exc:
        raise YamlError(str(exc), None, syntax=True) from exc
    except RecursionError as exc:
        raise YamlError("YAML nesting is too deep", None, syntax=False) from exc
    finally:
        loader.dispose()


def load_value(text: str) -> Any:
    """Parse one YAML document strictly."""
    return _parse(text)[0]


def load_mapping(text: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Parse a YAML mapping strictly; return it with each top-level key's line.

    An empty document is an empty mapping; any other non-mapping is an error.
    """
    value, lines = _parse(text)
    if value is None:
        return {}, {}
    if not isinstance(value, dict):
        raise YamlError(
            f"the header must be a mapping of fields, got a {type(value).__name__}", 1, syntax=False
        )
    return value, lines
