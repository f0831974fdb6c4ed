"""Load one definition file with one adapter, never letting it take the others down."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from policies.contract import AgentContract, AgentFormat, Scope
from policies.loader.base import Context, Options, Source
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats import EXTENSIONS, adapter_for

__all__ = ["FileOutcome", "Status", "finish", "is_non_agent_file", "load_file"]


class Status(StrEnum):
    """What happened to a file."""

    LOADED = "loaded"
    REJECTED = "rejected"
    SKIPPED = "skipped"


@dataclass
class FileOutcome:
    """The result of loading one file."""

    display: str
    format: AgentFormat
    status: Status
    agents: list[AgentContract] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


_README_RE = re.compile(r"^readme(\.[A-Za-z0-9]+)*$", re.IGNORECASE)


def is_non_agent_file(name: str, fmt: AgentFormat) -> str | None:
    """Why a file in an agent directory is not a definition, or ``None`` if it is one.

    README files, files whose names start with ``_`` or ``.``, and files
    without the format's extension are skipped, never parsed.
    """
    if _README_RE.fullmatch(name):
        return "a README is documentation, not an agent definition"
    if name.startswith("_"):
        return "files whose names start with '_' are skipped"
    if not name.endswith(EXTENSIONS[fmt]):
        return f"{fmt.value} definitions are {' or '.join(EXTENSIONS[fmt])} files"
    return None


def load_file(
    path: Path,
    fmt: AgentFormat,
    *,
    scope: Scope,
    display: str,
    location_name: str | None = None,
    options: Options | None = None,
    declared: dict[str, str] | None = None,
    skip_non_agents: bool = True,
    file_name: str | None = None,
) -> FileOutcome:
    """Load ``path`` as format ``fmt``. Never raises for anything the file contains.

    ``file_name`` is the name the file has in its agent directory, when that
    differs from ``path.name`` (a copy in a test corpus).
    """
    options = options or Options()
    file_name = file_name or path.name
    if skip_non_agents:
        why = is_non_agent_file(file_name, fmt)
        if why is not None:
            note = Diagnostic(file=display, line=1, field="file", severity=Severity.INFO,
                              reason=f"skipped: {why}", code="not_an_agent")
            return FileOutcome(display, fmt, Status.SKIPPED, diagnostics=[note])
    stem = location_name or _stem(file_name, fmt)
    source = Source(path=path, display=display, scope=scope, format=fmt, text="",
                    location_name=stem, declared=declared or {})
    ctx = Context(source, options)
    agents: list[AgentContract] = []
    adapter = adapter_for(fmt)  # outside the try: a broken install is no file's fault
    try:
        text = decode_text(read_bounded(path))
        source = Source(path=path, display=display, scope=scope, format=fmt, text=text,
                        location_name=stem, declared=declared or {})
        ctx.source = source
        agents = adapter.load(source, ctx)
    except DefinitionRejected as exc:
        if not (exc.diag_code == "rejected_after_errors" and ctx.failed):
            ctx.error(exc.field, exc.reason, line=exc.line, hint=exc.hint, code=exc.diag_code)
    except Exception as exc:
        ctx.error("file", f"internal error while reading this file: {type(exc).__name__}: {exc}",
                  hint="this is a corral bug; please report it with the file", code="internal")
    return finish(display, fmt, agents, ctx.diagnostics, strict=options.strict,
                  partial=ctx.partial)


def finish(display: str, fmt: AgentFormat, agents: list[AgentContract],
           diagnostics: list[Diagnostic], *, strict: bool, partial: bool = False) -> FileOutcome:
    """The outcome of a read: rejected on any error (warnings too, with ``strict``).

    ``partial``: the file maps names to definitions that stand alone (the adapter left
    the rejected ones out); it loads with what is left, and its errors stay reported.
    Under ``strict`` a warning cannot be told apart by entry: the whole file rejects.
    """
    if strict and any(d.severity is Severity.WARNING for d in diagnostics):
        diagnostics = [
            d.model_copy(update={"severity": Severity.ERROR, "reason": d.reason + " (--strict)"})
            if d.severity is Severity.WARNING else d
            for d in diagnostics
        ]
    if any(d.severity is Severity.ERROR for d in diagnostics) and (
            strict or not partial or not agents):
        return FileOutcome(display, fmt, Status.REJECTED, diagnostics=diagnostics)
    status = Status.LOADED if agents else Status.SKIPPED
    return FileOutcome(display, fmt, status, agents=agents, diagnostics=diagnostics)


def _stem(name: str, fmt: AgentFormat) -> str:
    for ext in sorted(EXTENSIONS[fmt], key=len, reverse=True):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name
