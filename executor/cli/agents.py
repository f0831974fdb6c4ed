"""``corral agents list``, ``show``, ``check`` and ``new``.

Each loads definitions through :meth:`executor.api.Corral.agents` (or
``agent``); the run machinery is never imported here (``corral agents ...``
starts fast).
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from executor.api import Corral
from executor.cli.agent_views import LEGEND, list_lines, render_check, render_show
from executor.cli.app import loading_corral
from executor.errors import EXIT_FINDINGS
from executor.options import allow_net_option, echo, loader_options
from executor.text import one_line
from policies.contract import AgentFormat
from policies.loader import Diagnostic, Environment, Severity

__all__ = ["agents"]


@click.group("agents")
def agents() -> None:
    """Discover, inspect and check agent definitions of every format."""


@agents.command("list")
@loader_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--runnable", is_flag=True, help="Only agents a run accepts now.")
@click.option("--format", "formats", multiple=True, metavar="FORMAT",
              help="Only agents of this format (claude, codex, ngn, zuno, pi, ...).")
@click.option("--source", "source", metavar="TEXT",
              help="Only agents whose definition file's path contains TEXT.")
@click.option("-l", "--long", "long", is_flag=True, help="Also each definition's source.")
@click.argument("pattern", required=False)
def agents_list(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, as_json: bool, runnable: bool, formats: tuple[str, ...],
                source: str | None, long: bool, pattern: str | None) -> None:
    """List the agents that won discovery (PATTERN: only names it matches, * and ? as in
    a shell, case-insensitive)."""
    found = loading_corral(root, trust_project, config_file, strict, no_personal).agents()

    def keep(name: str, data: Mapping[str, Any]) -> bool:
        can = data["runnable"]
        return ((pattern is None or fnmatch.fnmatch(name.casefold(), pattern.casefold()))
                and (not formats or data["format"] in formats)
                and (source is None or source in str(data["source"]))
                and (not runnable or bool(can["user"] or can["subagent"])))

    if as_json:
        listed = found.to_json()
        listed["agents"] = [a for a in listed["agents"] if keep(a["name"], a)]
        click.echo(json.dumps(listed, indent=2))
        return
    if not found.agents:
        untrusted = [d for d in found.diagnostics if d.code == "untrusted_project"]
        echo("no agents found" + (
            f": {untrusted[0].reason}" if untrusted else
            " (personal: ~/.claude/agents, ~/.config/ngn/agents, ...; project: .claude/agents, "
            ".ngn/agents, ... with --trust-project; any file with --config FILE)"))
    width = shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 120
    lines = list_lines(found, keep, width=width, long=long)
    for line in lines:
        echo(line)
    if found.agents and not lines:
        echo("no agents match", err=True)
    elif lines:
        echo(LEGEND, err=True)
    problems = [d for d in found.diagnostics if d.severity is not Severity.INFO]
    if problems:
        rejected = sum(1 for d in problems if d.severity is Severity.ERROR)
        same = " ".join(shlex.quote(word) for word in [
            *(["--root", str(root)] if str(root) != "." else []),
            *(["--trust-project"] if trust_project else []),
            *(["--config", str(config_file)] if config_file is not None else []),
            *(["--strict"] if strict else []), *(["--no-personal"] if no_personal else [])])
        echo(f"\n{len(problems)} diagnostic(s), {rejected} error(s): run "
             f"`{one_line(' '.join(['corral agents check', same]).strip())}` for details",
             err=True)
    _trust_line(root, trust_project, found.diagnostics)


def _trust_line(root: Path, trust_project: bool, diagnostics: list[Diagnostic]) -> None:
    """Whether the project's own definitions were loaded, and how to change that."""
    if trust_project:
        return
    codes = {d.code for d in diagnostics}
    if "untrusted_project" in codes:
        echo("project definitions: not loaded (untrusted); after reading them, `corral "
             "trust` loads them from now on, --trust-project for one command", err=True)
    elif "trust_changed" not in codes:
        state = Corral(root).trust_state()
        if state.state == "trusted":
            echo(f"project definitions: trusted (`corral trust`, "
                 f"{one_line(state.trusted_at or '')})", err=True)


@agents.command("show")
@loader_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@allow_net_option
@click.argument("name")
def agents_show(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, as_json: bool, allow_net: tuple[str, ...], name: str) -> None:
    """Print the effective, resolved contract of agent NAME (with --allow-net: as a run
    given those hosts would see it)."""
    view = loading_corral(root, trust_project, config_file, strict, no_personal,
                          allow_net=allow_net).agent(name)
    if as_json:
        click.echo(json.dumps(view.to_json(), indent=2))
    else:
        echo(render_show(view))


@agents.command("new")
@click.argument("name")
@click.option("--format", "fmt", required=True,
              type=click.Choice([f.value for f in AgentFormat]), help="The definition format.")
@click.option("--mode", default="all", show_default=True,
              type=click.Choice(["all", "primary", "subagent"]),
              help="Who may use the agent: you and delegating agents (all), only you "
              "(primary), or only delegating agents (subagent).")
@click.option("--path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write it, relative to --root (default: where the format's "
              "project agents are discovered, e.g. .claude/agents/NAME.md).")
@click.option("--description", help="When to use the agent (default: a placeholder).")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".",
              show_default=True, help="Repository root.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def agents_new(name: str, fmt: str, mode: str, path: Path | None, description: str | None,
               root: Path, as_json: bool) -> None:
    """Write a valid, minimal definition of agent NAME; never over an existing file."""
    made = loading_corral(root, False, None, False, False).new_agent(
        name, format=fmt, mode=mode, path=path, description=description)
    if as_json:
        click.echo(json.dumps(made.to_json(), indent=2))
        return
    echo(f"wrote {one_line(str(made.path))}: {made.format} agent {one_line(made.name)}, "
         f"mode {made.mode}")
    if made.shadowed_by:
        echo(f"note: {one_line(made.shadowed_by)} also defines {one_line(made.name)} and wins "
             "over it", err=True)
    if made.discovered:
        echo(f"check it: corral agents check --trust-project --root {one_line(str(root))}")
    else:
        echo("note: corral does not discover agents there; import it with an agent_imports "
             "entry of a --config file", err=True)


@agents.command("check")
@loader_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--watch", is_flag=True, help="Re-check whenever a definition file changes.")
@click.option("-v", "--verbose", is_flag=True, help="List every warning (by default they "
              "are grouped by kind, with counts).")
def agents_check(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                 no_personal: bool, as_json: bool, watch: bool, verbose: bool) -> None:
    """Check every definition; exit 1 when any was rejected. The summary and the rejected
    files come first, then every error, then the warnings grouped by kind."""
    corral = loading_corral(root, trust_project, config_file, strict, no_personal)

    def run_check() -> bool:
        found = corral.check()
        if as_json:
            click.echo(json.dumps(found.to_json()))
        else:
            for line in render_check(found.result, verbose=verbose):
                echo(line)
        sys.stdout.flush()
        return found.rejected

    if watch:
        # watchdog (its observer threads and platform backends) only for --watch.
        from executor.cli.watch import watch_definitions  # noqa: PLC0415

        env = Environment.from_env()
        watch_definitions(root, env, run_check, personal=not no_personal)
        return
    if run_check():
        sys.exit(EXIT_FINDINGS)
