"""The ``corral`` command line (also ``python -m executor``): its group, errors and helpers.

The CLI is thin: it parses options, calls the Python API (:mod:`executor.api`),
and renders text or ``--json``. Errors are rendered in one place (:func:`main`):
message, context and hint as text on stderr, or, when ``--json`` was asked
for, one JSON object ``{"error": {"code", "message", "context", "hint",
"retryable", ...}}`` on stdout (:func:`executor.api.error_json`), for every
failure of every command (a usage error included). Exit codes are one table
(:mod:`executor.errors`, and the README): 0 success, 1 ``agents check`` found
rejected definitions, 2 a user error, 3 an infrastructure failure or a failed
run, 4 a denial, 5 the project's environment could not be set up, 130
interrupted.
"""

from __future__ import annotations

import importlib
import json
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from executor.api.errors import error_json
from executor.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USER, RunInterrupted
from executor.options import echo
from executor.text import field, one_line
from policies.errors import CorralError

if TYPE_CHECKING:
    from executor.api import Corral

__all__ = ["LAZY_COMMANDS", "LazyGroup", "cli", "interrupted", "loading_corral", "main",
           "render_error", "setup_output", "stopped_like_ctrl_c", "warn"]

#: The commands, each defined in its own module: name -> (module, the command's name in it,
#: the line ``corral --help`` shows). A module is imported only when one of its commands
#: runs or prints its own help, so ``corral --help`` loads click and nothing else of
#: weight, and ``corral agents ...`` never loads the run machinery (sandboxes, the model
#: loop, merges). ``corral mcp`` and ``corral serve`` are the MCP and web front doors'
#: own commands: the table names their modules, and no front door imports another. A test
#: checks this table against the commands the modules define.
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "agents": ("executor.cli.agents", "agents", "Discover, inspect and check agent "
               "definitions of every format."),
    "apply": ("executor.cli.apply", "apply_command", "Validate a run's diff and merge it "
              "into the checkout."),
    "diff": ("executor.cli.runs", "diff_command", "Print a run's unified diff."),
    "env": ("executor.cli.env", "env_group", "Build, list or remove the project's cached "
            "environments."),
    "discard": ("executor.cli.runs", "discard_command", "Mark a run's diff as discarded (it "
                "stays readable)."),
    "fanout": ("executor.cli.fanout", "fanout_command", "Run PROMPT in several children at "
               "once and compare."),
    "gc": ("executor.cli.runs", "gc_command", "Clean up what crashed or (--older-than) "
           "finished runs left."),
    "image": ("executor.cli.image", "image_group", "Build the docker backend's sandbox image "
              "from the Dockerfile shipped in corral."),
    "ledger": ("executor.cli.ledger", "ledger_group", "The ledger's index: `ledger "
               "reindex` rebuilds it from the record files."),
    "logs": ("executor.cli.logs", "logs_command", "Print a run's journal so far, or follow "
             "it live (-f)."),
    "mcp": ("executor.mcpserver.command", "mcp_command", "Serve corral's agents, runs and "
            "fanouts over MCP (stdio or HTTP)."),
    "replay": ("executor.cli.replay", "replay_group", "Make a replay: `replay from-diff "
               "PATCH` applies a patch as a child."),
    "run": ("executor.cli.run", "run_command", "Run agent NAME on PROMPT in a sandbox; print "
            "its answer and diff."),
    "runs": ("executor.cli.runs", "runs_command", "List the recorded runs of the repository, "
             "newest first."),
    "trust": ("executor.cli.trust", "trust_command", "Load this repository's own definitions "
              "from now on, while they stay as they are."),
    "untrust": ("executor.cli.trust", "untrust_command", "Forget `corral trust` for a "
                "repository."),
    "serve": ("executor.web.command", "serve_command", "Serve a local web app: watch runs "
              "live, compare candidates, apply one."),
    "shell": ("executor.cli.shell", "shell_command", "A shell (or -- CMD) on a run's "
              "workspace; your changes are recorded in the run."),
    "show": ("executor.cli.runs", "show_command", "Print a run's whole record: every tool "
             "call and result."),
}


class LazyGroup(click.Group):
    """A group whose :data:`LAZY_COMMANDS` are imported on first use.

    The listing of ``corral --help`` comes from the table, so printing it imports
    nothing; a command's own ``--help`` (and running it) imports its module.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(LAZY_COMMANDS))

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Register ``cmd``; a lazy one shows its table line, loaded or not."""
        name = name or cmd.name
        if name in LAZY_COMMANDS and cmd.short_help is None:
            cmd.short_help = LAZY_COMMANDS[name][2]
        super().add_command(cmd, name)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            module, attribute, _ = LAZY_COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))  # click's own
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                rows.append((name, LAZY_COMMANDS[name][2]))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from executor.api import corral_version  # noqa: PLC0415 - only for --version

        click.echo(f"corral, version {corral_version()}")
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and exit.")
def cli() -> None:
    """corral: run coding-harness sub-agents under contracts that only narrow."""


