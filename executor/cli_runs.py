"""``corral run``, ``runs``, ``show``, ``diff``, ``discard`` and ``gc``.

``runs`` groups a fanout's children under it (:mod:`executor.ledger`);
``gc --older-than`` also removes what finished runs left (:mod:`executor.ledger`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from executor.cli import cli, echo, environment_options, loader_options, render_error
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
from executor.fanout.rows import check_lines
from executor.ledger import (
    FanoutRecord,
    RunRecord,
    RunStatus,
    discard_run,
    fanout_status,
    finalize_crashed_fanouts,
    find_run,
    ledger_dir,
    load_patch,
    load_transcript,
    parse_duration,
    prune_finished,
    run_status,
    scan_fanouts,
    scan_runs,
)
from executor.models import ScriptedModel
from executor.progress import Progress
from executor.run import RunSettings, run_agent, with_environment
from executor.run.approval import parse_approve, policy_handler, prompt_handler
from executor.runview import (
    child_lines,
    diff_banner,
    outside_lines,
    runs_line,
    show_lines,
    status_line,
)
from executor.text import one_line, printable_patch
from executor.tools.dispatch import ApprovalHandler
from policies.config import config_path, load_user_config
from policies.contract import SandboxMode
from policies.loader import Environment
from sandbox.config import HOST_WARNING, USER_BACKENDS
from sandbox.state import check_state_dir, default_state_root

__all__ = ["exit_code", "run_json"]

STATUS_EXIT = {RunStatus.COMPLETED: EXIT_OK, RunStatus.FAILED: EXIT_FAILURE,
               RunStatus.TIMEOUT: EXIT_FAILURE, RunStatus.DENIED: EXIT_DENIED,
               RunStatus.CANCELLED: EXIT_INTERRUPTED, RunStatus.RUNNING: EXIT_FAILURE,
               RunStatus.CRASHED: EXIT_FAILURE,
               # The run ended and found something to fix: out of steps, or its answer
               # failed a response reviewer's check (its answer and diff are recorded).
               RunStatus.STEP_LIMIT: EXIT_FINDINGS, RunStatus.REVIEW_FAILED: EXIT_FINDINGS}


def exit_code(record: RunRecord) -> int:
    """The exit code of ``corral run`` (the README's table): a run that completed with a
    denied tool call exits 4, so a script learns it without parsing JSON; a failure
    (3) outranks a denial."""
    code = STATUS_EXIT[record.status]
    if code == EXIT_OK and record.denied_calls:
        return EXIT_DENIED
    return code


def run_json(record: RunRecord) -> dict[str, Any]:
    """The ``run --json`` object."""
    return {
        "run_id": record.run_id, "agent": record.agent, "status": run_status(record).value,
        "final_text": record.final_text, "diff": record.diff,
        "changed_files": record.changed_files, "denied_calls": record.denied_calls,
        "backend": record.backend, "mode": record.mode, "error": record.error,
        "children": record.children, "usage": record.usage, "steps": record.steps,
        "state": record.state,
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
                try:
                    return click.confirm(text, default=False, err=True)
                except click.Abort:  # Ctrl-C or end of input at the question: cancel the run
                    raise KeyboardInterrupt from None

        return prompt_handler(ask)
    return None  # non-interactive and no policy: every 'ask' is denied


def _script(path: Path) -> ScriptedModel:
    """A replay file, or the user error it is when it is missing or malformed (exit 2)."""
    try:
        return ScriptedModel.from_file(path)
    except ModelError as exc:
        raise ExecutorError(exc.message, code="bad_script", operation="load_script",
                            context=exc.context, hint=exc.hint or "a script is a YAML list of "
                            "turns: {text: ...} or {tool_calls: [{name, arguments}]}") from exc


@cli.command("run")
@loader_options
@click.option("--agent", "agent", help="The agent to run (default: the default_agent of a "
              "zuno.json).")
@click.option("--backend", type=click.Choice(sorted(USER_BACKENDS)), default="auto",
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
@environment_options
@click.argument("prompt")
def run_command(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, agent: str | None, backend: str, mode: str,
                script: Path | None,
                model: str | None, approve: str | None, timeout: float | None, as_json: bool,
                no_env: bool, setup_network: bool, prompt: str) -> None:
    """Run agent NAME on PROMPT in a sandbox; print its answer and diff.

    Exit codes: 0 completed, 2 a user error (nothing ran), 3 the run failed or timed
    out, 4 a denial (the run was refused, or it completed with a denied tool call).
    """
    if script is not None and model is not None:
        raise click.UsageError("--script and --model are exclusive")
    ledger = ledger_dir(root)  # refuses a state dir a child could write, before anything
    registry = load(root, trust_project, config_file, strict, no_personal)
    if agent is not None or registry.default_agent is not None:  # run_agent says when neither
        find_agent(agent or str(registry.default_agent), registry, root=root,
                   trust_project=trust_project, config_file=config_file, strict=strict,
                   no_personal=no_personal)
    config = load_user_config()
    replay = _script(script) if script is not None else None
    if backend == "host":
        echo(f"warning: {HOST_WARNING}", err=True)
    progress = Progress(enabled=not as_json and sys.stderr.isatty())
    settings = RunSettings(
        root=root.resolve(), backend=USER_BACKENDS[backend](), config=config, registry=registry,
        ledger=ledger, env=Environment.from_env(), trust_project=trust_project,
        mode_ceiling=SandboxMode(mode), model_override=model, script=replay,
        approval=_approval(approve, progress), progress=progress, timeout_seconds=timeout,
        config_file=config_path(),
        welcome=None if as_json else _welcome,
    )
    settings = with_environment(settings, no_env=no_env,
                                network=True if setup_network else None,
                                on_output=setup_output(as_json), warn=warn_diagnostic)
    with progress:
        record = run_agent(settings, agent, prompt)
    if as_json:
        click.echo(json.dumps(run_json(record), indent=2))
    else:
        _print_record(record, ledger)
    sys.exit(exit_code(record))


def _child(ledger: Path) -> Any:
    def find(run_id: str) -> RunRecord | None:
        try:
            return find_run(ledger, run_id)
        except ExecutorError:
            return None

    return find


def _print_record(record: RunRecord, ledger: Path) -> None:
    """The run's summary on stderr, its answer and diff on stdout. A record is read back
    from the state dir: every field is escaped, ours included."""
    echo(status_line(record), err=True)
    if record.fanout:
        echo(f"fanout: {one_line(record.fanout)} (`corral runs` shows its other children)",
             err=True)
    if record.error:
        render_error(record.error, exit_code=exit_code(record))
    for denied in record.denied_calls:
        echo(f"denied: {one_line(denied['tool'])}: {one_line(denied['reason'])}", err=True)
    for note in record.notes:
        echo(f"note: {one_line(note)}", err=True)
    for line in child_lines(record, _child(ledger)):
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
        echo(record.diff, nl=not record.diff.endswith("\n"))
    for line in outside_lines(record):
        echo(line, err=True)


def _fanout_header(fanout: FanoutRecord) -> str:
    check = f"  check `{one_line(fanout.check_command)}`" if fanout.check_command else ""
    return (f"fanout {one_line(fanout.fanout_id)}  {fanout_status(fanout):9} "
            f"{len(fanout.children)} child(ren){check}  {one_line(fanout.created_at[:19])}  "
            f'"{one_line(fanout.prompt)[:60]}"')


def _grouped(records: list[RunRecord], fanouts: list[FanoutRecord],
             ) -> list[tuple[FanoutRecord | None, list[tuple[int | None, RunRecord | str]]]]:
    """Newest first: a fanout with its children (by index; runs they delegated after
    them; a planned child without a record by its id), or one run on its own."""
    by_id = {r.run_id: r for r in records}
    grouped = {f.fanout_id for f in fanouts}
    entries: list[tuple[str, FanoutRecord | None, list[tuple[int | None, RunRecord | str]]]] = []
    for fanout in fanouts:
        members: list[tuple[int | None, RunRecord | str]] = [
            (child.index, by_id.get(child.run_id) or child.run_id) for child in fanout.children]
        planned = {child.run_id for child in fanout.children}
        members += [(None, r) for r in records if r.fanout == fanout.fanout_id
                    and r.run_id not in planned]
        entries.append((fanout.created_at, fanout, members))
    entries += [(r.started_at, None, [(None, r)]) for r in records
                if r.fanout not in grouped]
    entries.sort(key=lambda entry: entry[0], reverse=True)
    return [(fanout, members) for _, fanout, members in entries]


@cli.command("runs")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def runs_command(root: Path, as_json: bool) -> None:
    """List the recorded runs of the repository, newest first: running, crashed (the
    process died), completed..., and what became of each diff (pending, applied,
    discarded, already in the checkout); a fanout's children grouped under it."""
    ledger = ledger_dir(root)
    records, broken = scan_runs(ledger)
    fanouts, broken_fanouts = scan_fanouts(ledger)
    groups = _grouped(records, fanouts)
    if as_json:
        listed: list[dict[str, Any]] = []
        for fanout, members in groups:
            if fanout is not None:
                listed.append({"fanout_id": fanout.fanout_id, "status": fanout_status(fanout),
                               "prompt": fanout.prompt, "created_at": fanout.created_at,
                               "check_command": fanout.check_command,
                               "children": [c.run_id for c in fanout.children]})
            listed += [run_json(r) | {"started_at": r.started_at, "parent_run": r.parent_run,
                                      "fanout": r.fanout}
                       for _, r in members if isinstance(r, RunRecord)]
        click.echo(json.dumps(
            listed + [{"status": "corrupted", "error": exc.to_dict()}
                      for exc in [*broken, *broken_fanouts]], indent=2))
        return
    if not records and not broken and not fanouts and not broken_fanouts:
        echo("no runs recorded")
    for fanout, members in groups:
        if fanout is None:
            echo(runs_line(members[0][1]))  # type: ignore[arg-type]
            continue
        echo(_fanout_header(fanout))
        for index, member in members:
            mark = f"#{index:<2}" if index is not None else "   "
            if isinstance(member, str):
                echo(f"  {mark} {one_line(member)}  not started (no record)")
            else:
                echo(f"  {mark} {runs_line(member)}")
    for exc in [*broken, *broken_fanouts]:  # one unreadable record never hides the others
        render_error(exc.to_dict(), prefix="corrupted", exit_code=exc.exit_code)


@cli.command("show")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--full", is_flag=True, help="Print every tool result and message whole "
              "(by default each is cut after a few thousand characters, with a marker).")
