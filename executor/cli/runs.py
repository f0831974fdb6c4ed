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

from executor.api import (
    Corral,
    Entry,
    FanoutRecord,
    RunResult,
    RunStatus,
    RunSummary,
    fanout_status,
)
from executor.api.results import entry_json
from executor.cli.app import render_error
from executor.cli.fanout_views import fanout_lines
from executor.cli.pager import show_patch
from executor.cli.run import print_record
from executor.cli.run_views import (
    RUNS_HEADER,
    age,
    check_lines,
    diff_state,
    hand_note,
    show_lines,
)
from executor.options import echo
from executor.text import one_line, printable_patch

__all__ = ["diff_command", "discard_command", "gc_command", "is_fanout_id", "runs_command",
           "show_command", "summary_line"]


def _fanout_header(fanout: FanoutRecord) -> str:
    check = f"  check `{one_line(fanout.check_command)}`" if fanout.check_command else ""
    return (f"fanout {one_line(fanout.fanout_id)}  {fanout_status(fanout):9} "
            f"{len(fanout.children)} child(ren){check}  {one_line(fanout.created_at[:19])}  "
            f'"{one_line(fanout.prompt)[:60]}"')


def is_fanout_id(value: str) -> bool:
    """Whether a RUN argument names a fanout (``f-...``): run ids start with a digit."""
    return value.startswith("f-")


def _fanout_diffs(corral: Corral, fanout_id: str, *, force_escape: bool, pager: bool) -> None:
    """Every child's diff of a fanout, one after another, each under a header naming the
    child, its run and its check; escaped and coloured on a terminal as a run's diff."""
    fanout = corral.show_fanout(fanout_id)
    parts: list[str] = []
    for child in fanout.children:
        if child.run is None or not child.run.diff:
            continue
        check = {True: "check passed", False: "check failed", None: "no check"}[
            child.check_passed]
        parts.append(f"# child #{child.index}: run {child.run_id}, {child.agent}, "
                     f"{child.status}, {check}\n")
        parts.append(printable_patch(corral.diff(child.run_id).patch)[0])
    if not parts:
        echo(f"note: no child of fanout {one_line(fanout.fanout_id)} changed anything",
             err=True)
        return
    text = "".join(part if part.endswith("\n") else part + "\n" for part in parts)
    if force_escape or sys.stdout.isatty():
        show_patch(text, pager=pager)
    else:
        click.echo(text, nl=False)


def _fanout_diffs_json(corral: Corral, fanout_id: str) -> dict[str, object]:
    """Every child's diff of a fanout as JSON, each with its index, agent and check."""
    fanout = corral.show_fanout(fanout_id)
    children = [{"index": child.index, "agent": child.agent, "check_passed": child.check_passed}
                | corral.diff(child.run_id).to_json()
                for child in fanout.children if child.run is not None]
    return {"fanout_id": fanout.fanout_id, "children": children}


@click.command("runs")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice([s.value for s in RunStatus]),
              help="Only runs that ended so (repeat for several).")
@click.option("--agent", help="Only runs of this agent.")
@click.option("--pending", is_flag=True, help="Only runs whose diff waits for apply or "
              "discard.")
@click.option("--since", metavar="WHEN", help="Only runs started since WHEN: a duration "
              "back from now (30m, 12h, 7d) or an ISO time (2026-12-01T09:30).")
@click.option("--fanout", "fanout_id", metavar="FANOUT", help="Only this fanout (an id "
              "or unique start of one) and its children.")
@click.option("-n", "--limit", type=click.IntRange(min=1),
              help="Only the newest N entries (a fanout counts as one).")
@click.option("--after", metavar="ID", help="The entries after this one (the id the "
              "previous page ended with: its `next page` note says it).")
def runs_command(root: Path, as_json: bool, statuses: tuple[str, ...], agent: str | None,
                 pending: bool, since: str | None, fanout_id: str | None,
                 limit: int | None, after: str | None) -> None:
    """List the recorded runs of the repository, newest first: running, crashed (the
    process died), completed..., what became of each diff (pending, applied, discarded,
    superseded, already in the checkout), how long ago it started and its prompt; a fanout's
    children grouped under it. Read from the ledger's index, printed as it is read."""
    corral = Corral(root)
    entries = corral.iter_runs(status=statuses, agent=agent, pending=pending, since=since,
                               fanout=fanout_id, after=after)
    filtering = bool(statuses or agent or pending or since or fanout_id or after)
    shown, items, last, more = 0, 0, "", False
    for entry in entries:
        if limit is not None and shown == limit:
            more = True
            break
        if as_json:  # streamed too: one array, an object at a time
            for item in entry_json(entry):
                click.echo(("[\n" if items == 0 else ",\n") + _indented(item), nl=False)
                items += 1
        else:
            if shown == 0:
                echo(RUNS_HEADER)
            _entry_lines(entry)
        shown, last = shown + 1, entry.id
    broken = () if after else corral.runs(limit=0).broken
    if as_json:
        for exc in broken:
            click.echo(("[\n" if items == 0 else ",\n") + _indented(
                {"status": "corrupted", "error": exc.to_dict()}), nl=False)
            items += 1
        click.echo("\n]" if items else "[]")
    elif shown == 0:
        echo("no runs match" if filtering or broken else "no runs recorded")
    for exc in () if as_json else broken:  # one unreadable record never hides the others
        render_error(exc.to_dict(), prefix="corrupted", exit_code=exc.exit_code)
    if more:
        echo(f"note: more entries: the next page is `corral runs -n {limit} --after "
             f"{one_line(last)}`", err=True)


def _indented(item: dict[str, object]) -> str:
    return "\n".join("  " + line for line in json.dumps(item, indent=2).splitlines())