def loading_corral(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                   no_personal: bool, *, backend: str = "auto",
                   memory: str | None = None, allow_net: tuple[str, ...] = (),
                   review_commands: bool = False, net: str = "none") -> Corral:
    """The Corral of a command that loads definitions (:func:`executor.options.loader_options`);
    a ``--root`` that is not a directory is a usage error first."""
    from executor.api import Corral  # noqa: PLC0415 - the API only for a command that runs

    if not root.is_dir():
        raise click.BadParameter(f"{root} is not a directory", param_hint="--root")
    return Corral(root, trust_project=trust_project, config_file=config_file, strict=strict,
                  personal=not no_personal, backend=backend, memory=memory,
                  allow_net=allow_net, review_commands=review_commands, net=net)


def warn(text: str) -> None:
    """One warning on stderr (the host backend's, an ignored part of an environment)."""
    echo(f"warning: {one_line(text)}", err=True)


def setup_output(as_json: bool) -> Callable[[str], None] | None:
    """Where an environment's setup output goes: stderr on a terminal (escaped), nowhere
    otherwise (it is in the environment's log either way)."""
    if as_json or not sys.stderr.isatty():
        return None

    def show(text: str) -> None:
        echo(text, err=True, nl=False)

    return show


def render_error(error: Mapping[str, Any], *, as_json: bool = False, exit_code: int = 2,
                 prefix: str = "error") -> None:
    """One error (a :meth:`CorralError.to_dict` mapping), rendered in one place.

    Text, on stderr: message, every context entry, the hint, each value escaped
    (they carry paths, names and reasons a child or a definition file chose). A value
    that spans lines prints as lines (:func:`executor.text.field`), each escaped, each
    later line indented deeper than any label: under the message or the hint's first
    character, four spaces for a context value (whose keys are indented two). So no
    line of a value can pose as ``error:``, ``hint:`` or a context entry. JSON, on
    stdout: :func:`executor.api.error_json`, ASCII.
    """
    if as_json:
        click.echo(json.dumps(error_json(error, exit_code), indent=2))
        return
    message = error.get("message") or error.get("code") or "unknown error"
    echo(field(f"{prefix}: ", str(message)), err=True)
    for key, value in (error.get("context") or {}).items():
        echo(field(f"  {one_line(str(key))}: ", str(value), indent="    "), err=True)
    hint = error.get("hint")
    if hint:
        echo(field("hint: ", str(hint)), err=True)


def _usage(exc: click.ClickException) -> CorralError:
    """A click usage error as corral's own error (code ``usage_error``, exit 2)."""
    context: dict[str, str] = {}
    hint = "`corral --help` lists the commands"
    ctx = getattr(exc, "ctx", None)
    if isinstance(ctx, click.Context):
        context["usage"] = ctx.get_usage().removeprefix("Usage: ")
        hint = f"`{ctx.command_path} --help` lists its options"
    return CorralError(exc.format_message(), code="usage_error", operation="parse_arguments",
                       context=context, hint=hint)


def wants_json(argv: list[str]) -> bool:
    """Whether ``--json`` was asked for (before a ``--``): also when parsing failed, so a
    usage error reaches a script as JSON too."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in words


def _stop_as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def stopped_like_ctrl_c() -> Iterator[None]:
    """Inside the block, SIGTERM (``timeout``, CI, a service manager) and SIGHUP (a closed
    terminal) stop what runs as Ctrl-C does: every run ends ``cancelled`` with its diff
    recorded, never ``crashed``. The handlers before are put back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only (the API used from a worker thread)
        return
    before = {number: signal.signal(number, _stop_as_ctrl_c)
              for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def interrupted(run_id: str | None) -> RunInterrupted:
    """What an interrupted ``corral run`` says: which run, and that its diff was kept."""
    if run_id is None:  # stopped before its record existed: nothing ran
        return RunInterrupted("interrupted before the run started: nothing ran")
    shown = one_line(run_id)
    return RunInterrupted(
        f"interrupted: run {shown} was cancelled; its record and diff are kept",
        context={"run": run_id},
        hint=f"`corral show {shown}` shows what it did, `corral diff {shown}` what it "
        f"changed, `corral apply {shown}` merges it")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and render every error in one place, escaped."""
    as_json = wants_json(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="corral", standalone_mode=False)
    except click.exceptions.Abort:
        render_error({"code": "aborted", "message": "aborted"}, as_json=as_json,
                     exit_code=EXIT_INTERRUPTED)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        render_error(_usage(exc).to_dict(), as_json=as_json, exit_code=EXIT_USER)
        sys.exit(EXIT_USER)
    except CorralError as exc:
        render_error(exc.to_dict(), as_json=as_json, exit_code=exc.exit_code)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        render_error({"code": "interrupted", "message": "interrupted"}, as_json=as_json,
                     exit_code=EXIT_INTERRUPTED)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # a bug: still never raw on the terminal (an OSError names a path)
        echo(traceback.format_exc(), err=True, nl=False)
        render_error({"code": "internal", "message": "internal error in corral (a bug): "
                      f"{type(exc).__name__}: {exc}",
                      "hint": "the traceback on stderr says where; please report it"},
                     as_json=as_json, exit_code=EXIT_FAILURE)
        sys.exit(EXIT_FAILURE)
