"""The scheduling seam's local implementation: concurrency, order, cancel, deadline.

Every wait is on state (events, barriers with a timeout that fails the test
instead of hanging it); nothing sleeps.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from executor.scheduling import (
    Cancellation,
    Deadline,
    Job,
    JobContext,
    JobNotRun,
    LocalScheduler,
)
from tests.timescale import scaled

WAIT = scaled(30.0)


def job(key: str, fn: Any) -> Job[Any]:
    return Job(key=key, run=fn)


def test_jobs_run_concurrently_up_to_the_limit_and_no_more() -> None:
    running = 0
    most = 0
    lock = threading.Lock()
    together = threading.Barrier(3, timeout=WAIT)  # three jobs must be in at the same time
    release = threading.Event()

    def work(context: JobContext) -> str:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if context.key in ("a", "b", "c"):
            together.wait()  # would raise BrokenBarrierError if they ran one at a time
        release.wait(WAIT)
        with lock:
            running -= 1
        return context.key

    with LocalScheduler(jobs=3) as scheduler:
        handles = [scheduler.submit(job(key, work)) for key in "abcde"]
        release.set()
        assert [h.result(WAIT) for h in handles] == list("abcde")
    assert most == 3


def test_results_come_in_the_order_jobs_finish() -> None:
    first_may_end = threading.Event()

    def slow(context: JobContext) -> str:
        first_may_end.wait(WAIT)
        return "slow"

    def fast(context: JobContext) -> str:
        return "fast"

    with LocalScheduler(jobs=2) as scheduler:
        handles = [scheduler.submit(job("slow", slow)), scheduler.submit(job("fast", fast))]
        order = []
        for handle in scheduler.as_completed(handles):
            order.append(handle.result())
            first_may_end.set()
    assert order == ["fast", "slow"]


def test_cancel_drops_queued_jobs_and_tells_running_ones() -> None:
    started = threading.Event()
    stopped: list[str] = []

    def running(context: JobContext) -> str:
        context.cancellation.on_cancel(lambda: stopped.append("stop the child's processes"))
        started.set()
        context.cancellation.wait(WAIT)
        return f"ended: {context.cancellation.reason}"

    with LocalScheduler(jobs=1) as scheduler:
        first = scheduler.submit(job("running", running))
        queued = scheduler.submit(job("queued", lambda context: "never"))
        assert started.wait(WAIT)
        scheduler.cancel("interrupted (Ctrl-C)")
        assert first.result(WAIT) == "ended: interrupted (Ctrl-C)"
        assert queued.outcome() == "cancelled"
        with pytest.raises(JobNotRun, match="cancelled before it started: interrupted"):
            queued.result()
        late = scheduler.submit(job("late", lambda context: "never"))
        assert late.outcome() == "cancelled"
    assert stopped == ["stop the child's processes"]


def test_a_job_whose_turn_comes_after_the_deadline_never_starts() -> None:
    ran: list[str] = []
    with LocalScheduler(jobs=1, deadline=Deadline.after(0)) as scheduler:
        handle = scheduler.submit(job("late", lambda context: ran.append("ran")))
        assert list(scheduler.as_completed([handle])) == [handle]
    assert handle.outcome() == "expired" and ran == []
    with pytest.raises(JobNotRun, match="the deadline passed before it could start"):
        handle.result()


def test_a_failing_job_costs_the_others_nothing() -> None:
    def boom(context: JobContext) -> str:
        raise ValueError("a bug in one child")

    with LocalScheduler(jobs=2) as scheduler:
        bad = scheduler.submit(job("bad", boom))
        good = scheduler.submit(job("good", lambda context: "fine"))
        done = {h.key: h for h in scheduler.as_completed([bad, good])}
    assert done["good"].result() == "fine" and done["bad"].outcome() == "failed"
    with pytest.raises(ValueError, match="a bug in one child"):
        done["bad"].result()


def test_a_job_reports_through_its_own_channel_in_its_own_thread() -> None:
    seen: list[tuple[str, str]] = []

    def work(context: JobContext) -> None:
        context.report(f"step of {context.key}")

    with LocalScheduler(jobs=2) as scheduler:
        handles = [scheduler.submit(job(key, work), report=lambda event: seen.append(
            (event, threading.current_thread().name))) for key in ("a", "b")]
        for handle in handles:
            handle.result(WAIT)
    assert sorted(event for event, _ in seen) == ["step of a", "step of b"]
    assert all(thread.startswith("corral-") for _, thread in seen)


def test_a_callback_registered_after_the_cancellation_runs_at_once() -> None:
    cancellation = Cancellation()
    cancellation.cancel("first")
    cancellation.cancel("second")  # the first reason wins
    ran: list[str] = []
    cancellation.on_cancel(lambda: ran.append("now"))
    assert ran == ["now"] and cancellation.reason == "first"
    assert Deadline().remaining() is None and not Deadline().expired()