def _entry_lines(entry: Entry) -> None:
    fanout = entry.fanout
    if fanout is None:
        member = entry.members[0][1]
        if isinstance(member, RunSummary):
            echo(summary_line(member))
        return
    echo(_fanout_header(fanout))
    for index, member in entry.members:
        mark = f"#{index:<2}" if index is not None else "   "
        if isinstance(member, str):
            echo(f"  {mark} {one_line(member)}  not started (no record)")
        else:
            echo(f"  {mark} {summary_line(member)}")


def summary_line(run: RunSummary) -> str:
    """One line of ``corral runs`` (columns: :data:`RUNS_HEADER`), from the run's index
    row: what ``runs_line`` prints from a whole record."""
    status = run.live_status()
    parent = f" (child of {one_line(run.parent_run)})" if run.parent_run else ""
    prompt = one_line(run.prompt)
    prompt = f'"{prompt[:48]}..."' if len(prompt) > 48 else f'"{prompt}"'
    return (f"{one_line(run.run_id)}  {status.value:9} {one_line(run.diff_state(status)):11} "
            f"{age(run.started_at):>4}  {one_line(run.agent):20} "
            f"{one_line(run.mode):15} {run.files:3} file(s)  {prompt}{parent}")


@click.command("show")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--full", is_flag=True, help="Print every tool result and message whole "
              "(by default each is cut after a few thousand characters, with a marker).")
@click.argument("run_id")
def show_command(root: Path, as_json: bool, full: bool, run_id: str) -> None:
    """Print a run's whole record: every tool call with its arguments, decision, result.
    A fanout id (f-...) prints the fanout's comparison: one row per child, the
    conflicts, what to do next. A run still going (or whose process died) shows the calls
    and messages so far, from its journal (`corral logs RUN -f` follows it)."""
    corral = Corral(root)
    if is_fanout_id(run_id):
        fanout = corral.show_fanout(run_id)
        if as_json:
            click.echo(json.dumps(fanout.to_json(), indent=2))
            return
        for line in fanout_lines(fanout):
            echo(line)
        return
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
@click.option("--no-pager", is_flag=True, help="Print on a terminal without the pager "
              "($PAGER, else less).")
@click.option("--pick", "pick", type=click.IntRange(min=1), metavar="N",
              help="With a fanout id: the diff of child N only.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the diff as text, "
              "with diff_base64 when it is not UTF-8.")
@click.argument("run_id")
def diff_command(root: Path, force_escape: bool, no_pager: bool, pick: int | None,
                 as_json: bool, run_id: str) -> None:
    """Print a run's unified diff: escaped on a terminal, the exact bytes through a pipe or
    into a file (merge it with `corral apply RUN`, which checks it). A run that changed
    nothing prints nothing (exit 0). A fanout id prints each child's diff under a header
    (`--pick N`: child N's alone, exactly as for its run id)."""
    corral = Corral(root)
    if is_fanout_id(run_id) and pick is None:
        if as_json:
            click.echo(json.dumps(_fanout_diffs_json(corral, run_id), indent=2))
            return
        _fanout_diffs(corral, run_id, force_escape=force_escape, pager=not no_pager)
        return
    picked: dict[str, object] = {}
    if pick is not None:
        if not is_fanout_id(run_id):
            raise click.UsageError("--pick takes a fanout id (f-...)")
        picked = {"fanout_id": run_id, "pick": pick}
        run_id = corral.pick(run_id, pick)
    found = corral.diff(run_id)
    if as_json:  # ASCII JSON: a diff's control characters arrive escaped
        click.echo(json.dumps(picked | found.to_json(), indent=2))
        return
    patch, run_id = found.patch, found.run.run_id
    if found.run.record.hand_changes:  # stderr: stdout stays the exact bytes
        echo(f"note: {hand_note(found.run.record)}", err=True)
    if not patch:
        echo(f"note: run {one_line(run_id)} ({found.run.status.value}) changed "
             "nothing: its diff is empty", err=True)
        return
    if force_escape or sys.stdout.isatty():
        text, escaped = printable_patch(patch)
        show_patch(text, pager=not no_pager)
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.argument("run_id")
def discard_command(root: Path, as_json: bool, run_id: str) -> None:
    """Mark a run's diff as discarded: it stays readable (show, diff) but is no longer
    pending in `corral runs`. Nothing in your checkout changes. A fanout id discards
    every child's diff still pending."""
    corral = Corral(root)
    if is_fanout_id(run_id):
        fanout = corral.show_fanout(run_id)
        pending = [c.run_id for c in fanout.children
                   if c.run is not None and diff_state(c.run.record) == "pending"]
        for child in pending:
            corral.discard(child)
        if as_json:
            click.echo(json.dumps({"fanout_id": fanout.fanout_id, "discarded": pending},
                                  indent=2))
            return
        echo(f"discarded {len(pending)} pending diff(s) of fanout "
             f"{one_line(fanout.fanout_id)}", err=True)
        return
    done = corral.discard(run_id)
    if as_json:
        click.echo(json.dumps(done.to_json(), indent=2))
        return
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
              "copies, never a diff no record holds; shared snapshots idle for longer), once "
              "finished longer ago than DURATION: 30m, 12h, 7d, 2w, 1h30m; 0 for all.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gc_command(older_than: str | None, as_json: bool) -> None:
    """Clean sandboxes left behind by crashed runs; their diffs are saved first and handed
    to the runs' records, so `corral show/diff/apply RUN` work on them. Crashed fanouts
    are marked. Environments no run used for your config's environment.prune_after_days
    (default 14), and shared snapshots of your checkout no run used for
    snapshots.prune_after_hours (default 24), are removed. With --older-than, also what
    finished runs left."""
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
