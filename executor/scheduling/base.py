"""The scheduling seam: what fanout and parallel delegation ask of whatever runs their jobs.

The code above this seam (:mod:`executor.fanout`, the ``delegate`` tool's
parallel mode) only ever submits :class:`Job` objects to a :class:`Scheduler`,
waits for their handles as they complete, and cancels; it never creates a
thread or a process itself. Two implementations exist:
:class:`executor.scheduling.local.LocalScheduler` (a thread pool on this
machine) and :class:`executor.scheduling.cluster.RayScheduler` (a Ray cluster,
in its own module so that Ray is imported only when it is used); nothing above
the seam differs between them.

What a job may rely on, wherever it runs, is its :class:`JobContext`:

- ``deadline``: one shared wall-clock deadline (epoch seconds, so it means the
  same on every machine of a cluster; a job turns it into its own monotonic
  deadline with :meth:`Deadline.monotonic`);
- ``cancellation``: set once for every job of the scheduler (Ctrl-C, the parent
  gave up); a job polls it and registers callbacks that stop what it started;
- ``report``: the one channel back to the submitter's display (progress
  events); a local engine calls the submitter's function in the job's thread
  (which must therefore be thread-safe); a remote engine relays what a job
  reports there (in batches, in order, to one thread of the submitter's).

A job is ``portable`` when its callable and its arguments are plain data that
pickle. That alone does not let it run elsewhere: nothing is shared between
machines (no state dir, no repository, no ledger reached by path). A job that
may leave this machine also carries a :class:`Remote`: what it needs there
(:meth:`Remote.cargo`, bytes made once per key in the submitting process and
sent once to each machine that runs such a job), what it does there with only
its cargo and a directory of that machine's own (:meth:`Remote.there`, which
returns plain data), what it reports there while it runs (:meth:`Remote.relayed`,
here: its journal, say, before the display gets the rest), and how what came
back becomes its result here (:meth:`Remote.land`, in the submitting process:
everything returned is untrusted input and is validated there). A job
without a ``remote`` (a delegated child, which closes over live objects of the
submitting process and is retained by its parent's session for follow-ups)
runs in the submitting process under every scheduler.

Queued jobs that never start because the scheduler was cancelled, or because
the deadline passed before a slot was free, are still reported: their
handle's :meth:`Handle.outcome` says so (``cancelled`` / ``expired``), so the
submitter can record them instead of losing them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, cast

from executor.errors import ExecutorError

__all__ = [
    "Cancellation",
    "Deadline",
    "Handle",
    "Job",
    "JobContext",
    "JobNotRun",
    "JobState",
    "Outcome",
    "Remote",
    "Scheduler",
    "ended_in_order",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: How a job ended: ``done`` (it returned), ``failed`` (it raised), ``cancelled`` or
#: ``expired`` (it never started: the scheduler was cancelled, or the deadline passed).
Outcome = Literal["done", "failed", "cancelled", "expired"]


class JobNotRun(ExecutorError):
    """A job that never started (cancelled, or the deadline passed before a slot was free)."""

    code = "job_not_run"


@dataclass(frozen=True)
class Deadline:
    """One wall-clock deadline shared by every job of a scheduler (``None``: no limit)."""

    at: float | None = None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """The deadline ``seconds`` from now (``None``: no deadline)."""
        return cls(None if seconds is None else time.time() + seconds)

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` without a deadline."""
        return None if self.at is None else max(self.at - time.time(), 0.0)

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.at is not None and time.time() >= self.at

    def monotonic(self) -> float | None:
        """The same instant on this process's ``time.monotonic()`` clock."""
        remaining = self.remaining()
        return None if remaining is None else time.monotonic() + remaining


class Cancellation:
    """Set once, seen by every job; callbacks run once, in the thread that cancels.

    Thread-safe. A callback registered after the cancellation runs at once (in
    the registering thread), so a job cannot miss it by registering late.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._reason = ""
        self._callbacks: list[Callable[[], object]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()

    @property
    def reason(self) -> str:
        """Why (empty until cancelled)."""
        return self._reason

    def cancel(self, reason: str) -> None:
        """Cancel (the first reason wins) and run every registered callback."""
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` when cancelled (now, if already); returns a function that
        unregisters it (call it when what the callback would stop has ended)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def forget() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return forget
        callback()
        return lambda: None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` passes; whether it was cancelled."""
        return self._event.wait(timeout)


@dataclass(frozen=True)
class JobContext:
    """What a running job may use (see the module docstring)."""

    key: str
    deadline: Deadline
    cancellation: Cancellation
    report: Callable[[Any], None] = field(default=lambda event: None)


