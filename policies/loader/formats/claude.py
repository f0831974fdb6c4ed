"""Claude Code subagents (``.claude/agents/*.md``).

Supported: ``name`` and ``description`` (required), ``tools`` and
``disallowedTools`` (list or comma form, with ``Bash(...)``, ``Agent(...)`` and
path specifiers), ``model`` (foreign: needs an override unless ``inherit``),
``permissionMode`` (``default``/``manual``/``acceptEdits``/``auto`` keep the
standard mode, ``dontAsk`` is strict, ``bypassPermissions`` is ``allow_all``,
which removes prompts and never restrictions, ``plan`` narrows to reviewer;
any other value rejects), ``maxTurns``, ``skills``, ``effort``,
``isolation: worktree``. ``hooks`` and ``mcpServers`` reject: corral runs no
foreign hooks, and MCP servers come from the user config (``[mcp_servers.NAME]``),
never from a definition. The header may fall back to the lenient
reader, as Claude Code tolerates unquoted multi-line descriptions.
"""

from __future__ import annotations

from typing import Any

from policies.contract import AgentContract, AgentFormat, AgentMode, SandboxMode
from policies.loader.base import Context, FieldRules, Reader, Source, tolerant_name
from policies.loader.formats.common import allowlist, build, denylist, markdown
from policies.loader.models import foreign_route
from policies.mcp import DEFINITION_SERVERS
from policies.permissions import PermissionMode, PermissionPolicy

__all__ = ["ClaudeAdapter", "claude_fields"]

FIELDS = frozenset({
    "name", "description", "tools", "disallowedTools", "model", "permissionMode", "maxTurns",
    "skills", "mcpServers", "hooks", "memory", "background", "effort", "isolation", "color",
    "initialPrompt",
})
PERMISSION_MODES = {
    "default": PermissionMode.STANDARD, "manual": PermissionMode.STANDARD,
    "acceptEdits": PermissionMode.STANDARD, "auto": PermissionMode.STANDARD,
    "dontAsk": PermissionMode.STRICT, "bypassPermissions": PermissionMode.ALLOW_ALL,
    "plan": PermissionMode.STANDARD,
}
EFFORTS = ("low", "medium", "high", "xhigh", "max")
RULES = FieldRules(
    cosmetic=frozenset({"initialPrompt"}),
    unsupported={
        "hooks": "hooks are not supported: corral runs no foreign hooks",
        "mcpServers": DEFINITION_SERVERS,
    },
    near_miss={"allowedTools": "tools", "allowed_tools": "tools", "allowed-tools": "tools",
               "deniedTools": "disallowedTools", "denied_tools": "disallowedTools",
               "maxSteps": "maxTurns", "max_steps": "maxTurns", "handoffs": "Agent(...) in tools"},
    restricting=frozenset({"tools", "disallowedTools", "permissionMode", "maxTurns", "isolation",
                           "mcpServers", "model"}),
)


class ClaudeAdapter:
    """Claude Code's Markdown agents."""

    format = AgentFormat.CLAUDE

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one agent."""
        reader, body = markdown(source, ctx, known=FIELDS, lenient=True)
        fields = claude_fields(reader, AgentFormat.CLAUDE)
        fields["extras"] = {**fields["extras"], **reader.leftovers(RULES)}
        return [build(reader, source, instructions=body, **fields)]


def claude_fields(reader: Reader, fmt: AgentFormat) -> dict[str, Any]:
    """The contract fields of a Claude-shaped header (shared with Cursor's subset)."""
    written = reader.string("name", required=True)
    display = written or reader.ctx.source.location_name
    # Claude Code (and Cursor) load names with spaces or dots ("Frontend Developer"): a
    # stable identity is derived, the name as written stays the display name.
    name = tolerant_name(reader, "name", display,
                         stem=reader.ctx.source.location_name if written else None)
    description = reader.string("description", required=True)
    tools, rules, delegates = allowlist(reader, "tools", reader.names("tools"), fmt)
    denied, deny_rules = denylist(reader, "disallowedTools", reader.names("disallowedTools"), fmt)
    mode = AgentMode.BUILD
    permission_mode = PermissionMode.STANDARD
    raw_mode = reader.string("permissionMode")
    if raw_mode is not None:
        if raw_mode not in PERMISSION_MODES:
            reader.error("permissionMode", f"unknown permission mode {raw_mode!r}",
                         hint="one of " + ", ".join(PERMISSION_MODES))
        else:
            permission_mode = PERMISSION_MODES[raw_mode]
            if raw_mode == "plan":
                mode = AgentMode.REVIEWER
    sandbox = None
    isolation = reader.string("isolation")
    if isolation is not None:
        if isolation != "worktree":
            reader.error("isolation", f"unknown isolation {isolation!r}; only 'worktree' exists")
        sandbox = SandboxMode.WORKTREE
    effort = reader.choice("effort", EFFORTS)
    skills = reader.names("skills") or []
    if reader.boolean("background"):
        reader.warn("background", "background scheduling is not supported; the agent runs in "
                    "the foreground under corral")
    memory = reader.string("memory")
    if memory is not None:
        reader.warn("memory", f"persistent agent memory ({memory}) is not provided; the agent "
                    "starts without it")
    return {
        "name": name, "id": name, "display_name": display, "description": description,
        "model": foreign_route(reader, "model", reader.string("model"), fmt),
        "reasoning": effort, "tools": tools, "denied_tools": denied, "delegates": delegates,
        "mode": mode, "sandbox": sandbox,
        "permission": PermissionPolicy(mode=permission_mode, rules=(*rules, *deny_rules)),
        "steps": reader.integer("maxTurns", minimum=1), "required_skills": tuple(skills),
        "color": reader.string("color"),
        "extras": {"memory": memory} if memory else {},
    }
