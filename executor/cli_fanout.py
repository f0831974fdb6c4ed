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
import yaml

from executor.cli import cli, echo, environment_options, loader_options
from executor.cli_agents import find_agent, load
from executor.cli_env import setup_output, warn_diagnostic
from executor.errors import (
    EXIT_DENIED,
    EXIT_FAILURE,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ExecutorError,
    ModelError,
)
from executor.fanout import FanoutRequest, run_fanout
from executor.fanout.plan import ChildPlan, plan_children
from executor.fanout.rows import fanout_json, fanout_lines, rows
from executor.ledger import FanoutRecord, ledger_dir
from executor.models import ScriptedModel
from executor.progress import Progress
from executor.run import RunSettings, with_environment
from executor.scheduling import DEFAULT_JOBS, Deadline, LocalScheduler
from policies.config import config_path, load_user_config
from policies.loader import Environment
from sandbox.config import HOST_WARNING, USER_BACKENDS

__all__ = ["fanout_command", "fanout_exit_code"]

#: Worst first: the exit code of a fanout is the first of these any child gives.
_PRECEDENCE = (EXIT_INTERRUPTED, EXIT_FAILURE, EXIT_DENIED, EXIT_FINDINGS, EXIT_OK)


def _replay(path: Path) -> list[object]:
    """A replay file's turns, validated (a user error when missing or malformed)."""
    try:
        ScriptedModel.from_file(path)
    except ModelError as exc:
        raise ExecutorError(exc.message, code="bad_script", operation="load_script",
                            context=exc.context, hint=exc.hint or "a script is a YAML list of "
                            "turns: {text: ...} or {tool_calls: [{name, arguments}]}") from exc
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data)


def fanout_exit_code(record: FanoutRecord, ledger: Path) -> int:
    """The exit code of ``corral fanout`` (see the module docstring)."""
    from executor.cli_runs import exit_code  # noqa: PLC0415 - cli_runs imports cli, which loads this module lazily

    if record.status == "cancelled":
        return EXIT_INTERRUPTED
    codes = {EXIT_OK}
    for row in rows(record, ledger):
        if row.record is None:
            codes.add(EXIT_FAILURE)
            continue
        codes.add(exit_code(row.record))
        check = row.record.check
        if check and not check.get("skipped") and check.get("exit_code") != 0:
            codes.add(EXIT_FINDINGS)
    return next(code for code in _PRECEDENCE if code in codes)


def _label(plan: ChildPlan, count: int) -> str:
    return f"[{plan.index}/{count}] {plan.agent} {plan.run_id}"


@cli.command("fanout")
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
@click.option("--backend", type=click.Choice(sorted(USER_BACKENDS)), default="auto",
              show_default=True, help="Where the children run; 'host' has no process "
              "isolation.")
@click.option("--jobs", type=click.IntRange(min=1), default=DEFAULT_JOBS, show_default=True,
              help="Children at once (they mostly wait on models).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Shared wall-clock limit of the whole fanout, checks included, in seconds.")
@click.option("--approve", help="Approvals (nobody is asked during a fanout): never, or "
              "always-for=TOOL,TOOL.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@environment_options
@click.argument("prompt")
def fanout_command(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                   no_personal: bool, agents: tuple[str, ...], count: int | None,
                   scripts: tuple[Path, ...], models: tuple[str, ...],
                   check_command: str | None, check_timeout: float, backend: str, jobs: int,
                   timeout: float | None, approve: str | None, as_json: bool,
                   no_env: bool, setup_network: bool, prompt: str) -> None:
    """Run PROMPT in several children at once, each in its own sandbox, all from one
    snapshot of your current checkout; run the check command in each; print one row per
    child and which diffs conflict. Nothing is applied: `corral apply RUN` merges the one
    you choose."""
    ledger = ledger_dir(root)  # refuses a state dir a child could write, before anything
    registry = load(root, trust_project, config_file, strict, no_personal)
    named = list(agents) or ([registry.default_agent] if registry.default_agent else [])
    plans = plan_children(count=count, agents=named, models=models, scripts=scripts)
    for agent in dict.fromkeys(plan.agent for plan in plans):
        find_agent(agent, registry, root=root, trust_project=trust_project,
                   config_file=config_file, strict=strict, no_personal=no_personal)
    replays = {str(path): _replay(path) for path in dict.fromkeys(scripts)}
    if check_command is not None and not check_command.strip():
        raise click.BadParameter("the check command is empty", param_hint="--check-cmd")
    if backend == "host":
        echo(f"warning: {HOST_WARNING}", err=True)
    settings = RunSettings(
        root=root.resolve(), backend=USER_BACKENDS[backend](), config=load_user_config(),
        registry=registry, ledger=ledger, env=Environment.from_env(),
        trust_project=trust_project, config_file=config_path())
    settings = with_environment(settings, no_env=no_env,
                                network=True if setup_network else None,
                                on_output=setup_output(as_json), warn=warn_diagnostic)
    request = FanoutRequest(settings=settings, prompt=prompt, plans=plans, approve=approve,
                            check_command=check_command, check_timeout=check_timeout,
                            jobs=jobs, timeout_seconds=timeout, replays=replays)
    progress = Progress(enabled=not as_json and sys.stderr.isatty(), calls=False)
    for plan in plans:
        progress.label(plan.run_id, _label(plan, len(plans)), plan.agent)
    with progress, LocalScheduler(jobs=jobs, deadline=Deadline.after(timeout),
                                  name="corral-fanout") as scheduler:
        record = run_fanout(request, scheduler=scheduler, report=progress)
    if as_json:
        click.echo(json.dumps(fanout_json(record, ledger), indent=2))
    else:
        for line in fanout_lines(record, ledger):
            echo(line)
    sys.exit(fanout_exit_code(record, ledger))
