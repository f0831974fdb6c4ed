"""What each page shows, read through the Python API (:class:`executor.api.Corral`) only.

Plain data for the templates: every string here is what a definition, a child, a
file name or a model produced, as it is; the templates escape it (autoescape, and
:func:`executor.web.app.shown` makes controls and bidi characters visible first).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.api import RUN_STATES, RunStatus, RunSummary, fanout_status
from executor.api.agents import show_all

if TYPE_CHECKING:
    from executor.api import Corral, FanoutRecord, FanoutResult, LogEvent

__all__ = ["SOURCE_LIMIT", "age", "agents_page", "event_view", "fanout_page", "runs_page"]

#: Bytes of a definition file shown on the agents page.
SOURCE_LIMIT = 256 * 1024
#: Lines shown around a diagnostic's line.
AROUND = 3


def age(iso: str, now: datetime | None = None) -> str:
    """``iso`` as how long ago (``42s``, ``5m``, ``3h``, ``2d``); ``?`` when unreadable."""
    try:
        then = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return "?"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# -- agents ---------------------------------------------------------------------------------

@dataclass
class SourceLine:
    number: int
    text: str
    marked: bool = False


@dataclass
class DiagnosticView:
    severity: str
    field: str
    reason: str
    hint: str | None
    code: str
    line: int
    excerpt: list[SourceLine]


@dataclass
class FileDiagnostics:
    file: str
    errors: int
    warnings: int
    diagnostics: list[DiagnosticView]
    source: list[SourceLine] | None
    unreadable: str | None = None


def _source(root: Path, file: str) -> tuple[list[str] | None, str | None]:
    path = Path(file)
    path = path if path.is_absolute() else root / path
    try:
        with path.open("rb") as handle:
            data = handle.read(SOURCE_LIMIT + 1)
    except OSError as exc:
        return None, f"cannot read it: {exc.strerror or exc}"
    note = f"only its first {SOURCE_LIMIT} bytes are shown" if len(data) > SOURCE_LIMIT else None
    return data[:SOURCE_LIMIT].decode("utf-8", "replace").split("\n"), note


def agents_page(corral: Corral) -> dict[str, Any]:
    """The agents page: each agent's row, and the diagnostics grouped by file with the
    source around each one's line."""
    found = corral.agents()
    effective = {view.contract.name: view.to_json()["effective"]["tools"]
                 for view in show_all(corral.sources())}
    rows = []
    for data in found.to_json()["agents"]:
        lines, note = _source(corral.root, data["source"])
        rows.append({"data": data, "effective": effective.get(data["name"]),
                     "why_effective": None if data["name"] in effective else "not resolved",
                     "source": [SourceLine(i, text) for i, text in enumerate(lines or [], 1)],
                     "source_note": note})
    groups: dict[str, FileDiagnostics] = {}
    for diagnostic in found.diagnostics:
        group = groups.get(diagnostic.file)
        if group is None:
            lines, note = _source(corral.root, diagnostic.file)
            group = groups[diagnostic.file] = FileDiagnostics(
                diagnostic.file, 0, 0, [],
                [SourceLine(i, text) for i, text in enumerate(lines, 1)] if lines else None,
                note)
        severity = str(diagnostic.severity.value)
        if severity == "error":
            group.errors += 1
        else:
            group.warnings += 1
        excerpt = []
        if group.source is not None:
            low = max(1, diagnostic.line - AROUND)
            excerpt = [SourceLine(s.number, s.text, s.number == diagnostic.line)
                       for s in group.source[low - 1: diagnostic.line + AROUND]]
            for line in group.source:
                if line.number == diagnostic.line:
                    line.marked = True
        group.diagnostics.append(DiagnosticView(severity, diagnostic.field, diagnostic.reason,
                                                diagnostic.hint, diagnostic.code,
                                                diagnostic.line, excerpt))
    return {"agents": rows, "groups": sorted(groups.values(), key=lambda g: g.file),
            "default_agent": found.default_agent, "rejected": found.rejected}


# -- runs -----------------------------------------------------------------------------------

@dataclass
class RunRow:
    run: RunSummary
    fanout: str | None
    index: int | None
    age: str
    files: int


#: Entries (a fanout counts as one) one runs page shows.
PAGE_ENTRIES = 50


def runs_page(corral: Corral, *, status: str = "", agent: str = "",
              state: str = "", after: str = "") -> dict[str, Any]:
    """The runs page: one page of runs newest first under their fanouts, filtered, from
    the ledger's index (``after``: the entry the previous page ended with)."""
    listed = corral.runs(limit=PAGE_ENTRIES, after=after or None,
                         status=(status,) if status else (), agent=agent or None,
                         state=state or None)
    rows: list[RunRow] = []
    fanouts: dict[str, FanoutRecord] = {}
    for fanout, members in listed.groups():
        if fanout is not None:
            fanouts[fanout.fanout_id] = fanout
        for index, member in members:
            if isinstance(member, RunSummary):
                rows.append(RunRow(member, fanout.fanout_id if fanout else None, index,
                                   age(member.started_at), member.files))
    return {"rows": rows, "fanouts": fanouts,
            "fanout_status": {key: fanout_status(f) for key, f in fanouts.items()},
            "broken": [exc.to_dict() for exc in listed.broken],
            "statuses": [s.value for s in RunStatus],
            "agents": sorted({r.agent for r in listed.runs} | ({agent} if agent else set())),
            "states": list(RUN_STATES),
            "filters": {"status": status, "agent": agent, "state": state},
            "next_after": listed.next_after}


