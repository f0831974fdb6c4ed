"""How a run record reads on a terminal (``corral run``, ``show``, ``runs``).

Rendering only: every function returns text, the CLI prints it. A record is
read back from the state dir, so every value in it is escaped (:func:`one_line`,
:func:`printable`), ours included. Sizes and durations are in human units
(``48.0 MiB``, ``2.4 s``), never Python reprs. ``show`` prints every tool result
and message in full up to a limit per item, and past it a marker that says how
many bytes were left out and how to get them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from executor.api import RunRecord, RunStatus, run_status
from executor.text import one_line, printable

__all__ = [
    "ITEM_LIMIT",
    "RUNS_HEADER",
    "age",
    "check_lines",
    "child_lines",
    "diff_banner",
    "diff_state",
    "discarded_lines",
    "hand_note",
    "held_lines",
    "human_bytes",
    "human_seconds",
    "lineage_lines",
    "outside_lines",
    "runs_line",
    "show_lines",
    "status_line",
    "summary_lines",
]

#: Characters of one tool result or message ``show`` prints before its marker.
ITEM_LIMIT = 4000


def human_bytes(count: float) -> str:
    """``48.0 MiB``: binary units, one decimal past bytes."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def human_seconds(seconds: float) -> str:
    """``0.42 s``, ``12.3 s``, ``2 min 05 s``."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def status_line(record: RunRecord) -> str:
    """``run ID: agent NAME completed (host backend, worktree mode, 3 step(s))``."""
    status = run_status(record).value
    state = f", {record.state}" if record.state != "pending" else ""
    oom = ", a command ran out of memory" if record.oom_killed else ""
    return (f"run {one_line(record.run_id)}: agent {one_line(record.agent)} {status}{state} "
            f"({one_line(record.backend)} backend, {one_line(record.mode)} mode, "
            f"{record.steps} step(s){oom})")


def diff_banner(record: RunRecord) -> str:
    """What the diff is and what to do with it, for the run's mode and state."""
    in_patch = [c for c in record.changed_files if c.get("in_patch", True)]
    files = f"{len(in_patch)} file(s) changed"
    run_id = one_line(record.run_id)
    if record.mode == "workspace-write":
        return (f"--- diff: {files}, already in your checkout (workspace-write mode): "
                "`git diff` shows them, `git restore` undoes them ---")
    if record.state == "applied":
        return f"--- diff: {files}, applied to your checkout ---"
    if record.continued_by:
        return (f"--- diff: {files}, continued by run {one_line(record.continued_by)}, whose "
                "diff holds it ---")
    if record.state == "discarded":
        return f"--- diff: {files}, discarded (your checkout was not changed) ---"
    if record.state == "superseded":
        return (f"--- diff: {files}, superseded by run {one_line(record.superseded_by or '?')} "
                f"(applied), whose diff conflicts with it (`corral apply {run_id}` still "
                "tries, as you ask) ---")
    return f"--- diff: {files} (`corral apply {run_id}` merges it into your checkout) ---"


def lineage_lines(record: RunRecord) -> list[str]:
    """Which run this one continues or was continued by, and which files were changed by
    hand (``corral shell``), one escaped line each."""
    lines = []
    if record.continues:
        lines.append(f"continues: run {one_line(record.continues)} (its changes are in this "
                     "run's diff)")
    if record.continued_by:
        lines.append(f"continued by: run {one_line(record.continued_by)} (its diff holds "
                     "this run's changes: apply that one)")
    note = hand_note(record)
    if note:
        lines.append(note)
    return lines


def hand_note(record: RunRecord) -> str:
    """``changed by hand (corral shell): PATH, ...``, or nothing; every path escaped."""
    if not record.hand_changes:
        return ""
    return ("changed by hand (corral shell): "
            + ", ".join(one_line(path) for path in record.hand_changes))


def outside_lines(record: RunRecord) -> list[str]:
    """Changes the child made that no diff can show (workspace-write: ignored files, nested
    repositories, special files, permission bits), one escaped line each."""
    outside = [c for c in record.changed_files if not c.get("in_patch", True)]
    if not outside:
        return []
    lines = [f"--- changed outside the diff: {len(outside)} path(s), already in your checkout "
             "(no diff can carry them) ---"]
    for change in outside:
        flags = ", ".join(change.get("flags") or ())
        detail = f": {change['detail']}" if change.get("detail") else ""
        lines.append(one_line(f"  {change['status']:12} {change['path']}"
                              f"{f'  [{flags}]' if flags else ''}{detail}"))
    return lines


def discarded_lines(record: RunRecord) -> list[str]:
    """What a read-only run's commands wrote into their throwaway layer, all dropped."""
    found = record.discarded_writes
    if found is None:
        return []
    return [f"discarded: {found.get('files', 0)} file(s), {human_bytes(found.get('bytes', 0))} "
            "its commands wrote in their throwaway layer (read-only: your checkout was not "
            "changed)"]


