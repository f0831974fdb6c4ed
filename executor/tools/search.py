"""search(pattern): regex search over the workspace's files.

ripgrep does the work when it is installed: run on the host against the
workspace directory, with no config file (``RIPGREP_CONFIG_PATH`` unset, an
empty environment), never following symlinks (its default), hidden files
included but ``.git`` excluded, and a timeout. Without ripgrep a pure-Python
search walks the same files through the confined file API. Both report
``path:line: text``, capped, with an explicit marker when cut.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from pydantic import Field

from executor.dispatch import ToolFailure, ToolOutput
from executor.tools.context import Args, ToolContext
from sandbox.errors import SandboxError

__all__ = ["SearchTool", "python_search", "ripgrep_search"]

MAX_RESULTS = 200
MAX_LINE = 300
RG_TIMEOUT = 30.0


class SearchArgs(Args):
    pattern: str = Field(min_length=1, description="A regular expression.")
    path: str = Field(default=".", description="Directory to search under.")
    glob: str | None = Field(default=None, description="Only files matching this glob.")
    ignore_case: bool = False
    max_results: int = Field(default=MAX_RESULTS, ge=1, le=1000)


def ripgrep_search(rg: str, root: Path, directory: Path, args: SearchArgs,
                   ) -> tuple[list[str], bool]:
    """Matches as ``path:line: text`` relative to ``root``; ``True`` when cut."""
    argv = [rg, "--no-config", "--no-heading", "--line-number", "--with-filename",
            "--color", "never", "--hidden", "--glob", "!.git", "--max-columns", str(MAX_LINE),
            "--max-columns-preview"]
    if args.ignore_case:
        argv.append("--ignore-case")
    if args.glob:
        argv += ["--glob", args.glob]
    argv += ["--regexp", args.pattern, "--", str(directory.relative_to(root) or ".")]
    try:
        done = subprocess.run(  # noqa: S603 - argv list, fixed binary, no shell, no env
            argv, cwd=root, capture_output=True, timeout=RG_TIMEOUT, env={}, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolFailure(f"search took longer than {RG_TIMEOUT:.0f}s; narrow the path or "
                          "the pattern") from exc
    if done.returncode == 2 and not done.stdout:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise ToolFailure("search failed: " + (message[-1] if message else "ripgrep error"))
    lines = done.stdout.decode(errors="replace").splitlines()
    return [line.removeprefix("./") for line in lines[:args.max_results]], \
        len(lines) > args.max_results


def python_search(context: ToolContext, args: SearchArgs) -> tuple[list[str], bool]:
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
    out: list[str] = []
    for rel in files.glob(pattern if base in ("", ".") else f"{base}/{pattern}", limit=20000):
        try:
            data = files.read_bytes(rel, max_bytes=4 * 1024 * 1024)
        except SandboxError:
            continue  # directories, special files, big files: not searched
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if regex.search(line):
                out.append(f"{rel}:{number}:{line[:MAX_LINE]}")
                if len(out) > args.max_results:
                    return out[:args.max_results], True
    return out, False


class SearchTool:
    """search(pattern, path, glob, ignore_case): regex search of file contents."""

    name = "search"
    description = ("Search file contents with a regular expression; returns path:line: text "
                   "lines (hidden files included, .git excluded).")
    args = SearchArgs

    def __init__(self, rg: str | None = None, *, use_ripgrep: bool = True) -> None:
        self.rg = (rg or shutil.which("rg")) if use_ripgrep else None

    def subjects(self, args: SearchArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: SearchArgs, context: ToolContext) -> ToolOutput:
        try:
            directory = context.sandbox.files.resolve_dir(args.path)
        except SandboxError as exc:
            raise ToolFailure(exc.message) from exc
        if self.rg:
            lines, cut = ripgrep_search(self.rg, context.sandbox.root, directory, args)
        else:
            lines, cut = python_search(context, args)
        text = "\n".join(lines) or "(no matches)"
        if cut:
            text += f"\n[truncated: showing the first {args.max_results} matches; narrow the " \
                    "search]"
        return ToolOutput(text, data={"matches": len(lines), "engine": "rg" if self.rg else
                                      "python"})
