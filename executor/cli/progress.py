"""Live progress on a terminal: one line per running agent, updated in place.

Only rendering lives here (rich); sessions and runs emit plain events
(:class:`executor.api.ProgressEvent`), from any thread: every child of a
fanout or of a parallel delegate call runs in its own, so the state is
guarded by one lock and the lines are drawn from a snapshot of it. Disabled
(``--json``, or stderr not a terminal) it does nothing at all: nothing is
ever written to a pipe.

Each run is one line, keyed by its run id (two children of one agent are two
lines): its step, its current tool and its elapsed time, redrawn in place
several times a second. ``corral run`` keeps the line of the top-level run
and shows a delegated child's line until its record is written; every finished tool call
also leaves one plain line (``agent [step] tool: decision``). ``corral
fanout`` labels one line per child before it starts (``[2/3] patcher
waiting``), keeps it when the child is done (its status, files changed and
check), and prints no per-call lines.

Everything shown is escaped (:func:`executor.text.one_line`) and handed to
rich as :class:`rich.text.Text`, never as a string: rich reads ``[...]`` in a
string as markup, so a file named ``[link=https://...]x`` would otherwise
become a hyperlink, and ``:emoji:`` codes would be replaced. The live display
does not capture stdout or stderr: what the CLI prints meanwhile is never
re-read as ANSI or markup. :meth:`Progress.paused` takes the lines away while
a person answers an approval prompt.

rich is loaded only for a live display (:mod:`executor.cli.live`, which
draws the lines this module keeps): ``--json`` and piped runs never import it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from executor.api import ProgressEvent
from executor.text import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from executor.cli.live import LiveDisplay

__all__ = ["Line", "Progress"]


@dataclass
class Line:
    """What one run's line shows."""

    agent: str
    depth: int
    label: str = ""
    text: str = "starting"
    started: float | None = None
    finished: float | None = None

    def elapsed(self, now: float) -> str:
        if self.started is None:
            return ""
        seconds = (self.finished or now) - self.started
        return f" ({seconds:.1f} s)"

    def shown(self, now: float) -> str:
        """The line's text, escaped."""
        head = f"{'  ' * self.depth}{self.label or self.agent}"
        return one_line(f"{head}: {self.text}{self.elapsed(now)}")


class Progress:
    """Per-run lines updated by events; ``calls``: finished tool calls leave a line each
    (``corral run``); ``corral fanout`` passes ``calls=False`` and labels its children."""

    def __init__(self, *, enabled: bool, console: Console | None = None,
                 calls: bool = True) -> None:
        self.enabled = enabled
        self.console = console
        self.calls = calls
        self.live: LiveDisplay | None = None
        self.tools = 0
        self.changed: set[str] = set()
        self._lock = threading.RLock()
        self._lines: dict[str, Line] = {}

    def _start(self) -> None:
        # rich (about 20 ms of imports) only when lines are drawn on a terminal.
        from executor.cli.live import LiveDisplay  # noqa: PLC0415

        self.live = LiveDisplay(self.lines, console=self.console)
        self.console = self.live.console
        self.live.start()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def lines(self) -> list[Line]:
        """A snapshot of the lines, in the order they appeared (the display draws it)."""
        with self._lock:
            return list(self._lines.values())

    def __enter__(self) -> Progress:
        if self.enabled:
            self._start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No live lines inside the block (a prompt is shown); back afterwards."""
        with self._lock:
            running = self.live is not None
            self._stop()
        try:
            yield
        finally:
            if running:
                with self._lock:
                    self._start()

    def label(self, run_id: str, label: str, agent: str) -> None:
        """Show a line for a run before it starts (a fanout child waiting for a slot)."""
        with self._lock:
            self._lines[run_id] = Line(agent=agent, depth=0, label=label, text="waiting")
        self._refresh()

    def _refresh(self) -> None:
        live = self.live
        if live is not None:
            live.refresh()

    def __call__(self, event: ProgressEvent) -> None:
        live = self.live
        if live is None:
            return
        printed: str | None = None
        with self._lock:
            key = event.run_id or event.agent
            line = self._lines.get(key)
            if line is None:
                line = self._lines[key] = Line(agent=event.agent, depth=event.depth)
            if line.started is None:
                line.started = time.monotonic()
            indent = "  " * event.depth
            if event.kind == "step":
                line.text = f"step {event.step}"
            elif event.kind == "tool":
                self.tools += 1
                line.text = f"step {event.step}: {event.detail}"
            elif event.kind == "tool_done":
                self.changed.update(f"{key}:{path}" for path in event.paths)
                if self.calls:
                    files = (f" ({len(self.changed)} file(s) changed)" if self.changed else "")
                    printed = one_line(f"{indent}{event.agent} [{event.step}] "
                                       f"{event.detail}{files}")
            elif event.kind == "final":
                line.text = f"answered after {event.step} step(s)"
            elif event.kind == "phase":
                self._phase(key, line, event)
        if printed is not None:
            live.print(printed)
        self._refresh()

    def _phase(self, key: str, line: Line, event: ProgressEvent) -> None:
        words = {"sandbox": "opening its sandbox", "diff": "collecting its diff",
                 "check": "running the check command"}
        if event.detail.startswith("ended"):  # its record is written
            if not line.label and event.depth > 0:
                self._lines.pop(key, None)  # a delegated child's line goes
            return
        if event.detail.startswith("done"):  # a fanout child, checked: its line stays
            line.finished = time.monotonic()
            line.text = event.detail.removeprefix("done").strip() or "done"
            return
        line.text = words.get(event.detail, event.detail)