def held_lines(record: RunRecord) -> list[str]:
    """Agent and editor configuration the child created that corral moved out of the
    checkout (workspace-write), with where it is now; every path escaped."""
    if not record.held_files:
        return []
    return [one_line(f"--- held out of your checkout: {len(record.held_files)} path(s) of "
                     "agent or editor configuration a workspace-write child may not write, "
                     f"kept in {record.held_dir} ---"),
            *(one_line(f"  {path}") for path in record.held_files),
            "  (copy what you want back by hand; run the agent in worktree mode to get it "
            "as a reviewed diff)"]


def child_lines(record: RunRecord, child: Callable[[str], RunRecord | None]) -> list[str]:
    """The runs a delegating run started, each with its own diff to apply."""
    if not record.children:
        return []
    lines = ["child runs (each has its own record and diff; a child's diff is not in its "
             "parent's and is merged only by its own `corral apply`):"]
    for child_id in record.children:
        found = child(child_id)
        if found is None:
            lines.append(f"  {one_line(child_id)}  (no record)")
            continue
        todo = ""
        if found.diff and found.mode != "workspace-write" and found.state == "pending":
            todo = f"  corral apply {one_line(found.run_id)}"
        lines.append(f"  {one_line(found.run_id)}  {run_status(found).value:9} "
                     f"{one_line(found.agent)}  {len(found.changed_files)} file(s){todo}")
    return lines


def summary_lines(record: RunRecord) -> list[str]:
    """Usage, timings and resources in human units (empty parts left out)."""
    usage = record.usage
    cached = usage.get("cached_tokens", 0) if usage else 0
    tokens = (f"{usage.get('input_tokens', 0):,} input"
              + (f" ({cached:,} cached)" if cached else "")
              + f" + {usage.get('output_tokens', 0):,} output tokens in "
              f"{usage.get('requests', 0)} request(s)") if usage else "none"
    timings = record.timings
    spent = "-"
    if timings:
        spent = human_seconds(timings.get("duration_seconds", 0.0))
        parts = [f"model {human_seconds(timings['model_seconds'])}"
                 if "model_seconds" in timings else "",
                 f"tools {human_seconds(timings['tool_seconds'])}"
                 if "tool_seconds" in timings else ""]
        if any(parts):
            spent += " (" + ", ".join(p for p in parts if p) + ")"
    resources = record.resources
    used = [f"{int(resources['commands'])} command(s)" if "commands" in resources else "",
            f"peak RSS {human_bytes(resources['peak_rss_bytes'])}"
            if "peak_rss_bytes" in resources else "",
            f"CPU {human_seconds(resources['cpu_seconds'])}" if "cpu_seconds" in resources
            else ""]
    return [f"usage:     {tokens}", f"time:      {spent}",
            f"resources: {', '.join(u for u in used if u) or 'no commands ran'}"]


def _full(text: str, run_id: str, indent: str, *, limit: int | None) -> list[str]:
    """``text`` indented, escaped, cut at ``limit`` characters with a marker saying how
    many bytes are left and how to see them."""
    shown = text if limit is None or len(text) <= limit else text[:limit]
    lines = [indent + line for line in printable(shown).split("\n")]
    if shown is not text:
        rest = len(text[limit:].encode("utf-8", "surrogatepass"))
        lines.append(f"{indent}[truncated {rest} bytes: `corral show {one_line(run_id)} --full` "
                     f"prints everything, `corral show {one_line(run_id)} --json` has it as "
                     "data]")
    return lines


