"""Fanout: one task in N children at once, each checked on what it recorded, compared.

- :mod:`executor.fanout.plan`: which child gets which agent, model and replay;
- :mod:`executor.fanout.run`: the fanout itself (:func:`run_fanout`): checks,
  its record, one snapshot, the children through the scheduling seam;
- :mod:`executor.fanout.child`: one child as a portable job, and its check;
- :mod:`executor.fanout.remote`: the same child on a machine that shares nothing
  (a Ray node): the snapshot as a bundle there, its records back here;
- :mod:`executor.fanout.check`: the check command on a recorded diff;
- :mod:`executor.fanout.conflicts` and :mod:`executor.fanout.rows`: the result
  as the children recorded it, and which diffs conflict;
- :mod:`executor.fanout.choice`: which candidate to apply (``--pick best``).

Each child is a run of :mod:`executor.run`; the records are :mod:`executor.ledger`'s.
"""

from executor.fanout.plan import MAX_CHILDREN, ChildPlan, FanoutUsage, plan_children
from executor.fanout.run import FanoutRequest, run_fanout, shared_snapshot

__all__ = ["MAX_CHILDREN", "ChildPlan", "FanoutRequest", "FanoutUsage", "plan_children",
           "run_fanout", "shared_snapshot"]
