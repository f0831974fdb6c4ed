"""How one run follows another: a continued run's conversation, and the run it supersedes.

``corral run --continue RUN`` starts a new run (a new id, its own record) from
RUN's conversation: :func:`conversation` reads RUN's transcript back as
messages (the system prompt left out: the new run has its own, naming its own
workspace). A tool call the transcript holds no result for (RUN was cancelled
or crashed in the middle of it) is answered with an error result saying so,
because a provider refuses a conversation with an unanswered call. Once the
new run's workspace holds RUN's changes, :func:`supersede` marks RUN
``discarded`` with ``continued_by`` (its diff is part of the new run's), so
applying both is never the default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from executor.ledger.records import RecordError, RunRecord, now_iso
from executor.ledger.store import find_run, load_transcript, rewrite_record
from executor.models.base import Message, ToolCall

__all__ = ["UNANSWERED", "conversation", "supersede"]

#: The result a call the transcript holds no result for is given.
UNANSWERED = "this call did not return: the run ended before it finished"
_ROLES = ("system", "user", "assistant", "tool")


def _call(item: object) -> ToolCall:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) \
            or not isinstance(item.get("name"), str) \
            or not isinstance(item.get("arguments", {}), dict):
        raise ValueError("a tool call needs an id, a name and arguments")
    raw = item.get("raw_arguments")
    return ToolCall(id=item["id"], name=item["name"], arguments=dict(item.get("arguments", {})),
                    raw_arguments=raw if isinstance(raw, str) else None)


def _message(item: dict[str, Any]) -> Message:
    role = item.get("role")
    if role not in _ROLES or not isinstance(item.get("content", ""), str):
        raise ValueError(f"a message with role {role!r}")
    calls = item.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError("tool_calls is not a list")
    call_id, name = item.get("tool_call_id"), item.get("name")
    return Message(role=role, content=item.get("content", ""),
                   tool_calls=tuple(_call(c) for c in calls),
                   tool_call_id=call_id if isinstance(call_id, str) else None,
                   name=name if isinstance(name, str) else None,
                   is_error=bool(item.get("is_error", False)))


def _answer_dangling(messages: list[Message]) -> list[Message]:
    """Every call of an assistant message answered before the next message that is not a
    tool result (with :data:`UNANSWERED` where the transcript has none)."""
    out: list[Message] = []
    pending: dict[str, ToolCall] = {}

    def flush() -> None:
        out.extend(Message(role="tool", content=UNANSWERED, tool_call_id=call.id,
                           name=call.name, is_error=True) for call in pending.values())
        pending.clear()

    for message in messages:
        if message.role == "tool" and message.tool_call_id in pending:
            pending.pop(message.tool_call_id)
            out.append(message)
            continue
        flush()
        out.append(message)
        if message.role == "assistant":
            pending = {call.id: call for call in message.tool_calls}
    flush()
    return out


def conversation(ledger: Path, run_id: str) -> list[Message]:
    """Run ``run_id``'s conversation as messages, without its system prompt; a transcript
    that cannot be read as one is :class:`RecordError`."""
    try:
        messages = [_message(item) for item in load_transcript(ledger, run_id)]
    except ValueError as exc:
        raise RecordError(f"the transcript of run {run_id} cannot be continued: {exc}",
                          operation="read_record",
                          context={"transcript": str(ledger / run_id / "transcript.jsonl")},
                          hint="start a new run instead") from exc
    return _answer_dangling([m for m in messages if m.role != "system"])


def supersede(ledger: Path, run_id: str, *, by: str, diff_sha256: str | None
              ) -> RunRecord | None:
    """Mark run ``run_id`` ``discarded``, continued by run ``by``, if it still is as the
    continuation found it (pending, its diff the one with ``diff_sha256``); the record,
    or ``None`` when it changed meanwhile (applied, discarded, changed by hand)."""
    record = find_run(ledger, run_id)
    if record.state != "pending" or record.diff_sha256 != diff_sha256:
        return None
    return rewrite_record(ledger, record.model_copy(update={
        "state": "discarded", "state_changed_at": now_iso(), "continued_by": by,
        "notes": [*record.notes, f"continued by run {by}: its diff holds this run's changes "
                                 "(apply that one)"]}))
