"""Working-memory strategies: which part of the transcript each request sends.

The transcript (the run record) always keeps everything; a strategy only
decides the *request view*. Strategies come from the catalog format's
``memoryConfig`` (``summarizing_window`` when omitted):

* ``full``: every message;
* ``none``: the system prompt, the task, and the latest step only;
* ``windowed``: the task and the last ``window_turns`` steps (default 8);
* ``summarizing_window``: like ``windowed``, and the older steps survive as
  one summary (placed in the system prompt by default);
* ``auto_compact``: everything until the estimate passes ``compact_at_ratio``
  (default 0.8) of the context budget, then summary + window (the summary as
  a user message by default).

``toolResultEviction`` applies on top of any strategy: a tool result older
than ``after_turns`` steps (and, if set, larger than ``above_tokens``) is
replaced by a stub that says how big it was. Steps are cut whole, so a tool
result never loses the assistant message that asked for it. Summaries are
mechanical (which tools ran, on what, with what outcome): no extra model
request, so a replayed script stays deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from executor.models.base import Message
from policies.contract import MemoryConfig, MemoryKind

__all__ = ["DEFAULT_WINDOW", "estimate_tokens", "request_view", "text_only_view"]

DEFAULT_WINDOW = 8
_RESULT_EXCERPT = 120


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A cheap estimate: four characters a token, plus a little per message."""
    total = 0
    for message in messages:
        total += len(message.content) // 4 + 4
        for call in message.tool_calls:
            total += (len(call.name) + len(str(call.arguments))) // 4 + 4
    return total


def _steps(messages: Sequence[Message]) -> list[list[Message]]:
    """Group the messages after the task into steps: one assistant message with its
    tool results, or a lone user message (a follow-up)."""
    steps: list[list[Message]] = []
    for message in messages:
        if message.role == "tool" and steps:
            steps[-1].append(message)
        else:
            steps.append([message])
    return steps


def _summary(steps: Sequence[list[Message]]) -> str:
    lines = [f"Summary of {len(steps)} earlier step(s), condensed to save context:"]
    for number, step in enumerate(steps, start=1):
        head = step[0]
        if head.role == "user":
            lines.append(f"- step {number}: the user said: {head.content[:_RESULT_EXCERPT]}")
            continue
        if head.content.strip():
            lines.append(f"- step {number}: you said: {head.content.strip()[:_RESULT_EXCERPT]}")
        results = {m.tool_call_id: m for m in step[1:]}
        for call in head.tool_calls:
            result = results.get(call.id)
            outcome = "no result" if result is None else (
                ("error: " if result.is_error else "ok: ")
                + " ".join(result.content.split())[:_RESULT_EXCERPT])
            args = ", ".join(f"{k}={str(v)[:40]!r}" for k, v in sorted(call.arguments.items()))
            lines.append(f"- step {number}: {call.name}({args}) -> {outcome}")
    return "\n".join(lines)


def _evict(steps: list[list[Message]], memory: MemoryConfig) -> list[list[Message]]:
    policy = memory.tool_result_eviction
    if policy is None or (policy.after_turns is None and policy.above_tokens is None):
        return steps
    keep_recent = policy.after_turns if policy.after_turns is not None else 0
    out: list[list[Message]] = []
    for index, step in enumerate(steps):
        old = index < len(steps) - keep_recent
        new_step = [step[0]]
        for message in step[1:]:
            big = policy.above_tokens is None or len(message.content) // 4 > policy.above_tokens
            if old and big:
                stub = (f"[tool result evicted to save context: {len(message.content)} "
                        "characters; call the tool again if you need it]")
                new_step.append(replace(message, content=stub))
            else:
                new_step.append(message)
        out.append(new_step)
    return out


def request_view(messages: Sequence[Message], memory: MemoryConfig, *,
                 budget_tokens: int = 100_000) -> list[Message]:
    """The messages to send for the next request (see the module docstring).

    ``messages`` starts with the system prompt and the task (a user message).
    """
    if len(messages) <= 2:
        return list(messages)
    system, task, rest = messages[0], messages[1], list(messages[2:])
    steps = _evict(_steps(rest), memory)
    window = memory.window_turns or DEFAULT_WINDOW
    kind = memory.kind
    kept: list[list[Message]]
    dropped: list[list[Message]]
    if kind is MemoryKind.FULL:
        kept, dropped = steps, []
    elif kind is MemoryKind.NONE:
        kept, dropped = steps[-1:], []
    elif kind is MemoryKind.WINDOWED:
        kept, dropped = steps[-window:], []
    elif kind is MemoryKind.SUMMARIZING_WINDOW:
        kept, dropped = steps[-window:], steps[:-window]
    else:  # AUTO_COMPACT
        ratio = memory.compact_at_ratio or 0.8
        flat = [system, task, *(m for step in steps for m in step)]
        if estimate_tokens(flat) <= ratio * budget_tokens:
            kept, dropped = steps, []
        else:
            kept, dropped = steps[-window:], steps[:-window]
    view = [system, task]
    if dropped:
        summary = _summary(dropped)
        default = "SYSTEM_PROMPT" if kind is MemoryKind.SUMMARIZING_WINDOW else "USER_MESSAGE"
        if (memory.summary_placement or default) == "SYSTEM_PROMPT":
            view[0] = replace(system, content=f"{system.content}\n\n{summary}")
        else:  # appended to the task: providers want user/assistant to alternate
            view[1] = replace(task, content=f"{task.content}\n\n{summary}")
    return view + [m for step in kept for m in step]


_CALL_ARGS = 300


def text_only_view(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with every tool call and tool result written out as text.

    The finalization request after a step limit carries no tools (zuno: "one
    additional text-only request with no tools"). A provider refuses tool-call
    blocks in a request that defines no tools, so the conversation is sent as
    plain text: an assistant turn says which tools it called, and the results
    of one step become one user message. Consecutive user messages are joined,
    so roles still alternate.
    """
    out: list[Message] = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            calls = "\n".join(
                f"[tool call {call.name}({_call_text(call.arguments, call.raw_arguments)})]"
                for call in message.tool_calls)
            text = f"{message.content}\n{calls}" if message.content.strip() else calls
            out.append(Message(role="assistant", content=text))
            continue
        if message.role == "tool":
            outcome = "error" if message.is_error else "result"
            text = f"[tool {outcome} of {message.name or 'a tool'}]\n{message.content}"
        elif message.role == "user":
            text = message.content
        else:
            out.append(Message(role=message.role, content=message.content))
            continue
        if out and out[-1].role == "user":
            out[-1] = Message(role="user", content=f"{out[-1].content}\n\n{text}")
        else:
            out.append(Message(role="user", content=text))
    return out


def _call_text(arguments: dict[str, object], raw: str | None) -> str:
    text = raw if raw is not None else json.dumps(arguments, ensure_ascii=False,
                                                  sort_keys=True, default=str)
    return text if len(text) <= _CALL_ARGS else text[: _CALL_ARGS - 1] + "…"
