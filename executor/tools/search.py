"""search(pattern): regex search over the workspace's files.

ripgrep does the work when the sandbox has it: it runs *inside* the sandbox
(``sandbox.exec``), so it sees exactly what the child sees and a symlink the
child swapped in can never lead it to the host's files; ``--no-config``,
``--json`` (exact paths, whatever characters they hold), hidden files
included, ``.git`` excluded, symlinks not followed (ripgrep's default), the
sandbox's timeout and output cap. Without ripgrep a pure-Python search walks
the same files through the confined file API. Both report ``path:line:
text``, drop every result whose path the permission rules deny to ``search``
or ``read_file``, and mark where they were cut.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any

from pydantic import Field

from executor.tools.context import Args, ToolContext
from executor.tools.dispatch import ToolFailure, ToolOutput
from sandbox.errors import SandboxError
from sandbox.names import has_git_alias

__all__ = ["SearchTool", "python_search", "ripgrep_search"]

MAX_RESULTS = 200
MAX_LINE = 300
RG_TIMEOUT = 30.0
RG_OUTPUT = 4 * 1024 * 1024
_MISSING = 127  # the sandbox's exit code for a program that is not installed


class SearchArgs(Args):
    pattern: str = Field(min_length=1, description="A regular expression.")
    path: str = Field(default=".", description="Directory to search under.")
    glob: str | None = Field(default=None, description="Only files matching this glob.")
    ignore_case: bool = False
    max_results: int = Field(default=MAX_RESULTS, ge=1, le=1000)


def ripgrep_search(context: ToolContext, args: SearchArgs) -> list[tuple[str, int, str]] | None:
    """(path, line, text) matches from ripgrep inside the sandbox; None without ripgrep."""
    argv = ["rg", "--no-config", "--json", "--hidden", "--max-columns", str(MAX_LINE),
            "--max-columns-preview"]
    if args.ignore_case:
        argv.append("--ignore-case")
    if args.glob:
        argv += ["--glob", args.glob]
    # Later globs win in ripgrep: the .git exclusions go last, after the model's glob.
    argv += ["--glob", "!.git", "--glob", "!**/.git/**", "--regexp", args.pattern, "--",
             args.path]
    try:
        result = context.sandbox.exec(argv, timeout=context.time_left(RG_TIMEOUT),
                                      output_cap=RG_OUTPUT)
    except SandboxError as exc:
        raise ToolFailure(f"search failed: {exc.message}") from exc
    if result.exit_code == _MISSING:
        return None
    if result.timed_out:
        raise ToolFailure(f"search took longer than {RG_TIMEOUT:.0f}s; narrow the path or "
                          "the pattern")
    if result.exit_code == 2 and not result.stdout:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ToolFailure("search failed: " + (message[-1] if message else "ripgrep error"))
    matches: list[tuple[str, int, str]] = []
    for line in result.stdout.splitlines():
        try:
            event: dict[str, Any] = json.loads(line)
        except ValueError:
            continue  # a line cut by the output cap
        if event.get("type") != "match":
            continue
        data = event["data"]
        path = _rg_text(data["path"])
        text = _rg_text(data["lines"]).rstrip("\n")
        matches.append((str(path).removeprefix("./"), int(data["line_number"]), text))
    return matches


def _rg_text(field: dict[str, Any]) -> str:
    """ripgrep's JSON gives text, or base64 ``bytes`` when it is not UTF-8."""
    if "text" in field:
        return str(field["text"])
    return os.fsdecode(base64.b64decode(field.get("bytes", "")))


def python_search(context: ToolContext, args: SearchArgs) -> list[tuple[str, int, str]]:
    """The same search without ripgrep, through the confined file API."""
    flags = re.IGNORECASE if args.ignore_case else 0
    try:
        regex = re.compile(args.pattern, flags)
    except re.error as exc:
        raise ToolFailure(f"invalid regular expression: {exc}") from exc
    base = args.path.strip("/")
    pattern = args.glob or "**"
    if not pattern.startswith("**") and "/" not in pattern:
        pattern = f"**/{pattern}"
    files = context.sandbox.files
    out: list[tuple[str, int, str]] = []
    for rel in files.glob(pattern if base in ("", ".") else f"{base}/{pattern}", limit=20000):
        try:
            data = files.read_bytes(rel, max_bytes=4 * 1024 * 1024)
        except SandboxError:
            continue  # directories, special files, big files: not searched
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            if regex.search(line):
                out.append((rel, number, line[:MAX_LINE]))
                if len(out) > 5 * args.max_results:
                    return out
    return out


class SearchTool:
    """search(pattern, path, glob, ignore_case): regex search of file contents."""

    name = "search"
    description = ("Search file contents with a regular expression; returns path:line: text "
                   "lines (hidden files included, .git excluded).")
    args = SearchArgs

    def __init__(self, *, use_ripgrep: bool = True) -> None:
        self.use_ripgrep = use_ripgrep

    def subjects(self, args: SearchArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: SearchArgs, context: ToolContext) -> ToolOutput:
        try:
            context.sandbox.files.resolve_dir(args.path)
        except SandboxError as exc:
            raise ToolFailure(exc.message) from exc
        found = ripgrep_search(context, args) if self.use_ripgrep else None
        engine = "rg"
        if found is None:
            found, engine = python_search(context, args), "python"
        # Judged once per file, not once per matching line.
        allowed = {path for path in {m[0] for m in found}
                   if not has_git_alias(path) and context.shown(self.name, path)}
        shown = [m for m in found if m[0] in allowed]
        hidden = len({m[0] for m in found} - {m[0] for m in shown})
        lines = [f"{path}:{number}:{text}" for path, number, text in shown[:args.max_results]]
        text = "\n".join(lines) or "(no matches)"
        if hidden:
            text += f"\n[{hidden} file(s) hidden by permission rules]"
        if len(shown) > args.max_results:
            text += f"\n[truncated: showing the first {args.max_results} matches; narrow the " \
                    "search]"
        return ToolOutput(text, data={"matches": len(lines), "engine": engine})
