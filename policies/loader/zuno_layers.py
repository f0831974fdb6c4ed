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

Model routing presets (:func:`apply_presets`; "An agent's model is the most
specific route. When it is absent, the active preset's agent route applies,
then the parent session model"): ``presets`` maps a preset name to a body of
exactly ``agents`` and ``categories`` maps, each a model choice per name (a
``provider/model`` string, or ``{"model", "reasoning"}``); layers merge (objects
merge). ``preset`` names the active one (the latest layer's). A zuno agent
without a model of its own gets the active preset's route for its name; its own
``reasoning`` and ``variant`` then do not apply (they go with its configured
model only): the route's ``reasoning`` does. Flat bodies, ``variant`` and any
other key in a preset are errors on that key, never ignored; a preset naming
an agent that is not a zuno agent routes nothing (a warning); ``categories``
route workflow nodes, which corral does not have (an info note).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from policies.capability import DEFAULT_SUBAGENT_DEPTH
from policies.contract import AgentContract, AgentFormat, ModelRoute
from policies.loader.base import Context, Options, Source
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.common import json_document, key_line
from policies.loader.formats.zuno import rebuild
from policies.loader.models import parse_ref

__all__ = ["ZunoSettings", "apply_presets", "apply_settings", "merge", "merge_layers",
           "read_settings"]

#: zuno's provider-neutral reasoning levels (a preset route's ``reasoning``).
_REASONING = ("off", "low", "medium", "high", "xhigh", "max")


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
    preset: Any = None
    preset_line: int = 1
    presets: Any = None
    presets_line: int = 1


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
        preset=document.get("preset"),
        preset_line=key_line(text, "preset"),
        presets=document.get("presets"),
        presets_line=key_line(text, "presets"),
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


def apply_presets(layers: Iterable[ZunoSettings], agents: Mapping[str, AgentContract],
                  ) -> tuple[dict[str, AgentContract], list[Diagnostic]]:
    """The zuno agents the active preset routes (by name, their route replaced), and the
    diagnostics about ``preset`` and ``presets`` (see the module docstring)."""
    notes: list[Diagnostic] = []
    bodies: dict[str, tuple[ZunoSettings, dict[str, JsonValue]]] = {}
    active: tuple[ZunoSettings, Any] | None = None
    for layer in layers:
        if layer.preset is not None:
            active = (layer, layer.preset)
        if layer.presets is None:
            continue
        if not isinstance(layer.presets, dict):
            notes.append(_diag(layer.display, layer.presets_line, "presets", Severity.ERROR,
                               "must be a map of preset name to preset body", "preset"))
            continue
        for name, body in layer.presets.items():
            problems = _body_problems(body)
            if problems:
                notes += [_diag(layer.display, layer.presets_line, f"presets.{name}{where}",
                                Severity.ERROR, f"{why}; the preset is not used", "preset")
                          for where, why in problems]
                continue
            below = bodies[name][1] if name in bodies else {}
            bodies[name] = (layer, merge(below, body))
    if active is None:
        return {}, notes
    layer, name = active
    if not isinstance(name, str) or name not in bodies:
        known = ", ".join(sorted(bodies)) or "none"
        notes.append(_diag(layer.display, layer.preset_line, "preset", Severity.ERROR,
                           f"names no preset: {name!r} (presets: {known}); no preset route "
                           "applies", "preset"))
        return {}, notes
    where, body = bodies[name]
    routed: dict[str, AgentContract] = {}
    agent_routes = body.get("agents")
    for agent, choice in (agent_routes.items() if isinstance(agent_routes, dict) else ()):
        contract = agents.get(agent)
        if contract is None or contract.origin.format is not AgentFormat.ZUNO:
            what = "no loaded agent" if contract is None else f"a {contract.origin.format.value} " \
                "agent, whose route is its own file's"
            notes.append(_diag(where.display, where.presets_line, f"presets.{name}.agents.{agent}",
                               Severity.WARNING, f"routes {what}: it routes nothing",
                               "preset"))
            continue
        if not contract.model.inherit or contract.model.provider is not None:
            continue  # the agent's own model is the most specific route
        routed[agent] = contract.model_copy(update={"model": _route(choice, name)})
    if body.get("categories"):
        notes.append(_diag(where.display, where.presets_line, f"presets.{name}.categories",
                           Severity.INFO, "categories route workflow nodes; corral has no "
                           "workflows, so they route nothing", "preset"))
    return routed, notes


def _body_problems(body: Any) -> list[tuple[str, str]]:
    """What is wrong with one preset body (``(where, why)``; empty when it is valid)."""
    if not isinstance(body, dict):
        return [("", "a preset body must be an object with agents and categories")]
    problems: list[tuple[str, str]] = []
    for key, value in body.items():
        if key not in ("agents", "categories"):
            why = ("variant is provider-specific and not allowed in a preset" if key == "variant"
                   else "not a field of a preset (a body holds exactly agents and categories; "
                   "flat forms are not accepted)")
            problems.append((f".{key}", why))
            continue
        if value is None:
            continue
        if not isinstance(value, dict):
            problems.append((f".{key}", "must be a map of name to model choice"))
            continue
        for target, choice in value.items():
            problem = _choice_problem(choice)
            if problem:
                problems.append((f".{key}.{target}", problem))
    return problems


def _choice_problem(choice: Any) -> str | None:
    if isinstance(choice, str):
        return None if choice.strip() else "a model choice must not be empty"
    if not isinstance(choice, dict):
        return "a model choice is a provider/model string or {model, reasoning}"
    unknown = set(choice) - {"model", "reasoning"}
    if unknown:
        return (f"a model choice holds only model and reasoning, not {sorted(unknown)}"
                + (" (variant is provider-specific)" if "variant" in unknown else ""))
    model = choice.get("model")
    if not isinstance(model, str) or not model.strip():
        return "model is required, in provider/model form"
    reasoning = choice.get("reasoning")
    if reasoning is not None and reasoning not in _REASONING:
        return f"reasoning must be one of {', '.join(_REASONING)}, got {reasoning!r}"
    return None


def _route(choice: JsonValue, preset: str) -> ModelRoute:
    """A (valid) model choice as a route: the model, with the choice's reasoning as its
    level (a bare string leaves reasoning to the model)."""
    if not isinstance(choice, dict):
        return ModelRoute(candidates=(parse_ref(str(choice)),), preset=preset)
    ref = parse_ref(str(choice["model"]))
    reasoning = choice.get("reasoning")
    if isinstance(reasoning, str):
        ref = ref.model_copy(update={"level": reasoning})
    return ModelRoute(candidates=(ref,), preset=preset)


def _diag(file: str, line: int, field: str, severity: Severity, reason: str,
          code: str) -> Diagnostic:
    return Diagnostic(file=file, line=line, field=field, severity=severity, reason=reason,
                      code=code)
