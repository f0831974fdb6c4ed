"""Gemini CLI subagents (``.gemini/agents/*.md``).

Supported: ``kind: local`` (``remote`` rejects), ``name`` (required, a slug
``^[a-z0-9-_]+$`` as Gemini demands), ``description`` (required),
``display_name``, ``tools`` (an array, as Gemini demands: a comma string
rejects), ``model`` (foreign), ``temperature``, ``max_turns``,
``timeout_mins``. Gemini subagents cannot delegate, so the contract denies
the ``delegate`` tool and its delegation allowlist is empty. ``mcp_servers``
rejects. The header is strict YAML, as Gemini's own loader is.
"""

from __future__ import annotations

import re

from policies.contract import AgentContract, AgentFormat
from policies.loader.base import Context, FieldRules, Source, check_name
from policies.loader.formats.common import allowlist, build, markdown
from policies.loader.formats.foreign_keys import CLAUDE_KEYS, cross_harness
from policies.loader.models import foreign_route
from policies.mcp import DEFINITION_SERVERS
from policies.permissions import PermissionPolicy

__all__ = ["GeminiAdapter"]

FIELDS = frozenset({"kind", "name", "description", "display_name", "tools", "mcp_servers",
                    "model", "temperature", "max_turns", "timeout_mins"})
SLUG_RE = re.compile(r"^[a-z0-9-_]+$")
RULES = FieldRules(
    unsupported={
        "mcp_servers": DEFINITION_SERVERS,
        "mcpServers": DEFINITION_SERVERS,
        **cross_harness("Gemini", "Claude",
                        {k: v for k, v in CLAUDE_KEYS.items() if k not in {"tools", "maxTurns"}},
                        {}),
    },
    near_miss={"maxTurns": "max_turns", "timeoutMins": "timeout_mins"},
    restricting=frozenset({"tools", "max_turns", "timeout_mins", "kind", "model"}),
)


class GeminiAdapter:
    """Gemini CLI's Markdown agents."""

    format = AgentFormat.GEMINI

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one local agent."""
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        kind = reader.string("kind")
        if kind == "remote":
            reader.error("kind", "remote agents are not supported: corral runs local agents only")
        elif kind is not None and kind != "local":
            reader.error("kind", f"must be local, got {kind!r}")
        name = reader.string("name", required=True) or source.location_name
        if check_name(reader, "name", name) and not SLUG_RE.fullmatch(name):
            reader.error("name", f"Gemini names are lowercase slugs (^[a-z0-9-_]+$), got {name!r}")
        description = reader.string("description", required=True)
        display = reader.string("display_name") or name
        tools, rules, _ = allowlist(reader, "tools", reader.names("tools", comma=False),
                                    self.format)
        temperature = reader.number("temperature", low=0, high=2)
        steps = reader.integer("max_turns", minimum=1)
        timeout = reader.integer("timeout_mins", minimum=1)
        model = foreign_route(reader, "model", reader.string("model"), self.format)
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=name, display_name=display, description=description, instructions=body,
            model=model, temperature=temperature, tools=tools, delegates=frozenset(),
            denied_tools=frozenset({"delegate"}),
            steps=steps, timeout_seconds=timeout * 60 if timeout else None,
            permission=PermissionPolicy(rules=tuple(rules)), extras=extras,
        )]
