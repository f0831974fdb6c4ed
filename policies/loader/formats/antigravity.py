"""Google Antigravity agents (``.agents/agents/*.md``, ``.agents/agents/<name>/agent.md``).

There is no official public specification (``shared/formats.md`` rates it
low confidence); corral follows the ngn adapter table: ``name`` and
``description`` required, ``tools`` (omitted means *no tools*, Antigravity's
documented default), ``mainAgent`` and ``subagent`` for reachability, a
foreign ``model``. Command policies, plugins, skills and MCP settings reject.
The header is strict YAML.
"""

from __future__ import annotations

from policies.contract import AgentContract, AgentFormat
from policies.loader.base import Context, FieldRules, Source, check_name
from policies.loader.formats.common import allowlist, build, markdown
from policies.loader.formats.foreign_keys import CLAUDE_KEYS, cross_harness
from policies.loader.models import foreign_route
from policies.permissions import PermissionPolicy

__all__ = ["AntigravityAdapter"]

FIELDS = frozenset({"name", "description", "tools", "mainAgent", "subagent", "model"})
_UNSUPPORTED = "is not supported: Antigravity command policies, plugins, skills and MCP settings " \
    "have no corral equivalent"
RULES = FieldRules(
    unsupported={
        **dict.fromkeys(("commandPolicies", "command_policies", "plugins", "skills", "mcp",
                         "mcpServers", "mcp_servers"), _UNSUPPORTED),
        **cross_harness("Antigravity", "Claude",
                        {k: v for k, v in CLAUDE_KEYS.items() if k != "tools"}, {}),
    },
    near_miss={"main_agent": "mainAgent", "subAgent": "subagent", "sub_agent": "subagent"},
    restricting=frozenset({"tools", "mainAgent", "subagent", "model"}),
)


class AntigravityAdapter:
    """Antigravity's Markdown agents."""

    format = AgentFormat.ANTIGRAVITY

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one agent."""
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        name = reader.string("name", required=True) or source.location_name
        check_name(reader, "name", name)
        description = reader.string("description", required=True)
        names = reader.names("tools")
        tools, rules, _ = allowlist(reader, "tools", names if names is not None else [],
                                    self.format)
        main_agent = reader.boolean("mainAgent")
        subagent = reader.boolean("subagent")
        model = foreign_route(reader, "model", reader.string("model"), self.format)
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=name, display_name=name, description=description, instructions=body,
            model=model, tools=tools,
            user_invocable=True if main_agent is None else main_agent,
            subagent_available=True if subagent is None else subagent,
            permission=PermissionPolicy(rules=tuple(rules)), extras=extras,
        )]
