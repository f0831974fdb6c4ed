"""pi subagents (``.pi/agents/*.md``, ``~/.pi/agent/agents/*.md``).

Exactly ``shared/spec/pi-subagent-format.md``: ``name`` and ``description``
required (pi skips such files silently; corral says why), ``tools`` as a
comma string (a YAML list is accepted too) validated against pi's tools,
``subagent`` always rejected and ``delegate`` denied even when ``tools`` is
omitted (no recursive delegation: "every tool the parent has, minus
subagent"), ``model`` and the
ordered ``models`` fallbacks (``@role`` aliases, ``:level`` suffixes, ``*`` and
``@default`` for the parent's model), ``thinking``, ``sandbox`` and
``color``. The header is strict YAML.
"""

from __future__ import annotations

from policies.contract import AgentContract, AgentFormat, SandboxMode
from policies.loader.base import Context, FieldRules, Source, check_name
from policies.loader.formats.common import allowlist, build, markdown
from policies.loader.models import LEVELS, native_route
from policies.permissions import PermissionPolicy

__all__ = ["PiAdapter"]

FIELDS = frozenset({"name", "description", "tools", "model", "models", "thinking", "sandbox",
                    "color"})
COLORS = ("red", "blue", "green", "yellow", "purple", "orange", "pink", "cyan")
RULES = FieldRules(
    near_miss={"tool": "tools", "allowedTools": "tools", "allowed_tools": "tools",
               "sandbox_mode": "sandbox", "sandboxMode": "sandbox", "fallbacks": "models"},
    restricting=frozenset({"tools", "sandbox", "model", "models"}),
)


class PiAdapter:
    """pi's Markdown agents."""

    format = AgentFormat.PI

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one agent."""
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        name = reader.string("name", required=True) or source.location_name
        check_name(reader, "name", name)
        description = reader.string("description", required=True)
        names = reader.names("tools")
        if names is not None and "subagent" in names:
            reader.error("tools", "the subagent tool is always rejected: pi agents cannot "
                         "delegate (no recursion)")
            names = [n for n in names if n != "subagent"]
        tools, rules, _ = allowlist(reader, "tools", names, self.format)
        model = reader.string("model")
        models = reader.names("models") or []
        thinking = reader.choice("thinking", LEVELS)
        sandbox = reader.choice("sandbox", [mode.value for mode in SandboxMode])
        color = reader.string("color")
        if color is not None and color not in COLORS:
            reader.warn("color", f"unknown colour {color!r}; pi accepts {', '.join(COLORS)}")
        route = native_route(reader, "model", ([model] if model else []) + models)
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=name, display_name=name, description=description, instructions=body,
            model=route, reasoning=thinking, tools=tools, delegates=frozenset(),
            denied_tools=frozenset({"delegate"}),
            sandbox=SandboxMode(sandbox) if sandbox else None,
            permission=PermissionPolicy(rules=tuple(rules)), color=color, extras=extras,
        )]
