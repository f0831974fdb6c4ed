"""``corral run``, ``runs``, ``show``, ``diff`` and ``gc``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from executor.approval import parse_approve, policy_handler, prompt_handler
from executor.cli import cli, echo, load, loader_options
from executor.dispatch import ApprovalHandler
from executor.errors import ExecutorError
from executor.models import ScriptedModel
from executor.progress import Progress
from executor.results import (
    RunRecord,
    RunStatus,
    find_run,
    ledger_dir,
    list_runs,
    load_patch,
    load_transcript,
)
from executor.runner import RunSettings, run_agent
from executor.text import one_line, printable, printable_patch
from policies.config import load_user_config
from policies.contract import SandboxMode
from policies.loader import Environment
from sandbox.config import (
    HOST_WARNING,
    AutoConfig,
    BackendConfig,
    BubblewrapConfig,
    DockerConfig,
    HostConfig,
)
from sandbox.state import check_state_dir, default_state_root

__all__ = ["run_json"]

BACKENDS: dict[str, type[BackendConfig]] = {
    "auto": AutoConfig, "host": HostConfig, "bubblewrap": BubblewrapConfig, "docker": DockerConfig,
}
STATUS_EXIT = {RunStatus.COMPLETED: 0, RunStatus.FAILED: 3, RunStatus.TIMEOUT: 3,
               RunStatus.DENIED: 4, RunStatus.CANCELLED: 130, RunStatus.STEP_LIMIT: 1,
               RunStatus.REVIEW_FAILED: 1}


def run_json(record: RunRecord) -> dict[str, Any]:
    """The ``run --json`` object."""
    return {
        "run_id": record.run_id, "agent": record.agent, "status": record.status.value,
        "final_text": record.final_text, "diff": record.diff,
        "changed_files": record.changed_files, "denied_calls": record.denied_calls,
        "backend": record.backend, "mode": record.mode, "error": record.error,
        "children": record.children, "usage": record.usage, "steps": record.steps,
        "reviews": record.reviews,
    }


def _welcome(agent: str, message: str) -> None:
    """A catalog agent's ``welcomeMessage``, shown when its session starts."""
    echo(f"{one_line(agent)}: {one_line(message)}", err=True)


def _approval(approve: str | None, progress: Progress) -> ApprovalHandler | None:
    tools = parse_approve(approve)
    if tools is not None:
        return policy_handler(tools)
    if sys.stdin.isatty():
        def ask(text: str) -> bool:
            with progress.paused():  # the live status line would cover the question
                return click.confirm(text, default=False, err=True)

        return prompt_handler(ask)
    return None  # non-interactive and no policy: every 'ask' is denied


@cli.command("run")
@loader_options
@click.option("--agent", "agent", help="The agent to run (default: the default_agent of a "
              "zuno.json).")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="auto",
              show_default=True, help="Where the child runs; 'host' has no process isolation.")
@click.option("--mode", "mode", type=click.Choice([m.value for m in SandboxMode]),
              default=SandboxMode.WORKTREE.value, show_default=True,
              help="The most the child may write; its contract can only narrow it.")
@click.option("--script", type=click.Path(dir_okay=False, path_type=Path),
              help="Replay a scripted model (YAML turns) for the whole run tree.")
@click.option("--model", "model", help="Model route (provider/model or @role) overriding the "
              "agent's.")
