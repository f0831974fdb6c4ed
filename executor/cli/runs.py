"""``corral runs``, ``show``, ``diff``, ``discard`` and ``gc``: reading and tidying the ledger.

``runs`` groups a fanout's children under it (:meth:`executor.api.RunList.groups`);
``gc --older-than`` also removes what finished runs left
(:meth:`executor.api.Corral.gc`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from executor.api import Corral, FanoutRecord, RunResult, fanout_status
from executor.cli.app import render_error
from executor.cli.run import print_record
from executor.cli.run_views import check_lines, runs_line, show_lines
from executor.options import echo
from executor.text import one_line, printable_patch

__all__ = ["diff_command", "discard_command", "gc_command", "runs_command", "show_command"]


def _fanout_header(fanout: FanoutRecord) -> str:
    check = f"  check `{one_line(fanout.check_command)}`" if fanout.check_command else ""
    return (f"fanout {one_line(fanout.fanout_id)}  {fanout_status(fanout):9} "
            f"{len(fanout.children)} child(ren){check}  {one_line(fanout.created_at[:19])}  "
            f'"{one_line(fanout.prompt)[:60]}"')


@click.command("runs")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def runs_command(root: Path, as_json: bool) -> None:
    """List the recorded runs of the repository, newest first: running, crashed (the
    process died), completed..., and what became of each diff (pending, applied,
    discarded, already in the checkout); a fanout's children grouped under it."""
    found = Corral(root).runs()
    if as_json:
        click.echo(json.dumps(found.to_json(), indent=2))
        return
    if not found.runs and not found.fanouts and not found.broken:
        echo("no runs recorded")
    for fanout, members in found.groups():
        if fanout is None:
            echo(runs_line(members[0][1].record))  # type: ignore[union-attr]
            continue
        echo(_fanout_header(fanout))
        for index, member in members:
            mark = f"#{index:<2}" if index is not None else "   "
            if isinstance(member, str):
                echo(f"  {mark} {one_line(member)}  not started (no record)")
            else:
                echo(f"  {mark} {runs_line(member.record)}")
    for exc in found.broken:  # one unreadable record never hides the others
        render_error(exc.to_dict(), prefix="corrupted", exit_code=exc.exit_code)


@click.command("show")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--full", is_flag=True, help="Print every tool result and message whole "
              "(by default each is cut after a few thousand characters, with a marker).")
@click.argument("run_id")
def show_command(root: Path, as_json: bool, full: bool, run_id: str) -> None:
    """Print a run's whole record: every tool call with its arguments, decision, result."""
    corral = Corral(root)
    run: RunResult = corral.show(run_id)
    transcript = corral.transcript(run.run_id)
    if as_json:
        click.echo(json.dumps(run.record_json() | {"transcript": transcript}, indent=2))
        return
    print_record(run, corral.show)
    echo("")
    for line in [*check_lines(run.record), *show_lines(run.record, transcript, full=full)]:
        echo(line)


@click.command("diff")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--escape", "force_escape", is_flag=True,
              help="Escape control characters even when stdout is not a terminal "
              "(for a pager such as `less -R`).")
@click.argument("run_id")
def diff_command(root: Path, force_escape: bool, run_id: str) -> None:
    """Print a run's unified diff: escaped on a terminal, the exact bytes through a pipe or
    into a file (merge it with `corral apply RUN`, which checks it). A run that changed
    nothing prints nothing (exit 0)."""
    found = Corral(root).diff(run_id)
    patch, run_id = found.patch, found.run.run_id
    if not patch:
        echo(f"note: run {one_line(run_id)} ({found.run.status.value}) changed "
             "nothing: its diff is empty", err=True)
        return
    if force_escape or sys.stdout.isatty():
        text, escaped = printable_patch(patch)
        click.echo(text, nl=not text.endswith("\n"))
        if escaped:
            echo(f"note: {escaped} control or invisible character(s) of this diff are shown "
                 "as escapes (\\x1b, \\u202e, ...); through a pipe or into a file, "
                 f"`corral diff {one_line(run_id)}` writes the exact bytes", err=True)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(patch)
    sys.stdout.buffer.flush()


@click.command("discard")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.argument("run_id")
def discard_command(root: Path, run_id: str) -> None:
    """Mark a run's diff as discarded: it stays readable (show, diff) but is no longer
    pending in `corral runs`. Nothing in your checkout changes."""
    done = Corral(root).discard(run_id)
    record = done.run.record
    if done.already:
        echo(f"run {one_line(record.run_id)} was already discarded", err=True)
        return
    note = ("; its changes were made in your checkout (workspace-write) and stay there: "
            "`git restore` undoes them") if record.mode == "workspace-write" and record.diff \
        else ""
    echo(f"discarded run {one_line(record.run_id)} ({len(record.changed_files)} file(s)){note}",
         err=True)


@click.command("gc")
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
    report = Corral().gc(older_than)
    if as_json:  # ASCII JSON: a directory name cannot put raw controls on a terminal
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    for entry in report.sandboxes.entries:
        saved = f"  diff saved to {entry.patch_path}" if entry.patch_path else ""
        echo(f"{entry.action:14} {one_line(entry.sandbox_id)}  {one_line(entry.detail)}"
             f"{one_line(saved)}")
    for run in report.crashed:
        record = run.record
        todo = (f": `corral show {record.run_id}`, `corral apply {record.run_id}` (from its "
                "repository)" if record.diff else "")
        echo(f"{'run crashed':14} {one_line(record.run_id)}  agent {one_line(record.agent)}, "
             f"{len(record.changed_files)} file(s) in its record{one_line(todo)}")
    for fanout in report.fanouts:
        echo(f"{'fanout crashed':14} {one_line(fanout.fanout_id)}  {len(fanout.children)} "
             "child(ren); `corral runs` shows each one's state")
    for item in report.pruned:
        owner = f"run {one_line(item.run_id)}: " if item.run_id else ""
        echo(f"{item.action:14} {one_line(str(item.path))}  {owner}{one_line(item.detail)}")
    for env in report.environments:
        echo(f"{'env removed':14} {one_line(env.key)}  unused for over "
             f"{report.environment_days:g} day(s), {one_line(env.repo)}")
    if report.empty:
        echo("nothing to clean")
