"""``corral fanout``: N children of one task, each in its own sandbox, compared.

Exit codes (the README's table): 0 every child completed and every check
passed; 1 every child ran, but a check failed, or a child stopped at its step
limit or failed a review; 3 a child failed, timed out or crashed (the others'
diffs are recorded all the same); 4 a child was denied, or completed with a
denied call; 2 a user error before anything ran; 130 interrupted (every child
recorded, cancelled).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from executor.api import BACKENDS, DEFAULT_JOBS, ChildPlan
from executor.cli.app import loading_corral, setup_output, stopped_like_ctrl_c, warn
from executor.cli.fanout_views import fanout_lines
from executor.cli.progress import Progress
from executor.options import allow_net_option, echo, environment_options, loader_options, net_option

__all__ = ["fanout_command"]


def _label(plan: ChildPlan, count: int) -> str:
    return f"[{plan.index}/{count}] {plan.agent} {plan.run_id}"


@click.command("fanout")
@loader_options
@click.option("--agent", "agents", multiple=True, help="The agent each child runs: once for "
              "all children, or once per child (default: the default_agent of a zuno.json).")
@click.option("-n", "count", type=int, help="How many children (default: the number of "
              "--agent, --model or --script values given more than once).")
@click.option("--script", "scripts", multiple=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="A replay (YAML turns): once for all children (each plays its own copy), "
              "or once per child.")
@click.option("--model", "models", multiple=True, help="A model route: once for all "
              "children, or once per child.")
@click.option("--check-cmd", "check_command", help="A command run in each child's sandbox "
              "after its diff was recorded (e.g. 'pytest -q'); it cannot change the diff.")
@click.option("--check-timeout", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, help="Seconds the check command may take.")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="auto",
              show_default=True, help="Where the children run; 'host' has no process "
              "isolation.")
@click.option("--jobs", type=click.IntRange(min=1), default=DEFAULT_JOBS, show_default=True,
              help="Children at once (they mostly wait on models), on every machine together.")
@click.option("--on", "on", default="local", show_default=True, metavar="local|ray[://ADDR]",
              help="Where the children run: this machine, or the sandboxing nodes of a Ray "
              "cluster (ray: RAY_ADDRESS; ray://HOST:PORT: that cluster). Needs corral[ray].")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Shared wall-clock limit of the whole fanout, checks included, in seconds.")
@click.option("--approve", help="Approvals (nobody is asked during a fanout): never, or "
              "always-for=TOOL,TOOL.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@environment_options
@allow_net_option
@net_option
@click.option("--review-commands", is_flag=True,
              help="A read-only agent keeps the shell its definition gives it; its commands "
              "write a throwaway layer over your checkout, never the checkout ([review] "
              "commands = true in your config).")
@click.argument("prompt")
def fanout_command(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                   no_personal: bool, agents: tuple[str, ...], count: int | None,
                   scripts: tuple[Path, ...], models: tuple[str, ...],
                   check_command: str | None, check_timeout: float, backend: str, jobs: int,
                   timeout: float | None, approve: str | None, as_json: bool, on: str,
                   no_env: bool, setup_network: bool, memory: str | None,
                   allow_net: tuple[str, ...], review_commands: bool, net: str,
                prompt: str) -> None:
    """Run PROMPT in several children at once, each in its own sandbox, all from one
    snapshot of your current checkout; run the check command in each; print one row per
    child and which diffs conflict. Nothing is applied: the output ends with the command
    that merges the best one (`corral apply FANOUT --pick best`, or `--pick N`)."""
    if check_command is not None and not check_command.strip():
        raise click.BadParameter("the check command is empty", param_hint="--check-cmd")
    corral = loading_corral(root, trust_project, config_file, strict, no_personal,
                            backend=backend, memory=memory, allow_net=allow_net,
                            review_commands=review_commands, net=net)
    progress = Progress(enabled=not as_json and sys.stderr.isatty(), calls=False)

    def label(plans: list[ChildPlan]) -> None:
        for plan in plans:
            progress.label(plan.run_id, _label(plan, len(plans)), plan.agent)

    with stopped_like_ctrl_c():  # SIGTERM, SIGHUP: every child cancelled, as by Ctrl-C
        result = corral.fanout(prompt, agents=agents, n=count, scripts=scripts,
                               models=models, check=check_command,
                               check_timeout=check_timeout, jobs=jobs, timeout=timeout,
                               approve=approve, environment=not no_env,
                               setup_network=True if setup_network else None,
                               progress=progress, on_plan=label,
                               on_setup_output=setup_output(as_json), on_warning=warn,
                               on=on)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for line in fanout_lines(result):
            echo(line)
    sys.exit(result.exit_code)
