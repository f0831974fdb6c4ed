"""The Ray scheduler: jobs on the nodes of a Ray cluster that share no filesystem.

:class:`RayScheduler` is the :class:`~executor.scheduling.base.Scheduler` of
``corral fanout --on ray[://ADDRESS]`` (Ray itself is imported only through
:mod:`executor.scheduling.rayboundary`, when a scheduler is made; what runs on
the nodes is :mod:`executor.scheduling.raytask`).

- **What travels.** A job with a :class:`~executor.scheduling.base.Remote` runs
  there; its cargo (a fanout's snapshot as a git bundle) is made once per key
  and ``ray.put`` once: every task of that key takes the same object, which Ray
  copies to a node once. The task returns plain data, which the driver lands
  (:meth:`Remote.land`) the moment it is ready, so what a finished child
  recorded is here before anything else can be lost. A job without a ``remote``
  runs here, in a local pool.
- **Placement.** Each task asks one unit of :data:`RESOURCE`, which a node
  advertises only when its sandbox probe works (:mod:`executor.scheduling.node`):
  a node without it never gets a job. Tasks are spread over the nodes.
- **Concurrency.** ``jobs`` tasks at most are in the cluster at once; the rest
  wait here, in order (so ``--jobs`` bounds the whole cluster).
- **Faults.** Ray retries nothing (``max_retries=0``); a task lost with its node
  or worker is submitted again once, elsewhere if Ray can, and its notes say so;
  lost twice, it fails.
- **Cancel and deadline.** One small actor per driver holds the cancellations.
  A task asks it before it starts (cancelled, or past the shared deadline: it
  never starts) and polls it while it runs (its job's
  :class:`~executor.scheduling.base.Cancellation` is then cancelled there, so
  the child stops and records itself as it does here). Tasks that had not
  started are ``ray.cancel``\\ ed. The deadline is wall-clock, so the same on
  every node.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, cast

from executor.errors import ExecutorError
from executor.scheduling.base import (
    Cancellation,
    Deadline,
    Handle,
    Job,
    JobNotRun,
    JobState,
    Outcome,
    Remote,
    ended_in_order,
)
from executor.scheduling.local import LocalScheduler
from executor.scheduling.node import RESOURCE
from executor.scheduling.rayboundary import RayMissing, connect, import_ray, parse_target
from executor.scheduling.raytask import POLL, driver_flag, run_task

__all__ = ["RESOURCE", "RayMissing", "RayScheduler", "import_ray", "parse_target"]

T = TypeVar("T")


def _text(value: object, limit: int) -> str:
    """A node's string, as a string, cut at ``limit`` characters."""
    return (value if isinstance(value, str) else "" if value is None else repr(value))[:limit]


class _RayHandle(JobState[T]):
    def __init__(self, scheduler: RayScheduler, job: Job[T],
                 report: Callable[[Any], None] | None = None) -> None:
        super().__init__(job, scheduler.cancellation)
        self._scheduler = scheduler
        self.report = report
        self.attempts = 0
        self.notes: list[str] = []


