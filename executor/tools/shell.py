"""shell(command): one command line, run by ``sh -c`` inside the sandbox.

The command runs through the sandbox's process layer: its backend's
isolation, the wall-clock timeout, the output cap (output past it is drained,
not left in the pipe), the memory and process limits. There is no way to ask
for an unsandboxed run: no argument exists for it.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from pydantic import Field

from executor.tools.context import Args, ToolContext
from executor.tools.dispatch import ToolDenied, ToolFailure, ToolOutput
from sandbox.errors import SandboxError
from sandbox.names import git_dir_signature

__all__ = ["ShellTool"]

MAX_OUTPUT = 64 * 1024


def _never_in_a_made_repository(root: Path, cwd: str) -> None:
    """A call allowed by a pattern (``Bash(git status:*)``) runs nowhere the child made a
    git directory: at ``cwd`` and on the way there from the workspace root, no directory
    may hold what git's discovery takes for one (``HEAD`` with ``objects/``, ``refs/``:
    :func:`sandbox.names.git_dir_signature`), and none may be a symlink. The pattern named
    a command; a repository the child wrote would choose what that command runs."""
    here = root
    for part in PurePosixPath(cwd).parts:
        if part in ("/", "."):
            continue
        here = here / part
        if here.is_symlink():
            raise ToolDenied(f"cwd {cwd!r} goes through a symlink ({part!r}): a call allowed "
                             "by a pattern runs only in the workspace's own directories")
        try:
            entries = list(os.scandir(here))
        except OSError:
            return  # not there: the sandbox says so when it runs
        files = {e.name for e in entries if e.is_file(follow_symlinks=False)}
        dirs = {e.name for e in entries if e.is_dir(follow_symlinks=False)}
        if git_dir_signature(files, dirs):
            raise ToolDenied(
                f"cwd {cwd!r} holds a git directory ({part!r}: "
                f"{', '.join(git_dir_signature(files, dirs))}): a call allowed by a pattern "
                "never runs where the agent made a repository; run it at the workspace root")


class ShellArgs(Args):
    command: str = Field(min_length=1, description="A shell command line (run with sh -c).")
    timeout: float | None = Field(default=None, gt=0,
                                  description="Seconds before the command is killed "
                                  "(capped by the sandbox's limit).")
    cwd: str = Field(default=".", description="Working directory, relative to the workspace.")


class ShellTool:
    """shell(command, timeout, cwd)."""

    name = "shell"
    description = ("Run a shell command in the sandbox (sh -c) and get its exit code, stdout "
                   "and stderr. Long output is cut with a marker.")
    args = ShellArgs

    def subjects(self, args: ShellArgs) -> list[str | None]:
        return [args.command]

    def run(self, args: ShellArgs, context: ToolContext) -> ToolOutput:
        sandbox = context.sandbox
        if context.shell_by_pattern:
            _never_in_a_made_repository(sandbox.root, args.cwd)
        limit = sandbox.limits.timeout_seconds
        timeout = context.time_left(min(args.timeout, limit) if args.timeout else limit)
        try:
            result = sandbox.exec(["sh", "-c", args.command], timeout=timeout,
                                  output_cap=MAX_OUTPUT, cwd=args.cwd,
                                  on_output=context.on_output)
        except SandboxError as exc:
            raise ToolFailure(exc.message) from exc
        if result.peak_rss_bytes is not None:
            context.resources["peak_rss_bytes"] = max(
                context.resources.get("peak_rss_bytes", 0), float(result.peak_rss_bytes))
        if result.cpu_seconds is not None:
            context.resources["cpu_seconds"] = round(
                context.resources.get("cpu_seconds", 0.0) + result.cpu_seconds, 3)
        context.resources["commands"] = context.resources.get("commands", 0) + 1
        if result.oom_killed:
            context.resources["oom_kills"] = context.resources.get("oom_kills", 0) + 1
        out = result.stdout.decode("utf-8", "replace")
        err = result.stderr.decode("utf-8", "replace")
        if result.stdout_bytes > len(result.stdout):
            out += f"\n[truncated: stdout was {result.stdout_bytes} bytes, showing {MAX_OUTPUT}]"
        if result.stderr_bytes > len(result.stderr):
            err += f"\n[truncated: stderr was {result.stderr_bytes} bytes, showing {MAX_OUTPUT}]"
        if result.timed_out:
            head = f"timed out after {result.duration_seconds:.1f}s (the process tree was killed)"
        elif result.stopped:
            head = "stopped"
        else:
            head = f"exit code {result.exit_code}"
        if result.oom_killed:
            head += (f" (out of memory: the sandbox's cap of {_size(sandbox.limits.memory_bytes)} "
                     "for all its processes was reached, and the kernel killed one)")
        parts = [head]
        if out:
            parts.append("--- stdout ---\n" + out.rstrip("\n"))
        if err:
            parts.append("--- stderr ---\n" + err.rstrip("\n"))
        return ToolOutput(
            "\n".join(parts), is_error=not result.ok,
            data={"exit_code": result.exit_code, "timed_out": result.timed_out,
                  "duration_seconds": result.duration_seconds,
                  "peak_rss_bytes": result.peak_rss_bytes, "cpu_seconds": result.cpu_seconds,
                  "oom_killed": result.oom_killed},
        )


def _size(count: int | None) -> str:
    """A memory cap in the units ``--memory`` takes."""
    if count is None:
        return "none"
    for unit, size in (("G", 1 << 30), ("M", 1 << 20)):
        if count >= size:
            return f"{count / size:.4g}{unit}"
    return f"{count}B"
