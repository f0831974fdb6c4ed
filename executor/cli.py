"""The ``corral`` command line (also ``python -m executor``).

The CLI is thin: it parses options, calls one library function, and renders
text or ``--json``. Errors are rendered in one place (:func:`main`). Exit
codes: 0 success, 1 ``agents check`` found rejected definitions, 2 a user
error (bad option, unknown agent, bad config), 3 an infrastructure failure,
4 a denial.
"""

from __future__ import annotations

import io
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from executor.offer import root_capability
from executor.text import one_line, printable
from executor.views import agent_json, list_json, render_show
from executor.watch import watch_definitions
from policies.capability import Capability
from policies.config import load_user_config
from policies.errors import CorralError
from policies.loader import Environment, LoadResult, Options, Severity, discover

__all__ = ["cli", "echo", "main", "render_error"]

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
    """Run discovery with the user's config."""
    user = load_user_config()
    options = Options(strict=strict, custom_tools=frozenset(user.custom_tools),
                      model_map=user.model_map)
    if not root.is_dir():
        raise click.BadParameter(f"{root} is not a directory", param_hint="--root")
    return discover(root, trust_project=trust_project, personal=not no_personal,
                    config_file=config_file, options=options, env=Environment.from_env())


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
        echo("no agents found" + ("" if trust_project else
                                  " (project agents need --trust-project)"))
    for name, contract in sorted(result.agents.items()):
        flags = "".join([
            "R" if contract.is_read_only else "-",
            "u" if contract.user_invocable else "-",
            "s" if contract.subagent_available else "-",
        ])
        echo(f"{one_line(name):32} {flags} {contract.origin.format.value:11} "
             f"{one_line(contract.origin.source)}")
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
    contract = result.get(name)
    if contract is None:
        related = [d.render() for d in result.diagnostics
                   if d.severity is Severity.ERROR and name in d.file]
        known = ", ".join(sorted(result.agents)) or "none"
        raise CorralError(f"no agent named {name!r}", code="unknown_agent",
                          context={"known agents": known},
                          hint="\n".join(related) if related else (
                              None if trust_project else "project agents need --trust-project"))
    if as_json:
        click.echo(json.dumps(agent_json(contract, effective=_root_capability(result),
                                         agents=result.agents), indent=2))
    else:
        echo(render_show(contract, _root_capability(result), result.agents))


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
            for diagnostic in result.diagnostics:
                echo(one_line(diagnostic.render()))
            rejected = sum(1 for o in result.outcomes if o.status.value == "rejected")
            echo(f"{len(result.agents)} agent(s) loaded, {rejected} definition(s) rejected")
        sys.stdout.flush()
        return result

    if watch:
        env = Environment.from_env()
        watch_definitions(root, env, run_check, personal=not no_personal)
        return
    if run_check().rejected:
        sys.exit(1)


def render_error(exc: CorralError) -> None:
    """An error as text on stderr: message, context and hint, every value escaped (they
    carry paths, names and reasons a child or a definition file chose)."""
    echo(f"error: {one_line(exc.message)}", err=True)
    for key, value in exc.context.items():
        echo(f"  {one_line(str(key))}: {one_line(str(value))}", err=True)
    if exc.hint:
        echo("hint: " + printable(exc.hint).replace("\n", "\n  "), err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and render errors in one place, escaped."""
    try:
        cli.main(args=argv, prog_name="corral", standalone_mode=False)
    except click.exceptions.Abort:
        echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)  # usage errors quote what was typed, a file name included
        echo(shown.getvalue(), err=True, nl=False)
        sys.exit(2)
    except CorralError as exc:
        render_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:  # a bug: still never raw on the terminal (an OSError names a path)
        echo(traceback.format_exc(), err=True, nl=False)
        echo("error: internal error in corral (a bug): the traceback above says where",
             err=True)
        sys.exit(3)


# The run commands live in their own module; importing it registers them on `cli`
# (it needs `cli`, `load` and `loader_options`, all defined above).
from executor import cli_apply as _cli_apply  # noqa: E402
from executor import cli_runs as _cli_runs  # noqa: E402

__all__ += ["_cli_apply", "_cli_runs"]
