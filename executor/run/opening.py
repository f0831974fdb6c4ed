"""Opening an agent's run: its sandbox, its MCP servers, its tools and its session.

:func:`open_session` runs when an agent's first turn starts. It records the run
as ``running`` first (a process killed from then on leaves a record that reads
``crashed``, not nothing), opens the sandbox in the mode the capability derives
(on a fanout's one snapshot when there is one; on a snapshot of its own when it
is a top-level worktree child where overlays work, or its reviewers or an
environment's layer need one), starts the MCP servers whose
tools the run could hold (:func:`start_mcp`), builds its tools from
:func:`executor.agents.offer.make_offer` (the computation ``agents show`` prints)
and its dispatcher, and its session with the system prompt; the session, the
dispatcher and the shell's output go to the run's journal. A run that continues
another (:mod:`executor.run.resume`) gets that run's diff replayed into its
sandbox before anything else runs there, and that run's conversation after its
own system prompt. The system prompt holds only what the definition wrote (and its
skills), so it is byte-identical across runs; where the run works goes before the task.
"""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.agents.offer import make_offer, servers_to_start
from executor.mcpclient import McpServers
from executor.models import Sampling
from executor.models.base import model_limits
from executor.run.egress import open_egress
from executor.run.prepare import settings_apply
from executor.run.recording import write_running
from executor.run.resume import replay_into
from executor.run.session import Session
from executor.run.skills import resolve_skills
from executor.tools import ToolContext, native_tools, override_note, with_overrides
from executor.tools.dispatch import Dispatcher, Tool
from executor.tools.mcptool import mcp_tools
from policies.capability import (
    GRANT_NOTE,
    REVIEW_COMMAND_GROUPS,
    admit_listed,
    shell_removed,
)
from policies.contract import SandboxMode
from policies.permissions import Action, denied_programs, only_patterns_allow
from policies.templates import render as render_template
from policies.tools import group_of
from sandbox.errors import SandboxError
from sandbox.factory import open_sandbox, overlays_unusable, scratch_unusable
from sandbox.workspaces.snapshot import acquire_snapshot

if TYPE_CHECKING:
    from executor.run.agent import AgentRun

__all__ = ["open_session", "spellings", "start_mcp", "system_prompt", "task_context"]


