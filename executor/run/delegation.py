"""Delegation: the ``delegate`` tool starts a child of a run, or follows one up.

A child gets a capability derived from its parent's at creation
(:func:`policies.capability.derive_child`), checked against the delegation
allowlist, reachability, status and depth; it runs in its own sandbox opened
on the parent's workspace; its result (final text, status, diff) comes back as
the tool result, cut with an explicit marker where too long (the full text
stays in the child's run record). Children are retained until their parent
ends and accept follow-ups (``child=<run id>``, or the agent's name when one
child runs it). The parallel mode (several tasks in one call) is
:mod:`executor.run.parallel`, built from the same steps.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from executor.errors import ModelError, RunError
from executor.ledger import RunRecord
from executor.models import Model
from executor.run.prepare import model_for, task_contract, usable_reviewers
from executor.run.settings import RunSettings, deadline_after
from executor.tools import truncate
from executor.tools.dispatch import ToolDenied
from policies.capability import DelegationDenied, check_delegation, derive_child
from policies.contract import AgentContract, SandboxMode
from policies.scoping import delegation_targets, local_name, namespace_of, resolve_agent

if TYPE_CHECKING:
    from executor.run.agent import AgentRun

__all__ = ["MAX_DIFF_CHARS", "MAX_RESULT_CHARS", "child_model", "delegable", "delegate",
           "forget_child", "plan_child", "result_text", "retained", "spawn"]

MAX_RESULT_CHARS = 8_000
MAX_DIFF_CHARS = 16_000


def delegable(parent: AgentRun) -> list[tuple[str, str]]:
    """Agents ``parent`` may delegate to right now (of its namespace, by the names it uses
    for them)."""
    return [(local_name(c), c.description or "") for c in delegation_targets(
        parent.capability, parent.contract, parent.settings.registry.agents.values())]


def delegate(parent: AgentRun, agent: str, prompt: str, child_id: str | None,
             instructions: str | None = None) -> str:
    """The ``delegate`` tool: start (or follow up with) a child; its result as text.

    ``instructions`` (pi's task contract) goes into a new child's system prompt,
    cut to 16 KB; a follow-up takes none (the child has its contract already).
    """
    if child_id is not None:
        child = retained(parent, child_id, agent, instructions)
        return result_text(child.turn(prompt))
    contract, handoff, cut = plan_child(parent, agent, instructions)
    if not parent.settings.limits.take_child():
        raise ToolDenied("this run may start no more children (shared limit)")
    model = child_model(parent, contract)
    if parent.sandbox is None:
        raise ToolDenied("this agent has no workspace to delegate from")
    # The child's snapshot reads this workspace from the host: nothing of ours may
    # still be running (a left-behind process could swap paths under the snapshot).
    parent.sandbox.stop_processes()
    child = spawn(parent, contract, model, handoff=handoff, cut=cut)
    try:
        record = child.turn(prompt)
    except RunError as exc:
        forget_child(parent, child)
        raise ToolDenied(f"{agent!r} could not start: {exc.message}") from exc
    report = result_text(record)
    return f"note: {cut}\n{report}" if cut else report


def plan_child(parent: AgentRun, agent: str,
               instructions: str | None) -> tuple[AgentContract, str | None, str | None]:
    """A new child's contract (in the parent's namespace, allowed by its capability and
    usable), and its task contract cut to 16 KB with the note saying so, or the
    :class:`ToolDenied` the model sees; nothing is spent or created."""
    contract = resolve_agent(parent.contract, agent, parent.settings.registry.agents)
    if contract is None:
        names = ", ".join(name for name, _ in delegable(parent)) or "none"
        raise ToolDenied(f"no agent named {agent!r} in namespace "
                         f"{namespace_of(parent.contract)!r}; you may delegate to: {names}")
    try:
        check_delegation(parent.capability, contract)
    except DelegationDenied as exc:
        raise ToolDenied(exc.message) from exc
    try:
        usable_reviewers(contract, parent.settings.registry)
    except RunError as exc:
        raise ToolDenied(exc.message) from exc
    handoff, cut = task_contract(instructions)
    return contract, handoff, cut


def child_model(parent: AgentRun, contract: AgentContract) -> Model:
    """The model a new child runs, or the :class:`ToolDenied` the model sees."""
    try:
        return model_for(parent.settings, contract, parent.model)
    except ModelError as exc:
        raise ToolDenied(f"cannot resolve a model for {local_name(contract)!r}: "
                         f"{exc.message}") from exc


def spawn(parent: AgentRun, contract: AgentContract, model: Model, *, handoff: str | None,
          cut: str | None, settings: RunSettings | None = None) -> AgentRun:
    """A new child on the parent's workspace, retained (not started yet)."""
    if parent.sandbox is None:
        raise ToolDenied("this agent has no workspace to delegate from")
    remaining = parent.deadline - time.monotonic() if parent.deadline is not None else None
    # A child works on this agent's workspace, not on the checkout a fanout's snapshot
    # was taken of: it snapshots that workspace itself (never the fanout's snapshot).
    child = parent.new_child(replace(settings or parent.settings, snapshot=None), contract,
                             derive_child(parent.capability, contract), model,
                             repo=parent.sandbox.root,
                             deadline=deadline_after(remaining, contract.timeout_seconds),
                             handoff=handoff)
    child.mcp_bound = ({name: t.fingerprint() for name, t in parent.mcp.listed.items()}
                       if parent.mcp is not None else {})
    if cut:
        child.record = child.record.model_copy(update={"notes": [cut]})
    with parent.lock:
        parent.children[child.run_id] = child
    return child


def forget_child(parent: AgentRun, child: AgentRun) -> None:
    """Drop a child that could not start (it has no record to point at)."""
    with parent.lock:
        parent.children.pop(child.run_id, None)


def retained(parent: AgentRun, ref: str, agent: str, instructions: str | None) -> AgentRun:
    """The retained child a follow-up names, checked against the agent the permission
    rules judged; or the :class:`ToolDenied` the model sees."""
    child = _retained(parent, ref)
    if local_name(child.contract) != agent and child.contract.name != agent:
        raise ToolDenied(f"child {ref!r} runs agent {local_name(child.contract)!r}, "
                         f"not {agent!r}")  # the permission rules judged `agent`
    if instructions is not None:
        raise ToolDenied("instructions are the task contract of a new child; send a "
                         "follow-up as the prompt")
    return child


def _retained(parent: AgentRun, ref: str) -> AgentRun:
    """A retained child by run id, or by agent name when exactly one child ran it."""
    with parent.lock:
        children = dict(parent.children)
    if ref in children:
        return children[ref]
    named = [c for c in children.values() if c.contract.name == ref]
    if len(named) == 1:
        return named[0]
    yours = ", ".join(f"{rid} ({c.contract.name})" for rid, c in children.items())
    why = "is ambiguous" if named else "is not one of your retained children"
    raise ToolDenied(f"child {ref!r} {why}; yours are: {yours or 'none'}")


def result_text(record: RunRecord, *, share: int = 1) -> str:
    """A child's result for its parent's model; ``share``: how many results go back in
    one tool result (a parallel call's), which divides the text and diff limits."""
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
    if record.held_files:  # agent and editor configuration: not in the workspace
        lines.append(f"--- held out of the workspace ({len(record.held_files)}): agent or "
                     "editor configuration a workspace-write child may not write; only the "
                     "user can put it back ---")
        lines.append(truncate("\n".join(record.held_files), MAX_RESULT_CHARS,
                              what="the list", hint=f"the full list is in run {record.run_id}"))
    return "\n".join(lines)
