"""The local scheduler: a pool of threads on this machine.

Children mostly wait (on a model, or on a sandboxed command in another
process), so threads are the right unit here: the work that needs a CPU runs
in the sandboxes' own processes. ``jobs`` threads run at once; the rest wait
in submission order. A queued job whose turn comes after the deadline, or
after :meth:`LocalScheduler.cancel`, never starts and ends ``expired`` or
``cancelled``. Portable or not, every job runs here.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from executor.scheduling.base import (
    Cancellation,
    Deadline,
    Handle,
    Job,
    JobContext,
    JobState,
    Outcome,
    ended_in_order,
)

__all__ = ["DEFAULT_JOBS", "LocalScheduler"]

T = TypeVar("T")

#: Children at once when nobody says: they mostly wait on models, so more than the
#: machine's cores, but few enough that N sandboxes' commands do not thrash a laptop.
DEFAULT_JOBS = 4


class _LocalHandle(JobState[T]):
    def __init__(self, scheduler: LocalScheduler, job: Job[T],
                 report: Callable[[Any], None] | None) -> None:
        super().__init__(job, scheduler.cancellation)
        self._scheduler = scheduler
        self.report = report or (lambda event: None)


class LocalScheduler:
    """A :class:`executor.scheduling.base.Scheduler` running up to ``jobs`` jobs at once in
    threads of this process."""

    def __init__(self, *, jobs: int = DEFAULT_JOBS, deadline: Deadline | None = None,
                 cancellation: Cancellation | None = None, name: str = "corral") -> None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        self._jobs = jobs
        self._deadline = deadline or Deadline()
        self._cancellation = cancellation or Cancellation()
        self._name = name
        self._cond = threading.Condition()
        self._queue: deque[_LocalHandle[Any]] = deque()
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._closed = False
        self._finished = itertools.count(1)
        self._cancellation.on_cancel(self._drop_queued)

    @property
    def deadline(self) -> Deadline:
        return self._deadline

    @property
    def cancellation(self) -> Cancellation:
        return self._cancellation

    @property
    def jobs(self) -> int:
        """How many jobs run at once."""
        return self._jobs

    def submit(self, job: Job[T], *, report: Callable[[Any], None] | None = None) -> Handle[T]:
        handle = _LocalHandle(self, job, report)
        with self._cond:
            if self._closed:
                raise RuntimeError("the scheduler is closed")
            if self._cancellation.cancelled:
                self._settle(handle, "cancelled")
                return handle
            self._queue.append(handle)
            if self._idle == 0 and len(self._workers) < self._jobs:
                worker = threading.Thread(target=self._work, daemon=False,
                                          name=f"{self._name}-{len(self._workers) + 1}")
                self._workers.append(worker)
                worker.start()
            else:
                self._cond.notify_all()
        return handle

    def _settle(self, handle: _LocalHandle[Any], outcome: Outcome) -> None:
        """Give a job that will never run its outcome (the lock is held)."""
        handle.settle(outcome, next(self._finished))
        self._cond.notify_all()

    def _drop_queued(self) -> None:
        with self._cond:
            while self._queue:
                self._settle(self._queue.popleft(), "cancelled")

    def _next(self) -> _LocalHandle[Any] | None:
        with self._cond:
            while True:
                while self._queue:
                    handle = self._queue.popleft()
                    if self._cancellation.cancelled:
                        self._settle(handle, "cancelled")
                    elif self._deadline.expired():
                        self._settle(handle, "expired")
                    else:
                        return handle
                if self._closed:
                    return None
                self._idle += 1
                try:
                    self._cond.wait()
                finally:
                    self._idle -= 1

    def _work(self) -> None:
        while (handle := self._next()) is not None:
            context = JobContext(key=handle.key, deadline=self._deadline,
                                 cancellation=self._cancellation, report=handle.report)
            try:
                value = handle.job.run(context)
            except BaseException as exc:  # handed to whoever waits on the handle
                self._finish(handle, "failed", error=exc)
            else:
                self._finish(handle, "done", value=value)

    def _finish(self, handle: _LocalHandle[Any], outcome: Outcome, value: Any = None,
                error: BaseException | None = None) -> None:
        with self._cond:
            handle.settle(outcome, next(self._finished), value, error)
            self._cond.notify_all()

    def as_completed(self, handles: Iterable[Handle[T]]) -> Iterator[Handle[T]]:
        pending: list[JobState[T]] = []
        for handle in handles:
            if not isinstance(handle, _LocalHandle) or handle._scheduler is not self:
                raise ValueError(f"handle {handle.key!r} was not submitted to this scheduler")
            pending.append(handle)
        yield from ended_in_order(pending, self._cond)

    def cancel(self, reason: str) -> None:
        self._cancellation.cancel(reason)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            workers = list(self._workers)
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join()

    def __enter__(self) -> LocalScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
