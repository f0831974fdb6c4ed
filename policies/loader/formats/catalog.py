"""Agent-definition JSON catalog (``initial-data/agent-definitions/*.json``).

Exactly ``shared/spec/agent-definition-json.md``: one agent per file; ``id``
(a UUID) is the stable id, ``name`` plus ``namespace`` the identity (``name``
in the default ``local`` namespace, ``<namespace>/<name>`` in any other, so
two namespaces never collide); only ``ACTIVE`` agents (or ones without a
status) can be run or delegated to;
``systemPrompt`` the instructions; ``llmConfigName`` a model role
(``@<name>``, resolved by the user's config); ``maxIterations`` the step
limit; ``status``; ``memoryConfig`` (``summarizing_window`` when omitted);
``toolSearch`` (grants ``tool_search``, which activates the deferred tools of
the listed groups: :func:`policies.tools.in_search_group`);
``responseReviewers`` (agent names of the same namespace); and ``tools[]``
bindings, each granting one tool when ``enabled``, under the name the file
gives it (``run_agent``, ``file_read``: the model is offered that name), with
``needsApproval``, ``deferred`` and ``overrides`` (the keys of
:mod:`policies.overrides`; ``baseDir`` becomes permission rules) per binding.
``systemPrompt`` template variables are checked (:mod:`policies.templates`).
``createdAt``/``updatedAt`` are bookkeeping.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from policies.contract import (
    AgentContract,
    AgentFormat,
    AgentStatus,
    MemoryConfig,
    MemoryKind,
    ModelRef,
    ModelRoute,
    ToolBinding,
    ToolResultEviction,
)
from policies.loader.base import Context, FieldRules, Reader, Source, check_name, json_ready
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.formats.common import build, json_document, key_line
from policies.loader.toolnames import resolve_tools
from policies.overrides import check_overrides, override_rules
from policies.permissions import PermissionPolicy, PermissionRule
from policies.templates import VARIABLES, unknown_variables
from policies.tools import SEARCH_GROUPS, in_search_group

__all__ = ["CatalogAdapter"]

FIELDS = ("id", "namespace", "name", "description", "systemPrompt", "welcomeMessage",
          "llmConfigName", "maxIterations", "status", "memoryConfig", "toolSearch",
          "responseReviewers", "tools", "createdAt", "updatedAt")
RULES = FieldRules(
    cosmetic=frozenset({"createdAt", "updatedAt"}),
    near_miss={"max_iterations": "maxIterations", "maxIteration": "maxIterations",
               "memory_config": "memoryConfig", "system_prompt": "systemPrompt"},
    restricting=frozenset({"tools", "maxIterations", "status", "toolSearch"}),
)
BINDING_KEYS = frozenset({"id", "agentDefinitionId", "name", "description", "enabled",
                          "overrides", "deferred", "needsApproval"})
PLACEMENTS = ("USER_MESSAGE", "SYSTEM_PROMPT")
_ROLE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
#: Identity is name + namespace: agents of the default namespace are known by
#: their bare name, others as ``<namespace>/<name>``.
DEFAULT_NAMESPACE = "local"


class CatalogAdapter:
    """One JSON agent definition per file."""

    format = AgentFormat.CATALOG

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """Read the single agent object of the file."""
        data = json_document(source.text)
        if not isinstance(data, dict):
            raise DefinitionRejected("file", "an agent definition must be a JSON object")
        lines = {key: key_line(source.text, key) for key in data}
        reader = Reader(ctx, data, lines)
        agent_id = reader.string("id", required=True) or ""
        if agent_id and not _is_uuid(agent_id):
            reader.error("id", f"must be a UUID, got {agent_id!r}")
        name = reader.string("name", required=True) or source.location_name
        check_name(reader, "name", name)
        namespace = _namespace(reader)
        if namespace is not None and namespace != DEFAULT_NAMESPACE:
            check_name(reader, "namespace", namespace)
            name = f"{namespace}/{name}"
        description = reader.string("description", required=True)
        prompt = reader.string("systemPrompt", required=True) or ""
        for placeholder in unknown_variables(prompt):
            reader.error("systemPrompt", f"unknown template variable {placeholder}; corral "
                         f"supports {', '.join('{{ ' + v + ' }}' for v in VARIABLES)}",
                         hint="remove it, or spell a supported variable exactly")
        role = reader.string("llmConfigName", required=True)
        if role is not None and not _ROLE_RE.fullmatch(role):
            reader.error("llmConfigName", f"{role!r} is not a config name")
        status = reader.choice("status", [s.value for s in AgentStatus])
        usable = status in (None, AgentStatus.ACTIVE.value)
        if not usable:
            reader.warn("status", f"the agent is {status}: loaded for inspection, but only "
                        "ACTIVE agents can be run or delegated to")
        bindings, tools, rules = _bindings(reader, agent_id)
        search_groups = _tool_search(reader, tools, bindings)
        reviewers = _reviewers(reader, name.rsplit("/", 1)[-1])
        memory = _memory(reader)
        steps = reader.integer("maxIterations", minimum=1)
        welcome = reader.string("welcomeMessage")
        extras = reader.leftovers(RULES)
        return [build(
            reader, source,
            name=name, id=agent_id or name, display_name=name.rsplit("/", 1)[-1],
            description=description,
            instructions=prompt, instructions_template=True,
            model=ModelRoute(candidates=(ModelRef(id=f"@{role}"),)) if role else ModelRoute(),
            tools=frozenset(tools), steps=steps, memory=memory, tool_bindings=tuple(bindings),
            tool_search_groups=tuple(search_groups), permission=PermissionPolicy(rules=rules),
            status=AgentStatus(status) if status else None, namespace=namespace,
            welcome_message=welcome, response_reviewers=tuple(reviewers),
            user_invocable=usable, subagent_available=usable, extras=extras,
        )]


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _namespace(reader: Reader) -> str | None:
    value = reader.take("namespace")
    if value is None:
        return None
    if isinstance(value, dict) and isinstance(value.get("value"), str) and set(value) == {"value"}:
        return str(value["value"])
    reader.error("namespace", 'must be {"value": "<namespace>"}')
    return None


def _bindings(reader: Reader, agent_id: str,
              ) -> tuple[list[ToolBinding], set[str], tuple[PermissionRule, ...]]:
    value = reader.take("tools")
    if value is None:
        return [], set(), ()
    if not isinstance(value, list):
        reader.error("tools", "must be a list of tool bindings")
        return [], set(), ()
    bindings: list[ToolBinding] = []
    granted: set[str] = set()
    bound: dict[str, int] = {}
    rules: list[PermissionRule] = []
    for index, entry in enumerate(value):
        where = f"tools[{index}]"
        if not isinstance(entry, dict):
            reader.error("tools", f"{where}: must be an object")
            continue
        unknown = set(entry) - BINDING_KEYS
        if unknown:
            reader.error("tools", f"{where}: unknown keys {sorted(unknown)}")
        name = entry.get("name")
        if not isinstance(name, str):
            reader.error("tools", f"{where}: name must be a string")
            continue
        binding_id = entry.get("id")
        if binding_id is not None and (not isinstance(binding_id, str)
                                       or not _is_uuid(binding_id)):
            reader.error("tools", f"{where}.id: must be a UUID, got {binding_id!r}")
        owner = entry.get("agentDefinitionId")
        if owner is not None and owner != agent_id:
            reader.error("tools", f"{where}: agentDefinitionId {owner!r} is not this agent's id")
        flags: dict[str, bool] = {}
        for key, default in (("enabled", True), ("deferred", False), ("needsApproval", False)):
            flag = entry.get(key, default)
            if not isinstance(flag, bool):
                reader.error("tools", f"{where}.{key}: must be true or false")
                flag = default
            flags[key] = flag
        overrides = entry.get("overrides", {})
        if not isinstance(overrides, dict):
            reader.error("tools", f"{where}.overrides: must be an object")
            overrides = {}
        overrides = {str(k): json_ready(v) for k, v in overrides.items()}
        description = entry.get("description")
        for tool in sorted(resolve_tools(reader, "tools", [name], AgentFormat.CATALOG).tools):
            if tool in bound:
                reader.error("tools", f"{where}: {name!r} grants {tool!r}, which "
                             f"tools[{bound[tool]}] already grants; keep one binding per tool")
                continue
            bound[tool] = index
            for problem in check_overrides(tool, overrides):
                reader.error("tools", f"{where}.overrides: {problem}")
            if flags["enabled"]:
                granted.add(tool)
                rules += override_rules(tool, overrides)
            bindings.append(ToolBinding(
                name=tool, description=description if isinstance(description, str) else None,
                enabled=flags["enabled"], deferred=flags["deferred"],
                needs_approval=flags["needsApproval"], overrides=overrides,
                wire_name=name if name != tool and _is_wire_name(name) else None,
            ))
    return bindings, granted, tuple(rules)


def _is_wire_name(name: str) -> bool:
    """Whether a binding's name can be offered to a model as a tool name."""
    return re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) is not None


