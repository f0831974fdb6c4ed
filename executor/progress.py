"""Live progress of a run on a terminal: steps, the current tool, the agents involved.

Only rendering lives here (rich); the session emits plain events. Disabled
(``--json``, or stderr not a terminal) it does nothing at all.

Everything shown is escaped (:func:`executor.text.one_line`) and handed to
rich as :class:`rich.text.Text`, never as a string: rich reads ``[...]`` in a
string as markup, so a file named ``[link=https://...]x`` would otherwise
become a hyperlink, and ``:emoji:`` codes would be replaced. The status line is
redrawn on every event (a fast tool is still shown), and the live display does
not capture stdout or stderr: what the CLI prints meanwhile is never re-read as
ANSI or markup. :meth:`Progress.paused` takes the status line away while a
person answers an approval prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from executor.session import ProgressEvent
from executor.text import one_line

__all__ = ["Progress"]


class Progress:
    """A status line updated by session events; a finished tool call leaves one line."""

    def __init__(self, *, enabled: bool, console: Console | None = None) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True, log_path=False)
        self.spinner = Spinner("dots", text=Text("starting"))
        self.live: Live | None = None
        self.tools = 0
        self.changed: set[str] = set()

    def _start(self) -> None:
        self.live = Live(self.spinner, console=self.console, transient=True,
                         redirect_stdout=False, redirect_stderr=False)
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
        self._stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No status line inside the block (a prompt is shown); back afterwards."""
        running = self.live is not None
        self._stop()
        try:
            yield
        finally:
            if running:
                self._start()

    def _status(self, text: str) -> None:
        self.spinner.update(text=Text(one_line(text)))
        if self.live is not None:
            self.live.refresh()

    def __call__(self, event: ProgressEvent) -> None:
        if self.live is None:
            return
        indent = "  " * event.depth
        if event.kind == "step":
            self._status(f"{indent}{event.agent}: step {event.step}")
        elif event.kind == "tool":
            self.tools += 1
            self._status(f"{indent}{event.agent}: step {event.step}: {event.detail}")
        elif event.kind == "tool_done":
            self.changed.update(f"{event.agent}:{path}" for path in event.paths)
            files = f" ({len(self.changed)} file(s) changed)" if self.changed else ""
            # print, not log: log() appends the time and the source line of this call.
            self.console.print(Text(one_line(f"{indent}{event.agent} [{event.step}] "
                                             f"{event.detail}{files}")), highlight=False)
        elif event.kind == "final":
            self._status(f"{indent}{event.agent}: answered after {event.step} step(s)")
