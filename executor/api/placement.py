"""Where a fanout's children run (``Corral.fanout(on=...)``, ``corral fanout --on``).

``local`` (the default): threads of this process
(:class:`executor.scheduling.LocalScheduler`). ``ray`` or ``ray://HOST:PORT``: the
sandboxing nodes of a Ray cluster (:class:`executor.scheduling.cluster.RayScheduler`),
checked before anything runs: Ray must be installed (the error says how) and the
value well formed; the cluster itself is reached when the children are about to
start, after every check of the user's input.
"""

from __future__ import annotations

from collections.abc import Callable

from executor.errors import ExecutorError
from executor.scheduling import Cancellation, Deadline, Scheduler

__all__ = ["PLACES", "is_remote", "scheduler_for"]

#: What ``on`` may be (``ray://HOST:PORT`` too).
PLACES = ("local", "ray")

SchedulerFactory = Callable[[int, Deadline, Cancellation], Scheduler]


def is_remote(on: str) -> bool:
    """Whether ``on`` runs children on other machines."""
    return on != "local"


def scheduler_for(on: str) -> SchedulerFactory | None:
    """The scheduler factory of ``on`` (``None``: the local pool); a bad value, or Ray
    missing, raises before anything runs."""
    if on == "local":
        return None
    from executor.scheduling.cluster import (  # noqa: PLC0415 - Ray only when asked
        RayScheduler,
        import_ray,
        parse_target,
    )
    if on != "ray" and not on.startswith("ray://"):
        raise ExecutorError(f"--on {on!r} is not a place children can run",
                            code="usage_error", operation="check_arguments",
                            hint="local (this machine), ray (RAY_ADDRESS) or ray://HOST:PORT")
    address = parse_target(on)
    import_ray()

    def make(jobs: int, deadline: Deadline, cancellation: Cancellation) -> Scheduler:
        return RayScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation,
                            address=address, name="corral-fanout")

    return make
