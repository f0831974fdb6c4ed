"""OpenCode agents: Markdown under ``.opencode/{agent,agents}/**`` and ``opencode.json`` maps.

Identity is the path relative to the agents directory without ``.md``
(``team/reviewer``); ``name`` is only a display name. Supported, V1 and V2:
``description``, ``mode`` (``subagent``/``primary``/``all``, default ``all``),
``model`` (foreign), ``variant``, ``temperature``, ``top_p``, ``steps`` (and
the deprecated ``maxSteps``), ``tools`` (a boolean map applied in order, with
``"*"``), ``permission`` (V1: an action, or a map of tool keys to an action or
an ordered ``{pattern: action}`` map where the last match wins),
``permissions`` (V2: an ordered list of ``{action, resource, effect}``; a call
no entry matches asks), ``hidden``, ``disable``/``disabled``, ``color``,
``options``, and ``prompt``/``system`` in JSON. ``tools`` and ``permission``
both narrow: a tool turned off in ``tools`` is not turned back on by an
``allow`` (OpenCode merges them; corral never widens). ``permission`` and
``permissions`` together reject, as does a V1-style map under ``permissions``,
``ask`` on ``external_directory``, and Claude-style tool lists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from policies.contract import AgentContract, AgentFormat, ModelRoute
from policies.loader.base import Context, FieldRules, Reader, Source, tolerant_name
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.common import build, json_document, key_line, markdown
from policies.loader.formats.foreign_keys import CLAUDE_KEYS, cross_harness
from policies.loader.models import foreign_route
from policies.loader.toolnames import readable_pattern, resolve_tools
from policies.permissions import PATH_TOOLS, Action, PermissionPolicy, PermissionRule

__all__ = ["OpenCodeAdapter", "permission_rules"]

FIELDS = frozenset({
    "description", "mode", "model", "variant", "temperature", "top_p", "prompt", "system",
    "steps", "maxSteps", "tools", "permission", "permissions", "hidden", "hidden_from_cycle",
    "color", "disable", "disabled", "options", "name",
})
#: V1 permission keys (and V2 actions) -> native tools.
PERMISSION_KEYS: dict[str, tuple[str, ...]] = {
    "read": ("read_file",), "edit": ("edit", "write_file", "apply_patch"),
    "write": ("write_file",), "patch": ("apply_patch",), "glob": ("find",), "grep": ("search",),
    "list": ("list_files",), "bash": ("shell",), "shell": ("shell",), "task": ("delegate",),
    "subagent": ("delegate",), "webfetch": ("web_fetch",), "websearch": ("web_search",),
    "todowrite": ("todo",), "todoread": ("todo",), "*": ("*",),
}
NO_EQUIVALENT = frozenset({"lsp", "skill", "question", "doom_loop", "codesearch"})
RULES = FieldRules(
    cosmetic=frozenset({"hidden_from_cycle"}),
    unsupported=cross_harness("OpenCode", "Claude",
                              {k: v for k, v in CLAUDE_KEYS.items() if k != "tools"},
                              {"disallowedTools": "tools: {name: false}",
                               "maxTurns": "steps", "permissionMode": "permission"}),
    near_miss={"max_steps": "steps", "maxTurns": "steps", "tool": "tools"},
    restricting=frozenset({"tools", "permission", "steps", "mode", "hidden", "disable", "model"}),
)


class OpenCodeAdapter:
    """OpenCode's Markdown agents and JSON agent maps."""

    format = AgentFormat.OPENCODE

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """A Markdown file is one agent; ``opencode.json(c)`` holds a map of them."""
        if source.path.suffix in {".json", ".jsonc"}:
            return _load_json(source, ctx)
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        if reader.has("prompt") or reader.has("system"):
            key = "prompt" if reader.has("prompt") else "system"
            reader.take(key)
            reader.error(key, "in a Markdown agent the prompt is the body, not a header field")
        return [_contract(reader, source, source.location_name, body)]