def open_session(run: AgentRun) -> Session:
    """Open ``run``'s sandbox, servers, tools and session (see the module docstring)."""
    skills = resolve_skills(run.contract.required_skills, root=run.settings.root,
                            env=run.settings.env, trust_project=run.settings.trust_project)
    # From here on, a record exists: a process killed now leaves a `running` record whose
    # owner is gone (shown as crashed), not nothing.
    write_running(run)
    run.phase("sandbox")
    # A fanout's one snapshot, when it took one: an overlay (or, where overlays are
    # unavailable, a worktree) over it; None: this run snapshots the checkout itself.
    snapshot = run.settings.snapshot
    environment = run.settings.environment
    layered = (environment is not None and environment.layer is not None
               and run.capability.sandbox is SandboxMode.WORKTREE)
    reviewed = (run.contract.response_reviewers and not run.reviewing
                and run.capability.sandbox is not SandboxMode.READ_ONLY)
    # A top-level worktree child is an overlay over the shared snapshot of the checkout's
    # state wherever overlays work (as root): its set-up and diff cost what it changes,
    # and the next run on the same state reuses the snapshot. Elsewhere: a worktree.
    overlaid = (run.parent_run is None and run.capability.sandbox is SandboxMode.WORKTREE
                and overlays_unusable(run.settings.state_root) is None)
    if snapshot is None and (reviewed or layered or overlaid):
        # Its reviewers will read its recorded diff over the state it starts from; and an
        # environment's layer goes under an overlay of that state (copy-on-write).
        run.base = snapshot = acquire_snapshot(run.repo, state_root=run.settings.state_root)
    notes = _review_commands(run)
    run.egress, egress_note = open_egress(run)
    notes += [egress_note] if egress_note else []
    run.sandbox = sandbox = open_sandbox(run.settings.backend, repo=run.repo,
                                         mode=run.capability.sandbox,
                                         state_root=run.settings.state_root,
                                         snapshot=snapshot,
                                         environment=run.settings.environment,
                                         scratch_size=scratch_size(run), egress=run.egress,
                                         denied=denied_programs(run.capability.layers))
    run.opened = True
    run.record = run.record.model_copy(update={"backend": sandbox.backend,
                                               "sandbox_id": sandbox.id,
                                               "base_commit": sandbox.base_commit})
    kept = notes + [f"the deny {d.pattern!r} is not enforced where {d.name} runs: {d.kept}"
                    for d in sandbox.denials if d.kept]
    if shell_removed(run.capability, run.contract):  # the user's grant would keep it
        kept.append(GRANT_NOTE)
    if kept:
        run.record = run.record.model_copy(update={"notes": [*run.record.notes, *kept]})
    write_running(run)
    if run.resume is not None:  # the run it continues: its changes in place first
        run.phase("replay")
        replay_into(sandbox, run.resume.patch)
        run.replayed = True
    if run.settings.cancellation is not None:
        # A cancelled run's running command stops now, not at its timeout, and no later
        # command starts (one the session was about to start included).
        run.forget_cancel = run.settings.cancellation.on_cancel(sandbox.cancel)
    start_mcp(run)
    # One offer for the schemas and for `agents show`: they cannot disagree.
    network = run.settings.config.network.grant()  # the user's only (--allow-net is in it)
    offer = make_offer(run.capability, run.contract, run.settings.registry.agents,
                       servers=run.settings.config.mcp_servers, listing=run.mcp,
                       top=run.parent_run is None, network=network)
    if offer.network is not None:  # what web_fetch may reach, in the record
        run.record = run.record.model_copy(update={"notes": [
            *run.record.notes, "web_fetch may reach (your grant): "
            + ", ".join(offer.network["allow"])
            + (f"; denied: {', '.join(offer.network['deny'])}" if offer.network["deny"] else "")
            + (f"; narrowed by this agent's rules: {'; '.join(offer.network['rules'])}"
               if offer.network["rules"] else "")]})
    descriptions = dict(offer.descriptions)
    implemented: dict[str, Tool[Any, ToolContext]] = {
        **native_tools(use_ripgrep=run.settings.use_ripgrep,
                       delegate_targets=offer.targets,
                       delegate_description=descriptions.pop("delegate", None),
                       network=network, url_rule=lambda url: run.capability.decide(
                           "web_fetch", url) is Action.ALLOW),
        **mcp_tools(run.mcp, run.settings.config.mcp_servers)}
    overrides = {b.name: b.overrides for b in run.contract.tool_bindings if b.enabled}
    tools = {name: with_overrides(implemented[name], overrides.get(name, {}))
             for name in (*offer.tools, *offer.deferred)}
    for name, tool in tools.items():  # a binding's own description still says its baseDir
        if name in descriptions and override_note(tool):
            descriptions[name] = f"{descriptions[name]} {override_note(tool)}"
    run.context = context = ToolContext(sandbox=sandbox, agent=run.contract.name,
                                        delegate=run.delegate, list_agents=run.delegable,
                                        deadline=run.deadline,
                                        delegate_tasks=run.delegate_tasks,
                                        shell_by_pattern=only_patterns_allow(
                                            run.capability.layers, "shell"))
    dispatcher = Dispatcher(
        agent=run.contract.name, capability=run.capability, tools=tools,
        context=context, approval=run.settings.approval, descriptions=descriptions,
        deferred=frozenset(offer.deferred), paths=lambda path: spellings(run, path),
        names=offer.names, unavailable=offer.unavailable,
    )
    context.permits = dispatcher.permits
    context.deferred = {offer.wire(n): descriptions.get(n) or tools[n].description
                        for n in offer.deferred}
    context.activate = dispatcher.activate
    instructions = system_prompt(run, [s.instructions for s in skills])
    limits = model_limits(run.model)
    run.session = Session(
        agent=run.contract.name, model=run.model, dispatcher=dispatcher,
        system_prompt=instructions, task_context=task_context(run),
        memory=run.contract.memory,
        sampling=Sampling(temperature=run.contract.temperature, top_p=run.contract.top_p,
                          reasoning=run.contract.reasoning if settings_apply(
                              run.contract, run.settings.model_override) else None,
                          options=run.contract.options,
                          tool_choice=_agent_tool_choice(run),
                          max_tokens=limits.output_tokens()),
        budget_tokens=limits.input_budget(),
        steps=run.contract.steps, limits=run.settings.limits, deadline=run.deadline,
        progress=run.settings.progress, depth=run.depth, run_id=run.run_id,
        cancellation=run.settings.cancellation,
    )
    if run.resume is not None:  # the conversation so far, after this run's own system prompt
        run.session.messages.extend(run.resume.messages)
    if run.journal is not None:  # every prompt, answer, call and output chunk, as it happens
        run.journal.event("prompt", role="system", text=instructions)
        if run.resume is not None:
            run.journal.event("phase", detail=f"continues run {run.resume.record.run_id} "
                              f"({len(run.resume.messages)} earlier message(s))")
        run.session.journal = dispatcher.journal = run.journal.event
        context.on_output = run.journal.output
    return run.session


