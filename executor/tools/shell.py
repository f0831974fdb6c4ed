"""shell(command): one command line, run by ``sh -c`` inside the sandbox.

The command runs through the sandbox's process layer: its backend's
isolation, the wall-clock timeout, the output cap (output past it is drained,
not left in the pipe), the memory and process limits. There is no way to ask
for an unsandboxed run: no argument exists for it.
"""

from __future__ import annotations

from pydantic import Field

from executor.tools.context import Args, ToolContext
from executor.tools.dispatch import ToolFailure, ToolOutput
from sandbox.errors import SandboxError

__all__ = ["ShellTool"]

MAX_OUTPUT = 64 * 1024


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
        limit = sandbox.limits.timeout_seconds
        timeout = context.time_left(min(args.timeout, limit) if args.timeout else limit)
        try:
            result = sandbox.exec(["sh", "-c", args.command], timeout=timeout,
                                  output_cap=MAX_OUTPUT, cwd=args.cwd)
        except SandboxError as exc:
            raise ToolFailure(exc.message) from exc
        if result.peak_rss_bytes is not None:
            context.resources["peak_rss_bytes"] = max(
                context.resources.get("peak_rss_bytes", 0), float(result.peak_rss_bytes))
        if result.cpu_seconds is not None:
            context.resources["cpu_seconds"] = round(
                context.resources.get("cpu_seconds", 0.0) + result.cpu_seconds, 3)
        context.resources["commands"] = context.resources.get("commands", 0) + 1
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
        parts = [head]
        if out:
            parts.append("--- stdout ---\n" + out.rstrip("\n"))
        if err:
            parts.append("--- stderr ---\n" + err.rstrip("\n"))
        return ToolOutput(
            "\n".join(parts), is_error=not result.ok,
            data={"exit_code": result.exit_code, "timed_out": result.timed_out,
                  "duration_seconds": result.duration_seconds,
                  "peak_rss_bytes": result.peak_rss_bytes, "cpu_seconds": result.cpu_seconds},
        )
