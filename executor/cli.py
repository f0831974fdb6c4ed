"""The ``corral`` command line (also ``python -m executor``).

The CLI is thin: it parses options, calls one library function, and renders
text or ``--json``. Errors are rendered in one place (:func:`main`): message,
context and hint as text on stderr, or, when ``--json`` was asked for, one JSON
object ``{"error": {"code", "message", "context", "hint", "retryable", ...}}`` on
stdout, for every failure of every command (a usage error included). Exit codes
are one table (:mod:`executor.errors`, and the README): 0 success, 1 ``agents
check`` found rejected definitions, 2 a user error, 3 an infrastructure failure
or a failed run, 4 a denial, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from executor.errors import (
    EXIT_FAILURE,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_USER,
    ExecutorError,
)
from executor.offer import root_capability
from executor.suggest import unknown_agent
from executor.text import one_line, printable
from executor.views import agent_json, list_json, render_check, render_show
from executor.watch import watch_definitions
from policies.capability import Capability
from policies.config import load_user_config
from policies.contract import AgentContract
from policies.errors import CorralError
from policies.loader import Environment, LoadResult, Options, Severity, discover

__all__ = ["cli", "echo", "error_json", "find_agent", "main", "render_error"]

F = TypeVar("F", bound=Callable[..., Any])


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` with every control character escaped (see :mod:`executor.text`).

    Everything the CLI prints goes through here (or is JSON, which escapes
    control characters itself): values inside a line should also be passed
    through :func:`one_line`, so a newline in one cannot fake the next line.
    """
    click.echo(printable(text), err=err, nl=nl)


def loader_options(func: F) -> F:
    """The options every command that loads definitions takes."""
    options = [
        click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".",
                     show_default=True, help="Repository root to discover project agents in."),
        click.option("--trust-project", is_flag=True,
                     help="Discover the project's own agent definitions (they are untrusted "
                     "by default)."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
                     help="An ngn JSON file of agent_imports and profiles; its imports are "
                     "trusted."),
        click.option("--strict", is_flag=True, help="Treat every warning as a rejection."),
        click.option("--no-personal", is_flag=True,
                     help="Skip personal definitions (~/.claude/agents, ...)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def load(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
         no_personal: bool) -> LoadResult:
    """Run discovery with the user's config.

    A ``--config`` file that is not there is a user error: silently loading
    nothing from it would answer every later question (which agents, why not)
    wrongly.
    """
    user = load_user_config()
    options = Options(strict=strict, custom_tools=frozenset(user.custom_tools),
                      model_map=user.model_map, mcp_servers=frozenset(user.mcp_servers),
                      provided_tools=frozenset(custom for server in user.mcp_servers.values()
                                               for custom in server.provides))
    if not root.is_dir():
        raise click.BadParameter(f"{root} is not a directory", param_hint="--root")
    if config_file is not None and not (config_file.exists() or config_file.is_symlink()):
        raise ExecutorError(
            f"the --config file {config_file} does not exist", code="config_not_found",
            context={"looked for": str(config_file.absolute())},
            hint="--config names an ngn JSON file of agent_imports and profiles, e.g. "
            "--config examples/agents.json in corral's own repository")
    return discover(root, trust_project=trust_project, personal=not no_personal,
                    config_file=config_file, options=options, env=Environment.from_env())


def find_agent(name: str, result: LoadResult, *, root: Path, trust_project: bool,
               config_file: Path | None, strict: bool, no_personal: bool) -> AgentContract:
    """The loaded agent ``name``, or a user error with a few close names, the rejected
    definition named like it, or the untrusted project file that defines it."""
    contract = result.get(name)
    if contract is not None:
        return contract
    untrusted = None
    if not trust_project and any(d.code == "untrusted_project" for d in result.diagnostics):
        untrusted = load(root, True, config_file, strict, no_personal)
    raise unknown_agent(name, result, trusted=trust_project, untrusted=untrusted)


def _root_capability(registry: LoadResult | None = None) -> Capability:
    return root_capability(load_user_config(), registry)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="corral")
def cli() -> None:
    """corral: run coding-harness sub-agents under contracts that only narrow."""


@cli.group()
def agents() -> None:
    """Discover, inspect and check agent definitions of every format."""


