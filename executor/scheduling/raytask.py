"""What runs on a Ray node for :class:`executor.scheduling.cluster.RayScheduler`.

:class:`Flag` is the schedulers' cancellation where every task can ask it (one
actor on the driver's node): which job started on which node, and whether (why)
a scheduler was cancelled. :func:`run_task` is one job on a node: it asks the
flag before it starts (cancelled, or past the deadline: it never starts), polls
it while the job runs (the job's own :class:`~executor.scheduling.base.Cancellation`
is cancelled there when it is set), posts what the job reports to it in batches
(the driver takes them and calls the submitter's ``report``), and returns plain
data, errors included.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any

from executor.scheduling.base import Cancellation, Deadline, JobContext, Remote
from executor.scheduling.node import node_place
from executor.scheduling.rayboundary import import_ray
from policies.errors import CorralError

__all__ = ["MAX_PENDING", "POLL", "Flag", "driver_flag", "run_task"]

#: Seconds between a running task's looks at the cancellation, and the driver's at new jobs.
POLL = 0.25
#: Reported events of one job waiting to be taken at most (a display's, never a record's).
MAX_PENDING = 4096


class Flag:
    """The cancellation of every scheduler of one driver, where every task can ask it (a Ray
    actor on the driver's node, made once per driver: an actor costs a process), by the
    scheduler's ``scope``."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}
        self.started: dict[str, dict[str, str]] = {}
        #: What running jobs reported, until the driver takes it.
        self.events: dict[str, dict[str, list[Any]]] = {}

    def begin(self, scope: str, key: str, node: str) -> str | None:
        if scope not in self.reasons:
            self.started.setdefault(scope, {})[key] = node
        return self.reasons.get(scope)

    def cancel(self, scope: str, reason: str) -> list[str]:
        self.reasons.setdefault(scope, reason)
        return list(self.started.get(scope, {}))

    def get(self, scope: str) -> str | None:
        return self.reasons.get(scope)

    def placements(self, scope: str) -> dict[str, str]:
        return dict(self.started.get(scope, {}))

    def node_of(self, scope: str, key: str) -> str | None:
        return self.started.get(scope, {}).get(key)

    def forget(self, scope: str) -> None:
        self.reasons.pop(scope, None)
        self.started.pop(scope, None)
        self.events.pop(scope, None)

    def post(self, scope: str, key: str, events: list[Any]) -> None:
        pending = self.events.setdefault(scope, {}).setdefault(key, [])
        pending += events[: max(MAX_PENDING - len(pending), 0)]

    def take(self, scope: str) -> dict[str, list[Any]]:
        return self.events.pop(scope, {})


_flags: dict[str, Any] = {}
_flags_lock = threading.Lock()


def driver_flag(ray: Any) -> Any:
    """This driver's :class:`Flag` actor, on its own node (made on first use per Ray job:
    an actor is a process, too slow to start once per fanout)."""
    here = ray.get_runtime_context().get_node_id()
    job = f"{ray.get_runtime_context().get_job_id()}@{here}"  # ids are unique per cluster
    with _flags_lock:
        if job not in _flags:
            _flags.clear()  # a previous connection's actor is gone with it
            strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                here, soft=False)
            _flags[job] = ray.remote(num_cpus=0)(Flag).options(
                scheduling_strategy=strategy).remote()
        return _flags[job]


class _Relay:
    """What a job reports on the node, posted to the flag in batches (in order)."""

    def __init__(self, flag: Any, scope: str, key: str) -> None:
        self.flag, self.scope, self.key = flag, scope, key
        self.lock = threading.Lock()
        self.events: list[Any] = []

    def report(self, event: Any) -> None:
        with self.lock:
            if len(self.events) < MAX_PENDING:
                self.events.append(event)

    def post(self) -> Any:
        with self.lock:
            events, self.events = self.events, []
        return self.flag.post.remote(self.scope, self.key, events) if events else None


def run_task(remote: Remote[Any], cargo: bytes, flag: Any, scope: str, key: str,
             deadline: Deadline) -> tuple[str, Any, str]:
    """One job on a node: (kind, what, node id); kind is done, not_run, error or bug."""
    ray = import_ray()
    node = str(ray.get_runtime_context().get_node_id())
    if ray.get(flag.begin.remote(scope, key, node)) is not None:
        return "not_run", "cancelled", node
    if deadline.expired():
        return "not_run", "expired", node
    cancellation = Cancellation()
    relay = _Relay(flag, scope, key)
    stop = threading.Event()

    def watch() -> None:
        cancelled = False
        while not stop.wait(POLL):
            relay.post()
            if cancelled:
                continue
            try:
                reason = ray.get(flag.get.remote(scope), timeout=30)
            except Exception:  # noqa: S112 - the driver's actor is briefly unreachable
                continue
            if reason is not None:
                cancelled = True
                cancellation.cancel(str(reason))

    watcher = threading.Thread(target=watch, daemon=True, name="corral-cancel-watch")
    watcher.start()
    try:
        context = JobContext(key=key, deadline=deadline, cancellation=cancellation,
                             report=relay.report)
        return "done", remote.there(context, cargo, node_place(node)), node
    except CorralError as exc:
        return "error", exc.to_dict(), node
    except Exception as exc:  # a bug there is reported here, as data
        return "bug", "".join(traceback.format_exception(exc))[-4000:], node
    finally:
        stop.set()
        watcher.join()
        last = relay.post()
        if last is not None:
            ray.get(last)  # before the result: the driver shows every event first
