"""Runs and fanouts started from the start page, each in a thread of the server.

:meth:`Starts.start` starts one (:meth:`Corral.run`, or :meth:`Corral.fanout` for more
than one child or a check command) and waits only until it has an id to show (the
run's first progress event, the fanout's plan), or has failed before that (a user's
mistake: an unknown agent, a missing replay): the page then follows it live.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from executor.api import CancelToken, CorralError

if TYPE_CHECKING:
    from executor.api import ChildPlan, Corral, ProgressEvent

__all__ = ["StartRequest", "Started", "Starts"]

#: Seconds to wait for a started run to have an id (its environment's setup included).
WAIT = 600.0


@dataclass(frozen=True)
class StartRequest:
    """What the start form asks for."""

    prompt: str
    agent: str | None = None
    n: int = 1
    check: str | None = None
    scripts: tuple[str, ...] = ()
    model: str | None = None
    mode: str = "worktree"


@dataclass
class Started:
    """Where a started run or fanout can be watched (``kind``: ``run`` or ``fanout``), or
    why it could not start (``error``: a :meth:`CorralError.to_dict`)."""

    kind: str
    ident: str | None = None
    error: dict[str, object] | None = None
    ready: threading.Event = field(default_factory=threading.Event)


class Starts:
    """The runs and fanouts this server started: their threads, and one cancellation for
    them all (:meth:`close`, when the server stops)."""

    def __init__(self, corral: Corral) -> None:
        self.corral = corral
        self.threads: list[threading.Thread] = []
        self.cancel = CancelToken()

    def close(self, timeout: float = 120.0) -> list[str]:
        """Cancel what still runs (each run ends ``cancelled``, its diff recorded, as on
        Ctrl-C) and wait for it, at most ``timeout`` seconds each; the names of the threads
        that did not end."""
        self.cancel.cancel()
        for thread in self.threads:
            thread.join(timeout)
        return [thread.name for thread in self.threads if thread.is_alive()]

    def start(self, request: StartRequest) -> Started:
        """Start ``request`` in a thread; return once it has an id or has failed."""
        fanout = request.n > 1 or bool(request.check) or len(request.scripts) > 1
        started = Started("fanout" if fanout else "run")
        target = self._fanout if fanout else self._run
        if self.cancel.cancelled:  # the server is stopping
            started.error = {"code": "stopping", "message": "the server is stopping"}
            return started
        thread = threading.Thread(target=target, args=(request, started), daemon=True,
                                  name=f"corral-serve-{started.kind}")
        self.threads.append(thread)
        thread.start()
        started.ready.wait(WAIT)
        return started

    def _run(self, request: StartRequest, started: Started) -> None:
        def progress(event: ProgressEvent) -> None:
            if event.run_id and started.ident is None:
                started.ident = event.run_id
                started.ready.set()

        try:
            result = self.corral.run(request.prompt, agent=request.agent, mode=request.mode,
                                     script=request.scripts[0] if request.scripts else None,
                                     model=request.model, approve="never", progress=progress,
                                     cancel=self.cancel)
            started.ident = started.ident or result.run_id
        except CorralError as exc:
            started.error = started.error or exc.to_dict()
        finally:
            started.ready.set()

    def _fanout(self, request: StartRequest, started: Started) -> None:
        def planned(plans: list[ChildPlan]) -> None:
            first = plans[0].run_id
            for _ in range(1200):  # bounded: the record is written right after the plan
                for fanout in self.corral.runs(limit=20).fanouts:  # the newest
                    if any(child.run_id == first for child in fanout.children):
                        started.ident = fanout.fanout_id
                        started.ready.set()
                        return
                threading.Event().wait(0.05)

        try:
            watcher: list[threading.Thread] = []

            def on_plan(plans: list[ChildPlan]) -> None:
                watcher.append(threading.Thread(target=planned, args=(plans,), daemon=True))
                watcher[0].start()

            result = self.corral.fanout(
                request.prompt, agents=[request.agent] if request.agent else [],
                n=request.n,
                scripts=list(request.scripts), models=[request.model] if request.model else [],
                check=request.check or None, approve="never", on_plan=on_plan,
                cancel=self.cancel)
            started.ident = started.ident or result.fanout_id
        except CorralError as exc:
            started.error = started.error or exc.to_dict()
        finally:
            started.ready.set()
