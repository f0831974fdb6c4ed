"""pi subagents (``.pi/agents/*.md``, ``~/.pi/agent/agents/*.md``).

Exactly ``shared/spec/pi-subagent-format.md``: ``name`` and ``description``
required (pi skips such files silently; corral says why), ``tools`` as a
comma string (a YAML list is accepted too) validated against pi's tools,
``subagent`` always rejected and ``delegate`` denied even when ``tools`` is
omitted (no recursive delegation: "every tool the parent has, minus
subagent"), ``model`` and the
ordered ``models`` fallbacks (``@role`` aliases, ``:level`` suffixes, ``*`` and
``@default`` for the parent's model), ``thinking``, ``sandbox`` and
``color`` (one of the eight accepted values, as the spec lists them: any
other rejects). The header is strict YAML.

``@role`` entries expand through the user's corral config ``[roles]`` and
``subagent.roles`` of pi's settings file (:mod:`policies.loader.pi_settings`),
whose chains the route carries; an undefined role is a warning here and an
error before a run.

What the spec says happens at run time is in the contract too: ``name`` is
kebab-case ("Unique identifier (kebab-case)"); ``sandbox: read-only``
"Overrides any ``tools`` field" with the read-only allowlist (``read``,
``grep``, ``find``, ``ls``; a ``bash`` it lists is kept for the mode to remove, so the
user's review-commands grant can run it in a throwaway layer); the model candidates
end with the parent's model
("Resolution order is legacy ``model``, then each ``models`` entry, then the
authenticated parent model"); and the whole conversation is kept ("No
compaction": memory ``full``).
"""

from __future__ import annotations

import re

from policies.contract import (
    AgentContract,
    AgentFormat,
    MemoryConfig,
    MemoryKind,
    ModelRoute,
    SandboxMode,
)
from policies.loader.base import Context, FieldRules, Reader, Source, check_name
from policies.loader.formats.common import allowlist, build, markdown
from policies.loader.models import LEVELS, native_route, parse_ref
from policies.permissions import PermissionPolicy
from policies.tools import ToolGroup, group_of

__all__ = ["PiAdapter"]

FIELDS = frozenset({"name", "description", "tools", "model", "models", "thinking", "sandbox",
                    "color"})
KEBAB_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
#: pi's read-only allowlist (read, grep, find, ls) in canonical names.
READ_ONLY_TOOLS = frozenset({"read_file", "search", "find", "list_files"})
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
        if check_name(reader, "name", name) and not KEBAB_RE.fullmatch(name):
            reader.error("name", f"{name!r} is not kebab-case (lowercase letters and digits "
                         "in words joined by single '-')",
                         hint=f"name it {_kebab(name)!r}" if _kebab(name) else None)
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
            reader.error("color", f"{color!r} is not an accepted value: {', '.join(COLORS)}")
        route = _with_roles(reader, native_route(reader, "model",
                                                 ([model] if model else []) + models))
        if route.candidates and not reader.ctx.options.model:  # then the parent's model
            route = route.model_copy(update={"parent_fallback": True})
        if sandbox == SandboxMode.READ_ONLY.value:
            # The bash it lists stays in its allowlist: its read-only mode removes it unless
            # the user granted review commands (then it runs in a throwaway layer).
            shell = frozenset(t for t in tools or () if group_of(t) is ToolGroup.EXEC)
            if tools is not None and tools != READ_ONLY_TOOLS:
                reader.ctx.info("tools", "sandbox: read-only overrides tools: the agent gets the "
                                "read-only allowlist (read, grep, find, ls)"
                                + ("; the bash it lists runs only where you grant review "
                                   "commands ([review] commands = true, --review-commands), "
                                   "in a throwaway layer" if shell else ""),
                                line=reader.line("sandbox"), code="read_only_override")
            tools, rules = READ_ONLY_TOOLS | shell, []
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=name, display_name=name, description=description, instructions=body,
            model=route, reasoning=thinking, tools=tools, delegates=frozenset(),
            denied_tools=frozenset({"delegate"}),
            sandbox=SandboxMode(sandbox) if sandbox else None,
            memory=MemoryConfig(kind=MemoryKind.FULL),
            permission=PermissionPolicy(rules=tuple(rules)), color=color, extras=extras,
        )]


def _with_roles(reader: Reader, route: ModelRoute) -> ModelRoute:
    """``route`` with the chains of pi's settings for the roles it names (transitively);
    a role defined neither there nor in the user's corral config is a warning (a run
    refuses it before it starts, never falling back to the parent's model)."""
    options = reader.ctx.options
    chains: dict[str, tuple[str, ...]] = {}
    todo = [ref.id[1:] for ref in route.candidates if ref.is_role]
    while todo:
        role = todo.pop()
        if role in chains or role not in options.pi_roles:
            if role not in chains and options.roles is not None and role not in options.roles:
                key = "model" if reader.has("model") and not reader.has("models") else "models"
                reader.warn(key, f"role @{role} is defined neither in [roles] of your corral "
                            "config nor in subagent.roles of ~/.pi/agent/settings.json: a run "
                            "of this agent stops with an error", code="undefined_role")
            continue
        chains[role] = options.pi_roles[role]
        todo += [parse_ref(entry).id[1:] for entry in chains[role]
                 if parse_ref(entry).is_role]
    return route.model_copy(update={"roles": chains}) if chains else route


def _kebab(name: str) -> str | None:
    """The kebab-case spelling of ``name`` (``My_Agent`` -> ``my-agent``), if it has one."""
    words = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)
    kebab = "-".join(word.lower() for word in words)
    return kebab if KEBAB_RE.fullmatch(kebab) else None
