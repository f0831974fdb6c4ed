"""A tool under per-agent overrides (:mod:`policies.overrides`).

:class:`OverriddenTool` wraps one tool implementation with an agent's
overrides for it: ``maxResultChars`` cuts the result with an explicit marker,
``baseDir`` re-roots the tool, and ``timeoutSeconds`` caps each shell
command's timeout. The model sees the same name and arguments.

``baseDir`` (the catalog's "e.g. { "baseDir": "/tmp" }", inside the workspace
here) re-roots every path of a path tool: the model's ``f.txt`` under baseDir
``sub`` is the workspace's ``sub/f.txt``, a path left at its default (``.``) is
``sub``, and the paths a tool reports (``find``, ``search``) are relative to
``sub`` too. The tool's description and its path argument's say so. The
permission subjects are the re-rooted workspace paths, and the contract's
rules (deny the tool, allow ``sub`` and ``sub/**``, :func:`policies.overrides.
override_rules`) are judged on them by the dispatcher like any other: ``../x``
is the workspace's ``x`` and stays denied. The tool itself runs on a view of
the sandbox whose file API and command directory are re-rooted the same way
(the sandbox's own confinement, ``..`` refused, still applies underneath).
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel, JsonValue, create_model
from pydantic.fields import FieldInfo

from executor.tools.context import ToolContext, truncate
from executor.tools.dispatch import Tool, ToolOutput
from policies.overrides import base_dir
from policies.permissions import PATH_TOOLS
from sandbox.files.confined import ConfinedFiles
from sandbox.protocol import Sandbox
from sandbox.results import ExecResult

__all__ = ["OverriddenTool", "override_note", "rebase", "with_overrides"]


def rebase(base: str, path: str) -> str:
    """The workspace path of ``path`` given relative to ``base``, normalized (``.`` is
    ``base``, ``../x`` is ``x``: outside ``base``, which the rules deny); an absolute or
    ``~`` path is left as it is (the sandbox and the rules judge it)."""
    if path.startswith(("/", "~")):
        return path
    return posixpath.normpath(posixpath.join(base, path))


def _within(base: str, path: str) -> str | None:
    """``path`` (given relative to ``base``) normalized and still relative to ``base``, or
    ``None`` when it leaves ``base`` (its call is denied before the tool runs)."""
    if path.startswith(("/", "~")):
        return None
    rooted = rebase(base, path)
    if rooted == base:
        return "."
    return rooted.removeprefix(f"{base}/") if rooted.startswith(f"{base}/") else None


#: The methods of the confined file API whose first argument is a path (the path tools
#: use these); every other method is refused under a base directory, not passed through.
_PATH_METHODS = frozenset({"read_bytes", "read_text", "stat", "exists", "list_dir",
                           "write_bytes", "write_text", "remove", "make_dir", "parts",
                           "resolve_dir"})


class _RebasedFiles:
    """The sandbox's confined file API with every path taken relative to ``base``."""

    def __init__(self, inner: ConfinedFiles, base: str) -> None:
        self.inner = inner
        self.base = base

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute
        if name not in _PATH_METHODS:
            raise AttributeError(f"{name} is not available under a base directory")

        def call(path: str = ".", *args: Any, **kwargs: Any) -> Any:
            return attribute(rebase(self.base, path), *args, **kwargs)

        return call

    def glob(self, pattern: str, *, limit: int = 1000) -> list[str]:
        """The matches under ``base``, relative to it."""
        prefix = f"{self.base}/"
        found = self.inner.glob(prefix + pattern.lstrip("/") if pattern.strip("/") else
                                prefix + "**", limit=limit)
        return [path.removeprefix(prefix) for path in found if path.startswith(prefix)]


class _RebasedSandbox:
    """``inner`` with its file API and its commands' directory re-rooted at ``base``."""

    def __init__(self, inner: Sandbox, base: str) -> None:
        self.inner = inner
        self.base = base
        self.files = cast(ConfinedFiles, _RebasedFiles(inner.files, base))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def exec(self, argv: Sequence[str], *, cwd: str = ".", **kwargs: Any) -> ExecResult:
        return self.inner.exec(argv, cwd=rebase(self.base, cwd), **kwargs)