def _load_json(source: Source, ctx: Context) -> list[AgentContract]:
    document = json_document(source.text, jsonc=source.path.suffix == ".jsonc")
    if not isinstance(document, dict):
        raise DefinitionRejected("file", "an OpenCode config must be a JSON object")
    keys = [key for key in ("agent", "agents") if key in document]
    if not keys:
        ctx.info("agent", "no agent definitions in this config (no 'agent' or 'agents' map)",
                 code="no_agents")
        return []
    if len(keys) == 2:
        raise DefinitionRejected("agents", "use either 'agent' (V1) or 'agents' (V2), not both",
                                 line=key_line(source.text, "agents"))
    agents = document[keys[0]]
    if not isinstance(agents, dict):
        raise DefinitionRejected(keys[0], "must be a map of agent id to definition",
                                 line=key_line(source.text, keys[0]))
    out: list[AgentContract] = []
    ctx.partial = True
    start = source.text.find(f'"{keys[0]}"')
    for agent_id, data in agents.items():
        line = key_line(source.text, agent_id, max(start, 0))
        sub = Context(source, ctx.options)
        reader = Reader(sub, data if isinstance(data, dict) else {}, {}, base_line=line,
                        where=f"{keys[0]}.{agent_id}.")
        try:
            if not isinstance(data, dict):
                raise DefinitionRejected(f"{keys[0]}.{agent_id}", "must be an object", line=line)
            prompt = _prompt(reader, source)
            out.append(_contract(reader, source, agent_id, prompt, line=line))
        except DefinitionRejected as exc:
            if not (exc.diag_code == "rejected_after_errors" and sub.failed):
                sub.error(exc.field, exc.reason, line=exc.line or line, hint=exc.hint)
        ctx.diagnostics.extend(sub.diagnostics)
    return out


def _prompt(reader: Reader, source: Source) -> str:
    key = "system" if reader.has("system") else "prompt"
    text = reader.string(key, allow_empty=True) or ""
    if text.startswith("{file:") and text.endswith("}"):
        return _prompt_file(reader, key, source, text[6:-1].strip())
    return text


def _prompt_file(reader: Reader, key: str, source: Source, ref: str) -> str:
    base = source.path.parent
    target = (base / ref).resolve() if not Path(ref).is_absolute() else Path(ref)
    if not target.is_relative_to(base.resolve()):
        reader.error(key, f"prompt file {ref!r} is outside the config's directory")
        return ""
    try:
        return decode_text(read_bounded(base / ref)).strip()
    except DefinitionRejected as exc:
        reader.error(key, f"prompt file {ref!r}: {exc.reason}")
        return ""


def _contract(reader: Reader, source: Source, agent_id: str, prompt: str,
              line: int | None = None) -> AgentContract:
    display = reader.string("name") or agent_id
    agent_id = tolerant_name(reader, "id", agent_id, segments=True)
    description = reader.string("description")
    if description is None:
        reader.warn("description", "no description: other agents cannot tell when to delegate "
                    "to this one")
    mode = reader.choice("mode", ["subagent", "primary", "all"]) or "all"
    tools, denied = _tools_map(reader)
    rules: list[PermissionRule] = []
    if reader.has("permission") and reader.has("permissions"):
        reader.error("permissions", "do not mix permission (V1) and permissions (V2) in one agent")
    if reader.has("permission"):
        rules = permission_rules(reader, "permission", reader.take("permission"))
    elif reader.has("permissions"):
        rules = _v2_rules(reader)
    steps = reader.integer("steps", minimum=1)
    if reader.has("maxSteps"):
        reader.warn("maxSteps", "maxSteps is deprecated; use steps", code="deprecated")
        legacy = reader.integer("maxSteps", minimum=1)
        steps = steps or legacy
    disabled = reader.boolean("disable")
    if reader.has("disabled"):
        disabled = reader.boolean("disabled") or disabled
    options = reader.mapping("options") or {}
    model: ModelRoute = foreign_route(reader, "model", reader.string("model"), AgentFormat.OPENCODE)
    sampling: dict[str, Any] = {"variant": reader.string("variant"),
                "temperature": reader.number("temperature", low=0, high=2),
                "top_p": reader.number("top_p", low=0, high=1)}
    hidden = bool(reader.boolean("hidden"))
    color = reader.string("color")
    extras = reader.leftovers(RULES)
    if options:
        extras["options"] = options
    return build(
        reader, source, line=line,
        name=agent_id, id=agent_id, display_name=display, description=description,
        instructions=prompt, model=model, **sampling, tools=tools, denied_tools=denied,
        user_invocable=mode != "subagent", subagent_available=mode != "primary",
        hidden=hidden, disabled=bool(disabled),
        permission=PermissionPolicy(rules=tuple(rules)), steps=steps, color=color, extras=extras,
    )