def _review_commands(run: AgentRun) -> list[str]:
    """A read-only run's shell where no throwaway layer can be had (a normal user, the
    host backend): removed, and the record says why (never run on the checkout)."""
    if scratch_size(run) is None:
        return []
    why = scratch_unusable(run.settings.backend, run.repo, run.settings.state_root)
    if why is None:
        return []
    capability = run.capability
    run.capability = capability.model_copy(update={"tools": frozenset(
        t for t in capability.tools if group_of(t) not in REVIEW_COMMAND_GROUPS)})
    return [f"shell removed: read-only, and no throwaway layer here: {why}"]


def scratch_size(run: AgentRun) -> int | None:
    """The size of a read-only run's throwaway layer: when it holds a shell (the user
    granted review commands, :mod:`sandbox.workspaces.scratch`); else ``None``."""
    capability = run.capability
    if not capability.read_only or not any(
            group_of(tool) in REVIEW_COMMAND_GROUPS for tool in capability.tools):
        return None
    return run.settings.config.review.scratch_size


def _agent_tool_choice(run: AgentRun) -> str | None:
    """The user config's ``[agents.NAME] tool_choice`` for this agent (``None``: the
    provider's own)."""
    settings = run.settings.config.agents.get(run.contract.name)
    return settings.tool_choice if settings is not None else None


def start_mcp(run: AgentRun) -> None:
    """Start the MCP servers whose tools this run could hold, in its sandbox, to list
    their exact schemas for the first request (:mod:`executor.mcpclient.servers`).

    A top-level run's capability then gains the listed tools its contract admits; a
    child's tools are its parent's listing, narrowed, and a tool its own server lists
    with another schema than the parent was shown is outside the bound."""
    servers = run.settings.config.mcp_servers
    top = run.parent_run is None
    wanted = servers_to_start(run.capability, run.contract, servers, top=top)
    if not wanted or run.sandbox is None:
        return
    run.phase("mcp servers")
    run.mcp = McpServers(servers, sandbox=run.sandbox, deadline=run.deadline)
    run.mcp.start(wanted)
    if run.mcp_bound is not None:
        for name, listed in list(run.mcp.listed.items()):
            if run.mcp_bound.get(name, listed.fingerprint()) != listed.fingerprint():
                del run.mcp.listed[name]
                run.mcp.rejected[name] = ("its schema differs from the one the delegating "
                                          "agent was shown")
    if top:
        run.capability = admit_listed(run.capability, run.contract, run.mcp.listed)
    notes = [f"MCP server {name!r} did not start: {why}"
             for name, why in sorted(run.mcp.failures.items())]
    notes += [f"MCP tool {name} refused: {why}"
              for name, why in sorted(run.mcp.rejected.items())]
    if notes:
        run.record = run.record.model_copy(update={"notes": [*run.record.notes, *notes]})


def spellings(run: AgentRun, path: str) -> list[str]:
    """A path subject as the rules must see it: normalized relative to the workspace,
    and the real path behind in-tree symlinks (strictest wins across spellings)."""
    if run.sandbox is None:
        return [path]
    try:
        lexical = "/".join(run.sandbox.files.parts(path)) or "."
    except SandboxError:
        return [path]  # the tool will refuse it with the reason
    found = [lexical]
    real = Path(os.path.realpath(run.sandbox.root / lexical))
    root = Path(os.path.realpath(run.sandbox.root))
    if real.is_relative_to(root):
        resolved = real.relative_to(root).as_posix() or "."
        if resolved != lexical:
            found.append(resolved)
    return found


def system_prompt(run: AgentRun, skills: list[str]) -> str:
    """The agent's instructions (a catalog template filled in) and its skills: the same
    bytes in every run of the agent, so a provider's prompt cache reuses them with the
    tool definitions. What differs per run is in :func:`task_context`."""
    instructions = run.contract.instructions.strip()
    if run.contract.instructions_template:  # filled in when the session starts
        instructions = render_template(instructions, today=date.today())
    parts = [instructions or f"You are the {run.contract.name} agent."]
    parts += [f"## Skill\n\n{text}" for text in skills]
    return "\n\n".join(parts)


def task_context(run: AgentRun) -> str:
    """What this run's first message says before its task: the task contract of the
    agent that delegated to it, and where it works (a path that differs per run)."""
    root = run.sandbox.root if run.sandbox is not None else run.repo
    parts = []
    if run.handoff:
        parts.append(f"## Task contract from the agent that delegated to you\n\n"
                     f"{run.handoff}")
    parts.append(f"You work in {root} ({run.capability.sandbox.value} "
                 "sandbox); tool paths are relative to it.")
    return "\n\n".join(parts)
