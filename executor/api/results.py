"""What the API returns: typed views over what the ledger holds.

Each result wraps a record as it is (:class:`~executor.ledger.RunRecord`,
:class:`~executor.ledger.FanoutRecord`: every field, under ``.record``) and adds
what every front door computes from it: a run's status as it stands now (a
``running`` record whose process died reads ``crashed``), its exit code (the
README's table: the CLI's, the MCP server's ``exit_code``), and the JSON
objects ``--json`` prints and MCP tools return.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from executor.errors import EXIT_DENIED, EXIT_FAILURE, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK
from executor.fanout.check import check_verdict
from executor.ledger import (
    Entry,
    FanoutRecord,
    RecordError,
    RunRecord,
    RunState,
    RunStatus,
    RunSummary,
    fanout_status,
    run_status,
)

__all__ = ["Diff", "RunList", "RunResult", "exit_code", "network_view"]

#: A run's exit code by its status (the README's "Exit codes").
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


def _check_passed(check: dict[str, Any] | None) -> bool | None:
    verdict = check_verdict(check)
    if verdict in (None, "skipped", "error"):
        return None
    return verdict == "passed"


@dataclass(frozen=True)
class RunResult:
    """One recorded run. ``record`` holds every field; the properties are the ones callers
    use most."""

    record: RunRecord
    #: Its calls (``record.audit``) and steps are the ones its journal holds so far: it is
    #: still running, or its process died before it could record them.
    from_journal: bool = False

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def agent(self) -> str:
        return self.record.agent

    @property
    def status(self) -> RunStatus:
        """How the run stands now: ``running`` only while its process lives (else
        ``crashed``), or how it ended."""
        return run_status(self.record)

    @property
    def final_text(self) -> str:
        return self.record.final_text

    @property
    def diff(self) -> str:
        """The diff as text (bytes that are not UTF-8 replaced: :meth:`Corral.diff` has the
        exact bytes)."""
        return self.record.diff

    @property
    def changed_files(self) -> list[dict[str, Any]]:
        return self.record.changed_files

    @property
    def denied_calls(self) -> list[dict[str, str]]:
        return self.record.denied_calls

    @property
    def network(self) -> dict[str, Any] | None:
        """``--net allow``: the grant its commands had, and every proxied connection
        (``connections``: protocol, host, port, allowed, reason, address), ``denied``
        counted; ``None``: its commands had no network."""
        return self.record.network

    @property
    def state(self) -> RunState:
        """What became of its diff: ``pending``, ``applied``, ``discarded`` or
        ``superseded`` (a sibling whose diff conflicts with it was applied)."""
        return self.record.state

    @property
    def backend(self) -> str:
        return self.record.backend

    @property
    def mode(self) -> str:
        return self.record.mode

    @property
    def error(self) -> dict[str, Any] | None:
        """Why it failed (``code``, ``message``, ...), or ``None``."""
        return self.record.error

    @property
    def children(self) -> list[str]:
        """The runs it delegated to."""
        return self.record.children

    @property
    def usage(self) -> dict[str, int]:
        return self.record.usage

    @property
    def steps(self) -> int:
        return self.record.steps

    @property
    def reviews(self) -> list[dict[str, Any]]:
        """Its response reviewers' verdicts."""
        return self.record.reviews

    @property
    def check(self) -> dict[str, Any] | None:
        """A fanout child's check command and how it ended (``None``: none ran)."""
        return self.record.check

    @property
    def check_passed(self) -> bool | None:
        """Whether its check exited 0; ``None`` when no check ran (or it was skipped)."""
        return _check_passed(self.record.check)

    @property
    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of one of its commands (the
        sandbox's memory cap was reached); its check's own is ``check["oom_killed"]``."""
        return self.record.oom_killed

    @property
    def exit_code(self) -> int:
        """The exit code ``corral run`` gives for it (see :func:`exit_code`)."""
        return exit_code(self.record)

    def to_json(self) -> dict[str, Any]:
        """The ``corral run --json`` object."""
        record = self.record
        return {
            "run_id": record.run_id, "agent": record.agent, "status": self.status.value,
            "final_text": record.final_text, "diff": record.diff,
            "changed_files": record.changed_files, "denied_calls": record.denied_calls,
            "backend": record.backend, "mode": record.mode, "error": record.error,
            "children": record.children, "usage": record.usage, "steps": record.steps,
            "state": record.state,
            "reviews": record.reviews, "oom_killed": record.oom_killed,
            "network": network_view(record.network),
        }

    def record_json(self) -> dict[str, Any]:
        """The whole record with its status as it stands now (``corral show --json``
        without the transcript); ``from_journal``: its calls are the journal's so far."""
        return self.record.model_dump(mode="json") | {"status": self.status.value} | (
            {"from_journal": True} if self.from_journal else {})


#: One entry of :meth:`RunList.groups`: a fanout (``None``: a run on its own) and its
#: members (index in the fanout or ``None``; a run's summary, or the id of a planned child
#: that left no record).
Group = tuple[FanoutRecord | None, list[tuple[int | None, RunSummary | str]]]


@dataclass(frozen=True)
class RunList:
    """One page of the recorded runs and fanouts of a repository, newest first (from the
    ledger's index: each run a :class:`~executor.ledger.RunSummary`, never its diff or
    transcript; :meth:`Corral.show` reads a whole record), the id to pass as ``after``
    for the next page (``None``: the last), and every record that cannot be read (one
    corrupted record never hides the others)."""

    entries: tuple[Entry, ...]
    broken: tuple[RecordError, ...] = ()
    next_after: str | None = None

    @property
    def runs(self) -> tuple[RunSummary, ...]:
        """Every run of the page (a fanout's children in its place)."""
        return tuple(m for e in self.entries for _, m in e.members
                     if isinstance(m, RunSummary))

    @property
    def fanouts(self) -> tuple[FanoutRecord, ...]:
        return tuple(e.fanout for e in self.entries if e.fanout is not None)

    def __iter__(self) -> Iterator[RunSummary]:
        return iter(self.runs)

    def groups(self) -> list[Group]:
        """Newest first: a fanout with its children (by index; runs they delegated after
        them; a planned child without a record by its id), or one run on its own."""
        return [(e.fanout, list(e.members)) for e in self.entries]

    def to_json(self) -> list[dict[str, Any]]:
        """The ``corral runs --json`` list: each fanout before its runs, each run with its
        fanout, then every corrupted record."""
        return [item for entry in self.entries for item in entry_json(entry)] + [
            {"status": "corrupted", "error": exc.to_dict()} for exc in self.broken]


def entry_json(entry: Entry) -> list[dict[str, Any]]:
    """One entry of a listing as ``corral runs --json`` prints it: a fanout's object
    before its runs', or one run's."""
    listed: list[dict[str, Any]] = []
    fanout = entry.fanout
    if fanout is not None:
        listed.append({"fanout_id": fanout.fanout_id, "status": fanout_status(fanout),
                       "prompt": fanout.prompt, "created_at": fanout.created_at,
                       "check_command": fanout.check_command,
                       "children": [c.run_id for c in fanout.children]})
    return listed + [m.to_json() for _, m in entry.members if isinstance(m, RunSummary)]


@dataclass(frozen=True)
class Diff:
    """A run's exact diff (``patch``: the bytes ``corral apply`` merges)."""

    run: RunResult
    patch: bytes

    @property
    def empty(self) -> bool:
        return not self.patch

    @property
    def text(self) -> str:
        """The patch as text, bytes that are not UTF-8 replaced."""
        return self.patch.decode("utf-8", "replace")

    def to_json(self) -> dict[str, Any]:
        """The diff as JSON (``corral diff --json``, MCP ``diff_run``): ``diff_base64`` holds
        the exact bytes when they are not UTF-8."""
        record, patch, text = self.run.record, self.patch, self.text
        data: dict[str, Any] = {
            "run_id": record.run_id, "status": self.run.status.value, "state": record.state,
            "mode": record.mode, "diff": text, "changed_files": record.changed_files,
            "empty": not patch}
        if text.encode("utf-8") != patch:
            data["diff_base64"] = base64.b64encode(patch).decode("ascii")
            data["note"] = ("the diff is not valid UTF-8: `diff` shows it with replacement "
                            "characters, `diff_base64` holds its exact bytes")
        if not patch:
            data["note"] = f"run {record.run_id} changed nothing: its diff is empty"
        return data


def network_view(network: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run's egress as its JSON shows it: the grant, and the denied requests (host, port,
    protocol, reason); ``None`` when its commands had no network."""
    if network is None:
        return None
    grant = network.get("grant") or {}
    return {"allow": grant.get("allow", []), "deny": grant.get("deny", []),
            "connections": len(network.get("connections", [])),
            "denied": [{key: event.get(key) for key in ("protocol", "host", "port", "reason")}
                       for event in network.get("connections", []) if not event.get("allowed")]}
