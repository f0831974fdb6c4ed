"""``corral apply``: merge a recorded run's diff into the checkout (``Corral.apply``).

Exit codes: 0 applied (or would apply, or was already applied), 1 a
three-way merge left conflict markers (listed), 2 a user error, 3 a step
failed and the checkout was restored (or could not be: the backup is named),
4 a refusal (an unsafe patch, a conflict with the checkout, a record that
does not verify, flagged files without ``--yes``, ``--pick best`` with no
candidate that passed its check and conflicts with nothing applied). ``--json`` prints
:meth:`ApplyReport.to_json` (or the branch's, the recovery's) on stdout, with ``fanout_id``
and ``pick`` for a fanout's child; the exit codes stay.

With a fanout id, ``--pick N`` applies child N, ``--pick best`` the first child whose
check passed and whose diff conflicts with nothing already applied
(:mod:`executor.fanout.choice`). Once a fanout's child is applied, its siblings whose
diffs conflict with it are marked ``superseded`` (listed on stderr).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from executor.api import ApplyReport, Corral, PatchPlan, RunRecord
from executor.text import one_line

__all__ = ["apply_command"]


class PickType(click.ParamType["int | str", object]):
    """``--pick``: a child's number (from 1), or ``best``."""

    name = "N|best"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> int | str:
        text = str(value).strip()
        if text == "best":
            return text
        if not text.isdigit() or int(text) < 1:
            self.fail(f"{value!r} is neither a child's number (1, 2, ...) nor 'best'", param,
                      ctx)
        return int(text)


def _show(record: RunRecord, plan: PatchPlan) -> None:
    if record.continued_by:
        click.echo(f"warning: run {record.run_id} was continued by run {record.continued_by}, "
                   "whose diff holds this one's changes: apply that one, not both", err=True)
    elif record.state == "discarded":
        click.echo(f"note: run {record.run_id} was discarded; applying it as you asked", err=True)
    elif record.state == "superseded":
        click.echo(f"note: run {record.run_id} was superseded by run {record.superseded_by} "
                   "(applied), whose diff conflicts with it; applying it as you asked", err=True)
    click.echo(f"run {record.run_id}: {len(plan.files)} file(s)", err=True)
    for item in plan.files:
        flags = f"  [{', '.join(item.flags)}]" if item.flags else ""
        origin = f" (from {item.old_path})" if item.old_path else ""
        click.echo(one_line(f"  {item.status:9} {item.path}{origin}{flags}"), err=True)


def _superseded(report: ApplyReport) -> None:
    for sibling in report.superseded:
        click.echo(one_line(f"superseded: run {sibling.run_id} (its diff conflicts with "
                            "this one's)"), err=True)


def _confirm(plan: PatchPlan) -> bool:
    return sys.stdin.isatty() and click.confirm(
        f"merge the {len(plan.flagged)} flagged file(s)?", err=True)


@click.command("apply")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--check", "check_only", is_flag=True,
              help="Run every check, including against the checkout; change nothing.")
@click.option("--3way", "three_way", is_flag=True,
              help="Merge files you changed since the child's snapshot three ways; "
              "conflicts are left marked in the files and listed.")
@click.option("--yes", is_flag=True, help="Merge even when files are flagged for review.")
@click.option("--allow-symlinks", is_flag=True, help="Merge symlinks the child created.")
@click.option("--allow-binary", is_flag=True, help="Merge binary changes.")
@click.option("--allow-git-dirs", is_flag=True,
              help="Merge files that make a directory a git directory, or 'gitdir:' pointers.")
@click.option("--allow-unverified", is_flag=True,
              help="Apply a record written before corral kept diff digests.")
@click.option("--recover", is_flag=True,
              help="Put back the files an interrupted apply of RUN saved.")
@click.option("--branch", "branch", metavar="NAME",
              help="Commit the diff on a new branch NAME from HEAD instead; the working "
              "tree and index are not touched.")
@click.option("--pick", "pick", type=PickType(), metavar="N|best",
              help="With a fanout id: apply child N's diff; 'best': the first child whose "
              "check passed and whose diff conflicts with nothing already applied.")
@click.option("--json", "as_json", is_flag=True,
              help="Print what was checked, applied, branched or recovered as JSON.")
