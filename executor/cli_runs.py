"""``corral run``, ``runs``, ``show``, ``diff`` and ``gc``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from executor.approval import parse_approve, policy_handler, prompt_handler
from executor.cli import cli, load, loader_options
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
from executor.text import printable
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

__all__ = ["run_json"]

BACKENDS: dict[str, type[BackendConfig]] = {
    "auto": AutoConfig, "host": HostConfig, "bubblewrap": BubblewrapConfig, "docker": DockerConfig,
}
STATUS_EXIT = {RunStatus.COMPLETED: 0, RunStatus.FAILED: 3, RunStatus.TIMEOUT: 3,
               RunStatus.DENIED: 4, RunStatus.CANCELLED: 130}


def run_json(record: RunRecord) -> dict[str, Any]:
    """The ``run --json`` object."""
    return {
        "run_id": record.run_id, "agent": record.agent, "status": record.status.value,
        "final_text": record.final_text, "diff": record.diff,
        "changed_files": record.changed_files, "denied_calls": record.denied_calls,
        "backend": record.backend, "mode": record.mode, "error": record.error,
        "children": record.children, "usage": record.usage, "steps": record.steps,
    }


def _approval(approve: str | None) -> ApprovalHandler | None:
    tools = parse_approve(approve)
    if tools is not None:
        return policy_handler(tools)
    if sys.stdin.isatty():
        return prompt_handler(lambda text: click.confirm(text, default=False, err=True))
    return None  # non-interactive and no policy: every 'ask' is denied


@cli.command("run")
@loader_options
@click.option("--agent", "agent", required=True, help="The agent to run.")
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
                no_personal: bool, agent: str, backend: str, mode: str, script: Path | None,
                model: str | None, approve: str | None, timeout: float | None, as_json: bool,
                prompt: str) -> None:
    """Run agent NAME on PROMPT in a sandbox; print its answer and diff."""
    if script is not None and model is not None:
        raise click.UsageError("--script and --model are exclusive")
    registry = load(root, trust_project, config_file, strict, no_personal)
    config = load_user_config()
    replay = ScriptedModel.from_file(script) if script is not None else None
    if backend == "host":
        click.echo(f"warning: {HOST_WARNING}", err=True)
    progress = Progress(enabled=not as_json and sys.stderr.isatty())
    settings = RunSettings(
        root=root.resolve(), backend=BACKENDS[backend](), config=config, registry=registry,
        ledger=ledger_dir(root), env=Environment.from_env(), trust_project=trust_project,
        mode_ceiling=SandboxMode(mode), model_override=model, script=replay,
        approval=_approval(approve), progress=progress, timeout_seconds=timeout,
    )
    with progress:
        record = run_agent(settings, agent, prompt)
    if as_json:
        click.echo(json.dumps(run_json(record), indent=2))
    else:
        _print_record(record)
    sys.exit(STATUS_EXIT[record.status])


def _print_record(record: RunRecord) -> None:
    click.echo(f"run {record.run_id}: agent {record.agent} {record.status.value} "
               f"({record.backend} backend, {record.mode} mode, {record.steps} step(s))", err=True)
    if record.error:
        message = record.error.get("message") or record.error.get("code")
        click.echo(f"error: {printable(str(message))}", err=True)
    for denied in record.denied_calls:
        click.echo(f"denied: {printable(denied['tool'])}: {printable(denied['reason'])}",
                   err=True)
    if record.final_text:
        click.echo(printable(record.final_text))
    if record.diff:
        click.echo(f"\n--- diff: {len(record.changed_files)} file(s) changed "
                   f"(corral apply {record.run_id} merges it) ---", err=True)
        click.echo(printable(record.diff), nl=not record.diff.endswith("\n"))


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
        click.echo("no runs recorded")
    for r in records:
        parent = f" (child of {r.parent_run})" if r.parent_run else ""
        click.echo(f"{r.run_id}  {r.status.value:9} {r.agent:24} {r.mode:15} "
                   f"{len(r.changed_files):3} file(s){parent}")


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
    click.echo(f"\nprompt: {printable(record.prompt)}\nmodel: {record.model}\ncontract: "
               f"{record.agent_source} ({record.agent_format}, {record.contract_digest[:12]})")
    click.echo(f"usage: {record.usage}  timings: {record.timings}  resources: "
               f"{record.resources}")
    click.echo("\ntool calls:")
    for call in record.audit:
        reason = f" ({printable(call['reason'])})" if call["reason"] else ""
        click.echo(f"  [{call['step']}] {printable(call['tool'])} "
                   f"{printable(json.dumps(call['arguments']))} -> {call['decision']}{reason}")
        result = printable(str(call["result"]).strip())
        if result:
            click.echo("      " + result[:400].replace("\n", "\n      "))
    click.echo("\ntranscript:")
    for message in transcript:
        text = message["content"] or ""
        calls = ", ".join(c["name"] for c in message.get("tool_calls") or [])
        click.echo(f"  {message['role']:9} {printable(repr(text[:300]))}"
                   + (f" calls: {printable(calls)}" if calls else ""))


@cli.command("diff")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.argument("run_id")
def diff_command(root: Path, run_id: str) -> None:
    """Print a run's unified diff (merge it with `corral apply RUN`, which checks it)."""
    ledger = ledger_dir(root)
    record = find_run(ledger, run_id)
    patch = load_patch(ledger, record.run_id)
    if not patch:
        raise ExecutorError(f"run {record.run_id} changed nothing", code="empty_diff")
    sys.stdout.flush()
    sys.stdout.buffer.write(patch)
    sys.stdout.buffer.flush()


@cli.command("gc")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gc_command(as_json: bool) -> None:
    """Clean sandboxes left behind by crashed runs (captured diffs are kept)."""
    from sandbox.gc import gc  # noqa: PLC0415 - keeps docker out of the other commands

    report = gc()
    if as_json:
        click.echo(report.model_dump_json(indent=2))
        return
    for entry in report.entries:
        click.echo(f"{entry.action:10} {entry.sandbox_id}  {entry.detail}")
    if not report.entries:
        click.echo("nothing to clean")
