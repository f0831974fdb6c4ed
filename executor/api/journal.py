"""What :class:`Corral` reads from run journals: ``logs``, ``logs -f``, and a live ``show``.

A run appends its events to its journal as they happen
(:mod:`executor.ledger.journal`). :func:`events` reads what a run (or every child
of a fanout, interleaved by time) has journaled so far; :func:`follow` keeps
reading until the run ends (its record is final, or its process died) or the
fanout does. :func:`live` gives a record without calls yet (a run still going,
or one whose process died) the calls so far, rebuilt from its journal, and
:func:`messages` its transcript so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.errors import ExecutorError
from executor.ledger import (
    JOURNAL,
    RunRecord,
    RunStatus,
    fanout_status,
    find_fanout,
    find_run,
    read_journal,
    run_status,
)

if TYPE_CHECKING:
    from executor.api.corral import Corral

__all__ = ["LogEvent", "calls_so_far", "events", "follow", "live", "messages"]

#: Seconds between two reads of a followed journal that had nothing new.
POLL = 0.1


@dataclass(frozen=True)
class LogEvent:
    """One journal event of a run: ``event`` as journaled (``t``, ``kind``, ...), the run and
    agent it belongs to, and for a fanout's child its place (``child`` of ``children``)."""

    run_id: str
    agent: str
    event: Mapping[str, Any]
    child: int | None = None
    children: int | None = None

    @property
    def kind(self) -> str:
        return str(self.event.get("kind", ""))

    @property
    def t(self) -> float:
        value = self.event.get("t")
        return float(value) if isinstance(value, int | float) else 0.0

    def to_json(self) -> dict[str, Any]:
        """One line of ``corral logs --json``: the event, with ``run`` and ``agent`` (and
        ``child``, ``children`` for a fanout's child)."""
        where: dict[str, Any] = {"run": self.run_id, "agent": self.agent}
        if self.child is not None:
            where |= {"child": self.child, "children": self.children}
        return dict(self.event) | where


@dataclass
class _Source:
    """One journal being read: where it is, how far, and how its events are labelled."""

    ledger: Path
    run_id: str
    agent: str
    child: int | None = None
    children: int | None = None
    offset: int = 0

    def read(self) -> list[LogEvent]:
        """Every whole event journaled since the last read."""
        found: list[LogEvent] = []
        while True:
            batch, self.offset = read_journal(self.ledger / self.run_id / JOURNAL, self.offset)
            found += [LogEvent(self.run_id, self.agent, e, self.child, self.children)
                      for e in batch]
            if not batch:
                return found

    def running(self) -> bool:
        """Whether its record still says ``running`` and its process lives."""
        for attempt in range(3):
            try:
                return run_status(find_run(self.ledger, self.run_id)) is RunStatus.RUNNING
            except ExecutorError:  # replaced this instant (a record rewrite), or unreadable
                time.sleep(POLL * attempt)
        return False


def _sources(corral: Corral, run_id: str) -> tuple[list[_Source], Callable[[], bool]]:
    """The journals of ``run_id`` (a run, or a fanout: each of its children) and how to
    tell whether more may come."""
    ledger = corral.ledger()
    if run_id.startswith("f-"):
        fanout = find_fanout(ledger, run_id)
        total = len(fanout.children)
        sources = [_Source(ledger, c.run_id, c.agent, c.index, total) for c in fanout.children]

        def fanout_running() -> bool:
            try:
                return fanout_status(find_fanout(ledger, fanout.fanout_id)) == "running"
            except ExecutorError:
                return False

        return sources, fanout_running
    record = find_run(ledger, run_id)
    source = _Source(ledger, record.run_id, record.agent)
    return [source], source.running


def _merged(sources: list[_Source]) -> list[LogEvent]:
    """What every source journaled since its last read, in time order (a fanout's
    children interleaved; one run's order is its own)."""
    found = [event for source in sources for event in source.read()]
    if len(sources) > 1:
        found.sort(key=lambda e: (e.t, e.child or 0))
    return found


def events(corral: Corral, run_id: str) -> list[LogEvent]:
    """:meth:`Corral.journal`."""
    return _merged(_sources(corral, run_id)[0])


def follow(corral: Corral, run_id: str, *, poll: float = POLL) -> Iterator[LogEvent]:
    """:meth:`Corral.follow` (an unknown id is refused here, before any event)."""
    sources, running = _sources(corral, run_id)
    return _following(sources, running, poll)


