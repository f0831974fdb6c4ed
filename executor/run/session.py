"""The agent loop: one conversation between a model and a dispatcher.

A turn starts with a user message (the task, or a follow-up to a retained
child). Each *step* is one tool-capable request: the model answers with text
(the turn ends) or with tool calls, which the dispatcher runs and answers.
When the agent's ``steps`` limit (zuno's semantics) or the tree's shared step
budget is spent and the model still wants tools, exactly one more request is
sent, text only and with no tools defined (the conversation's tool calls and
results written out as text, which every provider accepts without tool
definitions), asking for the completed work, the remaining work, the evidence
and the blockers; the limit is never silently raised, and the run reports that
it stopped at its limit (``stopped_by``), never that it completed. The request
view of the transcript comes from the agent's memory strategy; the transcript
itself keeps everything.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from executor.errors import ExecutorError, ModelError
from executor.models.base import Message, Model, Sampling, ToolCall, Usage
from executor.models.textcalls import TEXT_CALL_PREFIX, parse_text_calls
from executor.run.memory import request_view, text_only_view
from executor.tools.dispatch import Dispatcher, JournalHook, render_arguments
from policies.contract import MemoryConfig
from policies.tools import NATIVE_TOOLS

__all__ = ["FINALIZE_PROMPT", "Cancelled", "ProgressEvent", "RunCancelled", "RunTimeout",
           "Session", "SessionOutcome", "SharedLimits", "TextToolCall"]

#: A task that asks for a change (conservative: an imperative verb of editing).
_ASKS_CHANGE = re.compile(r"\b(fix|add|implement|write|edit|change|create|update|refactor|"
                          r"rename|remove|delete|modify|replace)\b", re.IGNORECASE)

FINALIZE_PROMPT = (
    "You have reached your step limit. Do not call any tool. Reply with a concise account of: "
    "the work you completed, the work that remains, the evidence for what you report, and "
    "any blockers."
)


class RunTimeout(ExecutorError):
    """The run's wall-clock budget ran out."""

    code = "run_timeout"


class TextToolCall(ModelError):
    """The model wrote a tool call as text where it cannot be run as one (among other
    text, unreadable, or to a tool it does not hold): the run ends failed, never as an
    answer."""

    code = "text_tool_call"

    @classmethod
    def of(cls, agent: str, text: str, reason: str, names: tuple[str, ...]) -> TextToolCall:
        """The error for ``text`` (shown, cut at 2000 characters)."""
        shown = text if len(text) <= 2000 else text[:2000] + "..."
        return cls(f"agent {agent!r}: the model wrote a tool call as text ({reason}): "
                   f"{shown}", operation="session",
                   context={"text": shown, "reason": reason, "tools": ", ".join(names)},
                   hint="use a server and chat template that return tool calls as calls "
                   "(docs/models.md, 'A local model'), or set tool_choice for the provider")


class RunCancelled(ExecutorError):
    """The run was cancelled from outside (its fanout or its parent gave up, Ctrl-C)."""

    code = "cancelled"


class Cancelled(Protocol):
    """What a session polls to learn it was cancelled
    (:class:`executor.scheduling.base.Cancellation` is one)."""

    @property
    def cancelled(self) -> bool:
        """Whether the run must stop."""

    @property
    def reason(self) -> str:
        """Why."""


@dataclass
class SharedLimits:
    """Budgets shared by every agent of one run tree (thread-safe)."""

    total_steps: int | None = 500
    children: int | None = 32
    steps_used: int = 0
    children_used: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take_step(self) -> bool:
        """Spend one step; False when the tree's budget is gone."""
        with self._lock:
            if self.total_steps is not None and self.steps_used >= self.total_steps:
                return False
            self.steps_used += 1
            return True

    def take_child(self) -> bool:
        """Spend one child; False when the tree may start no more."""
        return self.take_children(1)

    def take_children(self, count: int) -> bool:
        """Spend ``count`` children at once, or none: False when the tree may not start
        that many more (a parallel delegate call starts all of its tasks or none)."""
        with self._lock:
            if self.children is not None and self.children_used + count > self.children:
                return False
            self.children_used += count
            return True

    def children_left(self) -> int | None:
        """How many more children the tree may start (``None``: no limit)."""
        with self._lock:
            return None if self.children is None else self.children - self.children_used


@dataclass(frozen=True)
class ProgressEvent:
    """Something a live display may show."""

    #: ``phase`` is a run's own stage, outside its conversation: ``detail`` says which
    #: (``sandbox``, ``diff``, ``ended <status>`` once its record is written; a fanout
    #: child's ``check`` and ``done <summary>``).
    kind: Literal["step", "tool", "tool_done", "final", "phase"]
    agent: str
    step: int
    detail: str = ""
    depth: int = 0
    #: Workspace paths a finished write tool changed (for the "files changed" count).
    paths: tuple[str, ...] = ()
    #: The run this event belongs to: two children of one agent are two lines.
    run_id: str = ""


