"""Agent-definition JSON catalog (``initial-data/agent-definitions/*.json``).

Exactly ``shared/spec/agent-definition-json.md``: one agent per file; ``id``
(a UUID) is the stable id, ``name`` plus ``namespace`` the identity (``name``
in the default ``local`` namespace, ``<namespace>/<name>`` in any other, so
two namespaces never collide); only ``ACTIVE`` agents (or ones without a
status) can be run or delegated to;
``systemPrompt`` the instructions; ``llmConfigName`` a model role
(``@<name>``, resolved by the user's config); ``maxIterations`` the step
limit; ``status``; ``memoryConfig`` (``summarizing_window`` when omitted);
``toolSearch`` (grants ``tool_search`` for deferred tools);
``responseReviewers``; and ``tools[]`` bindings, each granting one tool when
``enabled``, with ``needsApproval``, ``deferred`` and ``overrides`` kept per
binding. ``createdAt``/``updatedAt`` are bookkeeping.
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
        role = reader.string("llmConfigName", required=True)
        if role is not None and not _ROLE_RE.fullmatch(role):
            reader.error("llmConfigName", f"{role!r} is not a config name")
        status = reader.choice("status", [s.value for s in AgentStatus])
        usable = status in (None, AgentStatus.ACTIVE.value)
        if not usable:
            reader.warn("status", f"the agent is {status}: loaded for inspection, but only "
                        "ACTIVE agents can be run or delegated to")
        bindings, tools = _bindings(reader, agent_id)
        deferred_groups = _tool_search(reader, tools)
        reviewers = _reviewers(reader)
        memory = _memory(reader)
        steps = reader.integer("maxIterations", minimum=1)
        welcome = reader.string("welcomeMessage")
        extras = reader.leftovers(RULES)
        if deferred_groups:
            extras["toolSearchGroups"] = json_ready(deferred_groups)
        return [build(
            reader, source,
            name=name, id=agent_id or name, display_name=name.rsplit("/", 1)[-1],
            description=description,
            instructions=prompt,
            model=ModelRoute(candidates=(ModelRef(id=f"@{role}"),)) if role else ModelRoute(),
            tools=frozenset(tools), steps=steps, memory=memory, tool_bindings=tuple(bindings),
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


def _bindings(reader: Reader, agent_id: str) -> tuple[list[ToolBinding], set[str]]:
    value = reader.take("tools")
    if value is None:
        return [], set()
    if not isinstance(value, list):
        reader.error("tools", "must be a list of tool bindings")
        return [], set()
    bindings: list[ToolBinding] = []
    granted: set[str] = set()
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
        description = entry.get("description")
        for tool in sorted(resolve_tools(reader, "tools", [name], AgentFormat.CATALOG).tools):
            if flags["enabled"]:
                granted.add(tool)
            bindings.append(ToolBinding(
                name=tool, description=description if isinstance(description, str) else None,
                enabled=flags["enabled"], deferred=flags["deferred"],
                needs_approval=flags["needsApproval"],
                overrides={str(k): json_ready(v) for k, v in overrides.items()},
            ))
    return bindings, granted


def _tool_search(reader: Reader, tools: set[str]) -> list[str]:
    value = reader.take("toolSearch")
    if value is None:
        return []
    if not isinstance(value, dict) or not isinstance(value.get("enabled", False), bool):
        reader.error("toolSearch", 'must be {"enabled": true, "groups": [...]}')
        return []
    groups = value.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        reader.error("toolSearch", "groups must be a list of strings")
        groups = []
    if value.get("enabled"):
        tools.add("tool_search")
    return list(groups)


def _reviewers(reader: Reader) -> list[str]:
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
