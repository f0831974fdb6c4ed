"""What a run settles about an agent before its session starts.

- :func:`agent_model`: the model that runs it (a replay runs the whole tree;
  otherwise its route, with the user's ``default_model`` as the parent of a
  top-level agent), with its ``variant`` only where it applies; :func:`model_for`
  picks it for an agent of a run tree (a parent's replay drives its subtree);
- :func:`settings_apply`: zuno's "reasoning and variant apply only with the
  agent's configured model": not when the model is inherited or overridden;
- :func:`usable_reviewers`: its response reviewers, resolved in its namespace,
  or a user error before anything runs;
- :func:`task_contract`: pi's ``instructions``, cut to 16 KB.
"""

from __future__ import annotations

from executor.errors import RunError
from executor.models import Model, ScriptedModel, resolve_model
from executor.run.settings import RunSettings
from executor.tools.agents import MAX_INSTRUCTIONS_BYTES
from policies.config import UserConfig
from policies.contract import AgentContract, AgentStatus, ModelRoute
from policies.loader import LoadResult
from policies.loader.models import parse_ref
from policies.scoping import namespace_of, resolve_agent

__all__ = ["agent_model", "model_for", "settings_apply", "task_contract", "usable_reviewers"]


def settings_apply(contract: AgentContract, override: str | None) -> bool:
    """Whether the agent's ``reasoning`` and ``variant`` apply: always, unless its format
    binds them to its own model (zuno), which then must run it (not inherited, not a
    preset's route, not overridden by ``--model``)."""
    own_route = (not contract.model.inherit and contract.model.preset is None
                 and override is None)
    return not contract.settings_need_own_model or own_route


def agent_model(contract: AgentContract, *, config: UserConfig, script: ScriptedModel | None,
                override: str | None, parent: Model | None) -> Model:
    """The model that runs ``contract`` (see the module docstring)."""
    if script is not None:
        return script  # one replay for the whole tree, in execution order
    if parent is None and config.default_model:
        parent = resolve_model(ModelRoute(candidates=(parse_ref(config.default_model),)),
                               config=config, parent=None)
    variant = contract.variant if settings_apply(contract, override) else None
    return resolve_model(contract.model, config=config, parent=parent, override=override,
                         variant=variant)


def model_for(settings: RunSettings, contract: AgentContract, parent: Model | None) -> Model:
    """The model of ``contract`` in a run tree under ``settings`` (``parent``: the model of
    the agent that starts it, ``None`` at the top)."""
    if isinstance(parent, ScriptedModel):
        # The replay that drives the parent drives its subtree: the tree's own, or the one a
        # parallel delegate call gave this branch (each task plays its own replay).
        return parent
    return agent_model(contract, config=settings.config, script=settings.script,
                       override=settings.model_override, parent=parent)


def usable_reviewers(contract: AgentContract, registry: LoadResult) -> list[AgentContract]:
    """The agent's response reviewers, resolved in its namespace; a missing or unusable one
    is a user error before anything runs (an answer to be checked never goes unchecked)."""
    found: list[AgentContract] = []
    for name in contract.response_reviewers:
        reviewer = resolve_agent(contract, name, registry.agents)
        if reviewer is None:
            why = f"no agent named {name!r} in namespace {namespace_of(contract)!r}"
        elif reviewer.disabled or reviewer.status not in (None, AgentStatus.ACTIVE):
            why = f"{name!r} is disabled or not ACTIVE"
        else:
            found.append(reviewer)
            continue
        raise RunError(f"agent {contract.name!r} names response reviewer {name!r}, which "
                       f"cannot run: {why}", code="unknown_reviewer",
                       context={"agent": contract.name, "source": contract.origin.source},
                       hint="define the reviewer agent, or remove it from responseReviewers")
    return found


def task_contract(instructions: str | None) -> tuple[str | None, str | None]:
    """pi's ``instructions`` task contract, cut to 16 KB (at a character boundary), and a
    note saying so when it was cut."""
    if instructions is None or not instructions.strip():
        return None, None
    data = instructions.encode("utf-8")
    if len(data) <= MAX_INSTRUCTIONS_BYTES:
        return instructions, None
    kept = data[:MAX_INSTRUCTIONS_BYTES].decode("utf-8", "ignore")
    return kept, (f"the instructions task contract was cut to 16 KB ({len(data)} bytes given, "
                  f"{len(kept.encode('utf-8'))} kept)")
