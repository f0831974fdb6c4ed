"""The progress bridge: a child runs in a thread, the MCP request waits for it in the event loop.

A child (or a fanout's children) runs the same blocking library call as the
CLI, in a thread of its own (:func:`run_blocking`), while the request's task
waits for it. Two things cross between them:

- **progress**: the executor's live events (:class:`executor.run.session.ProgressEvent`,
  from any of the child's threads) become one line each
  (:meth:`ProgressSink.describe`, the same words as the terminal's status line)
  and travel through a memory stream into the event loop, where
  :func:`run_blocking` hands them to ``send`` (the request's
  ``notifications/progress``, sent only when the client asked with a
  progressToken);
- **cancellation**: when the request's task is cancelled (the client sent
  ``notifications/cancelled``, or the connection closed), the run's
  :class:`~executor.scheduling.Cancellation` is set (the path Ctrl-C takes in the
  CLI: running commands are stopped, each session ends ``cancelled`` at its next
  step, its diff collected and recorded), and the task waits, shielded, until
  the thread has written the record, so a cancelled request never leaves a
  half-written run behind.

Nothing here knows MCP: the server passes ``send``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from executor.run.session import ProgressEvent
from executor.scheduling import Cancellation
from executor.text import one_line

__all__ = ["CANCEL_REASON", "ProgressSink", "run_blocking"]

T = TypeVar("T")

#: Why a run ended ``cancelled`` when the MCP client gave up on it (in its record).
CANCEL_REASON = "the MCP client cancelled the request"

_PHASES = {"sandbox": "opening its sandbox", "diff": "collecting its diff",
           "check": "running the check command"}


class ProgressSink:
    """Progress events of one request's run tree, as text lines, handed to the event loop.

    Thread-safe: sessions call it from their own threads. Before :meth:`bind` (or after
    the request ended) it drops every event.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._labels: dict[str, str] = {}
        self._stream: MemoryObjectSendStream[str] | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None

    def label(self, run_id: str, label: str) -> None:
        """Name a run's lines (a fanout child: ``[2/3] patcher RUN``)."""
        with self._lock:
            self._labels[run_id] = label

    def bind(self, stream: MemoryObjectSendStream[str] | None,
             token: anyio.lowlevel.EventLoopToken | None) -> None:
        """Where lines go (``None``: nowhere, from now on)."""
        with self._lock:
            self._stream, self._token = stream, token

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

    def __call__(self, event: ProgressEvent) -> None:
        line = self.describe(event)
        with self._lock:
            stream, token = self._stream, self._token
        if line is None or stream is None or token is None:
            return
        # The request may have ended (or the loop): then nobody is listening any more.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock,
                      anyio.RunFinishedError):
            anyio.from_thread.run_sync(stream.send_nowait, line, token=token)


async def run_blocking(work: Callable[[], T], *, cancellation: Cancellation,
                       progress: ProgressSink,
                       send: Callable[[str], Awaitable[None]] | None) -> T:
    """Run ``work`` in a thread of its own; forward its progress to ``send``; on
    cancellation of this task, cancel the run and wait for its record (see the module
    docstring). Returns what ``work`` returned, or raises what it raised."""
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    values: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(work())
        except BaseException as exc:  # handed to the waiting task, raised there
            errors.append(exc)
        finally:
            # The server may be gone: the record is written all the same.
            with suppress(anyio.RunFinishedError):
                anyio.from_thread.run_sync(done.set, token=token)

    writer, reader = anyio.create_memory_object_stream[str](math.inf)
    progress.bind(writer, token)

    async def forward() -> None:
        async with reader:
            async for line in reader:
                if send is not None:
                    await send(line)

    thread = threading.Thread(target=target, name="corral-mcp-run", daemon=True)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            thread.start()
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                cancellation.cancel(CANCEL_REASON)
                with anyio.CancelScope(shield=True):
                    await done.wait()  # the child stops, records its diff, returns
                raise
            finally:
                progress.bind(None, None)
                writer.close()
    finally:
        progress.bind(None, None)
    if errors:
        raise errors[0]
    return values[0]
