"""Agents as a run and a listing see them: found, shown, offered.

- :mod:`executor.agents.suggest`: what to say when a name matches no agent;
- :mod:`executor.agents.offer`: what a run's model is offered, the one computation
  a run and ``agents show`` share;
- :mod:`executor.agents.views`: the JSON objects of agents and diagnostics.

The definitions themselves are :mod:`policies` (formats, loader, contracts);
nothing here runs an agent, and importing this package loads none of its
modules.
"""

__all__: list[str] = []
