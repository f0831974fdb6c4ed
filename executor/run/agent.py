"""Running an agent end to end, and its delegated children.

:func:`run_agent` is the library call behind ``corral run``: it resolves the
agent, derives its capability from the user's root capability, resolves its
model, opens its sandbox in the mode the capability derives, runs the
session, collects the diff after the child's processes are stopped, tears the
sandbox down and writes the run record. A user's mistake (an unknown agent,
an agent that may not be run, a model that needs an override) fails before
anything is created.

Delegation (:class:`AgentRun.delegate`, the ``delegate`` tool) starts a child
with a capability derived from its parent's at creation, checked against the
delegation allowlist, reachability, status and depth; the child runs in its
own sandbox opened on the parent's workspace; its result (final text, status,
diff) comes back as the tool result, cut with an explicit marker where too
long, and the full text stays in the child's run record. Children are
retained until their parent ends and accept follow-ups (``child=<run id>``).

Each session's tools come from :func:`executor.agents.offer.make_offer`, the same
computation ``agents show`` prints. A run that names no agent runs the
zuno ``default_agent``; a catalog agent's response reviewers check its answer
(:mod:`executor.run.reviews`), and its welcome message is shown when its
top-level session starts.

The ``delegate`` tool's parallel mode (several tasks at once) is
:mod:`executor.run.parallel`: its children run concurrently through the
scheduling seam (:mod:`executor.scheduling`), under the tree's shared budgets.
A fanout (:mod:`executor.fanout`) runs N top-level runs of this module
concurrently; :class:`RunSettings` carries what they share: the snapshot they
start from, the cancellation, and the fanout's id.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

from executor.agents.offer import make_offer, root_capability, servers_to_start
from executor.agents.suggest import unknown_agent
from executor.apply.preimages import capture_preimages
from executor.errors import ModelError, RunError
from executor.ledger import (
    RunRecord,
    RunStatus,
    new_run_id,
    now_iso,
    running_owner,
    write_run,
)
from executor.mcpclient import McpServers
from executor.models import Model, Sampling, ScriptedModel
from executor.run.prepare import agent_model, settings_apply, task_contract, usable_reviewers
from executor.run.reviews import run_reviews
from executor.run.session import (
    ProgressEvent,
    RunCancelled,
    RunTimeout,
    Session,
    SessionOutcome,
    SharedLimits,
)
from executor.run.skills import resolve_skills
from executor.scheduling import Cancellation, Deadline, LocalScheduler, Scheduler
from executor.tools import ToolContext, native_tools, truncate, with_overrides
from executor.tools.dispatch import ApprovalHandler, Dispatcher, Tool, ToolDenied
from executor.tools.mcptool import mcp_tools
from policies.capability import (
    Capability,
    DelegationDenied,
    admit_listed,
    check_delegation,
    derive_child,
)
from policies.config import UserConfig
from policies.contract import AgentContract, AgentStatus, SandboxMode
from policies.loader import Environment, LoadResult
from policies.scoping import delegation_targets, local_name, namespace_of, resolve_agent
from policies.templates import render as render_template
from sandbox.config import BackendConfig
from sandbox.environment import EnvironmentRef
from sandbox.errors import SandboxConfigError, SandboxDenied, SandboxError
from sandbox.factory import open_sandbox
from sandbox.protocol import Sandbox
from sandbox.replay import open_replay
from sandbox.state import check_state_dir, default_state_root
from sandbox.workspaces.repo import inspect_repo
from sandbox.workspaces.snapshot import SnapshotRef, acquire_snapshot, release_snapshot

__all__ = ["AgentRun", "RunSettings", "SchedulerFactory", "check_top", "run_agent", "top_model"]

MAX_RESULT_CHARS = 8_000
MAX_DIFF_CHARS = 16_000

#: (jobs at once, shared deadline, cancellation) -> the scheduler of one parallel delegate
#: call. The default runs them in threads here (:class:`LocalScheduler`).
SchedulerFactory = Callable[[int, Deadline, Cancellation], Scheduler]


def local_scheduler(jobs: int, deadline: Deadline, cancellation: Cancellation) -> Scheduler:
    """The default :data:`SchedulerFactory`: a thread pool of this process."""
    return LocalScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation,
                          name="corral-delegate")


@dataclass
class RunSettings:
    """Everything a run needs that is not the agent or the prompt."""

    root: Path
    backend: BackendConfig
    config: UserConfig
    registry: LoadResult
    ledger: Path
    env: Environment
    trust_project: bool = False
    mode_ceiling: SandboxMode = SandboxMode.WORKTREE
    model_override: str | None = None
    script: ScriptedModel | None = None
    approval: ApprovalHandler | None = None
    progress: Callable[[ProgressEvent], None] | None = None
    timeout_seconds: float | None = None
    limits: SharedLimits = field(default_factory=SharedLimits)
    state_root: Path | None = None
    use_ripgrep: bool = True
    #: Where ``config`` was read from, to name it when it lacks what the run needs.
    config_file: Path | None = None
    #: Shows an agent's welcome message (catalog ``welcomeMessage``) when its top-level
    #: session starts: (agent, message).
    welcome: Callable[[str, str], None] | None = None
    #: The one snapshot a fanout took before its children started; passed to
    #: ``open_sandbox`` so every child starts from it. ``None``: each run snapshots the
    #: checkout when its sandbox opens.
    snapshot: SnapshotRef | None = None
    #: Polled by every session of the tree (a fanout's, or a parallel delegate call's);
    #: a cancelled run ends ``cancelled``, its diff recorded.
    cancellation: Cancellation | None = None
    #: The fanout this run belongs to (recorded in its record).
    fanout: str | None = None
    #: Where the tasks of a parallel delegate call run (the scheduling seam).
    scheduler: SchedulerFactory = local_scheduler
    #: How many tasks of one parallel delegate call run at once (pi: 4).
    parallel_jobs: int = 4
    #: The project's environment under every sandbox of the run (children, checks,
    #: reviewers), prepared before anything ran (:mod:`executor.run.environment`).
    environment: EnvironmentRef | None = None


def _runnable(contract: AgentContract) -> str | None:
    if contract.disabled:
        return "it is disabled"
    if contract.status not in (None, AgentStatus.ACTIVE):
        return f"its status is {contract.status.value if contract.status else ''}"
    if not contract.user_invocable:
        return "it is not user-invocable (a subagent only)"
    return None


def _model(settings: RunSettings, contract: AgentContract, parent: Model | None) -> Model:
    if isinstance(parent, ScriptedModel):
        # The replay that drives the parent drives its subtree: the tree's own, or the one a
        # parallel delegate call gave this branch (each task plays its own replay).
        return parent
    return agent_model(contract, config=settings.config, script=settings.script,
                       override=settings.model_override, parent=parent)


def check_top(settings: RunSettings, agent: str | None) -> tuple[AgentContract, Capability]:
    """Everything a user may have got wrong about a top-level run, checked before anything
    is created: the agent (``None``: the zuno ``default_agent``, "Agent to use when none is
    named"), whether it may run, its reviewers, the repository, the state dirs; its
    capability under the user's root capability."""
    if agent is None:
        agent = settings.registry.default_agent
        if agent is None:
            raise RunError("no agent was named and no default_agent is set", code="no_agent",
                           hint="pass --agent NAME, or set default_agent in a zuno.json")
    contract = settings.registry.get(agent)
    if contract is None:
        raise unknown_agent(agent, settings.registry, trusted=settings.trust_project)
    refusal = _runnable(contract)
    if refusal is not None:
        raise RunError(f"agent {agent!r} cannot be run: {refusal}", code="agent_not_runnable")
    usable_reviewers(contract, settings.registry)
    try:
        info = inspect_repo(settings.root)  # a user's mistake: before anything is created
    except SandboxConfigError as exc:
        raise RunError(exc.message, code="not_a_repository", hint=exc.hint) from exc
    # Neither the ledger nor the sandboxes' state may lie where a child could write them.
    repository = [settings.root, info.top, info.git_dir, info.common_dir]
    check_state_dir(settings.ledger, repositories=repository)
    check_state_dir(settings.state_root or default_state_root(), repositories=repository)
    root = root_capability(settings.config, settings.registry, sandbox=settings.mode_ceiling)
    return contract, derive_child(root.model_copy(update={"depth": root.depth + 1}), contract)


def top_model(settings: RunSettings, contract: AgentContract) -> Model:
    """The model of a top-level run, or the user error it is when it cannot be resolved."""
    try:
        return _model(settings, contract, None)
    except ModelError as exc:  # nothing was contacted: the route or the config is wrong
        if exc.code == "variant":
            raise RunError(exc.message, code="unknown_variant", context=exc.context,
                           hint=exc.hint) from exc
        raise _no_model(exc, settings) from exc


def run_agent(settings: RunSettings, agent: str | None, prompt: str) -> RunRecord:
    """Run one agent as the top of a run tree; return its record (also written).

    ``agent`` ``None`` runs the default agent (zuno ``default_agent``: "Agent to use
    when none is named").
    """
    contract, capability = check_top(settings, agent)
    model = top_model(settings, contract)
    deadline = _deadline(settings.timeout_seconds, contract.timeout_seconds)
    run = AgentRun(settings, contract, capability, model, repo=settings.root, depth=0,
                   parent_run=None, deadline=deadline)
    if contract.welcome_message and settings.welcome is not None:
        settings.welcome(contract.display_name, contract.welcome_message)
    try:
        record = run.turn(prompt)
    except BaseException:
        run.close()
        raise
    return run.close_recorded(record)


def _no_model(exc: ModelError, settings: RunSettings) -> RunError:
    """A model that cannot be resolved before the run, as the user error it is (exit 2),
    naming the config file that was read (or that none was there)."""
    where = settings.config_file
    context = dict(exc.context)
    if where is not None:
        context["config"] = str(where) if where.exists() else f"{where} (not found: empty)"
    hint = exc.hint or "pass --model ROUTE, or --script FILE for a scripted replay"
    if where is not None:
        hint += f"\nproviders, roles and default_model are read from {where}"
    return RunError(exc.message, code="no_model", operation="resolve_model", context=context,
                    hint=hint)


def _deadline(*limits: float | None) -> float | None:
    present = [limit for limit in limits if limit is not None]
    return time.monotonic() + min(present) if present else None


class AgentRun:
    """One agent of a run tree: its sandbox, session, record and retained children."""

    def __init__(self, settings: RunSettings, contract: AgentContract, capability: Capability,
                 model: Model, *, repo: Path, depth: int, parent_run: str | None,
                 deadline: float | None, handoff: str | None = None,
                 reviewing: bool = False, run_id: str | None = None) -> None:
        self.settings = settings
        self.handoff = handoff
        #: A response reviewer at work: its own reviewers are not run (no loops).
        self.reviewing = reviewing
        self.reviews: list[dict[str, Any]] = []
        self.contract = contract
        self.capability = capability
        self.model = model
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
        self._forget_cancel: Callable[[], None] | None = None
        self.preimages: dict[str, bytes] = {}  # for `corral apply --3way`
        self.sandbox: Sandbox | None = None
        #: Its sandbox opened (it stays true once the sandbox is torn down).
        self.opened = False
        #: The snapshot this run started from, taken for its reviewers (they read its
        #: recorded diff over it, :meth:`_review_workspace`); released at :meth:`close`.
        self.base: SnapshotRef | None = None
        #: The MCP servers this run started (in its sandbox), and the schemas its parent
        #: was shown (a child's bound: tool -> schema fingerprint).
        self.mcp: McpServers | None = None
        self.mcp_bound: dict[str, str] | None = None
        self.session: Session | None = None
        self.context: ToolContext | None = None
        self.started_at = now_iso()
        self.clock = time.monotonic()
        self._prompt = ""
        self.record = RunRecord(
            run_id=self.run_id, parent_run=parent_run, agent=contract.name,
            agent_format=contract.origin.format.value, agent_source=contract.origin.source,
            contract_digest=contract.digest(), prompt="", model=model.name,
            backend=settings.backend.type, mode=capability.sandbox.value,
            status=RunStatus.FAILED, started_at=self.started_at, fanout=settings.fanout,
            environment=settings.environment.key if settings.environment else None,
        )

    # -- lifecycle -------------------------------------------------------------------------

    def _open(self) -> Session:
        skills = resolve_skills(self.contract.required_skills, root=self.settings.root,
                                env=self.settings.env, trust_project=self.settings.trust_project)
        # From here on, a record exists: a process killed now leaves a `running` record whose
        # owner is gone (shown as crashed), not nothing.
        self._write_running()
        self.phase("sandbox")
        # A fanout's one snapshot, when it took one: an overlay (or, where overlays are
        # unavailable, a worktree) over it; None: this run snapshots the checkout itself.
        snapshot = self.settings.snapshot
        environment = self.settings.environment
        layered = (environment is not None and environment.layer is not None
                   and self.capability.sandbox is SandboxMode.WORKTREE)
        reviewed = (self.contract.response_reviewers and not self.reviewing
                    and self.capability.sandbox is not SandboxMode.READ_ONLY)
        if snapshot is None and (reviewed or layered):
            # Its reviewers will read its recorded diff over the state it starts from; and an
            # environment's layer goes under an overlay of that state (copy-on-write).
            self.base = snapshot = acquire_snapshot(self.repo,
                                                    state_root=self.settings.state_root)
        self.sandbox = open_sandbox(self.settings.backend, repo=self.repo,
                                    mode=self.capability.sandbox,
                                    state_root=self.settings.state_root,
                                    snapshot=snapshot, environment=self.settings.environment)
        self.opened = True
        self.record = self.record.model_copy(update={"backend": self.sandbox.backend,
                                                     "sandbox_id": self.sandbox.id,
                                                     "base_commit": self.sandbox.base_commit})
        self._write_running()
        if self.settings.cancellation is not None:
            # A cancelled run's running command stops now, not at its timeout, and no later
            # command starts (one the session was about to start included).
            self._forget_cancel = self.settings.cancellation.on_cancel(self.sandbox.cancel)
        self._start_mcp()
        # One offer for the schemas and for `agents show`: they cannot disagree.
        offer = make_offer(self.capability, self.contract, self.settings.registry.agents,
                           servers=self.settings.config.mcp_servers, listing=self.mcp,
                           top=self.parent_run is None)
        descriptions = dict(offer.descriptions)
        implemented: dict[str, Tool[Any, ToolContext]] = {
            **native_tools(use_ripgrep=self.settings.use_ripgrep,
                           delegate_targets=offer.targets,
                           delegate_description=descriptions.pop("delegate", None)),
            **mcp_tools(self.mcp, self.settings.config.mcp_servers)}
        overrides = {b.name: b.overrides for b in self.contract.tool_bindings if b.enabled}
        tools = {name: with_overrides(implemented[name], overrides.get(name, {}))
                 for name in (*offer.tools, *offer.deferred)}
        self.context = ToolContext(sandbox=self.sandbox, agent=self.contract.name,
                                   delegate=self.delegate, list_agents=self.delegable,
                                   deadline=self.deadline, delegate_tasks=self.delegate_tasks)
        dispatcher = Dispatcher(
            agent=self.contract.name, capability=self.capability, tools=tools,
            context=self.context, approval=self.settings.approval, descriptions=descriptions,
            deferred=frozenset(offer.deferred), paths=self._spellings, names=offer.names,
            unavailable=offer.unavailable,
        )
        self.context.permits = dispatcher.permits
        self.context.deferred = {offer.wire(n): descriptions.get(n) or tools[n].description
                                 for n in offer.deferred}
        self.context.activate = dispatcher.activate
        self.session = Session(
            agent=self.contract.name, model=self.model, dispatcher=dispatcher,
            system_prompt=self._system_prompt([s.instructions for s in skills]),
            memory=self.contract.memory,
            sampling=Sampling(temperature=self.contract.temperature, top_p=self.contract.top_p,
                              reasoning=self.contract.reasoning if settings_apply(
                                  self.contract, self.settings.model_override) else None,
                              options=self.contract.options),
            steps=self.contract.steps, limits=self.settings.limits, deadline=self.deadline,
            progress=self.settings.progress, depth=self.depth, run_id=self.run_id,
            cancellation=self.settings.cancellation,
        )
        return self.session

    def _start_mcp(self) -> None:
        """Start the MCP servers whose tools this run could hold, in its sandbox, to list
        their exact schemas for the first request (:mod:`executor.mcpclient.servers`).

        A top-level run's capability then gains the listed tools its contract admits; a
        child's tools are its parent's listing, narrowed, and a tool its own server lists
        with another schema than the parent was shown is outside the bound."""
        servers = self.settings.config.mcp_servers
        top = self.parent_run is None
        wanted = servers_to_start(self.capability, self.contract, servers, top=top)
        if not wanted or self.sandbox is None:
            return
        self.phase("mcp servers")
        self.mcp = McpServers(servers, sandbox=self.sandbox, deadline=self.deadline)
        self.mcp.start(wanted)
        if self.mcp_bound is not None:
            for name, listed in list(self.mcp.listed.items()):
                if self.mcp_bound.get(name, listed.fingerprint()) != listed.fingerprint():
                    del self.mcp.listed[name]
                    self.mcp.rejected[name] = ("its schema differs from the one the delegating "
                                               "agent was shown")
        if top:
            self.capability = admit_listed(self.capability, self.contract, self.mcp.listed)
        notes = [f"MCP server {name!r} did not start: {why}"
                 for name, why in sorted(self.mcp.failures.items())]
        notes += [f"MCP tool {name} refused: {why}"
                  for name, why in sorted(self.mcp.rejected.items())]
        if notes:
            self.record = self.record.model_copy(update={"notes": [*self.record.notes, *notes]})

    def phase(self, detail: str) -> None:
        """Tell the live display what this run is doing outside its conversation."""
        if self.settings.progress is not None:
            self.settings.progress(ProgressEvent("phase", self.contract.name, 0, detail,
                                                 self.depth, (), self.run_id))

    def _write_running(self) -> None:
        running = self.record.model_copy(update={
            "status": RunStatus.RUNNING, "owner": running_owner(),
            "prompt": self.record.prompt or self._prompt})
        write_run(self.settings.ledger, running, [])

    def _spellings(self, path: str) -> list[str]:
        """A path subject as the rules must see it: normalized relative to the workspace,
        and the real path behind in-tree symlinks (strictest wins across spellings)."""
        if self.sandbox is None:
            return [path]
        try:
            lexical = "/".join(self.sandbox.files.parts(path)) or "."
        except SandboxError:
            return [path]  # the tool will refuse it with the reason
        spellings = [lexical]
        real = Path(os.path.realpath(self.sandbox.root / lexical))
        root = Path(os.path.realpath(self.sandbox.root))
        if real.is_relative_to(root):
            resolved = real.relative_to(root).as_posix() or "."
            if resolved != lexical:
                spellings.append(resolved)
        return spellings

    def _system_prompt(self, skills: list[str]) -> str:
        root = self.sandbox.root if self.sandbox is not None else self.repo
        instructions = self.contract.instructions.strip()
        if self.contract.instructions_template:  # filled in when the session starts
            instructions = render_template(instructions, today=date.today())
        parts = [instructions or f"You are the {self.contract.name} agent."]
        if self.handoff:
            parts.append(f"## Task contract from the agent that delegated to you\n\n"
                         f"{self.handoff}")
        parts += [f"## Skill\n\n{text}" for text in skills]
        parts.append(f"You work in {root} ({self.capability.sandbox.value} "
                     "sandbox); tool paths are relative to it.")
        return "\n\n".join(parts)

    def turn(self, prompt: str) -> RunRecord:
        """Run one turn (the task, or a follow-up); record it; keep the sandbox open."""
        status, error, outcome = RunStatus.COMPLETED, None, None
        self._prompt = self._prompt or prompt
        try:
            session = self.session if self.session is not None else self._open()
            outcome = session.run(prompt)
            if outcome.stopped_by != "answer":  # the summary of a stopped run, not an answer
                status = RunStatus.STEP_LIMIT
            elif self.contract.response_reviewers and not self.reviewing:
                with self._review_workspace() as root:
                    self.reviews = run_reviews(
                        usable_reviewers(self.contract, self.settings.registry),
                        self.contract.name, prompt, outcome.final_text,
                        lambda reviewer, task: self._review_with(reviewer, task, root))
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
            self._finish(prompt, RunStatus.CANCELLED, {"code": "cancelled"}, None)
            raise
        except Exception as exc:  # unforeseen: keep the tree's record, then fail loudly
            self._finish(prompt, RunStatus.FAILED,
                         {"code": "internal", "message": f"{type(exc).__name__}: {exc}"[:500]},
                         None)
            raise
        return self._finish(prompt, status, error, outcome)

    def skip(self, prompt: str, status: RunStatus, error: dict[str, Any]) -> RunRecord:
        """Record a run that never started (its fanout was cancelled, or its deadline passed
        before a slot was free): no sandbox, no diff, and a record all the same."""
        self._prompt = self._prompt or prompt
        return self._finish(prompt, status, error, None)

    def _finish(self, prompt: str, status: RunStatus, error: dict[str, Any] | None,
                outcome: SessionOutcome | None) -> RunRecord:
        update: dict[str, Any] = {"status": status, "error": error, "finished_at": now_iso(),
                                  "prompt": self.record.prompt or prompt}
        if self.sandbox is not None and self.capability.sandbox is not SandboxMode.READ_ONLY:
            self.phase("diff")
            self.collected = False
            try:
                diff = self.sandbox.collect_diff()
                self.collected = True
                self.patch = diff.patch
                self.preimages = capture_preimages(diff.patch, self.sandbox.files.read_bytes)
                update |= {"diff": diff.patch.decode("utf-8", "replace"),
                           "changed_files": [c.model_dump(mode="json") for c in diff.changed],
                           "excluded_files": [e.model_dump(mode="json") for e in diff.excluded],
                           "setid_cleared": list(diff.setid_cleared)}
            except SandboxError as exc:
                update |= {"status": RunStatus.FAILED, "error": exc.to_dict()}
        if self.session is not None:
            audit = self.session.dispatcher.audit
            update |= {
                "final_text": outcome.final_text if outcome else self.record.final_text,
                "audit": [a.to_json() for a in audit],
                "denied_calls": [{"tool": a.tool, "reason": a.reason}
                                 for a in self.session.dispatcher.denied],
                "usage": {"input_tokens": self.session.usage.input_tokens,
                          "output_tokens": self.session.usage.output_tokens,
                          "requests": self.session.requests},
                "steps": self.session.total_steps,
                "timings": {"duration_seconds": round(time.monotonic() - self.clock, 3),
                            "model_seconds": round(self.session.model_seconds, 3),
                            "tool_seconds": round(sum(a.duration_ms for a in audit) / 1000, 3)},
                "resources": dict(self.context.resources) if self.context else {},
                "notes": self.record.notes + (outcome.notes if outcome else []),
                "children": self.child_ids(),
                "reviews": list(self.reviews),
            }
        self.record = self.record.model_copy(update=update)
        write_run(self.settings.ledger, self.record,
                  self.session.messages if self.session else [], patch=self.patch,
                  preimages=self.preimages)
        self.phase(f"ended {self.record.status.value}")
        return self.record

    def child_ids(self) -> list[str]:
        """The run ids of the children started so far, in start order."""
        with self.lock:
            return list(self.children)

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
        if self._forget_cancel is not None:
            self._forget_cancel()
            self._forget_cancel = None
        if self.mcp is not None:  # the servers stop with the child (teardown kills the rest)
            self.mcp.close()
        if self.sandbox is not None:
            try:
                self.sandbox.teardown(discard=recorded and self.collected)
            except SandboxError as exc:
                errors.append(exc)
            finally:
                self.sandbox = None
        if self.base is not None:
            release_snapshot(self.base)
            self.base = None
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

    # -- delegation ------------------------------------------------------------------------

    def delegable(self) -> list[tuple[str, str]]:
        """Agents this one may delegate to right now (of its namespace, by the names it
        uses for them)."""
        return [(local_name(c), c.description or "") for c in delegation_targets(
            self.capability, self.contract, self.settings.registry.agents.values())]

    def delegate(self, agent: str, prompt: str, child_id: str | None,
                 instructions: str | None = None) -> str:
        """The ``delegate`` tool: start (or follow up with) a child; its result as text.

        ``instructions`` (pi's task contract) goes into a new child's system prompt,
        cut to 16 KB; a follow-up takes none (the child has its contract already).
        """
        if child_id is not None:
            child = self.retained(child_id, agent, instructions)
            return self.result_text(child, child.turn(prompt))
        contract, handoff, cut = self.plan_child(agent, instructions)
        if not self.settings.limits.take_child():
            raise ToolDenied("this run may start no more children (shared limit)")
        model = self.child_model(contract)
        if self.sandbox is None:
            raise ToolDenied("this agent has no workspace to delegate from")
        # The child's snapshot reads this workspace from the host: nothing of ours may
        # still be running (a left-behind process could swap paths under the snapshot).
        self.sandbox.stop_processes()
        child = self.spawn(contract, model, handoff=handoff, cut=cut)
        try:
            record = child.turn(prompt)
        except RunError as exc:
            self.forget_child(child)
            raise ToolDenied(f"{agent!r} could not start: {exc.message}") from exc
        report = self.result_text(child, record)
        return f"note: {cut}\n{report}" if cut else report

    def plan_child(self, agent: str,
                   instructions: str | None) -> tuple[AgentContract, str | None, str | None]:
        """A new child's contract (in this agent's namespace, allowed by its capability and
        usable), and its task contract cut to 16 KB with the note saying so, or the
        :class:`ToolDenied` the model sees; nothing is spent or created."""
        contract = resolve_agent(self.contract, agent, self.settings.registry.agents)
        if contract is None:
            names = ", ".join(name for name, _ in self.delegable()) or "none"
            raise ToolDenied(f"no agent named {agent!r} in namespace "
                             f"{namespace_of(self.contract)!r}; you may delegate to: {names}")
        try:
            check_delegation(self.capability, contract)
        except DelegationDenied as exc:
            raise ToolDenied(exc.message) from exc
        try:
            usable_reviewers(contract, self.settings.registry)
        except RunError as exc:
            raise ToolDenied(exc.message) from exc
        handoff, cut = task_contract(instructions)
        return contract, handoff, cut

    def child_model(self, contract: AgentContract) -> Model:
        """The model a new child runs, or the :class:`ToolDenied` the model sees."""
        try:
            return _model(self.settings, contract, self.model)
        except ModelError as exc:
            raise ToolDenied(f"cannot resolve a model for {local_name(contract)!r}: "
                             f"{exc.message}") from exc

    def spawn(self, contract: AgentContract, model: Model, *, handoff: str | None,
              cut: str | None, settings: RunSettings | None = None) -> AgentRun:
        """A new child on this agent's workspace, retained (not started yet)."""
        if self.sandbox is None:
            raise ToolDenied("this agent has no workspace to delegate from")
        remaining = self.deadline - time.monotonic() if self.deadline is not None else None
        # A child works on this agent's workspace, not on the checkout a fanout's snapshot
        # was taken of: it snapshots that workspace itself (never the fanout's snapshot).
        child = AgentRun(replace(settings or self.settings, snapshot=None), contract,
                         derive_child(self.capability, contract), model,
                         repo=self.sandbox.root, depth=self.depth + 1, parent_run=self.run_id,
                         deadline=_deadline(remaining, contract.timeout_seconds),
                         handoff=handoff)
        child.mcp_bound = ({name: t.fingerprint() for name, t in self.mcp.listed.items()}
                           if self.mcp is not None else {})
        if cut:
            child.record = child.record.model_copy(update={"notes": [cut]})
        with self.lock:
            self.children[child.run_id] = child
        return child

    def forget_child(self, child: AgentRun) -> None:
        """Drop a child that could not start (it has no record to point at)."""
        with self.lock:
            self.children.pop(child.run_id, None)

    def retained(self, ref: str, agent: str, instructions: str | None) -> AgentRun:
        """The retained child a follow-up names, checked against the agent the permission
        rules judged; or the :class:`ToolDenied` the model sees."""
        child = self._retained(ref)
        if local_name(child.contract) != agent and child.contract.name != agent:
            raise ToolDenied(f"child {ref!r} runs agent {local_name(child.contract)!r}, "
                             f"not {agent!r}")  # the permission rules judged `agent`
        if instructions is not None:
            raise ToolDenied("instructions are the task contract of a new child; send a "
                             "follow-up as the prompt")
        return child

    def delegate_tasks(self, tasks: list[Any]) -> str:
        """The ``delegate`` tool's parallel mode (:mod:`executor.run.parallel`)."""
        from executor.run.parallel import delegate_tasks  # noqa: PLC0415 - a cycle

        return delegate_tasks(self, tasks)

    @contextmanager
    def _review_workspace(self) -> Iterator[Path]:
        """Where this agent's reviewers read: its recorded diff over the state it started
        from, in a fresh sandbox (:func:`sandbox.replay.open_replay`), never its own
        workspace, so nothing of its session (a process it left, a file its diff does not
        carry) can sway a verdict. A read-only agent changed nothing: they read what it
        read."""
        if self.sandbox is None:
            raise RunError("the reviewed agent has no workspace", code="review")
        if self.capability.sandbox is SandboxMode.READ_ONLY:
            self.sandbox.stop_processes()
            yield self.sandbox.root
            return
        diff = self.sandbox.collect_diff()  # frozen: nothing of this agent runs any more
        replay = open_replay(self.settings.backend, repo=self.repo,
                             snapshot=self.settings.snapshot or self.base, patch=diff.patch,
                             state_root=self.settings.state_root,
                             environment=self.settings.environment)
        try:
            yield replay.root
        finally:
            replay.teardown(discard=True)

    def _review_with(self, reviewer: AgentContract, prompt: str, root: Path) -> RunRecord:
        """One response reviewer, read-only on ``root`` (:meth:`_review_workspace`), under
        this agent's capability, no delegation; closed as soon as it answered."""
        ceiling = self.capability.model_copy(update={
            "sandbox": SandboxMode.READ_ONLY, "read_only": True, "depth": 1,
            "delegates": frozenset()})
        try:
            model = _model(self.settings, reviewer, self.model)
        except ModelError as exc:
            raise RunError(f"no model for reviewer {reviewer.name!r}: {exc.message}",
                           code="review") from exc
        remaining = self.deadline - time.monotonic() if self.deadline is not None else None
        run = AgentRun(self.settings, reviewer, derive_child(ceiling, reviewer), model,
                       repo=root, depth=self.depth + 1, parent_run=self.run_id,
                       deadline=_deadline(remaining, reviewer.timeout_seconds), reviewing=True)
        try:
            return run.turn(prompt)
        finally:
            run.close()

    def _retained(self, ref: str) -> AgentRun:
        """A retained child by run id, or by agent name when exactly one child ran it."""
        with self.lock:
            children = dict(self.children)
        if ref in children:
            return children[ref]
        named = [c for c in children.values() if c.contract.name == ref]
        if len(named) == 1:
            return named[0]
        yours = ", ".join(f"{rid} ({c.contract.name})" for rid, c in children.items())
        why = "is ambiguous" if named else "is not one of your retained children"
        raise ToolDenied(f"child {ref!r} {why}; yours are: {yours or 'none'}")

    @staticmethod
    def result_text(child: AgentRun, record: RunRecord, *, share: int = 1) -> str:
        """The child's result for its parent's model; ``share``: how many results go back
        in one tool result (a parallel call's), which divides the text and diff limits."""
        in_patch = [c for c in record.changed_files if c.get("in_patch", True)]
        outside = [c for c in record.changed_files if not c.get("in_patch", True)]
        files = ", ".join(c["path"] for c in in_patch) or "none"
        lines = [f"child run {record.run_id} (agent {record.agent}): {record.status.value}, "
                 f"{record.mode} sandbox; follow up with child={record.run_id}"]
        if record.error:
            lines.append(f"error: {record.error.get('message', record.error.get('code'))}")
        lines += [f"review by {review['reviewer']}: {review['verdict'].upper()}"
                  for review in record.reviews]
        lines.append(truncate(record.final_text or "(no final text)",
                              max(MAX_RESULT_CHARS // share, 1000),
                              what="the child's final text",
                              hint=f"the full text is in run {record.run_id}"))
        if record.diff:
            where = ("the child wrote these changes into your workspace"
                     if record.mode == SandboxMode.WORKSPACE_WRITE.value else
                     "these changes are in the child's own workspace, not in yours; only the "
                     f"user merges them (corral apply {record.run_id})")
            lines.append(f"--- diff ({len(in_patch)} file(s): {files}; {where}) ---")
            lines.append(truncate(record.diff, max(MAX_DIFF_CHARS // share, 2000),
                                  what="the diff",
                                  hint=f"the full diff is in run {record.run_id}"))
        if outside:  # workspace-write: changed in the checkout, but no diff can show them
            listed = "\n".join(f"{c['status']} {c['path']} ({', '.join(c['flags'])})"
                               for c in outside)
            lines.append(f"--- changed outside the diff ({len(outside)}) ---")
            lines.append(truncate(listed, MAX_RESULT_CHARS, what="the list",
                                  hint=f"the full list is in run {record.run_id}"))
        return "\n".join(lines)