class Remote(Protocol[T_co]):
    """What a job is when it runs on a machine that shares nothing with the submitter."""

    def cargo_key(self) -> str:
        """Names the cargo: jobs with one key share one cargo (made once, sent once per
        machine)."""

    def cargo(self) -> bytes:
        """What every job of the key needs there (made in the submitting process)."""

    def there(self, context: JobContext, cargo: bytes, place: Path) -> Any:
        """Run on the remote machine, with the cargo and ``place``, a directory of that
        machine's own (kept between jobs, shared by the jobs of one cargo there); plain
        data (it pickles) back."""

    def relayed(self, event: Any) -> Any:
        """In the submitting process, while the job runs there: an event it reported, in
        order; what to hand the submitter's ``report`` (``None``: nothing, the job's own
        use of it, such as its journal, is done)."""

    def land(self, returned: Any, notes: list[str]) -> T_co:
        """In the submitting process: what :meth:`there` returned, validated and recorded
        here; the job's result. ``notes`` say what the scheduler did (where it ran, a
        retry after a lost machine)."""


@dataclass(frozen=True)
class Job(Generic[T]):
    """One unit of work: ``run(context)`` returns its result.

    ``key`` names it (unique per scheduler; shown in errors). ``portable``: the
    callable and its arguments are plain data that pickle. ``remote``: how it runs
    on a machine that shares nothing with this one (see the module docstring);
    without it, every scheduler runs the job in the submitting process.
    """

    key: str
    run: Callable[[JobContext], T]
    portable: bool = False
    remote: Remote[T] | None = None


class Handle(Protocol[T_co]):
    """A submitted job."""

    @property
    def key(self) -> str:
        """The job's key."""

    def done(self) -> bool:
        """Whether the job has an outcome (it ended, or will never start)."""

    def outcome(self) -> Outcome | None:
        """How it ended (``None`` while it is queued or running)."""

    def result(self, timeout: float | None = None) -> T_co:
        """Its value; re-raises what it raised; :class:`JobNotRun` when it never started;
        ``TimeoutError`` when ``timeout`` passes first."""


class JobState(Generic[T]):
    """What every scheduler's :class:`Handle` keeps, and how it answers: the job, how it
    ended (its value or error), the order it ended in, and ``event``, set once it ended.
    A scheduler settles it (:meth:`settle`) under its own lock."""

    def __init__(self, job: Job[T], cancellation: Cancellation) -> None:
        self.job = job
        self._cancellation = cancellation
        self.event = threading.Event()
        self._outcome: Outcome | None = None
        self.value: T | None = None
        self.error: BaseException | None = None
        self.order = 0

    @property
    def key(self) -> str:
        return self.job.key

    def done(self) -> bool:
        return self.event.is_set()

    def outcome(self) -> Outcome | None:
        return self._outcome

    def settle(self, outcome: Outcome, order: int, value: T | None = None,
               error: BaseException | None = None) -> None:
        """Give the job its outcome, then wake whoever waits on it."""
        self._outcome, self.value, self.error, self.order = outcome, value, error, order
        self.event.set()

    def result(self, timeout: float | None = None) -> T:
        if not self.event.wait(timeout):
            raise TimeoutError(f"job {self.key!r} has not ended yet")
        if self._outcome in ("cancelled", "expired"):
            why = (f"cancelled before it started: {self._cancellation.reason}"
                   if self._outcome == "cancelled" else
                   "the deadline passed before it could start")
            raise JobNotRun(f"job {self.key!r} never ran: {why}", operation="schedule",
                            context={"job": self.key, "outcome": str(self._outcome)})
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def ended_in_order(pending: list[JobState[T]], cond: threading.Condition
                   ) -> Iterator[JobState[T]]:
    """Yield ``pending``'s jobs as they end, in the order they ended (a scheduler's
    ``as_completed``); ``cond`` is the scheduler's condition, notified whenever one ends."""
    while pending:
        with cond:
            ready = [h for h in pending if h.done()]
            while not ready:
                cond.wait()
                ready = [h for h in pending if h.done()]
        ready.sort(key=lambda h: h.order)
        for handle in ready:
            pending.remove(handle)
            yield handle


class Scheduler(Protocol):
    """Runs jobs, some at once, under one deadline and one cancellation."""

    @property
    def deadline(self) -> Deadline:
        """The deadline every job shares."""

    @property
    def cancellation(self) -> Cancellation:
        """Set by :meth:`cancel`; every job's context carries it."""

    def submit(self, job: Job[T], *, report: Callable[[Any], None] | None = None) -> Handle[T]:
        """Queue ``job``; ``report`` receives what it reports (in the job's thread)."""

    def as_completed(self, handles: Iterable[Handle[T]]) -> Iterator[Handle[T]]:
        """Yield each of ``handles`` once it is done, in the order they finish."""

    def cancel(self, reason: str) -> None:
        """Queued jobs never start (outcome ``cancelled``); running ones see the
        cancellation (and its callbacks run now)."""

    def close(self) -> None:
        """Wait for every running job to end, then release the workers; queued jobs that
        have not started are cancelled first only if :meth:`cancel` was called."""
