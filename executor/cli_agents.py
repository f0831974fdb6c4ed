"""``corral agents list``, ``show`` and ``check``, and loading definitions for every command.

:func:`load` and :func:`find_agent` are shared with ``run`` and ``fanout``; the
run machinery is never imported here (``corral agents ...`` starts fast).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from executor.cli import cli, echo, loader_options
from executor.errors import EXIT_FINDINGS, ExecutorError
from executor.views import (
    agent_json,
    list_json,
    list_lines,
    render_check,
    render_show,
    show_context,
)
from policies.config import load_user_config
from policies.loader import Environment, LoadResult, Options, Severity, discover

if TYPE_CHECKING:
    from policies.capability import Capability
    from policies.contract import AgentContract

__all__ = ["agents", "find_agent", "load"]


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
                      providers=frozenset(user.providers), roles=frozenset(user.roles),
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
    from executor.suggest import unknown_agent  # noqa: PLC0415 - difflib only for a miss

    untrusted = None
    if not trust_project and any(d.code == "untrusted_project" for d in result.diagnostics):
        untrusted = load(root, True, config_file, strict, no_personal)
    raise unknown_agent(name, result, trusted=trust_project, untrusted=untrusted)


def _root_capability(registry: LoadResult | None = None) -> Capability:
    # The tool implementations (and their argument models) only for `agents show`.
    from executor.offer import root_capability  # noqa: PLC0415

    return root_capability(load_user_config(), registry)


@cli.group("agents")
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
    for line in list_lines(result):
        echo(line)
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
    extra = show_context(contract, result, root=root, trust_project=trust_project)
    if as_json:
        click.echo(json.dumps(agent_json(contract, effective=_root_capability(result),
                                         agents=result.agents, servers=servers, **extra),
                              indent=2))
    else:
        echo(render_show(contract, _root_capability(result), result.agents, servers, **extra))


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
        # watchdog (its observer threads and platform backends) only for --watch.
        from executor.watch import watch_definitions  # noqa: PLC0415

        env = Environment.from_env()
        watch_definitions(root, env, run_check, personal=not no_personal)
        return
    if run_check().rejected:
        sys.exit(EXIT_FINDINGS)
