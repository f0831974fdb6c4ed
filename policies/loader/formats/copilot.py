"""GitHub Copilot / VS Code custom agents (``.github/agents/*.agent.md`` or ``*.md``).

Identity is the filename minus ``.agent.md``/``.md``; ``name`` is a display
name. Supported: ``description`` (required, as on GitHub), ``tools``
(``['*']`` inherits, ``[]`` permits none), ``model`` (string, list or
pipe-joined; foreign), ``agents`` (``*`` all, ``[]`` none),
``user-invocable``, ``disable-model-invocation``, the deprecated ``infer``,
and the cosmetic ``target``, ``argument-hint`` and ``metadata``.
``handoffs``, ``mcp-servers`` and ``hooks`` reject. The header is strict YAML.
"""

from __future__ import annotations

from policies.contract import AgentContract, AgentFormat
from policies.loader.base import NAME_RE, Context, FieldRules, Source, tolerant_name
from policies.loader.formats.common import allowlist, build, markdown
from policies.loader.formats.foreign_keys import CLAUDE_KEYS, OPENCODE_KEYS, cross_harness
from policies.loader.models import foreign_route
from policies.loader.toolnames import delegate_target
from policies.mcp import DEFINITION_SERVERS
from policies.permissions import PermissionPolicy

__all__ = ["CopilotAdapter"]

FIELDS = frozenset({
    "name", "description", "target", "tools", "model", "agents", "user-invocable",
    "disable-model-invocation", "infer", "argument-hint", "handoffs", "mcp-servers", "metadata",
    "hooks",
})
MAX_BODY = 30_000
RULES = FieldRules(
    cosmetic=frozenset({"argument-hint", "metadata", "target"}),
    unsupported={
        "handoffs": "handoffs are not supported: corral delegates only through the delegate "
        "tool; list the targets in agents instead",
        "mcp-servers": DEFINITION_SERVERS,
        "hooks": "hooks are not supported: corral runs no foreign hooks",
        **cross_harness("Copilot", "Claude", {k: v for k, v in CLAUDE_KEYS.items()
                                              if k != "tools"}, {}),
        **cross_harness("Copilot", "OpenCode", OPENCODE_KEYS, {
            "mode": "user-invocable: false (subagent only) or disable-model-invocation: true "
            "(primary only)",
            "hidden": "user-invocable: false",
        }),
    },
    near_miss={"handoff": "handoffs", "agent": "agents", "tool": "tools",
               "mcpServers": "mcp-servers", "mcp_servers": "mcp-servers"},
    restricting=frozenset({"tools", "agents", "user-invocable", "disable-model-invocation",
                           "infer", "model"}),
)


class CopilotAdapter:
    """Copilot and VS Code custom agents."""

    format = AgentFormat.COPILOT

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one agent."""
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        display = reader.string("name") or source.location_name
        name = tolerant_name(reader, "file", source.location_name)
        description = reader.string("description", required=True)
        target = reader.fields.get("target")
        if target is not None and target not in {"vscode", "github-copilot"}:
            reader.error("target", f"must be vscode or github-copilot, got {target!r}")
        tools, rules, _ = allowlist(reader, "tools", reader.names("tools"), AgentFormat.COPILOT)
        model_value = reader.take("model")
        if isinstance(model_value, list):
            if not all(isinstance(item, str) for item in model_value):
                reader.error("model", "a model list must hold strings")
            model_text: str | None = " | ".join(str(item) for item in model_value) or None
        elif model_value is None or isinstance(model_value, str):
            model_text = model_value
        else:
            reader.error("model", "must be a string or a list of strings")
            model_text = None
        agents = reader.names("agents")
        delegates = None
        if agents is not None and "*" not in agents:
            targets = [delegate_target(agent) for agent in agents]
            for agent, target in zip(agents, targets, strict=True):
                if not NAME_RE.fullmatch(target):
                    reader.error("agents", f"{agent!r} is not an agent name (letters, digits, "
                                 "'_' or '-')")
            delegates = frozenset(targets)
        user_invocable = reader.boolean("user-invocable")
        disable_model = reader.boolean("disable-model-invocation")
        infer = reader.boolean("infer")
        if infer is not None:
            reader.warn("infer", "infer is deprecated; use user-invocable and "
                        "disable-model-invocation", code="deprecated")
            if disable_model is None and infer is False:
                disable_model = True
        if len(body) > MAX_BODY:
            reader.warn("instructions", f"the body is {len(body)} characters; GitHub limits "
                        f"custom agents to {MAX_BODY}")
        model = foreign_route(reader, "model", model_text, self.format)
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=name, display_name=display, description=description,
            instructions=body, model=model,
            tools=tools, delegates=delegates,
            user_invocable=True if user_invocable is None else user_invocable,
            subagent_available=not disable_model,
            permission=PermissionPolicy(rules=tuple(rules)), extras=extras,
        )]