def _tools_map(reader: Reader) -> tuple[frozenset[str] | None, frozenset[str]]:
    value = reader.take("tools")
    if value is None:
        return None, frozenset()
    if isinstance(value, list | str):
        reader.error("tools", "OpenCode tools is a map of tool name to true/false, got a "
                     f"{'list' if isinstance(value, list) else 'string'}",
                     hint="write tools: {bash: false} (a Claude-style list does not work here)")
        return None, frozenset()
    if not isinstance(value, dict):
        reader.error("tools", "must be a map of tool name to true/false")
        return None, frozenset()
    allowed: set[str] | None = None  # None: everything inherited
    denied: set[str] = set()
    for name, flag in value.items():
        if not isinstance(flag, bool):
            reader.error("tools", f"{name}: must be true or false, got {flag!r}")
            continue
        if name == "*":
            allowed, denied = (None, set()) if flag else (set(), set())
            continue
        targets = resolve_tools(reader, "tools", [name], AgentFormat.OPENCODE).tools
        if flag:
            denied -= targets
            if allowed is not None:
                allowed |= targets
        else:
            denied |= targets
            if allowed is not None:
                allowed -= targets
    return (frozenset(allowed) if allowed is not None else None), frozenset(denied)


def permission_rules(reader: Reader, key: str, value: Any, *,
                     table: dict[str, tuple[str, ...]] = PERMISSION_KEYS,
                     fmt: AgentFormat = AgentFormat.OPENCODE) -> list[PermissionRule]:
    """Translate an OpenCode/zuno permission object into ordered rules.

    Keys are the format's tool names (``table``, then the format's own alias
    table and MCP syntax). A key with no corral equivalent may only deny: an
    ``ask`` there is a restriction corral cannot enforce, so it rejects.
    """
    if isinstance(value, str):
        action = _action(reader, key, value)
        return [PermissionRule(tool="*", action=action)] if action else []
    if not isinstance(value, dict):
        reader.error(key, "must be an action or a map of tool to action")
        return []
    rules: list[PermissionRule] = []
    for tool_key, setting in value.items():
        where = f"{key}.{tool_key}"
        if tool_key == "external_directory":
            _external(reader, where, setting)
            continue
        if tool_key in NO_EQUIVALENT:
            actions = set(setting.values()) if isinstance(setting, dict) else {setting}
            if "ask" in actions:
                reader.error(key, f"{tool_key!r} has no corral equivalent, so its 'ask' cannot be "
                             "enforced", hint=f"remove the {tool_key} entry or make it deny")
            else:
                reader.warn(key, f"{tool_key!r} has no corral equivalent; its rule changes "
                            "nothing", code="tool_without_equivalent")
            continue
        tools = table.get(tool_key)
        if tools is None and _misplaced_pattern(reader, key, tool_key, setting, table):
            continue
        if tools is None:
            resolved = resolve_tools(reader, key, [tool_key], fmt).tools
            tools = tuple(sorted(resolved))
        if isinstance(setting, str):
            action = _action(reader, where, setting)
            if action:
                rules.extend(PermissionRule(tool=t, action=action) for t in tools)
        elif isinstance(setting, dict):
            for raw_pattern, raw in setting.items():
                action = _action(reader, where, raw)
                pattern = _path_pattern(reader, where, raw_pattern, tools)
                if pattern is not None and not readable_pattern(
                        reader, key, f"{where}.{raw_pattern}", pattern):
                    continue
                if action and pattern is not None:
                    rules.extend(PermissionRule(tool=t, pattern=None if pattern == "*" else pattern,
                                                action=action) for t in tools)
        else:
            reader.error(key, f"{tool_key}: must be an action or a map of pattern to action")
    return rules


_PATTERN_CHARS = re.compile(r"\s|/|^[~.]")


