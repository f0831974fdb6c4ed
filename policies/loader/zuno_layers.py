"""zuno configuration layers: entries merge, and the top-level keys apply.

zuno-custom-agents.md: "because arrays replace across configuration layers, a
project layer setting tools discards the global list entirely". Objects merge:
a project entry ``{"rv": {"tools": ["read"]}}`` keeps the global entry's
description, prompt and steps and replaces only its tools. corral's layers,
oldest first: the global config directory (``$XDG_CONFIG_HOME/zuno``), then
every project ``.zuno`` directory (the root's first, then nested ones,
shallower before deeper); in each, ``zuno.json`` and then the Markdown agents
(a file per agent is more specific than the map). A later definition of the
same name that is also a zuno definition merges over the earlier one
(:func:`merge`); one of another format replaces it, as every collision does.
Each layer is checked on its own first, so a bad layer never replaces a good
one.

The related top-level keys, read from every ``zuno.json`` once all layers are
loaded (:func:`apply_settings`):

- ``default_agent`` ("Agent to use when none is named. Must be a primary
  agent"): the latest layer's value; it may name an agent of any layer or
  format, Markdown included. One that names no agent, or one that is not a
  primary agent, is an error on that key and is not used; the file's agents
  still load;
- ``subagent_depth`` ("Maximum subagent nesting depth", default 1): a
  repository's file must never widen what its own agents may do, so a value
  can only lower the limit of the user's corral config; the lowest of all
  layers applies. A value that is not an integer >= 0 is an error and fails
  closed: depth 0, no delegation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from policies.capability import DEFAULT_SUBAGENT_DEPTH
from policies.contract import AgentContract, AgentFormat
from policies.loader.base import Context, Options, Source
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.common import json_document, key_line
from policies.loader.formats.zuno import rebuild

__all__ = ["ZunoSettings", "apply_settings", "merge", "merge_layers", "read_settings"]


def merge(base: Mapping[str, JsonValue], over: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """``over`` merged onto ``base``: objects merge key by key, anything else (arrays
    included) replaces."""
    out: dict[str, JsonValue] = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            out[key] = merge(below, value)
        else:
            out[key] = value
    return out


def merge_layers(old: AgentContract, new: AgentContract, options: Options,
                 ) -> tuple[AgentContract | None, list[Diagnostic]]:
    """``new`` merged over ``old`` when both are zuno layers, else ``None``."""
    if (old.origin.format is not AgentFormat.ZUNO or new.origin.format is not AgentFormat.ZUNO
            or old.raw_layer is None or new.raw_layer is None):
        return None, []
    origin = new.origin.model_copy(update={"layers": (*old.origin.layers, old.origin.source)})
    source = Source(path=Path(new.origin.file), display=new.origin.source,
                    scope=new.origin.scope, format=AgentFormat.ZUNO, text="",
                    location_name=new.name)
    ctx = Context(source, options)
    try:
        merged = rebuild(ctx, source, new.name, merge(old.raw_layer, new.raw_layer),
                         line=new.origin.line)
    except DefinitionRejected:
        errors = [d for d in ctx.diagnostics if d.severity is Severity.ERROR]
        return None, [d.model_copy(update={
            "reason": f"merged over {old.origin.source}: {d.reason}; the layer is used alone",
            "code": "layer_merge"}) for d in errors]
    note = Diagnostic(
        file=new.origin.source, line=new.origin.line or 1, field="name",
        severity=Severity.INFO, code="layered",
        reason=f"agent {new.name!r} from {new.origin.source} merges over the one from "
        f"{old.origin.source} (objects merge, arrays replace)")
    return merged.model_copy(update={"origin": origin, "display_name": new.display_name,
                                     "id": new.id}), [note]


@dataclass(frozen=True)
class ZunoSettings:
    """The top-level keys of one ``zuno.json``, where they were found."""

    display: str
    default_agent: Any = None
    default_line: int = 1
    subagent_depth: Any = None
    depth_line: int = 1
    has_default: bool = False
    has_depth: bool = False


def read_settings(path: Path, display: str) -> ZunoSettings | None:
    """The top-level keys of ``path`` (``None`` when it cannot be read: its own load says
    why)."""
    try:
        text = decode_text(read_bounded(path))
        document = json_document(text)
    except DefinitionRejected:
        return None
    if not isinstance(document, dict):
        return None
    return ZunoSettings(
        display=display,
        default_agent=document.get("default_agent"),
        default_line=key_line(text, "default_agent"),
        subagent_depth=document.get("subagent_depth"),
        depth_line=key_line(text, "subagent_depth"),
        has_default="default_agent" in document,
        has_depth="subagent_depth" in document,
    )


def apply_settings(layers: Iterable[ZunoSettings], agents: Mapping[str, AgentContract],
                   ) -> tuple[str | None, int | None, list[Diagnostic]]:
    """(default agent, subagent depth, diagnostics) from every layer, oldest first."""
    notes: list[Diagnostic] = []
    default: tuple[ZunoSettings, Any] | None = None
    depth: int | None = None
    for layer in layers:
        if layer.has_default and layer.default_agent is not None:
            default = (layer, layer.default_agent)
        if not layer.has_depth or layer.subagent_depth is None:
            continue
        value = layer.subagent_depth
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            notes.append(_diag(layer.display, layer.depth_line, "subagent_depth", Severity.ERROR,
                               f"must be an integer >= 0, got {value!r}; delegation is off "
                               "(depth 0) until it is fixed", "subagent_depth"))
            value = 0
        elif value > DEFAULT_SUBAGENT_DEPTH:
            notes.append(_diag(layer.display, layer.depth_line, "subagent_depth", Severity.INFO,
                               f"{value} applies only up to the subagent_depth of your corral "
                               "config (default 1): a zuno.json can lower it, never raise it",
                               "subagent_depth"))
        depth = value if depth is None else min(depth, value)
    chosen = None
    if default is not None:
        layer, name = default
        contract = agents.get(name) if isinstance(name, str) else None
        if contract is None:
            notes.append(_diag(layer.display, layer.default_line, "default_agent",
                               Severity.ERROR, f"names no loaded agent: {name!r}; no default "
                               "agent is used", "default_agent"))
        elif not contract.user_invocable or contract.disabled:
            notes.append(_diag(layer.display, layer.default_line, "default_agent",
                               Severity.ERROR, f"{name!r} is not a primary agent (its mode is "
                               "subagent, or it is disabled); a default_agent must be a "
                               "primary agent, so none is used", "default_agent"))
        else:
            chosen = contract.name
    return chosen, depth, notes


def _diag(file: str, line: int, field: str, severity: Severity, reason: str,
          code: str) -> Diagnostic:
    return Diagnostic(file=file, line=line, field=field, severity=severity, reason=reason,
                      code=code)
