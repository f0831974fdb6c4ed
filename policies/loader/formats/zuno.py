"""zuno agents: the ``agents`` map of a ``zuno.json`` and Markdown under ``{agent,agents}/**``.

Exactly ``shared/spec/zuno-custom-agents.md``: every field of its table, with
``mode`` deciding reachability (``subagent`` is delegation-only, ``primary``
top-level only, ``all`` both), ``tools``, ``delegates`` and ``requiredSkills``
exact lists, ``steps`` a positive integer, ``permission`` ``{mode, rules}``
where explicit denies stay terminal in every mode, ``color`` a theme colour
or a validated ``#rrggbb``. Unknown keys are not rejected: as the spec says,
they are swept into ``options`` verbatim (a key that looks like a misspelled
restriction gets a warning, since the spec calls this the one place a typo
does not error). ``options`` reach the provider with every request, except the
request fields corral alone sets (``RESERVED_OPTION_KEYS``: refused here);
``reasoning`` and ``variant`` apply only with the agent's configured model.

Configuration layers merge (:mod:`policies.loader.zuno_layers`): each
definition keeps its raw fields (``raw_layer``) so that a later layer's entry
of the same name merges over an earlier one (objects merge, arrays replace);
top-level ``default_agent`` and ``subagent_depth`` are read there too, once
every layer is known, so a ``default_agent`` defined in Markdown is found and
a wrong one never takes the file's agents down.
"""

from __future__ import annotations

import re
from typing import Any

from policies.contract import RESERVED_OPTION_KEYS, AgentContract, AgentFormat
from policies.loader.base import Context, Reader, Source, check_name, json_ready
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.formats.common import allowlist, build, json_document, key_line, markdown
from policies.loader.formats.opencode import PERMISSION_KEYS, permission_rules
from policies.loader.models import native_route
from policies.permissions import PermissionMode, PermissionPolicy
from policies.tools import NATIVE_TOOLS

__all__ = ["ZunoAdapter", "rebuild"]

FIELDS = frozenset({
    "color", "delegates", "description", "disable", "hidden", "mode", "model", "options",
    "permission", "prompt", "reasoning", "requiredSkills", "steps", "temperature", "tools",
    "top_p", "variant",
})
THEME_COLOURS = ("primary", "secondary", "accent", "success", "warning", "error", "info")
HEX_RE = re.compile(r"^#[0-9a-fA-F]{6}$")
REASONING = ("off", "low", "medium", "high", "xhigh", "max")
_PERMISSION_TABLE = {**{name: (name,) for name in NATIVE_TOOLS}, **PERMISSION_KEYS}
_RESTRICTING_FOLDED = {
    **{re.sub(r"[-_]", "", k).casefold(): k
       for k in ("tools", "delegates", "permission", "steps", "mode", "disable",
                 "requiredSkills", "hidden")},
    "tool": "tools", "delegate": "delegates", "permissions": "permission",
    "maxsteps": "steps", "step": "steps", "disabled": "disable", "requiredskill": "requiredSkills",
    "skills": "requiredSkills", "allowedtools": "tools",
}


class ZunoAdapter:
    """zuno's agents map (JSON) and Markdown agents."""

    format = AgentFormat.ZUNO

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """A Markdown file is one agent; a ``zuno.json`` holds the ``agents`` map."""
        if source.path.suffix == ".json":
            return _load_json(source, ctx)
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        if reader.has("prompt"):
            reader.take("prompt")
            reader.error("prompt", "in a Markdown agent the prompt is the body, not a field")
        raw = {**{k: json_ready(v) for k, v in reader.fields.items() if k != "prompt"},
               "prompt": body}
        return [_contract(reader, source, source.location_name, body, raw=raw)]


def _load_json(source: Source, ctx: Context) -> list[AgentContract]:
    document = json_document(source.text)
    if not isinstance(document, dict):
        raise DefinitionRejected("file", "a zuno config must be a JSON object")
    agents = document.get("agents")
    if agents is None:
        ctx.info("agents", "no agents map in this config", code="no_agents")
        return []
    if not isinstance(agents, dict):
        raise DefinitionRejected("agents", "must be a map of agent name to definition",
                                 line=key_line(source.text, "agents"))
    out: list[AgentContract] = []
    ctx.partial = True
    start = max(source.text.find('"agents"'), 0)
    for name, data in agents.items():
        line = key_line(source.text, name, start)
        sub = Context(source, ctx.options)
        try:
            if not isinstance(data, dict):
                raise DefinitionRejected(f"agents.{name}", "must be an object", line=line)
            out.append(rebuild(sub, source, name, data, line=line))
        except DefinitionRejected as exc:
            if not (exc.diag_code == "rejected_after_errors" and sub.failed):
                sub.error(exc.field, exc.reason, line=exc.line or line, hint=exc.hint)
        ctx.diagnostics.extend(sub.diagnostics)
    return out