def _tool_search(reader: Reader, tools: set[str], bindings: list[ToolBinding]) -> list[str]:
    """``toolSearch``: grant ``tool_search``; return its groups. A deferred tool that no
    enabled group selects can never be activated: warned, since it is never offered."""
    value = reader.take("toolSearch")
    deferred = [b.name for b in bindings if b.deferred and b.enabled]
    if value is None:
        value = {}
    if not isinstance(value, dict) or not isinstance(value.get("enabled", False), bool) or (
            set(value) - {"enabled", "groups"}):
        reader.error("toolSearch", 'must be {"enabled": true, "groups": [...]}')
        return []
    groups = value.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        reader.error("toolSearch", "groups must be a list of strings")
        return []
    for group in groups:
        if group not in SEARCH_GROUPS and not _MCP_SERVER_RE.fullmatch(group):
            reader.error("toolSearch", f"group {group!r} is neither a tool group "
                         f"({', '.join(sorted(SEARCH_GROUPS))}) nor an MCP server name")
        elif group not in SEARCH_GROUPS and not any(in_search_group(group, t)
                                                    for t in deferred):
            reader.warn("toolSearch", f"group {group!r} selects none of this agent's deferred "
                        "tools", code="empty_tool_group")
    enabled = bool(value.get("enabled"))
    if enabled:
        tools.add("tool_search")
    for tool in deferred:
        if not enabled:
            reader.warn("tools", f"{tool!r} is deferred but toolSearch is not enabled: nothing "
                        "can ever activate it, so it is never offered", code="unreachable_tool")
        elif groups and not any(in_search_group(g, tool) for g in groups):
            reader.warn("tools", f"{tool!r} is deferred but in none of the toolSearch groups "
                        f"({', '.join(groups)}): tool_search can never activate it",
                        code="unreachable_tool")
    return list(groups)


