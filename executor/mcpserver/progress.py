"""A request's progress notifications: the run's events as one line each.

A long tool (``run_agent``, ``fanout``) runs through :class:`executor.api.AsyncCorral`,
which runs the blocking call in a thread and hands its events
(:class:`executor.api.ProgressEvent`) to the event loop, in order; a cancelled
request cancels the run there, and waits for its record. What is left for the
server is the words: :class:`ProgressSink` turns each event into one line (the
same words as the terminal's status line, a fanout child labelled
``[2/3] patcher RUN``) and hands it to ``send`` (the request's
``notifications/progress``, sent only when the client asked with a
progressToken).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

from executor.api import ProgressEvent
from executor.text import one_line

__all__ = ["CANCEL_REASON", "ProgressSink"]

#: Why a run ended ``cancelled`` when the MCP client gave up on it (in its record).
CANCEL_REASON = "the MCP client cancelled the request"

_PHASES = {"sandbox": "opening its sandbox", "diff": "collecting its diff",
           "check": "running the check command"}


class ProgressSink:
    """Progress events of one request's run tree, as text lines for ``send``.

    Thread-safe: labels are set from the run's thread (a fanout names its children
    before they start), lines are sent from the event loop.
    """

    def __init__(self, send: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._lock = threading.Lock()
        self._labels: dict[str, str] = {}
        self._send = send

    def label(self, run_id: str, label: str) -> None:
        """Name a run's lines (a fanout child: ``[2/3] patcher RUN``)."""
        with self._lock:
            self._labels[run_id] = label

    def describe(self, event: ProgressEvent) -> str | None:
        """One line for an event, or ``None`` for events not worth a notification."""
        with self._lock:
            label = self._labels.get(event.run_id or "", "")
        who = label or ("  " * event.depth + event.agent)
        if event.kind == "step":
            text = f"step {event.step}"
        elif event.kind in ("tool", "tool_done"):
            text = f"step {event.step}: {event.detail}"
        elif event.kind == "final":
            text = f"answered after {event.step} step(s)"
        elif event.kind == "phase":
            if event.detail.startswith("done"):
                text = event.detail.removeprefix("done").strip() or "done"
            else:
                text = _PHASES.get(event.detail, event.detail)
        else:
            return None
        return one_line(f"{who}: {text}")[:400]

    async def __call__(self, event: ProgressEvent) -> None:
        """Send the event's line (in the event loop; :class:`executor.api.AsyncCorral`
        calls it in order)."""
        line = self.describe(event)
        if line is not None and self._send is not None:
            await self._send(line)