def rebuild(ctx: Context, source: Source, name: str, data: dict[str, Any], *,
            line: int | None = None) -> AgentContract:
    """The contract of one ``agents`` map entry (or of layers merged into one)."""
    reader = Reader(ctx, data, {}, base_line=line or 1, where=f"agents.{name}.")
    prompt = reader.string("prompt", allow_empty=True) or ""
    return _contract(reader, source, name, prompt, line=line,
                     raw={str(k): json_ready(v) for k, v in data.items()})


def _contract(reader: Reader, source: Source, name: str, prompt: str,
              line: int | None = None, *, raw: dict[str, Any]) -> AgentContract:
    check_name(reader, "name", name, segments=True)
    mode = reader.choice("mode", ["subagent", "primary", "all"]) or "all"
    tools, rules, _ = allowlist(reader, "tools", reader.names("tools", comma=False),
                                AgentFormat.ZUNO)
    delegates = reader.names("delegates", comma=False)
    for agent in delegates or []:
        check_name(reader, "delegates", agent, segments=True)
    permission = _permission(reader)
    color = reader.string("color")
    if color is not None and color not in THEME_COLOURS and not HEX_RE.fullmatch(color):
        reader.error("color", f"must be a theme colour ({', '.join(THEME_COLOURS)}) or #rrggbb, "
                     f"got {color!r}")
    model = reader.string("model")
    fields: dict[str, Any] = {
        "description": reader.string("description"),
        "model": native_route(reader, "model", [model] if model else []),
        "reasoning": reader.choice("reasoning", REASONING),
        "variant": reader.string("variant"),
        "temperature": reader.number("temperature", low=0, high=2),
        "top_p": reader.number("top_p", low=0, high=1),
        "steps": reader.integer("steps", minimum=1),
        "required_skills": tuple(reader.names("requiredSkills", comma=False) or ()),
        "hidden": bool(reader.boolean("hidden")),
        "disabled": bool(reader.boolean("disable")),
    }
    options: dict[str, Any] = dict(reader.mapping("options") or {})
    for key in options:
        if key in RESERVED_OPTION_KEYS:
            reader.error("options", f"{key!r} is a request field corral alone sets; provider "
                         "options cannot set it")
    for key in list(reader.fields):
        if key in reader.used:
            continue
        folded = re.sub(r"[-_]", "", key).casefold()
        if key in RESERVED_OPTION_KEYS:
            reader.error(key, f"unknown key swept into options, but {key!r} is a request "
                         "field corral alone sets; provider options cannot set it")
        elif folded in _RESTRICTING_FOLDED:
            reader.warn(key, f"unknown key swept into options; did you mean "
                        f"{_RESTRICTING_FOLDED[folded]!r}? It restricts nothing here",
                        code="swept_key")
        options[key] = json_ready(reader.take(key))
    merged = (*permission.rules, *rules)
    return build(
        reader, source, line=line,
        name=name, id=name, display_name=name, instructions=prompt, tools=tools,
        delegates=frozenset(delegates) if delegates is not None else None,
        delegates_exact=True,
        user_invocable=mode != "subagent", subagent_available=mode != "primary",
        permission=permission.model_copy(update={"rules": merged}), color=color,
        options={str(k): json_ready(v) for k, v in options.items()},
        settings_need_own_model=True, raw_layer=raw, **fields,
    )


def _permission(reader: Reader) -> PermissionPolicy:
    value = reader.mapping("permission")
    if value is None:
        return PermissionPolicy()
    unknown = set(value) - {"mode", "rules"}
    if unknown:
        reader.error("permission", f"unknown keys {sorted(unknown)}; expected mode and rules")
    mode = value.get("mode", "standard")
    if mode not in {m.value for m in PermissionMode}:
        reader.error("permission", f"mode must be standard, strict or allow_all, got {mode!r}")
        mode = "standard"
    rules = permission_rules(reader, "permission", value.get("rules", {}),
                             table=_PERMISSION_TABLE, fmt=AgentFormat.ZUNO)
    return PermissionPolicy(mode=PermissionMode(mode), rules=tuple(rules))
