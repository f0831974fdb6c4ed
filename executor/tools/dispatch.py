"""Tool dispatch: the second enforcement of the capability.

The model is shown only the tools the child holds (:meth:`Dispatcher.schemas`);
the dispatcher then refuses every call to any other name. One call goes
through a fixed pipeline:

1. **exact name**: the name must be exactly one of the visible tools, as the
   model was shown it (a catalog agent is offered ``run_agent``, not
   ``delegate``; the canonical name of a renamed tool is not callable). A
   hidden, unknown or misspelled name (case, homoglyph, whitespace, an extra
   segment) is denied with a tool error that lists the tools available, and
   nothing runs;
2. **arguments**: validated against the tool's pydantic model (a tool error,
   not a denial, when they do not fit);
3. **permission rules**: every subject of the call (the command, each path,
   the agent) is decided by the capability's layers; the strictest wins and a
   deny is terminal;
4. **approval**: ``ask`` (a rule, or ``needsApproval``) goes to the approval
   handler; without one (a non-interactive run) the call is denied;
5. **implementation**, whose :class:`ToolFailure` becomes a tool error;
6. **audit**: every call, allowed or not, is recorded with its decision.

A run's journal (``journal``, :mod:`executor.ledger.journal`) sees each call as it
goes: ``tool_call`` when it starts, ``decision`` once decided (before the tool
runs), ``tool_result`` when it ended.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from executor.models.base import Message, ToolCall, ToolSchema
from executor.text import safe_text
from executor.tools.wire_schema import compact
from policies.capability import Capability
from policies.errors import CorralError
from policies.permissions import PATH_TOOLS, Action

__all__ = [
    "ApprovalHandler",
    "ApprovalRequest",
    "AuditRecord",
    "Decision",
    "Dispatcher",
    "JournalHook",
    "Tool",
    "ToolDenied",
    "ToolFailure",
    "ToolOutput",
]

ArgsT = TypeVar("ArgsT", bound=BaseModel)
ContextT = TypeVar("ContextT")
ContextT_contra = TypeVar("ContextT_contra", contravariant=True)


class ToolFailure(CorralError):
    """A tool could not do what was asked; the model sees the message as a tool error.
    ``data`` goes to the record's audit entry (a refused fetch: its URL and reason)."""

    code = "tool_failure"

    def __init__(self, message: str, *, data: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.data: dict[str, Any] = dict(data or {})


class ToolDenied(ToolFailure):
    """A tool refused on policy grounds (a delegation outside the allowlist...): audited
    as a denial, like a refusal by the dispatcher itself."""

    code = "tool_denied"


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns: text for the model, structured data for the record."""

    content: str
    is_error: bool = False
    data: Mapping[str, Any] = field(default_factory=dict)


class Tool(Protocol[ArgsT, ContextT_contra]):
    """One native tool implementation."""

    name: str
    description: str
    args: type[ArgsT]

    def subjects(self, args: ArgsT) -> list[str | None]:
        """What permission patterns match against (a command, paths, an agent)."""
        ...

    def run(self, args: ArgsT, context: ContextT_contra) -> ToolOutput:
        """Do the work; raise ToolFailure for a failure the model should see."""
        ...


class Decision(StrEnum):
    """How a call ended."""

    ALLOWED = "allowed"
    APPROVED = "approved"
    DENIED = "denied"
    INVALID = "invalid"
    FAILED = "failed"


@dataclass(frozen=True)
class ApprovalRequest:
    """What an approval handler is asked about."""

    agent: str
    tool: str
    arguments: Mapping[str, Any]
    subjects: tuple[str, ...]
    reason: str


ApprovalHandler = Callable[[ApprovalRequest], bool]
#: journal(kind, fields): one event of a run's journal (``Journal.event``).
JournalHook = Callable[..., None]


@dataclass(frozen=True)
class AuditRecord:
    """One tool call as the run record keeps it."""

    index: int
    step: int
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    decision: Decision
    reason: str
    result: str
    is_error: bool
    duration_ms: float
    #: What the tool reported for the record (``web_fetch``: url, final url, status...).
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "index": self.index, "step": self.step, "call_id": self.call_id, "tool": self.tool,
            "arguments": dict(self.arguments), "decision": self.decision.value,
            "reason": self.reason, "result": self.result, "is_error": self.is_error,
            "duration_ms": round(self.duration_ms, 3),
            **({"data": dict(self.data)} if self.data else {}),
        }


class Dispatcher(Generic[ContextT]):
    """Enforces one capability over one set of tool implementations."""

    def __init__(self, *, agent: str, capability: Capability,
                 tools: Mapping[str, Tool[Any, ContextT]], context: ContextT,
                 approval: ApprovalHandler | None = None,
                 descriptions: Mapping[str, str] | None = None,
                 deferred: frozenset[str] = frozenset(),
                 paths: Callable[[str], list[str]] | None = None,
                 names: Mapping[str, str] | None = None,
                 unavailable: Mapping[str, str] | None = None) -> None:
        self.agent = agent
        self.capability = capability
        self.context = context
        self.approval = approval
        visible = set(capability.visible_tools())
        #: Only tools that are both held and implemented are offered and callable.
        self.tools = {name: tool for name, tool in tools.items() if name in visible}
        self.descriptions = dict(descriptions or {})
        #: Deferred tools stay out of the schemas, and uncallable, until activated.
        self.deferred = set(deferred) & set(self.tools)
        #: Every spelling a path subject must be judged under (normalized, and the real
        #: path behind in-tree symlinks), so ``./secrets/key`` meets ``secrets/**``.
        self.paths = paths or (lambda path: [path])
        #: canonical name -> the name the model is shown (and must call), where they differ.
        self.names = {k: v for k, v in (names or {}).items() if k in self.tools and k != v}
        self._canonical = {wire: name for name, wire in self.names.items()}
        #: Tools the agent holds but no run can call -> why (said in the denial).
        self.unavailable = dict(unavailable or {})
        self.audit: list[AuditRecord] = []
        #: Where each call's events go as it happens (the run's journal), if anywhere.
        self.journal: JournalHook | None = None
        self._decided = False

    def wire(self, name: str) -> str:
        """The name the model sees for canonical tool ``name``."""
        return self.names.get(name, name)

    def canonical(self, called: str) -> str | None:
        """The canonical tool a model-visible name calls (``None``: no such offered name)."""
        if called in self._canonical:
            return self._canonical[called]
        return None if called in self.names else called

    def activate(self, names: Sequence[str]) -> list[str]:
        """Make deferred tools visible (tool_search, by the names the model sees); return
        the ones that were deferred."""
        wanted = {self.canonical(name) for name in names}
        activated = [name for name in sorted(self.deferred) if name in wanted]
        self.deferred -= set(activated)
        return [self.wire(name) for name in activated]

    def schemas(self) -> list[ToolSchema]:
        """The tools the model is shown: exactly the ones it may call."""
        return [
            ToolSchema(name=self.wire(name),
                       description=self.descriptions.get(name, tool.description),
                       # A tool that carries its own schema (an MCP server's, exact) shows it.
                       parameters=getattr(tool, "parameters", None)
                       or compact(tool.args.model_json_schema()))
            for name, tool in sorted(self.tools.items()) if name not in self.deferred
        ]

    @property
    def denied(self) -> list[AuditRecord]:
        """Calls refused by the capability, the rules or an approver."""
        return [record for record in self.audit if record.decision is Decision.DENIED]

    def dispatch(self, call: ToolCall, *, step: int = 0) -> Message:
        """Run one call through the pipeline; always answer with a tool message."""
        started = time.perf_counter()
        arguments = call.arguments if call.raw_arguments is None else {
            "_raw": call.raw_arguments}
        self._decided = False
        if self.journal is not None:
            self.journal("tool_call", step=step, call_id=call.id, tool=call.name,
                         arguments=arguments)
        decision, reason, output = self._pipeline(call)
        content = safe_text(output.content)
        record = AuditRecord(
            index=len(self.audit), step=step, call_id=call.id, tool=call.name,
            arguments=arguments, decision=decision, reason=safe_text(reason), result=content,
            is_error=output.is_error, duration_ms=(time.perf_counter() - started) * 1000,
            data=output.data,
        )
        self.audit.append(record)
        if self.journal is not None:
            if not self._decided:  # refused before anything could run
                self._note_decision(call, decision, record.reason)
            self.journal("tool_result", call_id=call.id, tool=call.name,
                         decision=decision.value, reason=record.reason, is_error=record.is_error,
                         duration_ms=round(record.duration_ms, 3), result=content,
                         **({"data": dict(record.data)} if record.data else {}))
        return Message(role="tool", content=content, tool_call_id=call.id,
                       name=call.name, is_error=output.is_error)

    def _pipeline(self, call: ToolCall) -> tuple[Decision, str, ToolOutput]:
        name = self.canonical(call.name)
        tool = self.tools.get(name) if name is not None and name not in self.deferred else None
        if tool is None or name is None:
            available = ", ".join(sorted(self.wire(n) for n in set(self.tools) - self.deferred))
            reason = f"tool {call.name!r} is not available to this agent"
            if call.name in self.unavailable:
                reason += f": {self.unavailable[call.name]}"
            return Decision.DENIED, reason, ToolOutput(
                f"error: {reason}; the tools you can use are: {available or 'none'}",
                is_error=True)
        if call.raw_arguments is not None:
            reason = "arguments are not a JSON object"
            return Decision.INVALID, reason, ToolOutput(
                f"error: {reason}: {call.raw_arguments[:200]!r}", is_error=True)
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()[:5])
            return Decision.INVALID, problems, ToolOutput(
                f"error: invalid arguments for {call.name}: {problems}", is_error=True)
        subjects = tool.subjects(args)
        if name in PATH_TOOLS:
            subjects = [spelling for subject in subjects
                        for spelling in ([None] if subject is None else self.paths(subject))]
        action = self._decide(name, subjects)
        decision = Decision.ALLOWED
        if action is Action.DENY:
            reason = self._deny_reason(name, subjects)
            return Decision.DENIED, reason, ToolOutput(f"error: denied: {reason}", is_error=True)
        if action is Action.ASK:
            approved, reason = self._ask(call, name, subjects)
            if not approved:
                return Decision.DENIED, reason, ToolOutput(f"error: denied: {reason}",
                                                           is_error=True)
            decision = Decision.APPROVED
        self._note_decision(call, decision, "")
        try:
            output = tool.run(args, self.context)
        except ToolDenied as exc:
            return Decision.DENIED, exc.message, ToolOutput(f"error: denied: {exc.message}",
                                                            is_error=True, data=exc.data)
        except ToolFailure as exc:
            return Decision.FAILED, exc.message, ToolOutput(f"error: {exc.message}",
                                                            is_error=True, data=exc.data)
        return decision, "", output

    def _note_decision(self, call: ToolCall, decision: Decision, reason: str) -> None:
        self._decided = True
        if self.journal is not None:
            self.journal("decision", call_id=call.id, tool=call.name, decision=decision.value,
                         reason=reason)

    def permits(self, tool: str, path: str) -> bool:
        """Whether a result path may be shown by ``tool`` (search, find): the tool's own
        rules and ``read_file``'s allow it outright under every spelling (a result that
        would need approval is hidden: nobody is asked per result)."""
        spellings = self.paths(path)
        return all(self.capability.decide(name, spelling) is Action.ALLOW
                   for name in {tool, "read_file"} for spelling in spellings)

    def _decide(self, tool: str, subjects: Sequence[str | None]) -> Action:
        actions = [self.capability.decide(tool, subject) for subject in subjects or [None]]
        if Action.DENY in actions:
            return Action.DENY
        return Action.ASK if Action.ASK in actions else Action.ALLOW

    def _deny_reason(self, tool: str, subjects: Sequence[str | None]) -> str:
        blocked = [s for s in subjects if s is not None
                   and self.capability.decide(tool, s) is Action.DENY]
        if blocked:
            return f"a permission rule denies {tool} on {', '.join(map(repr, blocked[:3]))}"
        return f"a permission rule denies {tool}"

    def _ask(self, call: ToolCall, name: str,
             subjects: Sequence[str | None]) -> tuple[bool, str]:
        why = ("every call needs approval" if name in self.capability.approval_required
               else "a permission rule asks for approval")
        if self.approval is None:
            return False, f"{call.name} needs approval ({why}) and this run has no approver"
        request = ApprovalRequest(agent=self.agent, tool=name, arguments=call.arguments,
                                  subjects=tuple(s for s in subjects if s is not None),
                                  reason=why)
        if self.approval(request):
            return True, "approved"
        return False, f"{call.name} was not approved ({why})"


def render_arguments(arguments: Mapping[str, Any], limit: int = 200) -> str:
    """A short one-line rendering of call arguments (progress and prompts)."""
    text = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ += ["render_arguments"]