_MCP_SERVER_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]|_(?!_))*$")


def _reviewers(reader: Reader, own_name: str) -> list[str]:
    """``responseReviewers``: names of agents of this agent's namespace."""
    value = reader.take("responseReviewers")
    if value is None:
        return []
    if not isinstance(value, list):
        reader.error("responseReviewers", "must be a list")
        return []
    names: list[str] = []
    for item in value:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str):
            reader.error("responseReviewers", f"entries must be agent names, got {item!r}")
            continue
        if not check_name(reader, "responseReviewers", name):
            continue
        if name == own_name:
            reader.error("responseReviewers", f"{name!r} is this agent: an answer is checked "
                         "by another agent")
            continue
        if name not in names:
            names.append(name)
    return names


def _memory(reader: Reader) -> MemoryConfig:
    value: Any = reader.take("memoryConfig")
    if value is None:
        return MemoryConfig()
    if not isinstance(value, dict):
        reader.error("memoryConfig", "must be an object")
        return MemoryConfig()
    sub = Reader(reader.ctx, value, {}, base_line=reader.line("memoryConfig"),
                 where="memoryConfig.")
    kind = sub.choice("kind", [k.value for k in MemoryKind]) or MemoryKind.SUMMARIZING_WINDOW.value
    ratio = sub.number("compactAtRatio", low=0, high=1)
    placement = sub.choice("summaryPlacement", PLACEMENTS)
    window = sub.integer("windowTurns", minimum=1)
    eviction = sub.mapping("toolResultEviction")
    evict = None
    if eviction is not None:
        ev = Reader(reader.ctx, eviction, {}, base_line=reader.line("memoryConfig"),
                    where="memoryConfig.toolResultEviction.")
        evict = ToolResultEviction(after_turns=ev.integer("afterTurns", minimum=0),
                                   above_tokens=ev.integer("aboveTokens", minimum=0))
        ev.leftovers(FieldRules(reject_unknown=True))
    sub.leftovers(FieldRules(reject_unknown=True))
    if ratio is not None and kind != MemoryKind.AUTO_COMPACT.value:
        sub.warn("compactAtRatio", "applies only to kind auto_compact")
    return MemoryConfig(kind=MemoryKind(kind), compact_at_ratio=ratio or None,
                        summary_placement=placement, tool_result_eviction=evict,
                        window_turns=window)
