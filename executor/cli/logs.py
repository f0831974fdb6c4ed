"""``corral logs RUN [-f] [--json]``: a run's journal so far, or followed as it is written.

Over :meth:`executor.api.Corral.journal` and :meth:`~executor.api.Corral.follow`.
Text: one line per event (its time, step, what happened), a command's output
as it streamed (``  out| ``, ``  err| ``), the model's text and the results cut
after a few thousand characters with a marker (``--json`` has them whole);
every value a child or a model chose is escaped (:mod:`executor.text`), each of
its lines printed under a prefix of corral's own, so output cannot fake an
event line. A fanout id prints every child's events interleaved by time, each
line labelled ``[i/N] agent``. ``--json``: one JSON object per line (ASCII).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from executor.api import Corral, LogEvent
from executor.options import echo
from executor.text import one_line

__all__ = ["event_lines", "logs_command"]

#: Characters of one text (the model's, a result) printed before a marker.
TEXT_LIMIT = 2000


def _when(event: LogEvent) -> str:
    try:
        return datetime.fromtimestamp(event.t).strftime("%H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):  # an edited journal's time
        return "??:??:??.???"


def _text(text: str, indent: str) -> list[str]:
    """``text`` as escaped lines under ``indent``, cut at :data:`TEXT_LIMIT` with a marker."""
    shown = text[:TEXT_LIMIT].strip("\n")
    lines = [indent + one_line(line) for line in shown.split("\n")] if shown else []
    if len(text) > TEXT_LIMIT:
        lines.append(f"{indent}[{len(text) - TEXT_LIMIT} more character(s): "
                     "`corral logs --json` has them]")
    return lines


def _omitted(event: dict[str, Any], key: str) -> str:
    left = event.get(f"{key}_omitted")
    return f" [{left} character(s) not journaled]" if isinstance(left, int) else ""


def event_lines(item: LogEvent) -> list[str]:
    """One event as text lines (without the fanout label)."""
    event = dict(item.event)
    kind = item.kind
    head = f"{_when(item)} "
    step = f"[{one_line(str(event['step']))}] " if event.get("step") is not None else ""
    tool = one_line(str(event.get("tool", "")))
    text = str(event.get("text") or "")
    if kind == "prompt" and event.get("role") == "system":
        return [f"{head}system prompt ({len(text)} character(s); `corral show` prints it)"]
    if kind == "prompt":
        return [f"{head}prompt:", *_text(text, "      ")]
    if kind == "turn":
        calls = ", ".join(one_line(str(c.get("name"))) for c in event.get("calls") or []
                          if isinstance(c, dict))
        return [f"{head}{step}model" + (f" calls {calls}" if calls else " answered")
                + (":" if text else "") + _omitted(event, "text"), *_text(text, "      ")]
    if kind == "tool_call":
        arguments = json.dumps(event.get("arguments"), ensure_ascii=False, sort_keys=True)
        return [f"{head}{step}call {tool} {one_line(arguments)[:TEXT_LIMIT]}"]
    if kind == "decision":
        reason = f": {one_line(str(event['reason']))}" if event.get("reason") else ""
        return [f"{head}{one_line(str(event.get('decision')))} {tool}{reason}"]
    if kind == "output":
        mark = "  err| " if event.get("stream") == "stderr" else "  out| "
        data = str(event.get("data", "")).removesuffix("\n")
        return [mark + one_line(line) for line in data.split("\n")]
    if kind == "tool_result":
        took = event.get("duration_ms")
        took_text = "" if not isinstance(took, int | float) else (
            f", {took:.1f} ms" if took < 1000 else f", {took / 1000:.2f} s")
        result = str(event.get("result") or "")
        dropped = (f", {event['output_dropped']} byte(s) of output not journaled"
                   if event.get("output_dropped") else "")
        line = (f"{head}result {tool} ({one_line(str(event.get('decision')))}"
                f"{', error' if event.get('is_error') else ''}{took_text}{dropped})")
        if event.get("output_bytes") is not None:  # its output streamed above: the head only
            return [f"{line}: {one_line(result.split(chr(10), 1)[0])}"]
        return [f"{line}:" + _omitted(event, "result"), *_text(result, "      ")]
    if kind == "phase":
        return [f"{head}phase {one_line(str(event.get('detail', '')))}"]
    if kind == "egress":  # --net allow: one proxied connection
        why = f": {one_line(str(event['reason']))}" if event.get("reason") else ""
        return [f"{head}egress {'allowed' if event.get('allowed') else 'denied'} "
                f"{one_line(str(event.get('host')))}:{event.get('port')} "
                f"({one_line(str(event.get('protocol')))}){why}"]
    if kind == "end":
        error = event.get("error") or {}
        why = (f": {one_line(str(error.get('code', '')))} {one_line(str(error.get('message', '')))}"
               if isinstance(error, dict) and error else "")
        return [f"{head}end {one_line(str(event.get('status')))}{why}"]
    if kind == "truncated":
        return [f"{head}journal truncated at {event.get('limit')} bytes: later events were not "
                "journaled (the run's record has its calls and transcript once it ends)"]
    return [f"{head}{one_line(kind)}"]


def _print(events: Iterable[LogEvent], as_json: bool) -> int:
    count = 0
    for item in events:
        count += 1
        if as_json:
            click.echo(json.dumps(item.to_json(), ensure_ascii=True))
            continue
        label = (f"[{item.child}/{item.children}] {one_line(item.agent)} "
                 if item.child is not None else "")
        for line in event_lines(item):
            echo(label + line)
    return count


@click.command("logs")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing events as the run journals them (a command's output as it "
              "streams) until the run ends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.argument("run_id")
def logs_command(root: Path, follow: bool, as_json: bool, run_id: str) -> None:
    """Print a run's journal so far: every prompt, model answer, tool call, decision,
    output chunk, result and phase, as it happened; with -f, follow it live until the
    run ends. RUN may be a fanout id (f-...): its children's events, interleaved by
    time, each line labelled [i/N] agent."""
    corral = Corral(root)
    events = corral.follow(run_id) if follow else corral.journal(run_id)
    if not _print(events, as_json):
        echo(f"note: {one_line(run_id)} has no journal yet (a run recorded before journals "
             "were kept, or one that never started, has none)", err=True)
