"""Live progress on a terminal: one line per running agent, updated in place.

Only rendering lives here (rich); sessions and runs emit plain events
(:class:`executor.session.ProgressEvent`), from any thread: every child of a
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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from executor.session import ProgressEvent
from executor.text import one_line

__all__ = ["Progress"]


@dataclass
class _Line:
    """What one run's line shows."""

    agent: str
    depth: int
    label: str = ""
    text: str = "starting"
    started: float | None = None
    finished: float | None = None
    spinner: Spinner = field(default_factory=lambda: Spinner("dots"))

    def elapsed(self, now: float) -> str:
        if self.started is None:
            return ""
        seconds = (self.finished or now) - self.started
        return f" ({seconds:.1f} s)"


class Progress:
    """Per-run lines updated by events; ``calls``: finished tool calls leave a line each
    (``corral run``); ``corral fanout`` passes ``calls=False`` and labels its children."""

    def __init__(self, *, enabled: bool, console: Console | None = None,
                 calls: bool = True) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True, log_path=False)
        self.calls = calls
        self.live: Live | None = None
        self.tools = 0
        self.changed: set[str] = set()
        self._lock = threading.RLock()
        self._lines: dict[str, _Line] = {}

    def _start(self) -> None:
        self.live = Live(self, console=self.console, transient=True, redirect_stdout=False,
                         redirect_stderr=False, refresh_per_second=4)
        self.live.start()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

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
            self._lines[run_id] = _Line(agent=agent, depth=0, label=label, text="waiting")
        self._refresh()

    def _refresh(self) -> None:
        live = self.live
        if live is not None:
            live.refresh()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The lines as they are now (rich calls this on every refresh)."""
        now = time.monotonic()
        with self._lock:
            lines = list(self._lines.values())
        rendered: list[Text | Spinner] = []
        for line in lines:
            head = f"{'  ' * line.depth}{line.label or line.agent}"
            text = Text(one_line(f"{head}: {line.text}{line.elapsed(now)}"))
            if line.finished is not None:
                rendered.append(text)
            else:
                line.spinner.update(text=text)
                rendered.append(line.spinner)
        yield Group(*rendered) if rendered else Text("")

    def __call__(self, event: ProgressEvent) -> None:
        if self.live is None:
            return
        printed: Text | None = None
        with self._lock:
            key = event.run_id or event.agent
            line = self._lines.get(key)
            if line is None:
                line = self._lines[key] = _Line(agent=event.agent, depth=event.depth)
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
                    printed = Text(one_line(f"{indent}{event.agent} [{event.step}] "
                                            f"{event.detail}{files}"))
            elif event.kind == "final":
                line.text = f"answered after {event.step} step(s)"
            elif event.kind == "phase":
                self._phase(key, line, event)
        if printed is not None:
            # print, not log: log() appends the time and the source line of this call.
            self.console.print(printed, highlight=False)
        self._refresh()

    def _phase(self, key: str, line: _Line, event: ProgressEvent) -> None:
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
