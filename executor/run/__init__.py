"""Running an agent: one run tree, from what a user may have got wrong to its record.

- :mod:`executor.run.top`: the top of a tree (:func:`run_agent`; the checks a
  fanout runs per child: :func:`check_top`, :func:`top_model`);
- :mod:`executor.run.settings`: what a run needs besides the agent and prompt;
- :mod:`executor.run.agent`: one agent of a tree (:class:`AgentRun`), whose work
  is split by seam: :mod:`~executor.run.opening` (sandbox, servers, tools,
  session), :mod:`~executor.run.recording` (its record),
  :mod:`~executor.run.delegation` and :mod:`~executor.run.parallel` (the
  ``delegate`` tool), :mod:`~executor.run.reviews` (response reviewers);
- :mod:`executor.run.session` and :mod:`executor.run.memory`: the agent loop and
  what each request sends; :mod:`executor.run.prepare` and
  :mod:`executor.run.skills`: what a run settles before it starts;
  :mod:`executor.run.approval`: who answers an ``ask``;
  :mod:`executor.run.environment`: the project's environment under a run.

Below it: the tools and their dispatch (:mod:`executor.tools`), models, MCP
clients, scheduling, the ledger and the apply's preimages; above it, a fanout
(:mod:`executor.fanout`) and the API (:mod:`executor.api`).
"""

from executor.run.agent import AgentRun
from executor.run.environment import describe, with_environment
from executor.run.settings import RunSettings, SchedulerFactory, local_scheduler
from executor.run.top import check_top, run_agent, top_model

__all__ = ["AgentRun", "RunSettings", "SchedulerFactory", "check_top", "describe",
           "local_scheduler", "run_agent", "top_model", "with_environment"]
