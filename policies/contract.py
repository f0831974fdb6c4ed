"""The normalized agent contract every definition format becomes.

An :class:`AgentContract` is frozen data: what the definition asked for, in
corral's own vocabulary (canonical tool names, one sandbox-mode enum, one
permission model). It never says what the agent *may* do on its own: that is
the job of :mod:`policies.capability`, which intersects a contract with the
parent's capability. Fields a format documents but that carry no authority
are kept verbatim in ``extras``; nothing a definition says is dropped.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_serializer, field_validator

from policies.permissions import PermissionPolicy
from policies.tools import check_tool_name

__all__ = [
    "RESERVED_OPTION_KEYS",
    "AgentContract",
    "AgentFormat",
    "AgentMode",
    "AgentStatus",
    "MemoryConfig",
    "MemoryKind",
    "ModelRef",
    "ModelRoute",
    "Origin",
    "SandboxMode",
    "Scope",
    "ToolBinding",
    "ToolResultEviction",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

#: Request fields provider options may never set: they carry the conversation, the
#: tools and the protocol, which corral alone decides.
RESERVED_OPTION_KEYS = frozenset({
    "model", "messages", "system", "tools", "tool_choice", "functions", "function_call",
    "stream", "stream_options", "n", "parallel_tool_calls",
})


class AgentFormat(StrEnum):
    """The harness format a definition was written in."""

    NGN = "ngn"
    CLAUDE = "claude"
    COPILOT = "copilot"
    OPENCODE = "opencode"
    CODEX = "codex"
    CURSOR = "cursor"
    GEMINI = "gemini"
    ANTIGRAVITY = "antigravity"
    ZUNO = "zuno"
    PI = "pi"
    CATALOG = "catalog"


class Scope(StrEnum):
    """Where a definition came from; decides trust and precedence."""

    BUNDLED = "bundled"
    PERSONAL = "personal"
    PROJECT = "project"
    IMPORT = "import"


class AgentMode(StrEnum):
    """``reviewer`` prohibits writes, shell and custom tools."""

    BUILD = "build"
    REVIEWER = "reviewer"


class SandboxMode(StrEnum):
    """Where a child's writes may land. Ordered from most to least restrictive."""

    READ_ONLY = "read-only"
    WORKTREE = "worktree"
    WORKSPACE_WRITE = "workspace-write"

    @property
    def rank(self) -> int:
        """0 is the most restrictive."""
        return _SANDBOX_RANK[self]

    @classmethod
    def strictest(cls, *modes: SandboxMode | None) -> SandboxMode | None:
        """The most restrictive of the given modes (``None`` entries ignored)."""
        present = [mode for mode in modes if mode is not None]
        return min(present, key=lambda mode: mode.rank) if present else None


_SANDBOX_RANK = {SandboxMode.READ_ONLY: 0, SandboxMode.WORKTREE: 1, SandboxMode.WORKSPACE_WRITE: 2}


class AgentStatus(StrEnum):
    """Catalog lifecycle status; only ``ACTIVE`` agents are usable by default."""

    DRAFT = "DRAFT"
    ACTIVE = "ACTIVE"
    DEPRECATED = "DEPRECATED"


class ModelRef(BaseModel):
    """One model candidate: an exact id or a ``@role`` alias, with a ``:level``."""

    model_config = _FROZEN

    id: str
    level: str | None = None

    @property
    def is_role(self) -> bool:
        """Role aliases (``@fast``) expand through the user's config."""
        return self.id.startswith("@")

    def __str__(self) -> str:
        return f"{self.id}:{self.level}" if self.level else self.id


