"""One agent of a run tree (:class:`AgentRun`): its turns, its children, its teardown.

An :class:`AgentRun` holds what one agent of a tree has: its contract,
capability and model, its sandbox and session once its first turn opened them,
its record, and the children it delegated to (retained until it ends, for
follow-ups). What it does is split by seam, each module working on the run:

- :mod:`executor.run.opening`: the sandbox, MCP servers, tools and session;
- :mod:`executor.run.recording`: its record, ``running`` and then finished;
- :mod:`executor.run.delegation` and :mod:`executor.run.parallel`: the
  ``delegate`` tool, one child or several at once;
- :mod:`executor.run.reviews`: response reviewers on its recorded diff.

:func:`executor.run.top.run_agent` runs the top of a tree; a fanout
(:mod:`executor.fanout`) runs N of them concurrently, and :class:`RunSettings`
carries what they share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from executor.errors import ModelError, RunError
from executor.ledger import Journal, RunRecord, RunStatus, new_run_id, now_iso, write_run
from executor.mcpclient import McpServers
from executor.models import Model
from executor.run import delegation, parallel
from executor.run.opening import open_session
from executor.run.recording import finish
from executor.run.resume import Resume
from executor.run.reviews import review_answer
from executor.run.session import ProgressEvent, RunCancelled, RunTimeout, Session
from executor.run.settings import RunSettings
from executor.tools import ToolContext
from executor.tools.agents import DelegateTask
from policies.capability import Capability
from policies.contract import AgentContract
from sandbox.egress import EgressProxy
from sandbox.errors import SandboxDenied, SandboxError
from sandbox.protocol import Sandbox
from sandbox.workspaces.snapshot import SnapshotRef, release_snapshot

__all__ = ["AgentRun"]


class AgentRun:
    """One agent of a run tree: its sandbox, session, record and retained children."""

    def __init__(self, settings: RunSettings, contract: AgentContract, capability: Capability,
                 model: Model, *, repo: Path, depth: int, parent_run: str | None,
                 deadline: float | None, handoff: str | None = None,
                 reviewing: bool = False, run_id: str | None = None,
                 resume: Resume | None = None) -> None:
        self.settings = settings
        #: The run this one continues (``corral run --continue``): its diff is replayed into
        #: this run's sandbox and its conversation is this session's start
        #: (:mod:`executor.run.resume`); ``replayed`` once the sandbox holds its changes.
        self.resume = resume
        self.replayed = False
        self.handoff = handoff
        #: A response reviewer at work: its own reviewers are not run (no loops).
        self.reviewing = reviewing
        self.reviews: list[dict[str, Any]] = []
        self.contract = contract
        self.capability = capability
        self.model = model
        #: The model is its parent's (inherited): its connections are the parent's to close.
        self.shares_model = False
        self.repo = repo
        self.depth = depth
        self.parent_run = parent_run
        self.deadline = deadline
        self.run_id = run_id or new_run_id()
        self.children: dict[str, AgentRun] = {}
        #: Guards ``children``: a parallel delegate call's children finish in other threads.
        self.lock = threading.Lock()
        self.patch = b""
        #: The recorded diff was collected after the child's last action: a teardown may
        #: skip collecting again (what a check command wrote afterwards is not the child's).
        self.collected = False
        #: Unhooks the sandbox from the tree's cancellation (set when the sandbox opens).
        self.forget_cancel: Callable[[], None] | None = None
        self.preimages: dict[str, bytes] = {}  # for `corral apply --3way`
        self.sandbox: Sandbox | None = None
        #: The proxy its commands reach (``--net allow``), closed after the sandbox.
        self.egress: EgressProxy | None = None
        #: Its sandbox opened (it stays true once the sandbox is torn down).
        self.opened = False
        #: The snapshot this run started from, taken for its reviewers (they read its
        #: recorded diff over it, :func:`executor.run.reviews.review_workspace`); released
        #: at :meth:`close`.
        self.base: SnapshotRef | None = None
        #: The MCP servers this run started (in its sandbox), and the schemas its parent
        #: was shown (a child's bound: tool -> schema fingerprint).
        self.mcp: McpServers | None = None
        self.mcp_bound: dict[str, str] | None = None
        self.session: Session | None = None
        self.context: ToolContext | None = None
        #: Its journal (:mod:`executor.ledger.journal`), open from its first record until
        #: :meth:`close`.
        self.journal: Journal | None = None
        self.started_at = now_iso()
        self.clock = time.monotonic()
        #: The task of its first turn (its record's prompt).
        self.first_prompt = ""
        self.record = RunRecord(
            run_id=self.run_id, parent_run=parent_run, agent=contract.name,
            agent_format=contract.origin.format.value, agent_source=contract.origin.source,
            contract_digest=contract.digest(), prompt="", model=model.name,
            backend=settings.backend.type, mode=capability.sandbox.value,
            status=RunStatus.FAILED, started_at=self.started_at, fanout=settings.fanout,
            environment=settings.environment.key if settings.environment else None,
            continues=resume.record.run_id if resume else None,
            hand_changes=list(resume.record.hand_changes) if resume else [],
            notes=[settings.environment_note] if settings.environment_note else [],
        )

    def new_child(self, settings: RunSettings, contract: AgentContract,
                  capability: Capability, model: Model, *, repo: Path,
                  deadline: float | None, handoff: str | None = None,
                  reviewing: bool = False) -> AgentRun:
        """An agent one level below this one (a delegated child, a reviewer); not retained
        and not started."""
        child = AgentRun(settings, contract, capability, model, repo=repo,
                         depth=self.depth + 1, parent_run=self.run_id, deadline=deadline,
                         handoff=handoff, reviewing=reviewing)
        child.shares_model = model is self.model
        return child

    # -- turns -----------------------------------------------------------------------------

    def turn(self, prompt: str) -> RunRecord:
        """Run one turn (the task, or a follow-up); record it; keep the sandbox open."""
        status, error, outcome = RunStatus.COMPLETED, None, None
        self.first_prompt = self.first_prompt or prompt
        try:
            session = self.session if self.session is not None else open_session(self)
            outcome = session.run(prompt)
            if outcome.stopped_by != "answer":  # the summary of a stopped run, not an answer
                status = RunStatus.STEP_LIMIT
            elif self.contract.response_reviewers and not self.reviewing:
                self.reviews = review_answer(self, prompt, outcome.final_text)
                if any(review["verdict"] != "pass" for review in self.reviews):
                    status = RunStatus.REVIEW_FAILED
        except RunTimeout as exc:
            status, error = RunStatus.TIMEOUT, exc.to_dict()
        except RunCancelled as exc:
            status, error = RunStatus.CANCELLED, exc.to_dict()
        except SandboxDenied as exc:
            status, error = RunStatus.DENIED, exc.to_dict()
        except (SandboxError, ModelError) as exc:
            status, error = RunStatus.FAILED, exc.to_dict()
        except RunError:
            raise  # a user's mistake (a missing skill): nothing was created
        except KeyboardInterrupt:
            finish(self, prompt, RunStatus.CANCELLED, {"code": "cancelled"}, None)
            raise
        except Exception as exc:  # unforeseen: keep the tree's record, then fail loudly
            finish(self, prompt, RunStatus.FAILED,
                   {"code": "internal", "message": f"{type(exc).__name__}: {exc}"[:500]},
                   None)
            raise
        return finish(self, prompt, status, error, outcome)

    def skip(self, prompt: str, status: RunStatus, error: dict[str, Any]) -> RunRecord:
        """Record a run that never started (its fanout was cancelled, or its deadline passed
        before a slot was free): no sandbox, no diff, and a record all the same."""
        self.first_prompt = self.first_prompt or prompt
        return finish(self, prompt, status, error, None)

    def phase(self, detail: str, *, journal: bool = True) -> None:
        """Tell the live display (and, with ``journal``, the journal) what this run is doing
        outside its conversation."""
        if journal and self.journal is not None:
            self.journal.event("phase", detail=detail)
        if self.settings.progress is not None:
            self.settings.progress(ProgressEvent("phase", self.contract.name, 0, detail,
                                                 self.depth, (), self.run_id))

    # -- the delegate tool (the session's tools call these) --------------------------------

    def delegable(self) -> list[tuple[str, str]]:
        """Agents this one may delegate to right now (:func:`delegation.delegable`)."""
        return delegation.delegable(self)

    def delegate(self, agent: str, prompt: str, child_id: str | None,
                 instructions: str | None = None) -> str:
        """The ``delegate`` tool (:func:`executor.run.delegation.delegate`)."""
        return delegation.delegate(self, agent, prompt, child_id, instructions)

    def delegate_tasks(self, tasks: Sequence[DelegateTask]) -> str:
        """The ``delegate`` tool's parallel mode (:mod:`executor.run.parallel`)."""
        return parallel.delegate_tasks(self, tasks)

    def child_ids(self) -> list[str]:
        """The run ids of the children started so far, in start order."""
        with self.lock:
            return list(self.children)

    # -- teardown --------------------------------------------------------------------------

    def close(self, *, recorded: bool = False) -> None:
        """Tear down retained children, then this agent's sandbox (diffs were captured).

        ``recorded``: the record holds a diff collected after the agent's last
        action, and what ran in the sandbox since (a fanout's check command) must
        not become the diff: the sandbox is removed without collecting again.
        One failing teardown never keeps the others from running; the first
        error is raised after all of them ran (what it left, ``corral gc`` cleans).
        """
        errors: list[SandboxError] = []
        with self.lock:
            children = list(self.children.values())
        for child in children:
            try:
                child.close()
            except SandboxError as exc:
                errors.append(exc)
        if self.forget_cancel is not None:
            self.forget_cancel()
            self.forget_cancel = None
        if self.mcp is not None:  # the servers stop with the child (teardown kills the rest)
            self.mcp.close()
        if self.sandbox is not None:
            try:
                self.sandbox.teardown(discard=recorded and self.collected)
            except SandboxError as exc:
                errors.append(exc)
            finally:
                self.sandbox = None
        if self.egress is not None:
            self.egress.close()
        if self.base is not None:
            release_snapshot(self.base)
            self.base = None
        if self.journal is not None:
            self.journal.close()
        close_model = None if self.shares_model else getattr(self.model, "close", None)
        if callable(close_model):  # its provider's pooled connections (reopened if asked)
            close_model()
        if errors:
            raise errors[0]

    def close_recorded(self, record: RunRecord, *, recorded: bool = False) -> RunRecord:
        """:meth:`close`, and a record that says what teardown could not do (what it left,
        ``corral gc`` cleans; captured diffs are kept)."""
        try:
            self.close(recorded=recorded)
        except SandboxError as exc:
            record = record.model_copy(update={"notes": [
                *record.notes, f"teardown failed ({exc.code}): {exc.message}; what it left, "
                "`corral gc` cleans (captured diffs are kept)"]})
            write_run(self.settings.ledger, record, [], patch=self.patch,
                      keep_transcript=True, preimages=self.preimages)
        return record