@click.argument("run_id")
def show_command(root: Path, as_json: bool, full: bool, run_id: str) -> None:
    """Print a run's whole record: every tool call with its arguments, decision, result."""
    ledger = ledger_dir(root)
    record = find_run(ledger, run_id)
    transcript = load_transcript(ledger, record.run_id)
    if as_json:
        click.echo(json.dumps(record.model_dump(mode="json")
                              | {"status": run_status(record).value, "transcript": transcript},
                              indent=2))
        return
    _print_record(record, ledger)
    echo("")
    for line in [*check_lines(record), *show_lines(record, transcript, full=full)]:
        echo(line)


@cli.command("diff")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--escape", "force_escape", is_flag=True,
              help="Escape control characters even when stdout is not a terminal "
              "(for a pager such as `less -R`).")
@click.argument("run_id")
def diff_command(root: Path, force_escape: bool, run_id: str) -> None:
    """Print a run's unified diff: escaped on a terminal, the exact bytes through a pipe or
    into a file (merge it with `corral apply RUN`, which checks it). A run that changed
    nothing prints nothing (exit 0)."""
    ledger = ledger_dir(root)
    record = find_run(ledger, run_id)
    patch = load_patch(ledger, record.run_id)
    if not patch:
        echo(f"note: run {one_line(record.run_id)} ({run_status(record).value}) changed "
             "nothing: its diff is empty", err=True)
        return
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


