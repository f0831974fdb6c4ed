"""What the command-line front doors share: the options that make a Corral, and printing.

``corral ...`` (:mod:`executor.cli`) and ``corral mcp`` (:mod:`executor.mcpserver`)
each parse their own command line, never each other's modules; the options they
have in common (where definitions come from, the project's environment, the
backend) are defined here once, with :func:`echo`, which prints everything
escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from executor.text import printable

__all__ = ["allow_net_option", "echo", "environment_options", "loader_options",
           "memory_option"]

F = TypeVar("F", bound=Callable[..., Any])


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` with every control character escaped (see :mod:`executor.text`).

    Everything the command line prints goes through here (or is JSON, which escapes
    control characters itself): values inside a line should also be passed
    through :func:`executor.text.one_line`, so a newline in one cannot fake the next line.
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


def _memory(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--memory``: a bad size is a usage error naming the option."""
    from policies.config import parse_memory  # noqa: PLC0415 - only when given

    if value is not None:
        try:
            parse_memory(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return value


#: ``--memory SIZE``, on every command that runs children (and ``corral shell``).
memory_option = click.option(
    "--memory", callback=_memory, metavar="SIZE",
    help="Memory each sandbox may use, all its processes together (4G, 512M); default: "
    "[sandbox] memory of your config, else half of this machine's.")


#: ``--allow-net DOMAIN`` (repeatable): a host web_fetch may reach, on top of your config's
#: ``[network] allow``, for this command only.
def _allow_net(ctx: click.Context, param: click.Parameter,
               value: tuple[str, ...]) -> tuple[str, ...]:
    """``--allow-net``: a bad pattern is a usage error naming the option."""
    from policies.network import check_pattern  # noqa: PLC0415 - only when given

    try:
        return tuple(check_pattern(item) for item in value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


allow_net_option = click.option(
    "--allow-net", "allow_net", multiple=True, metavar="DOMAIN", callback=_allow_net,
    help="A host web_fetch may reach (docs.python.org, *.pypi.org for its subdomains, "
    "host:8080), on top of [network] allow of your config; repeat for more. A definition "
    "can only narrow it.")


net_option = click.option(
    "--net", "net", type=click.Choice(["none", "allow"]), default="none", show_default=True,
    help="allow: the run's commands reach the hosts you granted ([network] allow, --allow-net) "
    "through corral's filtering proxy (HTTP(S)_PROXY, ALL_PROXY), and nothing else; none: no "
    "network. A definition can only narrow it.")


def environment_options(func: F) -> F:
    """The options every command that runs children takes: the project's environment, and
    the memory of each sandbox."""
    options = [
        click.option("--no-env", is_flag=True,
                     help="Run without the project's environment (setup, carried paths, "
                     "image, variables)."),
        click.option("--setup-network", is_flag=True,
                     help="Let the environment's setup reach the network (to install "
                     "dependencies); children never can."),
        memory_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func