@click.option("--approve", help="Non-interactive approvals: never, or always-for=TOOL,TOOL.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Wall-clock limit of the run, in seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.argument("prompt")
def run_command(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, agent: str | None, backend: str, mode: str,
                script: Path | None,
                model: str | None, approve: str | None, timeout: float | None, as_json: bool,
                prompt: str) -> None:
    """Run agent NAME on PROMPT in a sandbox; print its answer and diff."""
    if script is not None and model is not None:
        raise click.UsageError("--script and --model are exclusive")
    ledger = ledger_dir(root)  # refuses a state dir a child could write, before anything
    registry = load(root, trust_project, config_file, strict, no_personal)
    config = load_user_config()
    replay = ScriptedModel.from_file(script) if script is not None else None
    if backend == "host":
        echo(f"warning: {HOST_WARNING}", err=True)
    progress = Progress(enabled=not as_json and sys.stderr.isatty())
    settings = RunSettings(
        root=root.resolve(), backend=BACKENDS[backend](), config=config, registry=registry,
        ledger=ledger, env=Environment.from_env(), trust_project=trust_project,
        mode_ceiling=SandboxMode(mode), model_override=model, script=replay,
        approval=_approval(approve, progress), progress=progress, timeout_seconds=timeout,
        welcome=None if as_json else _welcome,
    )
    with progress:
        record = run_agent(settings, agent, prompt)
    if as_json:
        click.echo(json.dumps(run_json(record), indent=2))
    else:
        _print_record(record)
    sys.exit(STATUS_EXIT[record.status])


def _print_record(record: RunRecord) -> None:
    # A record is read back from the state dir: every field is escaped, ours included.
    echo(f"run {one_line(record.run_id)}: agent {one_line(record.agent)} "
         f"{record.status.value} ({one_line(record.backend)} backend, {one_line(record.mode)} "
         f"mode, {record.steps} step(s))", err=True)
    if record.error:
        message = record.error.get("message") or record.error.get("code")
        echo(f"error: {one_line(str(message))}", err=True)
    for denied in record.denied_calls:
        echo(f"denied: {one_line(denied['tool'])}: {one_line(denied['reason'])}", err=True)
    for note in record.notes:
        echo(f"note: {one_line(note)}", err=True)
    for review in record.reviews:  # response reviewers' checks of the answer
        reason = str(review.get("text", "")).strip().split("\n")[-1]
        echo(f"review by {one_line(str(review['reviewer']))}: {str(review['verdict']).upper()}"
             + (f": {one_line(reason)}" if review["verdict"] != "pass" and reason else ""),
             err=True)
    if record.final_text:
        echo(record.final_text)
    if record.diff:
        echo(f"\n--- diff: {len(record.changed_files)} file(s) changed "
             f"(corral apply {one_line(record.run_id)} merges it) ---", err=True)
        echo(record.diff, nl=not record.diff.endswith("\n"))


@cli.command("runs")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def runs_command(root: Path, as_json: bool) -> None:
    """List the recorded runs of the repository, newest first."""
    records = list_runs(ledger_dir(root))
    if as_json:
        click.echo(json.dumps([run_json(r) | {"started_at": r.started_at} for r in records],
                              indent=2))
        return
    if not records:
        echo("no runs recorded")
    for r in records:
        parent = f" (child of {one_line(r.parent_run)})" if r.parent_run else ""
        echo(f"{one_line(r.run_id)}  {r.status.value:9} {one_line(r.agent):24} "
             f"{one_line(r.mode):15} {len(r.changed_files):3} file(s){parent}")


@cli.command("show")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.argument("run_id")
def show_command(root: Path, as_json: bool, run_id: str) -> None:
    """Print a run's whole record: every tool call with its arguments, decision, result."""
    ledger = ledger_dir(root)
    record = find_run(ledger, run_id)
    transcript = load_transcript(ledger, record.run_id)
    if as_json:
        click.echo(json.dumps(record.model_dump(mode="json") | {"transcript": transcript},
                              indent=2))
        return
    _print_record(record)
    echo(f"\nprompt: {one_line(record.prompt)}\nmodel: {one_line(str(record.model))}\n"
         f"contract: {one_line(record.agent_source)} ({one_line(record.agent_format)}, "
         f"{one_line(record.contract_digest[:12])})")
    echo(f"usage: {one_line(str(record.usage))}  timings: {one_line(str(record.timings))}  "
         f"resources: {one_line(str(record.resources))}")
    if record.changed_files:
        echo("\nchanged files:")
        for change in record.changed_files:
            flags = change.get("flags") or []
            origin = change.get("old_path")
            echo(f"  {one_line(str(change.get('status', '?'))):9} "
                 f"{one_line(str(change.get('path', '?')))}"
                 + (f" (from {one_line(str(origin))})" if origin else "")
                 + (f"  [{one_line(', '.join(map(str, flags)))}]" if flags else ""))
    echo("\ntool calls:")
    for call in record.audit:
        reason = f" ({one_line(str(call['reason']))})" if call["reason"] else ""
        echo(f"  [{one_line(str(call['step']))}] {one_line(str(call['tool']))} "
             f"{one_line(json.dumps(call['arguments']))} -> {one_line(str(call['decision']))}"
             f"{reason}")
        result = printable(str(call["result"]).strip())
        if result:
            echo("      " + result[:400].replace("\n", "\n      "))
    echo("\ntranscript:")
    for message in transcript:
        text = message["content"] or ""
        calls = ", ".join(str(c["name"]) for c in message.get("tool_calls") or [])
        echo(f"  {one_line(str(message['role'])):9} {one_line(repr(text[:300]))}"
             + (f" calls: {one_line(calls)}" if calls else ""))


@cli.command("diff")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--escape", "force_escape", is_flag=True,
              help="Escape control characters even when stdout is not a terminal "
              "(for a pager such as `less -R`).")
@click.argument("run_id")
def diff_command(root: Path, force_escape: bool, run_id: str) -> None:
    """Print a run's unified diff: escaped on a terminal, the exact bytes through a pipe or
    into a file (merge it with `corral apply RUN`, which checks it)."""
    ledger = ledger_dir(root)
    record = find_run(ledger, run_id)
    patch = load_patch(ledger, record.run_id)
    if not patch:
        raise ExecutorError(f"run {record.run_id} changed nothing", code="empty_diff")
    if force_escape or sys.stdout.isatty():
        text, escaped = printable_patch(patch)
        click.echo(text, nl=not text.endswith("\n"))
        if escaped:
            echo(f"note: {escaped} control or invisible character(s) of this diff are shown "
                 "as escapes (\\x1b, \\u202e, ...); through a pipe or into a file, "
                 f"`corral diff {one_line(record.run_id)}` writes the exact bytes", err=True)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(patch)
    sys.stdout.buffer.flush()


@cli.command("gc")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gc_command(as_json: bool) -> None:
    """Clean sandboxes left behind by crashed runs (captured diffs are kept)."""
    from sandbox.gc import gc  # noqa: PLC0415 - keeps docker out of the other commands

    state_root = default_state_root()
    check_state_dir(state_root)
    report = gc(state_root)
    if as_json:  # ASCII JSON: a directory name cannot put raw controls on a terminal
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    for entry in report.entries:
        echo(f"{entry.action:10} {one_line(entry.sandbox_id)}  {one_line(entry.detail)}")
    if not report.entries:
        echo("nothing to clean")
