"""Cursor subagents (``.cursor/agents/*.md``).

Supported: ``name`` (the filename when omitted), ``description`` (required),
``model`` (``inherit``,
or a foreign name such as ``fast``), ``readonly`` (narrows to reviewer: no
writes, no shell, no custom/MCP tools, as Cursor's readonly blocks all
three), ``is_background`` (accepted; corral runs the agent in the
foreground). Cursor has no tool allowlist: Claude fields such as ``tools``
reject, with a hint to move the file to ``.claude/agents`` (which Cursor also
reads). The header may fall back to the lenient reader, as for Claude.
"""

from __future__ import annotations

from policies.contract import AgentContract, AgentFormat, AgentMode, SandboxMode
from policies.loader.base import Context, FieldRules, Source, tolerant_name
from policies.loader.formats.common import build, markdown
from policies.loader.formats.foreign_keys import CLAUDE_KEYS, cross_harness
from policies.loader.models import foreign_route

__all__ = ["CursorAdapter"]

FIELDS = frozenset({"name", "description", "model", "readonly", "is_background"})
_MOVE = ("move the agent to .claude/agents (Cursor reads Claude-format files there) or remove "
         "the field")
RULES = FieldRules(
    unsupported={key: reason + "; " + _MOVE
                 for key, reason in cross_harness("Cursor", "Claude", CLAUDE_KEYS, {}).items()},
    near_miss={"read_only": "readonly", "readOnly": "readonly", "isBackground": "is_background"},
    restricting=frozenset({"readonly", "model"}),
)


class CursorAdapter:
    """Cursor's Markdown agents."""

    format = AgentFormat.CURSOR

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one agent."""
        reader, body = markdown(source, ctx, known=FIELDS | frozenset(CLAUDE_KEYS), lenient=True)
        written = reader.string("name")
        display = written or source.location_name  # ngn: filename fallback
        name = tolerant_name(reader, "name", display,
                             stem=source.location_name if written else None)
        description = reader.string("description", required=True)
        readonly = reader.boolean("readonly")
        if reader.boolean("is_background"):
            reader.warn("is_background", "background scheduling is not supported; the agent runs "
                        "in the foreground under corral")
        model = foreign_route(reader, "model", reader.string("model"), self.format)
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=name, display_name=display, description=description,
            instructions=body,
            model=model,
            mode=AgentMode.REVIEWER if readonly else AgentMode.BUILD,
            sandbox=SandboxMode.READ_ONLY if readonly else None,
            extras=extras,
        )]