@click.argument("run_id")
def apply_command(root: Path, check_only: bool, three_way: bool, yes: bool,
                  allow_symlinks: bool, allow_binary: bool, allow_git_dirs: bool,
                  allow_unverified: bool, recover: bool, branch: str | None,
                  pick: int | str | None, as_json: bool, run_id: str) -> None:
    """Validate a run's diff and merge it into the checkout, all or nothing. With a
    fanout id, `--pick N` names the child whose diff to apply, `--pick best` the first
    whose check passed and whose diff conflicts with nothing already applied."""
    picked: dict[str, object] = {}

    def emit(data: dict[str, object]) -> None:
        click.echo(json.dumps(picked | data, indent=2))

    corral = Corral(root)
    corral.ledger()  # refuses a state dir a child could write, before anything
    if run_id.startswith("f-"):
        if pick is None:
            raise click.UsageError(f"{run_id} is a fanout: say which child's diff to apply "
                                   f"with --pick N or --pick best (`corral show {run_id}` "
                                   "lists them)")
        fanout_id = run_id
        run_id = corral.pick(fanout_id, pick)
        picked = {"fanout_id": fanout_id, "pick": pick}
        if pick == "best" and not as_json:
            index = next(c.index for c in corral.show_fanout(fanout_id).children
                         if c.run_id == run_id)
            click.echo(one_line(f"best of fanout {fanout_id}: #{index} (run {run_id}), the "
                                "first whose check passed and whose diff conflicts with "
                                "nothing applied"), err=True)
    elif pick is not None:
        raise click.UsageError("--pick takes a fanout id (f-...)")
    if branch is not None:
        if check_only or three_way or recover:
            raise click.UsageError("--branch takes no --check, --3way or --recover")
        made = corral.branch(run_id, branch, allow_symlinks=allow_symlinks,
                             allow_binary=allow_binary, allow_git_dirs=allow_git_dirs,
                             allow_unverified=allow_unverified)
        if as_json:
            emit(made.to_json())
            return
        _show(made.run.record, made.plan)
        flagged = (f"; {len(made.plan.flagged)} file(s) flagged for review: read them before "
                   "you merge it" if made.plan.flagged else "")
        click.echo(one_line(f"made branch {made.branch} ({made.commit[:12]}, from HEAD "
                            f"{made.result.parent[:12]}) with run {made.run.run_id}'s "
                            f"{len(made.plan.files)} file(s){flagged}; your working tree "
                            "and index are unchanged"), err=True)
        return
    if recover:
        if check_only or three_way or allow_symlinks or allow_binary or allow_git_dirs:
            raise click.UsageError("--recover takes no other option")
        recovered = corral.recover(run_id)
        if as_json:
            emit(recovered.to_json())
            return
        click.echo(f"restored the files run {recovered.run.run_id}'s interrupted apply saved "
                   f"({recovered.restored}); what those paths held just before is in "
                   f"{recovered.saved}", err=True)
        return
    report = corral.apply(run_id, check_only=check_only, three_way=three_way, yes=yes,
                          allow_symlinks=allow_symlinks, allow_binary=allow_binary,
                          allow_git_dirs=allow_git_dirs, allow_unverified=allow_unverified,
                          confirm=_confirm, on_plan=None if as_json else _show)
    record, plan, result = report.run.record, report.plan, report.result
    if as_json:  # the same exit codes: 1 when conflict markers were left
        emit(report.to_json())
        if result.status == "conflicts":
            sys.exit(1)
        return
    _superseded(report)
    if result.status == "already_applied":
        click.echo(f"run {record.run_id} is already applied: every file it changes already "
                   "has the child's version; nothing to do", err=True)
        return
    if result.merged:
        verb = "would merge" if check_only else "merged"
        click.echo(one_line(f"{verb} three ways: {', '.join(result.merged)}"), err=True)
    if result.status == "checked":
        review = (f"; {len(plan.flagged)} flagged file(s) need --yes"
                  if plan.flagged and not yes else "")
        click.echo(f"would apply {len(plan.files)} file(s) from run {record.run_id}{review}",
                   err=True)
        return
    if result.backup is not None:
        click.echo(f"backup of the previous versions: {result.backup}", err=True)
    if result.status == "conflicts":
        click.echo(one_line(f"applied run {record.run_id} with conflicts in "
                             f"{len(result.conflicts)} file(s): {', '.join(result.conflicts)}"),
                   err=True)
        click.echo("resolve the conflict markers (<<<<<<< ours / >>>>>>> theirs) in those "
                   "files", err=True)
        sys.exit(1)
    click.echo(f"applied {len(plan.files)} file(s) from run {record.run_id}", err=True)