def _following(sources: list[_Source], running: Callable[[], bool],
               poll: float) -> Iterator[LogEvent]:
    while True:
        found = _merged(sources)
        yield from found
        if found:
            continue
        if not running():  # final (or dead): what it wrote before that is all there is
            yield from _merged(sources)
            return
        time.sleep(poll)


# -- a live record: the calls and messages so far ------------------------------------------

def calls_so_far(journaled: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The calls of a journal as the record's ``audit`` lists them; a call that has not
    ended is ``in_progress`` (its ``result`` is its output so far)."""
    calls: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}
    for event in journaled:
        kind, call_id = event.get("kind"), str(event.get("call_id", ""))
        if kind == "tool_call":
            latest[call_id] = call = {
                "index": len(calls), "step": event.get("step"), "call_id": call_id,
                "tool": event.get("tool"), "arguments": event.get("arguments"),
                "decision": "undecided", "reason": "", "result": "", "is_error": False,
                "duration_ms": None, "in_progress": True}
            calls.append(call)
        elif call_id in latest:
            call = latest[call_id]
            if kind == "decision":
                call |= {"decision": event.get("decision"), "reason": event.get("reason", "")}
            elif kind == "output" and call["in_progress"]:
                call["result"] += str(event.get("data", ""))
            elif kind == "tool_result":
                call |= {key: event.get(key) for key in
                         ("decision", "reason", "result", "is_error", "duration_ms")}
                call["in_progress"] = False
                del latest[call_id]
    return calls


def messages(journaled: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The transcript of a journal, one dict per message as ``transcript.jsonl`` has them."""
    found: list[dict[str, Any]] = []
    asked: dict[str, dict[str, Any]] = {}  # call id -> its entry in the last answer

    def message(role: str, content: Any, **more: Any) -> dict[str, Any]:
        return {"role": role, "content": str(content or ""), "tool_calls": [],
                "tool_call_id": None, "name": None, "is_error": False} | more

    for event in journaled:
        kind = event.get("kind")
        if kind == "prompt":
            found.append(message(str(event.get("role", "user")), event.get("text")))
        elif kind == "turn":
            calls: list[dict[str, Any]] = [
                {"id": str(c.get("id")), "name": c.get("name"), "arguments": {}}
                for c in event.get("calls") or [] if isinstance(c, dict)]
            asked = {str(c["id"]): c for c in calls}
            found.append(message("assistant", event.get("text"), tool_calls=calls))
        elif kind == "tool_call" and str(event.get("call_id")) in asked:
            asked[str(event.get("call_id"))]["arguments"] = event.get("arguments")
        elif kind == "tool_result":
            found.append(message("tool", event.get("result"),
                                 tool_call_id=event.get("call_id"), name=event.get("tool"),
                                 is_error=bool(event.get("is_error"))))
    return found


def _journaled(ledger: Path, run_id: str) -> list[dict[str, Any]]:
    source = _Source(ledger, run_id, "")
    return [dict(e.event) for e in source.read()]


def live(ledger: Path, record: RunRecord) -> RunRecord | None:
    """``record`` with the calls so far from its journal, when it has none of its own yet
    (a run still going, or one whose process died); ``None`` otherwise."""
    if record.status not in (RunStatus.RUNNING, RunStatus.CRASHED) or record.audit:
        return None
    journaled = _journaled(ledger, record.run_id)
    if not journaled:
        return None
    calls = calls_so_far(journaled)
    steps = max((int(e["step"]) for e in journaled
                 if e.get("kind") == "turn" and isinstance(e.get("step"), int)), default=0)
    why = ("it is still running" if run_status(record) is RunStatus.RUNNING
           else "its process died before it could write them")
    note = (f"{len(calls)} tool call(s) so far, from the run's journal ({why}); "
            f"`corral logs {record.run_id}` prints every event")
    return record.model_copy(update={"audit": calls, "steps": steps,
                                     "notes": [*record.notes, note]})


def transcript_so_far(ledger: Path, record: RunRecord) -> list[dict[str, Any]]:
    """The transcript a run journaled (for a run whose transcript was not written)."""
    return messages(_journaled(ledger, record.run_id))


__all__ += ["transcript_so_far"]