class RayScheduler:
    """A :class:`~executor.scheduling.base.Scheduler` over a Ray cluster (see the module
    docstring). ``address``: the cluster (``None``: ``RAY_ADDRESS``, or the one ``ray
    start`` made here); a process already connected (``ray.init``) keeps its connection."""

    def __init__(self, *, jobs: int, deadline: Deadline | None = None,
                 cancellation: Cancellation | None = None, address: str | None = None,
                 name: str = "corral") -> None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        self._ray = import_ray()
        connect(self._ray, address)
        self._jobs = jobs
        self._deadline = deadline or Deadline()
        self._cancellation = cancellation or Cancellation()
        self._local = LocalScheduler(jobs=jobs, deadline=self._deadline,
                                     cancellation=self._cancellation, name=name)
        self._cond = threading.Condition()
        self._queue: deque[_RayHandle[Any]] = deque()
        self._inflight: dict[Any, _RayHandle[Any]] = {}
        self._cargo: dict[str, Any] = {}
        self._finished = itertools.count(1)
        self._closed = False
        ray = self._ray
        self._flag = driver_flag(ray)
        self._scope = secrets.token_hex(8)
        self._task = ray.remote(run_task).options(
            num_cpus=0, resources={RESOURCE: 1}, max_retries=0, retry_exceptions=False,
            scheduling_strategy="SPREAD")
        self._thread = threading.Thread(target=self._dispatch, daemon=True,
                                        name=f"{name}-ray")
        self._thread.start()
        self._cancellation.on_cancel(self._on_cancel)

    @property
    def deadline(self) -> Deadline:
        return self._deadline

    @property
    def cancellation(self) -> Cancellation:
        return self._cancellation

    def placements(self) -> dict[str, str]:
        """Job key -> the Ray node id it started on (its latest attempt), so far."""
        return dict(self._ray.get(self._flag.placements.remote(self._scope)))

    def submit(self, job: Job[T], *, report: Callable[[Any], None] | None = None) -> Handle[T]:
        handle = _RayHandle(self, job, report)
        if job.remote is None:  # it closes over this process: it runs here
            local = self._local.submit(job, report=report)

            def wait() -> None:
                try:
                    self._finish(handle, "done", value=local.result())
                except JobNotRun:
                    self._finish(handle, cast(Outcome, local.outcome()))
                except BaseException as exc:  # handed to whoever waits
                    self._finish(handle, "failed", error=exc)

            threading.Thread(target=wait, daemon=True).start()
            return handle
        with self._cond:
            if self._closed:
                raise RuntimeError("the scheduler is closed")
            if self._cancellation.cancelled:
                self._settle(handle, "cancelled")
            else:
                self._queue.append(handle)
                self._cond.notify_all()
        return handle

    def _settle(self, handle: _RayHandle[Any], outcome: Outcome, value: Any = None,
                error: BaseException | None = None) -> None:
        """Give ``handle`` its outcome (the lock is held)."""
        handle.settle(outcome, next(self._finished), value, error)
        self._cond.notify_all()

    def _finish(self, handle: _RayHandle[Any], outcome: Outcome, value: Any = None,
                error: BaseException | None = None) -> None:
        with self._cond:
            self._settle(handle, outcome, value, error)

    def _launch(self, handle: _RayHandle[Any]) -> None:
        remote = cast(Remote[Any], handle.job.remote)
        key = remote.cargo_key()
        if key not in self._cargo:
            self._cargo[key] = self._ray.put(remote.cargo())  # once: Ray copies it per node
        handle.attempts += 1
        ref = self._task.remote(remote, self._cargo[key], self._flag, self._scope, handle.key,
                                self._deadline)
        self._inflight[ref] = handle

    def _dispatch(self) -> None:
        try:
            self._dispatch_until_closed()
        except BaseException as exc:  # Ray itself failed here: no job may wait forever
            with self._cond:
                stranded = [*self._queue, *self._inflight.values()]
                self._queue.clear()
                self._inflight.clear()
                for handle in stranded:
                    self._settle(handle, "failed", error=ExecutorError(
                        f"job {handle.key!r} was lost with the connection to Ray: "
                        f"{type(exc).__name__}: {exc}"[:500], code="ray_failed",
                        operation="run_remote"))
                self._closed = True

    def _dispatch_until_closed(self) -> None:
        ray = self._ray
        while True:
            with self._cond:
                while self._queue and len(self._inflight) < self._jobs:
                    handle = self._queue.popleft()
                    if self._cancellation.cancelled:
                        self._settle(handle, "cancelled")
                    elif self._deadline.expired():
                        self._settle(handle, "expired")
                    else:
                        try:
                            self._launch(handle)
                        except Exception as exc:  # the cargo could not be made
                            self._settle(handle, "failed", error=exc)
                if self._closed and not self._queue and not self._inflight:
                    return
                refs = list(self._inflight)
                if not refs:
                    self._cond.wait(POLL)
                    continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=POLL)
            self._relay()
            for ref in ready:
                with self._cond:
                    handle = self._inflight.pop(ref)
                self._collect(ref, handle)

    def _relay(self) -> None:
        """Hand what running jobs reported to their remotes, then to the submitters'
        ``report`` (in this thread, in order)."""
        with self._cond:
            by_key = {h.key: h for h in self._inflight.values()}
        if not by_key:
            return
        taken = self._ray.get(self._flag.take.remote(self._scope))
        for key, events in taken.items():
            handle = by_key.get(key)
            if handle is not None and handle.job.remote is not None:
                self._hand(handle, handle.job.remote, events)

    @staticmethod
    def _hand(handle: _RayHandle[Any], remote: Remote[Any], events: list[Any]) -> None:
        for event in events:
            try:
                shown = remote.relayed(event)
                if shown is not None and handle.report is not None:
                    handle.report(shown)
            except Exception:  # noqa: S112 - a display's (or journal's) failure is no job's
                continue

    def _collect(self, ref: Any, handle: _RayHandle[Any]) -> None:
        """Land what came back for ``handle``, or try it once more after a lost node. What
        came back is a node's word: its shape is checked, and nothing it holds can stop
        the dispatcher (every other job would wait forever)."""
        ray = self._ray
        try:
            returned = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            self._finish(handle, "cancelled")
            return
        except ray.exceptions.RayTaskError as exc:  # run_task itself failed: a bug
            self._finish(handle, "failed", error=exc)
            return
        except ray.exceptions.RayError as exc:  # the node or its worker was lost
            self._lost(handle, exc)
            return
        try:
            outcome, value, error = self._judge(handle, returned)
        except Exception as exc:  # a refused record, or anything else: this job failed
            outcome, value, error = "failed", None, exc
        self._finish(handle, outcome, value=value, error=error)

    def _judge(self, handle: _RayHandle[Any], returned: object
               ) -> tuple[Outcome, Any, BaseException | None]:
        if not (isinstance(returned, tuple) and len(returned) == 3
                and isinstance(returned[0], str) and isinstance(returned[2], str)):
            raise ExecutorError(f"job {handle.key!r}: its node returned no result corral "
                                "makes", code="remote_failed", operation="run_remote")
        kind, what, node = returned
        where = f"node {_text(node, 12)}"
        if kind == "not_run" and what in ("cancelled", "expired"):
            return cast(Outcome, what), None, None
        if kind == "error" and isinstance(what, dict):
            context = what.get("context")
            return "failed", None, ExecutorError(
                _text(what.get("message"), 2000), code=_text(what.get("code"), 80),
                operation=_text(what.get("operation"), 80) or None,
                context={_text(k, 80): _text(v, 2000) for k, v in context.items()}
                if isinstance(context, dict) else {},
                hint=_text(what.get("hint"), 2000) or None)
        if kind == "bug":
            lines = _text(what, 4000).strip().splitlines() or ["?"]
            return "failed", None, ExecutorError(
                f"the job failed on {where}: {lines[-1]}", code="remote_failed",
                operation="run_remote", context={"traceback": _text(what, 4000)})
        if kind != "done":
            raise ExecutorError(f"job {handle.key!r}: {where} returned {kind[:40]!r}",
                                code="remote_failed", operation="run_remote")
        notes = [*handle.notes, f"ran on Ray {where}"]
        return "done", cast(Remote[Any], handle.job.remote).land(what, notes), None

    def _lost(self, handle: _RayHandle[Any], exc: BaseException) -> None:
        ray = self._ray
        try:
            node = ray.get(self._flag.node_of.remote(self._scope, handle.key), timeout=30)
        except ray.exceptions.RayError:
            node = None
        where = f"node {node[:12]}" if node else "its node"
        why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
        if handle.attempts >= 2 or self._cancellation.cancelled or self._deadline.expired():
            self._finish(handle, "failed", error=ExecutorError(
                f"job {handle.key!r} was lost with {where} ({why}), "
                f"{'after a retry' if handle.attempts >= 2 else 'and not retried'}",
                code="node_lost", operation="run_remote", retryable=True))
            return
        handle.notes.append(f"retried once on another node: {where} was lost while it "
                            f"ran ({why})"[:300])
        with self._cond:
            self._queue.appendleft(handle)
            self._cond.notify_all()

    def as_completed(self, handles: Iterable[Handle[T]]) -> Iterator[Handle[T]]:
        pending: list[JobState[T]] = []
        for handle in handles:
            if not isinstance(handle, _RayHandle) or handle._scheduler is not self:
                raise ValueError(f"handle {handle.key!r} was not submitted to this scheduler")
            pending.append(handle)
        yield from ended_in_order(pending, self._cond)

    def _on_cancel(self) -> None:
        """Queued jobs never start; the actor tells running ones; tasks that had not
        started are cancelled in Ray (each is then ``cancelled``: it never ran)."""
        ray = self._ray
        with self._cond:
            while self._queue:
                self._settle(self._queue.popleft(), "cancelled")
            inflight = dict(self._inflight)
        started = set(ray.get(self._flag.cancel.remote(self._scope, self._cancellation.reason)))
        for ref, handle in inflight.items():
            if handle.key not in started:
                ray.cancel(ref, force=False)

    def cancel(self, reason: str) -> None:
        self._cancellation.cancel(reason)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._local.close()
        self._cargo.clear()
        with contextlib.suppress(self._ray.exceptions.RayError):  # gone with the connection
            self._flag.forget.remote(self._scope)

    def __enter__(self) -> RayScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
