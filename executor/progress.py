"""Live progress of a run on a terminal: steps, the current tool, the agents involved.

Only rendering lives here (rich); the session emits plain events. Disabled
(``--json``, or stderr not a terminal) it does nothing at all.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.status import Status

from executor.session import ProgressEvent
from executor.text import printable

__all__ = ["Progress"]


class Progress:
    """A status line updated by session events; a finished tool call leaves one line."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.console = Console(stderr=True)
        self.status: Status | None = None
        self.tools = 0
        self.changed: set[str] = set()

    def __enter__(self) -> Progress:
        if self.enabled:
            self.status = self.console.status("starting")
            self.status.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def __call__(self, event: ProgressEvent) -> None:
        if self.status is None:
            return
        indent = "  " * event.depth
        if event.kind == "step":
            self.status.update(f"{indent}{event.agent}: step {event.step}")
        elif event.kind == "tool":
            self.tools += 1
            self.status.update(printable(f"{indent}{event.agent}: step {event.step}: "
                                         f"{event.detail}"))
        elif event.kind == "tool_done":
            self.changed.update(f"{event.agent}:{path}" for path in event.paths)
            files = f" ({len(self.changed)} file(s) changed)" if self.changed else ""
            self.console.log(printable(f"{indent}{event.agent} [{event.step}] {event.detail}"
                                       f"{files}"), highlight=False, markup=False)
        elif event.kind == "final":
            self.status.update(f"{indent}{event.agent}: answered after {event.step} step(s)")
