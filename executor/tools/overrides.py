"""A tool under per-agent overrides (:mod:`policies.overrides`).

:class:`OverriddenTool` wraps one tool implementation with an agent's
overrides for it: ``maxResultChars`` cuts the result with an explicit marker,
``baseDir`` makes a path left at its default (``.``) mean that directory (the
confinement itself is a permission rule of the contract, judged by the
dispatcher like any other), and ``timeoutSeconds`` caps each shell command's
timeout. The model sees the same name and arguments; the description says
where a tool is confined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, JsonValue

from executor.tools.context import ToolContext, truncate
from executor.tools.dispatch import Tool, ToolOutput
from policies.overrides import base_dir

__all__ = ["OverriddenTool", "with_overrides"]


class OverriddenTool:
    """``inner`` with the overrides ``overrides`` (already validated by the loader)."""

    def __init__(self, inner: Tool[Any, ToolContext], overrides: Mapping[str, JsonValue]) -> None:
        self.inner = inner
        self.name = inner.name
        self.args: type[BaseModel] = inner.args
        limit = overrides.get("maxResultChars")
        self.max_chars = limit if isinstance(limit, int) else None
        timeout = overrides.get("timeoutSeconds")
        self.timeout = float(timeout) if isinstance(timeout, int | float) else None
        base = base_dir(overrides["baseDir"]) if "baseDir" in overrides else "."
        self.base = None if base == "." else base
        self.description = inner.description + (
            f" Confined to {self.base}/ (paths outside it are denied; the default path is "
            "it)." if self.base else "")

    def _adjust(self, args: BaseModel) -> BaseModel:
        updates: dict[str, object] = {}
        if self.base is not None and getattr(args, "path", None) == ".":
            updates["path"] = self.base
        if self.timeout is not None and hasattr(args, "timeout"):
            given = args.timeout
            updates["timeout"] = self.timeout if given is None else min(given, self.timeout)
        return args.model_copy(update=updates) if updates else args

    def subjects(self, args: BaseModel) -> list[str | None]:
        """The inner tool's subjects, for the adjusted arguments."""
        return self.inner.subjects(self._adjust(args))

    def run(self, args: BaseModel, context: ToolContext) -> ToolOutput:
        """Run the inner tool on the adjusted arguments; cut its result at the cap."""
        output = self.inner.run(self._adjust(args), context)
        if self.max_chars is None or len(output.content) <= self.max_chars:
            return output
        return ToolOutput(truncate(output.content, self.max_chars,
                                   what=f"the {self.name} result",
                                   hint="this agent's maxResultChars override caps it"),
                          is_error=output.is_error, data=output.data)


def with_overrides(tool: Tool[Any, ToolContext],
                   overrides: Mapping[str, JsonValue]) -> Tool[Any, ToolContext]:
    """``tool`` itself when there is nothing to override, else it wrapped."""
    return OverriddenTool(tool, overrides) if overrides else tool