def show_lines(record: RunRecord, transcript: list[dict[str, Any]], *,
               full: bool = False) -> list[str]:
    """``corral show`` after the run's summary: the contract, usage, changed files,
    every tool call (arguments, decision, result) and the transcript."""
    limit = None if full else ITEM_LIMIT
    lines = [f"prompt:    {one_line(record.prompt)}", f"model:     {one_line(str(record.model))}",
             f"contract:  {one_line(record.agent_source)} ({one_line(record.agent_format)}, "
             f"{one_line(record.contract_digest[:12])})",
             f"started:   {one_line(record.started_at)}"
             + (f", finished {one_line(record.finished_at)}" if record.finished_at else ""),
             *summary_lines(record)]
    if record.state != "pending":
        lines.append(f"state:     {record.state} {one_line(record.state_changed_at)}")
    if record.state == "superseded" and record.superseded_by:
        lines.append(f"           superseded by run {one_line(record.superseded_by)} "
                     "(applied), whose diff conflicts with this one")
    if record.environment:
        lines.append(f"environment: {one_line(record.environment)} "
                     f"(`corral env show {one_line(record.environment)}`)")
    if record.changed_files:
        lines += ["", "changed files:"]
        for change in record.changed_files:
            flags = change.get("flags") or []
            origin = change.get("old_path")
            lines.append(f"  {one_line(str(change.get('status', '?'))):9} "
                         f"{one_line(str(change.get('path', '?')))}"
                         + (f" (from {one_line(str(origin))})" if origin else "")
                         + (f"  [{one_line(', '.join(map(str, flags)))}]" if flags else "")
                         + ("  (by hand)" if change.get("path") in record.hand_changes
                            else ""))
    lines += ["", "tool calls:" if record.audit else "tool calls: none"]
    for call in record.audit:
        reason = f" ({one_line(str(call.get('reason')))})" if call.get("reason") else ""
        lines.append(f"  [{one_line(str(call.get('step')))}] {one_line(str(call.get('tool')))} "
                     f"{one_line(json.dumps(call.get('arguments'), ensure_ascii=False))} -> "
                     f"{one_line(str(call.get('decision')))}{reason}"
                     + (" (still running; its output so far:)" if call.get("in_progress")
                        else ""))
        result = str(call.get("result") or "").strip("\n")
        if result:
            lines += _full(result, record.run_id, "      ", limit=limit)
    lines += ["", "transcript:"]
    for message in transcript:
        calls = ", ".join(str(c.get("name")) for c in message.get("tool_calls") or [])
        lines.append(f"  {one_line(str(message.get('role')))}"
                     + (f" (calls {one_line(calls)})" if calls else "") + ":")
        text = str(message.get("content") or "").strip("\n")
        if text:
            lines += _full(text, record.run_id, "      ", limit=limit)
    return lines


#: The columns of ``corral runs`` (``runs_line`` pads to them).
RUNS_HEADER = (f"{'RUN':22}  {'STATUS':9} {'DIFF':11} {'AGE':>4}  {'AGENT':20} {'MODE':15} "
               f"{'FILES':>11}  PROMPT")


def age(iso: str, now: datetime | None = None) -> str:
    """How long ago ``iso`` was, in one unit: ``45s``, ``12m``, ``5h``, ``3d``; ``?`` when
    the record has no readable time."""
    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return "?"
    seconds = max(0.0, ((now or datetime.now(UTC)) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def diff_state(record: RunRecord) -> str:
    """What became of a run's diff: ``pending``, ``applied``, ``discarded``, ``superseded``
    (a fanout sibling whose diff conflicts with it was applied), ``continued`` (a later
    run's diff holds it), ``in checkout`` (workspace-write), or nothing (no diff, or still
    running)."""
    state = {"applied": "applied", "discarded": "discarded",
             "superseded": "superseded"}.get(record.state, "")
    if record.continued_by:
        state = "continued"
    if not state and record.diff and run_status(record) is not RunStatus.RUNNING:
        state = "in checkout" if record.mode == "workspace-write" else "pending"
    return state


def runs_line(record: RunRecord) -> str:
    """One line of ``corral runs`` (columns: :data:`RUNS_HEADER`)."""
    status = run_status(record)
    parent = f" (child of {one_line(record.parent_run)})" if record.parent_run else ""
    prompt = one_line(" ".join(record.prompt.split()))
    prompt = f'"{prompt[:48]}..."' if len(prompt) > 48 else f'"{prompt}"'
    return (f"{one_line(record.run_id)}  {status.value:9} {diff_state(record):11} "
            f"{age(record.started_at):>4}  {one_line(record.agent):20} "
            f"{one_line(record.mode):15} {len(record.changed_files):3} file(s)  "
            f"{prompt}{parent}")


def check_lines(record: RunRecord) -> list[str]:
    """A fanout child's check, for ``corral show``: the command, how it ended, its output's
    end (escaped, indented)."""
    check = record.check
    if not check:
        return []
    head = f"check:     `{one_line(str(check.get('command')))}` "
    if check.get("error"):
        error = check["error"]
        return [head + f"error ({one_line(str(error.get('code')))}): "
                f"{one_line(str(error.get('message')))}"]
    if check.get("skipped"):
        return [head + f"skipped: {one_line(str(check['skipped']))}"]
    ended = ("timed out" if check.get("timed_out") else f"exit {check.get('exit_code')}")
    size = int(check.get("output_bytes") or 0)
    tail = str(check.get("output_tail") or "")
    shown = len(tail.encode("utf-8", "surrogatepass"))
    cut = f"; its last {human_bytes(shown)} of {human_bytes(size)}" if size > shown else ""
    lines = [head + f"{ended} in {human_seconds(float(check.get('duration_seconds', 0.0)))}"
             f"{cut}"]
    lines += [f"      {one_line(line)}" for line in tail.rstrip("\n").split("\n") if tail]
    if check.get("hint"):
        lines.append(f"  hint: {one_line(str(check['hint']))}")
    return lines
