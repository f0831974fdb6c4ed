"""The top of a run tree: what a user may have got wrong, checked first; then the run.

:func:`run_agent` is the library call behind ``corral run`` (and the API's
:meth:`executor.api.Corral.run`): it resolves the agent, derives its
capability from the user's root capability, resolves its model, and runs it
(:class:`executor.run.agent.AgentRun`): its sandbox opens in the mode the
capability derives, its session runs, its diff is collected after the child's
processes are stopped, the sandbox is torn down and the run record written. A
user's mistake (an unknown agent, an agent that may not be run, a model that
needs an override) fails before anything is created (:func:`check_top`,
:func:`top_model`: a fanout checks each child with them too). A run that names
no agent runs the zuno ``default_agent``; a catalog agent's welcome message is
shown when its top-level session starts.
"""

from __future__ import annotations

from executor.agents.offer import root_capability
from executor.agents.suggest import unknown_agent
from executor.errors import ModelError, RunError
from executor.ledger import RunRecord
from executor.models import Model
from executor.run.agent import AgentRun
from executor.run.prepare import model_for, usable_reviewers
from executor.run.settings import RunSettings, deadline_after
from policies.capability import Capability, derive_child
from policies.contract import AgentContract, AgentStatus
from sandbox.errors import SandboxConfigError
from sandbox.state import check_state_dir, default_state_root
from sandbox.workspaces.repo import inspect_repo

__all__ = ["check_top", "run_agent", "top_model"]


def _runnable(contract: AgentContract) -> str | None:
    if contract.disabled:
        return "it is disabled"
    if contract.status not in (None, AgentStatus.ACTIVE):
        return f"its status is {contract.status.value if contract.status else ''}"
    if not contract.user_invocable:
        return "it is not user-invocable (a subagent only)"
    return None


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
        return model_for(settings, contract, None)
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
    deadline = deadline_after(settings.timeout_seconds, contract.timeout_seconds)
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
