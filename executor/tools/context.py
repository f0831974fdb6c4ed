"""What a tool implementation can reach: the sandbox, and the session's hooks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from sandbox.protocol import Sandbox

__all__ = ["Args", "DelegateHook", "DelegateTasksHook", "ToolContext", "truncate"]

#: delegate(agent, prompt, child, instructions) -> text for the model
DelegateHook = Callable[[str, str, str | None, str | None], str]
#: delegate(tasks=[...]) -> text for the model (the tasks are DelegateTask models)
DelegateTasksHook = Callable[[list[Any]], str]


class Args(BaseModel):
    """Base of every tool's arguments: unknown arguments are an error, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class ToolContext:
    """Per-session state the tools share."""

    sandbox: Sandbox
    agent: str
    delegate: DelegateHook | None = None
    #: The delegate tool's parallel mode (several tasks at once).
    delegate_tasks: DelegateTasksHook | None = None
    list_agents: Callable[[], list[tuple[str, str]]] | None = None
    #: Deferred tools tool_search may activate (by the names the model sees) -> description.
    deferred: dict[str, str] = field(default_factory=dict)
    activate: Callable[[Sequence[str]], object] | None = None
    todos: list[dict[str, Any]] = field(default_factory=list)
    #: Resource use of the commands run so far: peak RSS (max) and CPU seconds (sum).
    resources: dict[str, float] = field(default_factory=dict)
    #: The run's deadline (``time.monotonic()``); no command may outlive it.
    deadline: float | None = None
    #: permits(tool, path): may this result path be shown (search and find filter by it)?
    permits: Callable[[str, str], bool] | None = None
    #: on_output(stream, chunk): a command's output as it streams (the run's journal).
    on_output: Callable[[str, bytes], None] | None = None
    #: Whether a shell call runs only because an allow pattern matched its line: then it
    #: never runs in a directory the child made a repository (:mod:`executor.tools.shell`).
    shell_by_pattern: bool = False

    def shown(self, tool: str, path: str) -> bool:
        """Whether ``path`` may appear in ``tool``'s results."""
        return self.permits is None or self.permits(tool, path)

    def time_left(self, limit: float) -> float:
        """``limit`` capped by what is left of the run's deadline (at least a moment)."""
        if self.deadline is None:
            return limit
        return max(min(limit, self.deadline - time.monotonic()), 0.01)


def truncate(text: str, limit: int, *, what: str, hint: str = "") -> str:
    """``text`` cut to ``limit`` characters with an explicit marker saying so."""
    if len(text) <= limit:
        return text
    marker = f"\n[truncated: showing {limit} of {len(text)} characters of {what}"
    return text[:limit] + marker + (f"; {hint}]" if hint else "]")