@cli.command("discard")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.argument("run_id")
def discard_command(root: Path, run_id: str) -> None:
    """Mark a run's diff as discarded: it stays readable (show, diff) but is no longer
    pending in `corral runs`. Nothing in your checkout changes."""
    record, already = discard_run(ledger_dir(root), run_id)
    if already:
        echo(f"run {one_line(record.run_id)} was already discarded", err=True)
        return
    note = ("; its changes were made in your checkout (workspace-write) and stay there: "
            "`git restore` undoes them") if record.mode == "workspace-write" and record.diff \
        else ""
    echo(f"discarded run {one_line(record.run_id)} ({len(record.changed_files)} file(s)){note}",
         err=True)


@cli.command("gc")
@click.option("--older-than", "older_than", metavar="DURATION",
              help="Also remove what finished runs left (their captured diffs' working "
              "copies; never a diff no record holds), once finished longer ago than DURATION: "
              "30m, 12h, 7d, 2w, 1h30m; 0 for all.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gc_command(older_than: str | None, as_json: bool) -> None:
    """Clean sandboxes left behind by crashed runs; their diffs are saved first and handed
    to the runs' records, so `corral show/diff/apply RUN` work on them. Crashed fanouts
    are marked. Environments no run used for your config's environment.prune_after_days
    (default 14) are removed. With --older-than, also what finished runs left."""
    from executor.ledger import finalize_crashed_runs  # noqa: PLC0415 - needs sandbox.gc
    from sandbox.environment import prune_environments  # noqa: PLC0415
    from sandbox.gc import gc  # noqa: PLC0415 - keeps docker out of the other commands

    age = parse_duration(older_than) if older_than is not None else None
    state_root = default_state_root()
    check_state_dir(state_root)
    report = gc(state_root)
    crashed = finalize_crashed_runs(state_root)
    fanouts = finalize_crashed_fanouts(state_root)
    pruned = prune_finished(state_root, age) if age is not None else []
    environment = load_user_config().environment
    days = environment.prune_after_days if environment is not None else 14.0
    environments = prune_environments(state_root, older_than=days * 86400)
    if as_json:  # ASCII JSON: a directory name cannot put raw controls on a terminal
        click.echo(json.dumps(report.model_dump(mode="json") | {"runs": [
            {"run_id": c.record.run_id, "agent": c.record.agent, "status": "crashed",
             "ledger": str(c.ledger), "changed_files": len(c.record.changed_files),
             "patch_path": str(c.patch) if c.patch else None} for c in crashed],
            "fanouts": [{"fanout_id": f.fanout_id, "status": f.status} for f in fanouts],
            "pruned": [{"path": str(p.path), "action": p.action, "run_id": p.run_id,
                        "detail": p.detail} for p in pruned],
            "environments": [{"key": e.key, "repo": e.repo, "size_bytes": e.size_bytes}
                             for e in environments]}, indent=2))
        return
    for entry in report.entries:
        saved = f"  diff saved to {entry.patch_path}" if entry.patch_path else ""
        echo(f"{entry.action:14} {one_line(entry.sandbox_id)}  {one_line(entry.detail)}"
             f"{one_line(saved)}")
    for run in crashed:
        record = run.record
        todo = (f": `corral show {record.run_id}`, `corral apply {record.run_id}` (from its "
                "repository)" if record.diff else "")
        echo(f"{'run crashed':14} {one_line(record.run_id)}  agent {one_line(record.agent)}, "
             f"{len(record.changed_files)} file(s) in its record{one_line(todo)}")
    for fanout in fanouts:
        echo(f"{'fanout crashed':14} {one_line(fanout.fanout_id)}  {len(fanout.children)} "
             "child(ren); `corral runs` shows each one's state")
    for item in pruned:
        owner = f"run {one_line(item.run_id)}: " if item.run_id else ""
        echo(f"{item.action:14} {one_line(str(item.path))}  {owner}{one_line(item.detail)}")
    for env in environments:
        echo(f"{'env removed':14} {one_line(env.key)}  unused for over {days:g} day(s), "
             f"{one_line(env.repo)}")
    if not report.entries and not crashed and not fanouts and not pruned and not environments:
        echo("nothing to clean")
