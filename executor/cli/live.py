"""Drawing :mod:`executor.cli.progress`'s lines on a terminal with rich.

The one module of the live display that imports rich: :class:`Progress` loads
it only when it is enabled (a terminal, no ``--json``). Every line arrives
escaped (:func:`executor.text.one_line`) and is handed to rich as
:class:`rich.text.Text`, never as a string: rich reads ``[...]`` in a string
as markup, so a file named ``[link=https://...]x`` would otherwise become a
hyperlink, and ``:emoji:`` codes would be replaced. The live display does not
capture stdout or stderr: what the CLI prints meanwhile is never re-read as
ANSI or markup.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

__all__ = ["LiveDisplay", "Shown"]


class Shown(Protocol):
    """What the display draws of one line (:class:`executor.cli.progress.Line` is one)."""

    @property
    def finished(self) -> float | None:
        """When it stopped changing (no spinner then)."""

    def shown(self, now: float) -> str:
        """Its text, escaped."""


class LiveDisplay:
    """A rich :class:`~rich.live.Live` of the lines ``lines()`` returns, redrawn in place."""

    def __init__(self, lines: Callable[[], Sequence[Shown]], *,
                 console: Console | None) -> None:
        self.console = console or Console(stderr=True, log_path=False)
        self._lines = lines
        self._spinners: dict[int, Spinner] = {}
        self._live = Live(self, console=self.console, transient=True, redirect_stdout=False,
                          redirect_stderr=False, refresh_per_second=4)

    def start(self) -> None:
        self._live.start()

    def stop(self) -> None:
        self._live.stop()

    def refresh(self) -> None:
        self._live.refresh()

    def print(self, text: str) -> None:
        """One plain line above the live ones (``text`` is escaped already)."""
        # print, not log: log() appends the time and the source line of this call.
        self.console.print(Text(text), highlight=False)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The lines as they are now (rich calls this on every refresh)."""
        now = time.monotonic()
        rendered: list[Text | Spinner] = []
        lines = self._lines()
        self._spinners = {id(line): spinner for line in lines
                          if (spinner := self._spinners.get(id(line))) is not None}
        for line in lines:
            text = Text(line.shown(now))
            if line.finished is not None:
                rendered.append(text)
                continue
            spinner = self._spinners.get(id(line))
            if spinner is None:
                spinner = self._spinners[id(line)] = Spinner("dots")
            spinner.update(text=text)
            rendered.append(spinner)
        yield Group(*rendered) if rendered else Text("")
