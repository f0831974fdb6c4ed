"""The API for event loops: :class:`AsyncCorral`, the same :class:`Corral` awaited.

Each call runs the blocking call in a thread (anyio: asyncio or trio) while the
caller's task waits for it; nothing is implemented twice. Two things cross
between the thread and the loop:

- **progress**: the run's events, from any of its threads, travel through a
  memory stream into the event loop, where they are handed to the caller's
  ``progress`` callback (which may be a coroutine function) in order;
- **cancellation**: when the waiting task is cancelled (a client gave up on a
  request, a server shuts down), the run's :class:`~executor.api.CancelToken`
  is cancelled (every running command stops, each session ends ``cancelled``
  at its next step, its diff recorded) and the task waits, shielded, until the
  thread has written the record, so a cancelled call never leaves a half-written
  run behind. The cancellation is raised again once it has.
"""

from __future__ import annotations

import inspect
import math
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import suppress
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from executor.api.corral import Corral
from executor.api.inputs import CancelToken
from executor.scheduling import DEFAULT_JOBS

if TYPE_CHECKING:
    from executor.api.agents import Agents, AgentView, NewAgent
    from executor.api.environments import BuiltEnvironment
    from executor.api.fanouts import FanoutResult
    from executor.api.inputs import Replay
    from executor.api.journal import LogEvent
    from executor.api.records import GcReport
    from executor.api.reports import ApplyReport, BranchReport, Discarded, Recovered
    from executor.api.results import Diff, RunList, RunResult
    from executor.api.running import SchedulerFactory
    from executor.api.sessions import ShellResult
    from executor.apply import PatchPlan
    from executor.fanout import ChildPlan
    from executor.ledger import RunRecord
    from executor.run.session import ProgressEvent
    from executor.scheduling import Cancellation
    from executor.tools.dispatch import ApprovalHandler
    from sandbox.environment import EnvironmentInfo

__all__ = ["AsyncCorral", "AsyncProgress"]

T = TypeVar("T")
#: A progress callback of an async caller: called in the event loop, in order; it may be
#: a coroutine function.
AsyncProgress = Callable[["ProgressEvent"], "Awaitable[None] | None"]
_Emit = Callable[["ProgressEvent"], None]