# -- one run's journal ----------------------------------------------------------------------

@dataclass
class EventView:
    """One journal event as the page shows it: when, its kind, a head line, and text."""

    when: str
    kind: str
    head: str
    text: str = ""
    stream: str = ""
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _when(t: float) -> str:
    with contextlib.suppress(OverflowError, OSError, ValueError):
        return datetime.fromtimestamp(t).strftime("%H:%M:%S.%f")[:-3]
    return "??:??:??"


def event_view(item: LogEvent) -> EventView:
    """One journal event for the run page (``corral logs``'s lines, as HTML parts)."""
    event = dict(item.event)
    kind = item.kind
    step = f"[{event['step']}] " if event.get("step") is not None else ""
    tool = str(event.get("tool", ""))
    text = str(event.get("text") or "")
    label = f"[{item.child}/{item.children}] {item.agent}" if item.child is not None else ""
    view = EventView(_when(item.t), kind, kind, label=label)
    if kind == "prompt":
        view.head = "system prompt" if event.get("role") == "system" else "prompt"
        view.text = text
    elif kind == "turn":
        calls = ", ".join(str(c.get("name")) for c in event.get("calls") or []
                          if isinstance(c, dict))
        view.head = f"{step}model " + (f"calls {calls}" if calls else "answered")
        view.text = text
    elif kind == "tool_call":
        view.head = f"{step}call {tool}"
        view.text = json.dumps(event.get("arguments"), ensure_ascii=False, sort_keys=True)
    elif kind == "decision":
        view.head = f"{event.get('decision')} {tool}"
        view.text = str(event.get("reason") or "")
    elif kind == "output":
        view.head = str(event.get("stream") or "stdout")
        view.stream = "err" if event.get("stream") == "stderr" else "out"
        view.text = str(event.get("data", ""))
    elif kind == "tool_result":
        error = ", error" if event.get("is_error") else ""
        view.head = f"result {tool} ({event.get('decision')}{error})"
        result = str(event.get("result") or "")
        view.text = result.split("\n", 1)[0] if event.get("output_bytes") is not None else result
    elif kind == "phase":
        view.head = f"phase {event.get('detail', '')}"
    elif kind == "egress":  # --net allow: one proxied connection, allowed or denied
        verdict = "allowed" if event.get("allowed") else "denied"
        view.head = f"egress {verdict} {event.get('host')}:{event.get('port')} " \
                    f"({event.get('protocol')})"
        view.text = str(event.get("reason") or "")
    elif kind == "end":
        failure = event.get("error") or {}
        why = (f": {failure.get('code', '')} {failure.get('message', '')}"
               if isinstance(failure, dict) and failure else "")
        view.head = f"end {event.get('status')}{why}"
    return view


# -- one fanout -----------------------------------------------------------------------------

def fanout_page(result: FanoutResult) -> dict[str, Any]:
    """The fanout page: candidates side by side, checks, the conflict matrix."""
    ids = [child.run_id for child in result.children]
    conflicts: dict[tuple[str, str], list[str]] = {}
    for a, b, paths in result.conflicts:
        conflicts[(str(a), str(b))] = conflicts[(str(b), str(a))] = [str(p) for p in paths]
    same: dict[tuple[str, str], list[str]] = {}
    for entry in result.record.same_files or []:
        if isinstance(entry, list | tuple) and len(entry) == 3:
            a, b, paths = entry
            same[(str(a), str(b))] = same[(str(b), str(a))] = [str(p) for p in paths]
    matrix = [[("self", []) if a == b else
               ("conflict", conflicts[(a, b)]) if (a, b) in conflicts else
               ("same", same[(a, b)]) if (a, b) in same else ("clear", [])
               for b in ids] for a in ids]
    chosen = [c.run_id for c in result.children if c.run is not None and c.run.state == "applied"]
    # Each candidate's standing (executor.fanout.choice, as `--pick best` reads it): the
    # "Apply #N" button only on those recommended, the others behind "apply anyway".
    standing = {c.index: c for c in result.candidates()}
    best = next((c for c in standing.values() if c.recommended), None) \
        if result.record.check_command else None
    return {"fanout": result, "matrix": matrix, "ids": ids, "chosen": chosen,
            "running": result.status == "running", "candidates": standing, "best": best}