def _rebased_args(args: type[BaseModel], base: str) -> type[BaseModel]:
    """``args`` with its path argument's description saying paths are relative to
    ``base`` (the schema the model is shown)."""
    fields: dict[str, Any] = {}
    for name, info in args.model_fields.items():
        if name == "path":
            note = f"Path relative to {base}/ (this agent's base directory; '.' is {base}/)."
        elif name == "patch":
            note = (f"A unified diff whose file paths are relative to {base}/ (this agent's "
                    "base directory).")
        else:
            continue
        fields[name] = (info.annotation, FieldInfo.merge_field_infos(info, description=note))
    if not fields:
        return args
    return cast(type[BaseModel], create_model(args.__name__, __base__=args, **fields))


class OverriddenTool:
    """``inner`` with the overrides ``overrides`` (already validated by the loader)."""

    def __init__(self, inner: Tool[Any, ToolContext], overrides: Mapping[str, JsonValue]) -> None:
        self.inner = inner
        self.name = inner.name
        limit = overrides.get("maxResultChars")
        self.max_chars = limit if isinstance(limit, int) else None
        timeout = overrides.get("timeoutSeconds")
        self.timeout = float(timeout) if isinstance(timeout, int | float) else None
        base = base_dir(overrides["baseDir"]) if "baseDir" in overrides else "."
        self.base = None if base == "." or inner.name not in PATH_TOOLS else base
        self.args: type[BaseModel] = (inner.args if self.base is None else
                                      _rebased_args(inner.args, self.base))
        #: What the model is told about the overrides (after the tool's description).
        self.note = (f"Paths are relative to {self.base}/ (this agent's base directory): "
                     f"'f.txt' is {self.base}/f.txt, '.' is {self.base}/, and paths outside "
                     "it are denied." if self.base else "")
        self.description = " ".join(filter(None, [inner.description, self.note]))

    def _adjust(self, args: BaseModel) -> BaseModel:
        updates: dict[str, object] = {}
        path = getattr(args, "path", None)
        if self.base is not None and isinstance(path, str):
            # What runs is what the rules judged: the normalized path (a command such as
            # ripgrep would resolve 'link/..' through the symlink instead).
            inside = _within(self.base, path)
            if inside is not None and inside != path:
                updates["path"] = inside
        if self.timeout is not None and hasattr(args, "timeout"):
            given = args.timeout
            updates["timeout"] = self.timeout if given is None else min(given, self.timeout)
        return args.model_copy(update=updates) if updates else args

    def subjects(self, args: BaseModel) -> list[str | None]:
        """The inner tool's subjects, re-rooted: the workspace paths the rules judge."""
        subjects = self.inner.subjects(self._adjust(args))
        if self.base is None:
            return subjects
        return [None if s is None else rebase(self.base, s) for s in subjects]

    def _context(self, context: ToolContext) -> ToolContext:
        """``context`` with the sandbox re-rooted, and a result path judged re-rooted."""
        if self.base is None:
            return context
        base, permits = self.base, context.permits
        return dataclasses.replace(
            context, sandbox=cast(Sandbox, _RebasedSandbox(context.sandbox, base)),
            permits=None if permits is None else (
                lambda tool, path: permits(tool, rebase(base, path))))

    def run(self, args: BaseModel, context: ToolContext) -> ToolOutput:
        """Run the inner tool on the adjusted arguments; cut its result at the cap."""
        output = self.inner.run(self._adjust(args), self._context(context))
        if self.max_chars is None or len(output.content) <= self.max_chars:
            return output
        return ToolOutput(truncate(output.content, self.max_chars,
                                   what=f"the {self.name} result",
                                   hint="this agent's maxResultChars override caps it"),
                          is_error=output.is_error, data=output.data)


def override_note(tool: Tool[Any, ToolContext]) -> str:
    """What the model must be told about ``tool``'s overrides, also under a description a
    tool binding gives (empty when there is nothing)."""
    return tool.note if isinstance(tool, OverriddenTool) else ""


def with_overrides(tool: Tool[Any, ToolContext],
                   overrides: Mapping[str, JsonValue]) -> Tool[Any, ToolContext]:
    """``tool`` itself when there is nothing to override, else it wrapped."""
    return OverriddenTool(tool, overrides) if overrides else tool
