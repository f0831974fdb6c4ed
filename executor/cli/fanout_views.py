"""A fanout as text: ``corral fanout``'s table, its conflicts, and what to do next.

Every value shown is escaped (:func:`one_line`): agent names, run ids, check
commands, errors and file names are a child's, a definition's or the user's.
"""

from __future__ import annotations

from executor.api import FanoutResult, RunRecord, check_verdict
from executor.cli.run_views import human_seconds
from executor.text import one_line

__all__ = ["fanout_lines"]


def _check_cell(run: RunRecord) -> str:
    check = run.check
    if not check:
        return "-"
    verdict = check_verdict(check)
    if check.get("oom_killed"):  # the sandbox's memory cap, not a failed test
        return "out of memory"
    if verdict in ("skipped", "error"):
        return verdict
    took = human_seconds(float(check.get("duration_seconds", 0.0)))
    if check.get("timed_out"):
        return f"timed out {took}"
    code = check.get("exit_code")
    return f"{'passed' if code == 0 else f'failed ({code})'} {took}"



def fanout_lines(result: FanoutResult) -> list[str]:
    """The result table, the conflicts, and what to do next (escaped, one line each)."""
    record = result.record
    found = result.children
    short = {child.run_id: f"#{child.index}" for child in found}
    check = f", check `{one_line(record.check_command)}`" if record.check_command else ""
    lines = [f"fanout {one_line(record.fanout_id)}: {len(found)} child(ren), "
             f"{result.status}{check}",
             f"  {'#':>2}  {'run':22}  {'agent':16}  {'status':12}  {'files':>5}  {'+/-':>11}  "
             f"{'check':18}  {'steps':>5}  {'tokens':>8}"]
    for child in found:
        if child.run is None:
            lines.append(f"  {child.index:>2}  {one_line(child.run_id):22}  "
                         f"{one_line(child.agent):16}  not started")
            continue
        run = child.run.record
        files = len([c for c in run.changed_files if c.get("in_patch", True)])
        tokens = run.usage.get("input_tokens", 0) + run.usage.get("output_tokens", 0)
        lines.append(f"  {child.index:>2}  {one_line(run.run_id):22}  "
                     f"{one_line(run.agent):16}  {child.run.status.value:12}  {files:>5}  "
                     f"{f'+{child.lines_added} -{child.lines_removed}':>11}  "
                     f"{_check_cell(run):18}  "
                     f"{run.steps:>5}  {tokens:>8,}")
        if run.state != "pending":
            by = (f" by {short.get(run.superseded_by, one_line(run.superseded_by))} (applied)"
                  if run.state == "superseded" and run.superseded_by else "")
            lines.append(f"        {run.state}{by}")
        if run.error and run.error.get("message"):
            lines.append(f"        {one_line(str(run.error['message']))[:200]}")
        ran = run.check or {}
        if ran.get("error"):
            lines.append(f"        check error: {one_line(str(ran['error'].get('message')))}")
        elif ran.get("skipped"):
            lines.append(f"        check skipped: {one_line(str(ran['skipped']))}")
    checks = [c.run.record.check or {} for c in found if c.run is not None]
    hints = dict.fromkeys(str(check["hint"]) for check in checks if check.get("hint"))
    lines += [f"check hint: {one_line(hint)}" for hint in hints]  # once, not per child
    for a, b, pair in result.pairs():
        if pair.conflicts:
            why = "; ".join(f"{path} ({reason})" for path, reason in pair.conflicts.items())
            merge = (" (or apply the second with `corral apply --3way` and resolve the "
                     "marked conflicts)" if all(r.startswith("both change lines")
                                               for r in pair.conflicts.values()) else "")
            lines.append(f"conflict: {short.get(a, a)} and {short.get(b, b)}: "
                         f"{one_line(why)}: apply one of them{merge}")
        elif pair.same_files:
            lines.append(f"same files: {short.get(a, a)} and {short.get(b, b)} change "
                         f"{one_line(', '.join(pair.same_files))} in different places: both "
                         "apply, one after the other (`corral apply --3way` merges the second "
                         "where a plain apply finds its context changed)")
    lines += [f"note: {one_line(note)}" for note in record.notes]
    return lines + _next(result)


def _next(result: FanoutResult) -> list[str]:
    """The last line: the exact ``corral apply`` command for what the fanout recommends
    (:meth:`FanoutResult.next_command`), or nothing when no candidate can be applied."""
    command = result.next_command
    fanout_id = one_line(result.fanout_id)
    if command is None:
        applied = [f"#{c.index} (run {one_line(c.run_id)})" for c in result.children
                   if c.state == "applied"]
        return [f"applied: {', '.join(applied)}; nothing else is left to apply"] if applied \
            else []
    if command.endswith("--pick best"):
        best = result.best()
        return [f"apply the best, #{best.index} (the first whose check passed and whose diff "
                f"conflicts with nothing applied): {one_line(command)}"]
    if result.record.check_command:
        return [f"no candidate passed its check and conflicts with nothing applied "
                f"(`corral show {fanout_id}` says why); to apply one anyway: "
                f"{one_line(command)}"]
    if command.endswith("--pick N"):
        return [f"apply the one you choose (diffs: corral diff {fanout_id}): "
                f"{one_line(command)}"]
    return [f"apply it: {one_line(command)}"]


