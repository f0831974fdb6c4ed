"""Which child of a fanout gets which agent, model and replay (``corral fanout`` options).

The rule, the same for ``--agent``, ``--model`` and ``--script``:

- **one value**: every child gets it;
- **exactly N values**: child *i* gets the *i*-th, in the order given;
- any other count is refused (a usage error naming the option, the count and
  N): values are never cycled or padded, so ``--script a.yaml --script
  b.yaml -n 3`` cannot quietly run ``a.yaml`` twice.

``-n`` may be left out when an option is given more than once: N is then
its count (every option given more than once must agree). Without ``-n`` and
without such an option, N cannot be known and is asked for. ``--model`` and
``--script`` are exclusive, as for ``corral run``; neither given, each child
runs its agent's own model. Each child plays its own copy of its replay from
its first turn, so a replay shared by all children still gives each the same,
deterministic conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from executor.errors import ExecutorError
from executor.ledger import new_run_id

__all__ = ["MAX_CHILDREN", "ChildPlan", "FanoutUsage", "plan_children"]

#: Children of one fanout at most (the default children budget of a run tree).
MAX_CHILDREN = 32

T = TypeVar("T")


class FanoutUsage(ExecutorError):
    """Options that do not say unambiguously what each child runs (a user error, exit 2)."""

    code = "usage"
    exit_code = 2


@dataclass(frozen=True)
class ChildPlan:
    """What one child runs: its 1-based ``index``, its run id (chosen before anything
    starts, so the fanout's record names every child), agent, and model or replay."""

    index: int
    run_id: str
    agent: str
    model: str | None = None
    script: Path | None = None


def _spread(option: str, values: Sequence[T], count: int) -> list[T | None]:
    if not values:
        return [None] * count
    if len(values) == 1:
        return [values[0]] * count
    if len(values) == count:
        return list(values)
    raise FanoutUsage(
        f"{option} was given {len(values)} times for {count} children",
        operation="plan_fanout", context={"option": option, "values": len(values),
                                          "children": count},
        hint=f"give {option} once (every child gets it) or exactly {count} times (child i "
        "gets the i-th); values are never cycled")


def plan_children(*, count: int | None, agents: Sequence[str], models: Sequence[str],
                  scripts: Sequence[Path]) -> list[ChildPlan]:
    """One plan per child, by the rule of the module docstring."""
    if models and scripts:
        raise FanoutUsage("--script and --model are exclusive", operation="plan_fanout",
                          hint="replay scripts (--script) or run models (--model), not both")
    if not agents:
        raise FanoutUsage("no agent was named", operation="plan_fanout",
                          hint="pass --agent NAME (once for every child, or once per child)")
    given = {option: len(values) for option, values in
             (("--agent", agents), ("--model", models), ("--script", scripts))
             if len(values) > 1}
    if count is None:
        counts = set(given.values())
        if not counts:
            raise FanoutUsage("how many children? -n is missing", operation="plan_fanout",
                              hint="pass -n N, or give --agent, --model or --script once per "
                              "child")
        if len(counts) > 1:
            listed = ", ".join(f"{option} {n} times" for option, n in given.items())
            raise FanoutUsage(f"the options disagree on the number of children: {listed}",
                              operation="plan_fanout", context=dict(given),
                              hint="give each option once, or the same number of times, or "
                              "pass -n N")
        count = counts.pop()
    if not 1 <= count <= MAX_CHILDREN:
        raise FanoutUsage(f"-n must be between 1 and {MAX_CHILDREN}, not {count}",
                          operation="plan_fanout",
                          hint=f"a fanout runs at most {MAX_CHILDREN} children")
    per_agent = _spread("--agent", agents, count)
    per_model = _spread("--model", models, count)
    per_script = _spread("--script", scripts, count)
    return [ChildPlan(index=i + 1, run_id=new_run_id(), agent=str(per_agent[i]),
                      model=per_model[i], script=per_script[i]) for i in range(count)]