class AsyncCorral:
    """:class:`Corral`'s calls for ``async`` code (asyncio or trio, through anyio).

    ``corral`` is the Corral they run on; ``cancel_reason`` is what a run cancelled by
    the cancellation of the waiting task records. Every call has the blocking call's
    arguments and result; :meth:`run` and :meth:`fanout` take an async ``progress``
    callback and stop their children when the awaiting task is cancelled.
    """

    def __init__(self, corral: Corral, *,
                 cancel_reason: str = "the task waiting for it was cancelled") -> None:
        self.corral = corral
        self.cancel_reason = cancel_reason

    async def _thread(self, call: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(call)

    async def _bridged(self, work: Callable[[_Emit | None, Cancellation], T], *,
                       progress: AsyncProgress | None, cancel: Cancellation | None) -> T:
        """Run ``work(emit, cancellation)`` in a thread of its own; hand its events to
        ``progress`` in the loop; on cancellation of this task, cancel the run and wait for
        its record (see the module docstring)."""
        token = anyio.lowlevel.current_token()
        cancellation = cancel if cancel is not None else CancelToken()
        done = anyio.Event()
        values: list[T] = []
        errors: list[BaseException] = []
        writer, reader = anyio.create_memory_object_stream["ProgressEvent"](math.inf)
        lock = threading.Lock()
        listening = [True]

        def emit(event: ProgressEvent) -> None:
            with lock:
                if not listening[0]:
                    return  # the call ended (or the loop): nobody is listening any more
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError,
                          anyio.WouldBlock, anyio.RunFinishedError):
                anyio.from_thread.run_sync(writer.send_nowait, event, token=token)

        def stop() -> None:
            with lock:
                listening[0] = False

        def target() -> None:
            try:
                values.append(work(emit if progress is not None else None, cancellation))
            except BaseException as exc:  # handed to the waiting task, raised there
                errors.append(exc)
            finally:
                # The loop may be gone: the record is written all the same.
                with suppress(anyio.RunFinishedError):
                    anyio.from_thread.run_sync(done.set, token=token)

        async def forward() -> None:
            async with reader:
                async for event in reader:
                    if progress is not None:
                        shown = progress(event)
                        if inspect.isawaitable(shown):
                            await shown

        thread = threading.Thread(target=target, name="corral-async", daemon=True)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(forward)
                thread.start()
                try:
                    await done.wait()
                except anyio.get_cancelled_exc_class():
                    cancellation.cancel(self.cancel_reason)
                    with anyio.CancelScope(shield=True):
                        await done.wait()  # the children stop, record their diffs, return
                    raise
                finally:
                    stop()
                    writer.close()
        finally:
            stop()
        if errors:
            raise errors[0]
        return values[0]

    # -- agents ----------------------------------------------------------------------------

    async def agents(self) -> Agents:
        """:meth:`Corral.agents`."""
        return await self._thread(self.corral.agents)

    async def check(self) -> Agents:
        """:meth:`Corral.check`."""
        return await self._thread(self.corral.check)

    async def agent(self, name: str) -> AgentView:
        """:meth:`Corral.agent`."""
        return await self._thread(partial(self.corral.agent, name))

    async def new_agent(self, name: str, *, format: str, mode: str = "all",
                        path: str | os.PathLike[str] | None = None,
                        description: str | None = None) -> NewAgent:
        """:meth:`Corral.new_agent`."""
        return await self._thread(partial(self.corral.new_agent, name, format=format,
                                          mode=mode, path=path, description=description))

    # -- runs ------------------------------------------------------------------------------

    async def run(self, prompt: str, *, agent: str | None = None, mode: str = "worktree",
                  script: str | os.PathLike[str] | Replay | None = None,
                  model: str | None = None, approve: str | ApprovalHandler | None = None,
                  timeout: float | None = None, environment: bool = True,
                  setup_network: bool | None = None, progress: AsyncProgress | None = None,
                  cancel: Cancellation | None = None,
                  on_setup_output: Callable[[str], None] | None = None,
                  on_warning: Callable[[str], None] | None = None) -> RunResult:
        """:meth:`Corral.run`, awaited: ``progress`` is called in the event loop; cancelling
        the awaiting task cancels the run (its record says ``cancelled``, its diff kept).
        ``approve``, ``on_setup_output`` and ``on_warning`` are called in the run's thread."""

        def work(emit: _Emit | None, cancellation: Cancellation) -> RunResult:
            return self.corral.run(prompt, agent=agent, mode=mode, script=script, model=model,
                                   approve=approve, timeout=timeout, environment=environment,
                                   setup_network=setup_network, progress=emit,
                                   cancel=cancellation, on_setup_output=on_setup_output,
                                   on_warning=on_warning)

        return await self._bridged(work, progress=progress, cancel=cancel)

    async def continue_run(self, run_id: str, prompt: str, *,
                           script: str | os.PathLike[str] | Replay | None = None,
                           model: str | None = None,
                           approve: str | ApprovalHandler | None = None,
                           timeout: float | None = None, environment: bool = True,
                           setup_network: bool | None = None,
                           progress: AsyncProgress | None = None,
                           cancel: Cancellation | None = None,
                           on_setup_output: Callable[[str], None] | None = None,
                           on_warning: Callable[[str], None] | None = None) -> RunResult:
        """:meth:`Corral.continue_run`, awaited as :meth:`run` is."""

        def work(emit: _Emit | None, cancellation: Cancellation) -> RunResult:
            return self.corral.continue_run(
                run_id, prompt, script=script, model=model, approve=approve, timeout=timeout,
                environment=environment, setup_network=setup_network, progress=emit,
                cancel=cancellation, on_setup_output=on_setup_output, on_warning=on_warning)

        return await self._bridged(work, progress=progress, cancel=cancel)

    async def shell(self, run_id: str, command: Sequence[str], *,
                    timeout: float | None = None, environment: bool = True,
                    on_output: Callable[[str, bytes], None] | None = None) -> ShellResult:
        """:meth:`Corral.shell` with a command (``on_output`` is called in its thread)."""
        return await self._thread(partial(self.corral.shell, run_id, command, timeout=timeout,
                                          environment=environment, on_output=on_output))

    async def fanout(self, prompt: str, *, agents: Sequence[str] = (), n: int | None = None,
                     scripts: Sequence[str | os.PathLike[str] | Replay] = (),
                     models: Sequence[str] = (), check: str | None = None,
                     check_timeout: float = 600.0, jobs: int = DEFAULT_JOBS,
                     timeout: float | None = None, approve: str | None = None,
                     environment: bool = True, setup_network: bool | None = None,
                     progress: AsyncProgress | None = None, cancel: Cancellation | None = None,
                     on_plan: Callable[[list[ChildPlan]], None] | None = None,
                     on_setup_output: Callable[[str], None] | None = None,
                     on_warning: Callable[[str], None] | None = None,
                     scheduler: SchedulerFactory | None = None,
                     on: str = "local") -> FanoutResult:
        """:meth:`Corral.fanout`, awaited, as :meth:`run` is (``on_plan`` is called in the
        fanout's thread, before any child starts)."""

        def work(emit: _Emit | None, cancellation: Cancellation) -> FanoutResult:
            return self.corral.fanout(
                prompt, agents=agents, n=n, scripts=scripts, models=models, check=check,
                check_timeout=check_timeout, jobs=jobs, timeout=timeout, approve=approve,
                environment=environment, setup_network=setup_network, progress=emit,
                cancel=cancellation, on_plan=on_plan, on_setup_output=on_setup_output,
                on_warning=on_warning, scheduler=scheduler, on=on)

        return await self._bridged(work, progress=progress, cancel=cancel)

    # -- the ledger ------------------------------------------------------------------------

    async def runs(self, **filters: Any) -> RunList:
        """:meth:`Corral.runs` (the same keywords: ``limit``, ``after``, filters)."""
        return await self._thread(partial(self.corral.runs, **filters))

    async def show(self, run_id: str) -> RunResult:
        """:meth:`Corral.show`."""
        return await self._thread(partial(self.corral.show, run_id))

    async def transcript(self, run_id: str) -> list[dict[str, Any]]:
        """:meth:`Corral.transcript`."""
        return await self._thread(partial(self.corral.transcript, run_id))

    async def show_fanout(self, fanout_id: str) -> FanoutResult:
        """:meth:`Corral.show_fanout`."""
        return await self._thread(partial(self.corral.show_fanout, fanout_id))

    async def pick(self, fanout_id: str, index: int | str) -> str:
        """:meth:`Corral.pick`."""
        return await self._thread(partial(self.corral.pick, fanout_id, index))

    async def journal(self, run_id: str) -> list[LogEvent]:
        """:meth:`Corral.journal`."""
        return await self._thread(partial(self.corral.journal, run_id))

    async def follow(self, run_id: str, *, poll: float = 0.1) -> AsyncIterator[LogEvent]:
        """:meth:`Corral.follow`, each event awaited (the polling runs in a thread)."""
        events = await self._thread(partial(self.corral.follow, run_id, poll=poll))
        while True:
            item = await self._thread(partial(next, events, None))
            if item is None:
                return
            yield item

    async def diff(self, run_id: str) -> Diff:
        """:meth:`Corral.diff`."""
        return await self._thread(partial(self.corral.diff, run_id))

    async def apply(self, run_id: str, *, check_only: bool = False, three_way: bool = False,
                    yes: bool = False, allow_symlinks: bool = False,
                    allow_binary: bool = False, allow_git_dirs: bool = False,
                    allow_unverified: bool = False,
                    confirm: Callable[[PatchPlan], bool] | None = None,
                    on_plan: Callable[[RunRecord, PatchPlan], None] | None = None,
                    ) -> ApplyReport:
        """:meth:`Corral.apply` (``confirm`` and ``on_plan`` are called in its thread)."""
        return await self._thread(partial(
            self.corral.apply, run_id, check_only=check_only, three_way=three_way, yes=yes,
            allow_symlinks=allow_symlinks, allow_binary=allow_binary,
            allow_git_dirs=allow_git_dirs, allow_unverified=allow_unverified,
            confirm=confirm, on_plan=on_plan))

    async def branch(self, run_id: str, name: str, *, allow_symlinks: bool = False,
                     allow_binary: bool = False, allow_git_dirs: bool = False,
                     allow_unverified: bool = False) -> BranchReport:
        """:meth:`Corral.branch`."""
        return await self._thread(partial(
            self.corral.branch, run_id, name, allow_symlinks=allow_symlinks,
            allow_binary=allow_binary, allow_git_dirs=allow_git_dirs,
            allow_unverified=allow_unverified))

    async def recover(self, run_id: str) -> Recovered:
        """:meth:`Corral.recover`."""
        return await self._thread(partial(self.corral.recover, run_id))

    async def discard(self, run_id: str) -> Discarded:
        """:meth:`Corral.discard`."""
        return await self._thread(partial(self.corral.discard, run_id))

    async def gc(self, older_than: str | float | None = None) -> GcReport:
        """:meth:`Corral.gc`."""
        return await self._thread(partial(self.corral.gc, older_than))

    # -- the project's environment ---------------------------------------------------------

    async def build_environment(self, *, setup_network: bool | None = None,
                                rebuild: bool = False) -> BuiltEnvironment | None:
        """:meth:`Corral.build_environment`."""
        return await self._thread(partial(self.corral.build_environment,
                                          setup_network=setup_network, rebuild=rebuild))

    async def environments(self) -> list[EnvironmentInfo]:
        """:meth:`Corral.environments`."""
        return await self._thread(self.corral.environments)

    async def prune_environments(self, keys: Sequence[str] = (), *,
                                 older_than: str | float | None = None,
                                 everything: bool = False) -> list[EnvironmentInfo]:
        """:meth:`Corral.prune_environments`."""
        return await self._thread(partial(self.corral.prune_environments, keys,
                                          older_than=older_than, everything=everything))