@dataclass
class SessionOutcome:
    """How one turn ended."""

    final_text: str
    stopped_by: Literal["answer", "steps", "shared_steps"]
    steps: int
    usage: Usage
    requests: int
    model_seconds: float
    notes: list[str] = field(default_factory=list)


class Session:
    """One agent's conversation. ``run`` may be called again for a follow-up turn."""

    def __init__(
        self,
        *,
        agent: str,
        model: Model,
        dispatcher: Dispatcher[Any],
        system_prompt: str,
        memory: MemoryConfig,
        task_context: str = "",
        sampling: Sampling,
        steps: int | None,
        limits: SharedLimits,
        deadline: float | None = None,
        progress: Callable[[ProgressEvent], None] | None = None,
        depth: int = 0,
        budget_tokens: int = 100_000,
        run_id: str = "",
        cancellation: Cancelled | None = None,
    ) -> None:
        self.agent = agent
        self.model = model
        self.dispatcher = dispatcher
        self.memory = memory
        self.sampling = sampling
        self.steps = steps
        self.limits = limits
        self.deadline = deadline
        self.progress = progress
        self.depth = depth
        self.budget_tokens = budget_tokens
        self.run_id = run_id
        self.cancellation = cancellation
        self.messages: list[Message] = [Message(role="system", content=system_prompt)]
        #: Said before the first task (where the run works): kept out of the system prompt,
        #: whose bytes then stay the same across runs for the providers' prompt caches.
        self.task_context = task_context
        self._said: set[str] = set()
        self.usage = Usage()
        self.requests = 0
        self.model_seconds = 0.0
        self.total_steps = 0
        #: The run's journal: each prompt and model answer as it happens (the dispatcher
        #: journals the calls).
        self.journal: JournalHook | None = None

    def _note_turn(self, step: int, text: str, calls: list[ToolCall], *,
                   from_text: bool = False) -> None:
        if self.journal is not None:
            self.journal("turn", step=step, text=text,
                         calls=[{"id": c.id, "name": c.name} for c in calls],
                         **({"calls_from_text": True} if from_text else {}))

    def _text_calls(self, step: int, text: str) -> tuple[ToolCall, ...]:
        """The calls of an answer that is only tool calls written as text (renamed
        ``text_call_STEP_N``); ``()`` for a real answer. Call-like text among other text,
        or unreadable, ends the run (:class:`TextToolCall`): never a silent success."""
        offered = [schema.name for schema in self.dispatcher.schemas()]
        parsed = parse_text_calls(text, offered=offered, known=NATIVE_TOOLS)
        if parsed.kind == "none":
            return ()
        if parsed.kind == "ambiguous":
            raise TextToolCall.of(self.agent, text, parsed.reason, parsed.names)
        return tuple(replace(call, id=f"{TEXT_CALL_PREFIX}{step}_{index}")
                     for index, call in enumerate(parsed.calls))

    def _dispatch_text_calls(self, step: int, calls: tuple[ToolCall, ...], text: str) -> None:
        """A text call to a tool the model was not offered goes to the dispatcher, which
        denies it like any other call (audited, in the record's denied calls); then the run
        ends failed, and none of the answer's other calls runs."""
        offered = {schema.name for schema in self.dispatcher.schemas()}
        foreign = [call for call in calls if call.name not in offered]
        if not foreign:
            return
        for call in foreign:
            self.messages.append(self.dispatcher.dispatch(call, step=step))
        names = tuple(call.name for call in foreign)
        raise TextToolCall.of(self.agent, text, f"it names {', '.join(map(repr, names))}, "
                              "which this agent does not hold (denied)", names)

    def _no_change_note(self, prompt: str) -> list[str]:
        """A conservative note: the task asked for a change, the agent could write, and it
        ended without a single tool call (so it changed nothing)."""
        if self.dispatcher.audit or not _ASKS_CHANGE.search(prompt):
            return []
        writers = {"write_file", "edit", "apply_patch", "shell"}
        if not any(self.dispatcher.canonical(s.name) in writers
                   for s in self.dispatcher.schemas()):
            return []
        return ["the task asked for a change, but the model answered without any tool call: "
                "nothing was changed"]

    def _emit(self, kind: Literal["step", "tool", "tool_done", "final"], step: int,
              detail: str = "", paths: tuple[str, ...] = ()) -> None:
        if self.progress is not None:
            self.progress(ProgressEvent(kind, self.agent, step, detail, self.depth, paths,
                                        self.run_id))

    def _check_deadline(self) -> None:
        if self.cancellation is not None and self.cancellation.cancelled:
            raise RunCancelled(f"agent {self.agent!r} was cancelled: "
                               f"{self.cancellation.reason or 'no reason given'}",
                               operation="session")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise RunTimeout(f"agent {self.agent!r} ran out of time",
                             operation="session", hint="raise --timeout or the agent's limit")

    def _request(self, sampling: Sampling, *, tools: bool = True) -> Any:
        self._check_deadline()
        view = request_view(self.messages, self.memory, budget_tokens=self.budget_tokens)
        if not tools:
            view = text_only_view(view)
        started = time.monotonic()
        response = self.model.complete(view, self.dispatcher.schemas() if tools else [],
                                       sampling=sampling)
        self.model_seconds += time.monotonic() - started
        self.requests += 1
        self.usage = self.usage + response.usage
        return response

    def run(self, prompt: str) -> SessionOutcome:
        """One turn: the task (or a follow-up) until a text answer or a limit."""
        context = self._context_to_say()
        self.messages.append(Message(role="user", content=f"{context}\n\n{prompt}"
                                     if context else prompt))
        if self.journal is not None:
            self.journal("prompt", role="user", text=prompt,
                         **({"context": context} if context else {}))
        notes: list[str] = []
        step = 0
        while True:
            if self.steps is not None and step >= self.steps:
                return self._finalize(step, "steps", notes)
            if not self.limits.take_step():
                notes.append("stopped at the run's shared step budget")
                return self._finalize(step, "shared_steps", notes)
            step += 1
            self.total_steps += 1
            self._emit("step", step)
            response = self._request(self.sampling)
            calls, from_text = response.tool_calls, False
            if not calls:
                calls = self._text_calls(step, response.text)
                from_text = bool(calls)
            self._note_turn(step, response.text, list(calls), from_text=from_text)
            self.messages.append(Message(role="assistant",
                                         content="" if from_text else response.text,
                                         tool_calls=calls))
            if not calls:
                self._emit("final", step)
                notes += self._no_change_note(prompt)
                return SessionOutcome(response.text, "answer", step, self.usage, self.requests,
                                      self.model_seconds, notes)
            if from_text:
                notes.append(f"step {step}: {len(calls)} tool call(s) the model wrote as text "
                             f"were parsed and dispatched (call ids {TEXT_CALL_PREFIX}*)")
                self._dispatch_text_calls(step, calls, response.text)
            for call in calls:
                self._check_deadline()
                self._emit("tool", step, f"{call.name} {render_arguments(call.arguments, 80)}")
                self.messages.append(self.dispatcher.dispatch(call, step=step))
                record = self.dispatcher.audit[-1]
                self._emit("tool_done", step, f"{call.name}: {record.decision}",
                           _written(call, self.dispatcher.canonical(call.name))
                           if not record.is_error else ())

    def _context_to_say(self) -> str:
        """The task context, before the conversation's first task, and again before a
        follow-up of a continued run whose conversation said another (its workspace
        moved); never twice."""
        said = self.task_context in self._said or any(
            m.role == "user" and m.content.startswith(self.task_context)
            for m in self.messages)
        self._said.add(self.task_context)
        return "" if said or not self.task_context else self.task_context

    def _finalize(self, step: int, why: Literal["steps", "shared_steps"],
                  notes: list[str]) -> SessionOutcome:
        """The one text-only request after a limit: no tools in it at all."""
        self.messages.append(Message(role="user", content=FINALIZE_PROMPT))
        response = self._request(self.sampling, tools=False)
        self._note_turn(step, response.text, [])  # its calls are not run (noted)
        if response.tool_calls:
            notes.append(f"the finalization answer asked for {len(response.tool_calls)} tool "
                         "call(s); none was run")
        self.messages.append(Message(role="assistant", content=response.text))
        self._emit("final", step)
        return SessionOutcome(response.text, why, step, self.usage, self.requests,
                              self.model_seconds, notes)


def _written(call: ToolCall, tool: str | None) -> tuple[str, ...]:
    """The paths a successful write tool call changed (progress display only); ``tool`` is
    the canonical name of the tool called."""
    if tool in ("write_file", "edit") and isinstance(call.arguments.get("path"), str):
        return (call.arguments["path"],)
    if tool == "apply_patch" and isinstance(call.arguments.get("patch"), str):
        return tuple(line[4:].split("\t")[0].removeprefix("b/")
                     for line in call.arguments["patch"].split("\n")
                     if line.startswith("+++ ") and line[4:].strip() != "/dev/null")
    return ()