def _misplaced_pattern(reader: Reader, key: str, tool_key: str, setting: Any,
                       table: dict[str, tuple[str, ...]]) -> bool:
    """A permission key that is a command or path pattern, one level too high
    (``permission: {"rm -rf *": deny}``): rejected with the place it belongs, rather
    than as an unknown tool. Whether it is one: whitespace or a path separator, which
    no tool name holds (``github_*`` is a tool glob, judged as a tool name)."""
    if not _PATTERN_CHARS.search(tool_key):
        return False
    action = setting if isinstance(setting, str) else "deny"
    shell_key = next((k for k, v in table.items() if v == ("shell",)), "bash")
    if "/" in tool_key and not re.search(r"\s", tool_key):
        example = f"{key}: {{edit: {{{tool_key!r}: {action}}}}} (or read, for reads)"
        what = "a path pattern"
    else:
        example = f"{key}: {{{shell_key}: {{{tool_key!r}: {action}}}}}"
        what = "a command pattern"
    reader.error(key, f"{tool_key!r} is {what}, not a tool: patterns belong one level down, "
                 "under the tool they restrict", hint=f"write {example}")
    return True


def _path_pattern(reader: Reader, where: str, pattern: str,
                  tools: tuple[str, ...]) -> str | None:
    """Path globs are matched against workspace-relative paths: ``./`` and doubled
    slashes are normalized away; an absolute pattern could never match, so it rejects."""
    if not any(tool in PATH_TOOLS for tool in tools):
        return pattern
    text = re.sub(r"/{2,}", "/", pattern)
    while text.startswith("./"):
        text = text[2:]
    if text.startswith(("/", "~")):
        reader.error(where.split(".", maxsplit=1)[0],
                     f"{where}: path pattern {pattern!r} is absolute; patterns are relative to "
                     "the workspace (write it without the leading / or ~)")
        return None
    return text or "*"


def _external(reader: Reader, where: str, setting: Any) -> None:
    values = setting.values() if isinstance(setting, dict) else [setting]
    if any(v != "deny" for v in values):
        reader.error(where.split(".", maxsplit=1)[0],
                     "external_directory access cannot be granted: corral "
                     "never lets an agent reach outside its workspace",
                     hint="remove the entry or set it to deny")


def _action(reader: Reader, key: str, value: Any) -> Action | None:
    if value in {"allow", "ask", "deny"}:
        return Action(value)
    reader.error(key.split(".", maxsplit=1)[0],
                 f"{key}: action must be allow, ask or deny, got {value!r}")
    return None


def _v2_rules(reader: Reader) -> list[PermissionRule]:
    value = reader.take("permissions")
    if isinstance(value, dict):
        reader.error("permissions", "V2 permissions is an ordered list of {action, resource, "
                     "effect}; this is a map",
                     hint="use permission (singular) for a V1 map of tool to action")
        return []
    if not isinstance(value, list):
        reader.error("permissions", "must be a list of {action, resource, effect}")
        return []
    rules = [PermissionRule(tool="*", action=Action.ASK)]  # V2: a call nothing matches asks
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or set(entry) - {"action", "resource", "effect"}:
            reader.error("permissions", f"entry {index}: must be {{action, resource, effect}}")
            continue
        action, resource, effect = entry.get("action"), entry.get("resource", "*"), entry.get(
            "effect")
        decided = _action(reader, f"permissions.{index}", effect)
        if not isinstance(action, str) or not isinstance(resource, str) or decided is None:
            reader.error("permissions", f"entry {index}: action and resource must be strings")
            continue
        if action in NO_EQUIVALENT:
            continue
        tools = PERMISSION_KEYS.get(action)
        if tools is None:
            tools = tuple(sorted(resolve_tools(reader, "permissions", [action],
                                               AgentFormat.OPENCODE).tools))
        resource = _path_pattern(reader, f"permissions.{index}", resource, tools)
        if resource is None or not readable_pattern(reader, "permissions",
                                                    f"permissions.{index}.resource", resource):
            continue
        rules.extend(PermissionRule(tool=t, pattern=None if resource == "*" else resource,
                                    action=decided) for t in tools)
    return rules
