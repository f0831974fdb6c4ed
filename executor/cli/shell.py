"""``corral shell RUN [-- CMD...]``: a shell, or one command, on a run's workspace
(:meth:`executor.api.Corral.shell`).

The workspace is rebuilt as ``corral run --continue`` rebuilds it (the run's
backend and mounts, no network, your checkout as it is now with the run's diff
applied); your checkout is not touched. What you change there is recorded in
the run as changed by hand: its diff, ``corral show`` and ``corral diff`` say
which files.

- ``-- CMD...``: run CMD, its output streamed as it comes, its exit code
  passed through (a command stopped at ``--timeout`` exits 3);
- no CMD, on a terminal: an interactive shell (bash when the sandbox has it,
  else sh) on a terminal of the sandbox's own, your terminal in raw mode until
  it ends (its window size at the start; a later resize is not passed on);
- no CMD, input from a pipe or a file: that input, run by ``sh -c``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import termios
import tty
from collections.abc import Iterator
from pathlib import Path

import click

from executor.api import Corral, ShellResult, TerminalIO
from executor.cli.app import setup_output, stopped_like_ctrl_c, warn
from executor.errors import EXIT_FAILURE
from executor.options import echo, memory_option
from executor.text import one_line

__all__ = ["shell_command"]

#: The most of a piped script ``corral shell RUN < FILE`` reads.
_SCRIPT_LIMIT = 1 << 20


def _write(stream: str, data: bytes) -> None:
    target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
    target.write(data)
    target.flush()


@contextlib.contextmanager
def _raw(fd: int) -> Iterator[None]:
    """The terminal on ``fd`` in raw mode inside the block (keys go to the sandbox's shell
    as typed, Ctrl-C included), as it was afterwards."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _summary(result: ShellResult) -> None:
    run = one_line(result.run.run_id)
    if not result.changed:
        echo(f"run {run}: nothing changed by hand; its record is as it was", err=True)
        return
    echo(f"run {run}: {len(result.changed)} file(s) changed by hand, recorded in the run: "
         + ", ".join(one_line(path) for path in result.changed), err=True)
    echo(f"`corral diff {run}` shows the run's whole diff, `corral apply {run}` merges it",
         err=True)


@click.command("shell", context_settings={"ignore_unknown_options": True})
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--trust-project", is_flag=True, help="Build the project's environment from the "
              "repository's own description too, as `corral run --trust-project` does.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Wall-clock limit of CMD, in seconds (default: the backend's).")
@click.option("--no-env", is_flag=True, help="Without the project's environment.")
@memory_option
@click.argument("run_id")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def shell_command(root: Path, trust_project: bool, timeout: float | None, no_env: bool,
                  memory: str | None, run_id: str, command: tuple[str, ...]) -> None:
    """A shell (or one command: RUN -- CMD...) in a sandbox on RUN's workspace, with RUN's
    isolation; what you change there is recorded in RUN, marked as changed by hand. Exit
    code: CMD's (or the shell's)."""
    if not root.is_dir():
        raise click.BadParameter(f"{root} is not a directory", param_hint="--root")
    corral = Corral(root, trust_project=trust_project, memory=memory)
    run_id = corral.show(run_id).run_id  # `last`, a prefix: the id, named in what it says
    terminal = None
    argv: list[str] | None = list(command) or None
    if argv is None and sys.stdin.isatty() and sys.stdout.isatty():
        size = shutil.get_terminal_size()
        fd = sys.stdin.fileno()
        terminal = TerminalIO(fd, sys.stdout.fileno(), rows=size.lines, cols=size.columns,
                              term=os.environ.get("TERM", "xterm"),
                              session=lambda: _raw(fd))
    elif argv is None:
        script = sys.stdin.buffer.read(_SCRIPT_LIMIT + 1)
        if len(script) > _SCRIPT_LIMIT:
            raise click.UsageError(f"the script on stdin is over {_SCRIPT_LIMIT} bytes")
        argv = ["/bin/sh", "-c", script.decode("utf-8", "surrogateescape")]
    with stopped_like_ctrl_c():
        if terminal is not None:
            echo(f"corral shell on run {one_line(run_id)}: what you change is recorded in the "
                 "run as changed by hand when the shell ends (exit or Ctrl-D)", err=True)
            result = corral.shell(run_id, terminal=terminal, environment=not no_env,
                                  on_setup_output=setup_output(False), on_warning=warn)
        else:
            result = corral.shell(run_id, argv, timeout=timeout, environment=not no_env,
                                  on_output=_write, on_setup_output=setup_output(False),
                                  on_warning=warn)
    if result.timed_out:
        echo(f"the command timed out{f' after {timeout:g} s' if timeout else ''} and was "
             "stopped", err=True)
    _summary(result)
    sys.exit(result.exit_code if result.exit_code is not None else EXIT_FAILURE)