@agents.command("list")
@loader_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def agents_list(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, as_json: bool) -> None:
    """List the agents that won discovery."""
    result = load(root, trust_project, config_file, strict, no_personal)
    if as_json:
        click.echo(json.dumps(list_json(result), indent=2))
        return
    if not result.agents:
        untrusted = [d for d in result.diagnostics if d.code == "untrusted_project"]
        echo("no agents found" + (
            f": {untrusted[0].reason}" if untrusted else
            " (personal: ~/.claude/agents, ~/.config/ngn/agents, ...; project: .claude/agents, "
            ".ngn/agents, ... with --trust-project; any file with --config FILE)"))
    for name, contract in sorted(result.agents.items()):
        flags = "".join([
            "R" if contract.is_read_only else "-",
            "u" if contract.user_invocable else "-",
            "s" if contract.subagent_available else "-",
        ])
        shown = f"  ({one_line(contract.display_name)})" if contract.display_name not in (
            name, contract.origin.source) else ""
        echo(f"{one_line(name):32} {flags} {contract.origin.format.value:11} "
             f"{one_line(contract.origin.source)}{shown}")
    problems = [d for d in result.diagnostics if d.severity is not Severity.INFO]
    if problems:
        rejected = sum(1 for d in problems if d.severity is Severity.ERROR)
        echo(f"\n{len(problems)} diagnostic(s), {rejected} error(s): run "
             "`corral agents check` for details", err=True)


@agents.command("show")
@loader_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.argument("name")
def agents_show(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, as_json: bool, name: str) -> None:
    """Print the effective, resolved contract of agent NAME."""
    result = load(root, trust_project, config_file, strict, no_personal)
    contract = find_agent(name, result, root=root, trust_project=trust_project,
                          config_file=config_file, strict=strict, no_personal=no_personal)
    servers = load_user_config().mcp_servers
    if as_json:
        click.echo(json.dumps(agent_json(contract, effective=_root_capability(result),
                                         agents=result.agents, servers=servers), indent=2))
    else:
        echo(render_show(contract, _root_capability(result), result.agents, servers))


@agents.command("check")
@loader_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--watch", is_flag=True, help="Re-check whenever a definition file changes.")
def agents_check(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                 no_personal: bool, as_json: bool, watch: bool) -> None:
    """Check every definition; exit 1 when any was rejected."""

    def run_check() -> LoadResult:
        result = load(root, trust_project, config_file, strict, no_personal)
        if as_json:
            click.echo(json.dumps(list_json(result)))
        else:
            for line in render_check(result):
                echo(line)
        sys.stdout.flush()
        return result

    if watch:
        env = Environment.from_env()
        watch_definitions(root, env, run_check, personal=not no_personal)
        return
    if run_check().rejected:
        sys.exit(EXIT_FINDINGS)


def error_json(error: Mapping[str, Any], exit_code: int) -> dict[str, Any]:
    """The JSON error object (``--json``): ``{"error": {code, message, context, hint,
    retryable, operation, exit_code}}``; the same shape whatever failed."""
    body = {"code": error.get("code") or "error", "message": error.get("message") or "",
            "context": {str(k): str(v) for k, v in (error.get("context") or {}).items()},
            "hint": error.get("hint"), "retryable": bool(error.get("retryable")),
            "operation": error.get("operation")}
    return {"error": body | {"exit_code": exit_code}}


def render_error(error: Mapping[str, Any], *, as_json: bool = False, exit_code: int = 2,
                 prefix: str = "error") -> None:
    """One error (a :meth:`CorralError.to_dict` mapping), rendered in one place.

    Text, on stderr: message, every context entry, the hint, each value escaped
    (they carry paths, names and reasons a child or a definition file chose). JSON,
    on stdout: :func:`error_json`, ASCII.
    """
    if as_json:
        click.echo(json.dumps(error_json(error, exit_code), indent=2))
        return
    message = error.get("message") or error.get("code") or "unknown error"
    echo(f"{prefix}: {one_line(str(message))}", err=True)
    for key, value in (error.get("context") or {}).items():
        echo(f"  {one_line(str(key))}: {one_line(str(value))}", err=True)
    hint = error.get("hint")
    if hint:
        echo("hint: " + printable(str(hint)).replace("\n", "\n  "), err=True)


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


# The run commands live in their own module; importing it registers them on `cli`
# (it needs `cli`, `load` and `loader_options`, all defined above).
from executor import cli_apply as _cli_apply  # noqa: E402
from executor import cli_fanout as _cli_fanout  # noqa: E402
from executor import cli_runs as _cli_runs  # noqa: E402

__all__ += ["_cli_apply", "_cli_fanout", "_cli_runs"]
