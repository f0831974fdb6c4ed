"""``corral run``: one agent on a prompt, in a sandbox (:meth:`executor.api.Corral.run`).

Exit codes (the README's table): 0 completed, 1 stopped at its step limit or
failed a review, 2 a user error (nothing ran), 3 the run failed or timed out,
4 a denial (the run was refused, or it completed with a denied tool call), 5
the project's environment could not be set up, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import click

from executor.api import (
    BACKENDS,
    MODES,
    ApprovalHandler,
    ExecutorError,
    RunRecord,
    RunResult,
    prompt_handler,
)
from executor.cli.app import (
    interrupted,
    loading_corral,
    render_error,
    setup_output,
    stopped_like_ctrl_c,
    warn,
)
from executor.cli.pager import show_patch
from executor.cli.progress import Progress
from executor.cli.run_views import (
    child_lines,
    diff_banner,
    discarded_lines,
    held_lines,
    lineage_lines,
    outside_lines,
    status_line,
)
from executor.options import allow_net_option, echo, environment_options, loader_options, net_option
from executor.text import one_line, printable

__all__ = ["print_record", "run_command"]


def _welcome(agent: str, message: str) -> None:
    """A catalog agent's ``welcomeMessage``, shown when its session starts."""
    echo(f"{one_line(agent)}: {one_line(message)}", err=True)


def _approval(approve: str | None, progress: Progress) -> str | ApprovalHandler | None:
    """``--approve`` as given; else, on a terminal, a person is asked."""
    if approve is not None:
        return approve
    if sys.stdin.isatty():
        def ask(text: str) -> bool:
            with progress.paused():  # the live status line would cover the question
                try:
                    return click.confirm(text, default=False, err=True)
                except click.Abort:  # Ctrl-C or end of input at the question: cancel the run
                    raise KeyboardInterrupt from None

        return prompt_handler(ask)
    return None  # non-interactive and no policy: every 'ask' is denied


@click.command("run")
@loader_options
@click.option("--agent", "agent", help="The agent to run (default: the default_agent of a "
              "zuno.json).")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="auto",
              show_default=True, help="Where the child runs; 'host' has no process isolation.")
@click.option("--mode", "mode", type=click.Choice(MODES), default="worktree",
              show_default=True,
              help="The most the child may write; its contract can only narrow it.")
@click.option("--script", type=click.Path(dir_okay=False, path_type=Path),
              help="Replay a scripted model (YAML turns) for the whole run tree.")
@click.option("--model", "model", help="Model route (provider/model or @role) overriding the "
              "agent's.")
@click.option("--approve", help="Non-interactive approvals: never, or always-for=TOOL,TOOL.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Wall-clock limit of the run, in seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--continue", "continues", metavar="RUN",
              help="Continue run RUN: its agent, its workspace with its changes in place, its "
              "conversation; the new run's diff holds RUN's too.")
@environment_options
@allow_net_option
@net_option
@click.option("--review-commands", is_flag=True,
              help="A read-only agent keeps the shell its definition gives it; its commands "
              "write a throwaway layer over your checkout, never the checkout ([review] "
              "commands = true in your config).")
@click.argument("prompt")
@click.pass_context
def run_command(ctx: click.Context, root: Path, trust_project: bool, config_file: Path | None,
                strict: bool, no_personal: bool, agent: str | None, backend: str, mode: str,
                script: Path | None,
                model: str | None, approve: str | None, timeout: float | None, as_json: bool,
                continues: str | None, no_env: bool, setup_network: bool, memory: str | None,
                allow_net: tuple[str, ...], review_commands: bool, net: str,
                prompt: str) -> None:
    """Run agent NAME on PROMPT in a sandbox; print its answer and diff.

    With --continue RUN: a new run of RUN's agent, in its mode and backend, on RUN's
    workspace (your checkout now with RUN's diff applied), its conversation continued;
    RUN is then marked discarded (this run's diff holds its changes).

    Exit codes: 0 completed, 2 a user error (nothing ran), 3 the run failed or timed
    out, 4 a denial (the run was refused, or it completed with a denied tool call).
    """
    if script is not None and model is not None:
        raise click.UsageError("--script and --model are exclusive")
    if continues is not None:
        given = [f"--{name}" for name in ("agent", "mode")
                 if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{' and '.join(given)} cannot be given with --continue: "
                                   "a continuation runs the same agent in the same mode")
    corral = loading_corral(root, trust_project, config_file, strict, no_personal,
                            backend=backend, memory=memory, allow_net=allow_net,
                            review_commands=review_commands, net=net)
    progress = Progress(enabled=not as_json and sys.stderr.isatty())
    try:
        with stopped_like_ctrl_c():
            asked, network = _approval(approve, progress), True if setup_network else None
            if continues is not None:
                result = corral.continue_run(
                    continues, prompt, script=script, model=model, approve=asked,
                    timeout=timeout, environment=not no_env, setup_network=network,
                    progress=progress, on_setup_output=setup_output(as_json),
                    on_warning=warn, welcome=None if as_json else _welcome)
            else:
                result = corral.run(prompt, agent=agent, mode=mode, script=script, model=model,
                                    approve=asked, timeout=timeout, environment=not no_env,
                                    setup_network=network, progress=progress,
                                    on_setup_output=setup_output(as_json), on_warning=warn,
                                    welcome=None if as_json else _welcome)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the run recorded itself cancelled
        raise interrupted(progress.top_run) from None
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_record(result, corral.show)
    sys.exit(result.exit_code)


def _child(show: Callable[[str], RunResult]) -> Callable[[str], RunRecord | None]:
    def find(run_id: str) -> RunRecord | None:
        try:
            return show(run_id).record
        except ExecutorError:
            return None

    return find


def print_record(result: RunResult, show: Callable[[str], RunResult]) -> None:
    """The run's summary on stderr, its answer and diff on stdout (``show``: the API's,
    to list the child runs). A record is read back from the state dir: every field is
    escaped, ours included."""
    record = result.record
    echo(status_line(record), err=True)
    for line in lineage_lines(record):
        echo(line, err=True)
    if record.fanout:
        echo(f"fanout: {one_line(record.fanout)} (`corral runs` shows its other children)",
             err=True)
    if record.error:
        render_error(record.error, exit_code=result.exit_code)
    for denied in record.denied_calls:
        where = (f" (in {one_line(denied['agent'])}, run {one_line(denied['run'])})"
                 if "run" in denied else "")
        echo(f"denied{where}: {one_line(denied['tool'])}: {one_line(denied['reason'])}",
             err=True)
    for note in record.notes:
        echo(f"note: {one_line(note)}", err=True)
    for event in (record.network or {}).get("connections", []):  # --net allow: refusals
        if not event.get("allowed"):
            echo(f"egress denied: {one_line(str(event.get('host')))}:{event.get('port')} "
                 f"({event.get('protocol')}): {one_line(str(event.get('reason')))}", err=True)
    for line in discarded_lines(record):
        echo(line, err=True)
    for line in child_lines(record, _child(show)):
        echo(line, err=True)
    for review in record.reviews:  # response reviewers' checks of the answer
        reason = str(review.get("text", "")).strip().split("\n")[-1]
        echo(f"review by {one_line(str(review['reviewer']))}: {str(review['verdict']).upper()}"
             + (f": {one_line(reason)}" if review["verdict"] != "pass" and reason else ""),
             err=True)
    if record.final_text:
        echo(record.final_text)
    if record.diff:
        echo(f"\n{diff_banner(record)}", err=True)
        show_patch(printable(record.diff), pager=False)
    for line in [*outside_lines(record), *held_lines(record)]:
        echo(line, err=True)