class ModelRoute(BaseModel):
    """Which model runs the agent.

    ``candidates`` are tried in order (``model`` then ``models`` fallbacks);
    empty means *inherit the parent's model*. A model name that belongs to a
    foreign harness (``sonnet`` in a Claude file) is never guessed: it is kept
    in ``foreign`` and the route needs an explicit override before it can run.
    """

    model_config = _FROZEN

    candidates: tuple[ModelRef, ...] = ()
    provider: str | None = None
    foreign: str | None = None
    foreign_format: AgentFormat | None = None
    #: When no candidate is available, the parent's model runs the agent (pi: "then the
    #: authenticated parent model").
    parent_fallback: bool = False
    #: ``@role`` chains the definition's own harness defines for the roles the route
    #: names (pi: ``subagent.roles`` of ``~/.pi/agent/settings.json``); the user's corral
    #: config ``[roles]`` wins over them.
    roles: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: The zuno preset whose agent route this is ("When it is absent, the active preset's
    #: agent route applies"): not the agent's configured model.
    preset: str | None = None
    #: A model id no provider qualifies runs on the parent's connection (ngn: "provider
    #: ... omitted inherits the connection"), not on ``default_provider``.
    inherit_connection: bool = False

    @property
    def inherit(self) -> bool:
        """Whether the parent's model is used (on the route's ``provider``, when it names
        one: ngn's "omitted inherits the selected model")."""
        return not self.candidates and self.foreign is None

    @property
    def needs_override(self) -> bool:
        """Whether a foreign model selection still needs an explicit override."""
        return self.foreign is not None and not self.candidates

    @property
    def display(self) -> str | None:
        """The first candidate, or ``None`` when inheriting or unresolved."""
        return str(self.candidates[0]) if self.candidates else None


class MemoryKind(StrEnum):
    """Working-memory strategies of the agent-definition catalog format."""

    NONE = "none"
    FULL = "full"
    WINDOWED = "windowed"
    SUMMARIZING_WINDOW = "summarizing_window"
    AUTO_COMPACT = "auto_compact"


class ToolResultEviction(BaseModel):
    """Drop bulky tool results by age (turns) and size (tokens)."""

    model_config = _FROZEN

    after_turns: int | None = Field(default=None, ge=0)
    above_tokens: int | None = Field(default=None, ge=0)


class MemoryConfig(BaseModel):
    """How the conversation is kept within the context window.

    The default is ``summarizing_window``, as the catalog spec says for an
    omitted ``memoryConfig`` (not ``auto_compact``).
    """

    model_config = _FROZEN

    kind: MemoryKind = MemoryKind.SUMMARIZING_WINDOW
    compact_at_ratio: float | None = Field(default=None, gt=0, le=1)
    summary_placement: str | None = None
    tool_result_eviction: ToolResultEviction | None = None
    window_turns: int | None = Field(default=None, gt=0)


class ToolBinding(BaseModel):
    """Per-agent settings of one granted tool (catalog ``tools[]`` entries)."""

    model_config = _FROZEN

    name: str
    description: str | None = None
    enabled: bool = True
    deferred: bool = False
    needs_approval: bool = False
    overrides: dict[str, JsonValue] = Field(default_factory=dict)
    #: The name the definition gave the tool (``run_agent``, ``file_read``), when it is not
    #: the canonical one: the model is offered the tool under this name.
    wire_name: str | None = None

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return check_tool_name(value)


class Origin(BaseModel):
    """Where a contract was read from."""

    model_config = _FROZEN

    format: AgentFormat
    file: str
    source: str
    scope: Scope
    line: int | None = None
    #: Earlier configuration layers this definition was merged over (zuno), oldest first.
    layers: tuple[str, ...] = ()


class AgentContract(BaseModel):
    """The normalized, frozen definition of one agent.

    ``tools`` is the agent's own allowlist in canonical names: ``None`` means
    *inherit the parent's tools*, an empty set means *no tools*. It may hold
    prefix patterns for custom tools (``mcp__github__*``).
    """

    model_config = _FROZEN

    name: str
    id: str
    display_name: str
    description: str | None = None
    instructions: str = ""
    #: The instructions are a template (catalog ``{{ current_date }}``), filled in when a
    #: session starts.
    instructions_template: bool = False
    model: ModelRoute = Field(default_factory=ModelRoute)
    reasoning: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    variant: str | None = None
    #: Provider options sent with every request (zuno ``options``, unknown keys included).
    options: dict[str, JsonValue] = Field(default_factory=dict)
    #: ``reasoning`` and ``variant`` apply only when the agent's own model route runs it
    #: (zuno), never to an inherited or overridden model.
    settings_need_own_model: bool = False
    tools: frozenset[str] | None = None
    denied_tools: frozenset[str] = frozenset()
    delegates: frozenset[str] | None = None
    #: ``delegates`` is this agent's own exact allowlist (zuno: "Exact child-agent allowlist
    #: for direct delegation"), not a restriction its descendants inherit; omitted, the
    #: agent may start any agent its parent's scope allows (see :mod:`policies.capability`).
    delegates_exact: bool = False
    mode: AgentMode = AgentMode.BUILD
    user_invocable: bool = True
    subagent_available: bool = True
    hidden: bool = False
    disabled: bool = False
    sandbox: SandboxMode | None = None
    permission: PermissionPolicy = Field(default_factory=PermissionPolicy)
    steps: int | None = Field(default=None, gt=0)
    timeout_seconds: int | None = Field(default=None, gt=0)
    required_skills: tuple[str, ...] = ()
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    tool_bindings: tuple[ToolBinding, ...] = ()
    #: ``toolSearch`` groups whose deferred tools ``tool_search`` may activate; empty: every
    #: deferred tool of the agent.
    tool_search_groups: tuple[str, ...] = ()
    status: AgentStatus | None = None
    namespace: str | None = None
    welcome_message: str | None = None
    response_reviewers: tuple[str, ...] = ()
    color: str | None = None
    origin: Origin
    extras: dict[str, JsonValue] = Field(default_factory=dict)
    #: The definition's fields as written, for formats whose configuration layers merge
    #: (zuno: objects merge, arrays replace). Not part of the contract's content.
    raw_layer: dict[str, JsonValue] | None = Field(default=None, exclude=True, repr=False)

    @field_validator("tools", "denied_tools")
    @classmethod
    def _check_tools(cls, value: frozenset[str] | None) -> frozenset[str] | None:
        if value is not None:
            for name in value:
                check_tool_name(name, allow_pattern=True)
        return value

    @field_serializer("tools", "delegates")
    def _dump_optional_set(self, value: frozenset[str] | None) -> list[str] | None:
        return None if value is None else sorted(value)

    @field_serializer("denied_tools")
    def _dump_set(self, value: frozenset[str]) -> list[str]:
        return sorted(value)

    @property
    def approval_required(self) -> frozenset[str]:
        """Tools whose every call needs a human's approval (``needsApproval``)."""
        return frozenset(b.name for b in self.tool_bindings if b.needs_approval and b.enabled)

    @property
    def is_read_only(self) -> bool:
        """Whether the contract itself forbids writes (reviewer or read-only)."""
        return self.mode is AgentMode.REVIEWER or self.sandbox is SandboxMode.READ_ONLY

    def digest(self) -> str:
        """A stable SHA-256 of the contract's semantic content (not its origin)."""
        data: dict[str, Any] = self.model_dump(mode="json", exclude={"origin"})
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=sorted)
        return hashlib.sha256(blob.encode()).hexdigest()
