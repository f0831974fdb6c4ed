"""What :meth:`Corral.run` and :meth:`Corral.fanout` do: every check a user's input needs,
then the run machinery (:mod:`executor.run`, :mod:`executor.fanout`).

The order is the one every front door had: the state dir (a ledger a child
could write is refused before anything), the definitions, the agents named,
the replays, then the project's environment (built once, its setup output
streamed), then the children. A user's mistake therefore costs nothing: no
record, no sandbox, no setup.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.agents.registry import find_agent, load
from executor.api.fanouts import FanoutResult
from executor.api.inputs import CancelToken, Replay, scripted
from executor.api.network import check_egress, with_allow_net
from executor.api.placement import is_remote, scheduler_for
from executor.api.results import RunResult
from executor.errors import ExecutorError
from executor.fanout import FanoutRequest, plan_children, run_fanout
from executor.ledger import write_fanout
from executor.models import ScriptedModel
from executor.run import RunSettings, describe, run_agent, with_environment
from executor.run.approval import parse_approve, policy_handler
from executor.scheduling import Cancellation, Deadline, LocalScheduler, Scheduler
from policies.config import UserConfig, config_path, load_user_config
from policies.contract import SandboxMode
from policies.loader import Diagnostic, Environment, LoadResult
from sandbox.backends.limits import memory_warning
from sandbox.config import HOST_WARNING, BackendConfig

if TYPE_CHECKING:
    from executor.api.corral import Corral
    from executor.fanout import ChildPlan
    from executor.run.session import ProgressEvent
    from executor.tools.dispatch import ApprovalHandler

__all__ = ["approval_handler", "fanout_many", "live_display", "replay_model", "run_one",
           "settings_for", "usage"]

#: ``(jobs, the shared deadline, the cancellation)`` -> where a fanout's children run.
SchedulerFactory = Callable[[int, Deadline, Cancellation], Scheduler]
Progress = Callable[["ProgressEvent"], None]


def usage(message: str, hint: str) -> ExecutorError:
    """A call's arguments that do not fit together (exit code 2, before anything ran)."""
    return ExecutorError(message, code="usage_error", operation="check_arguments", hint=hint)


def _mode(mode: str) -> SandboxMode:
    try:
        return SandboxMode(mode)
    except ValueError:
        raise usage(f"mode {mode!r} is not a sandbox mode",
                    "read-only, worktree or workspace-write") from None


def replay_model(script: str | os.PathLike[str] | Replay | None) -> ScriptedModel | None:
    if script is None:
        return None
    if isinstance(script, Replay):
        return script.model()
    return scripted(Path(script))


def approval_handler(approve: str | ApprovalHandler | None) -> ApprovalHandler | None:
    """``never`` / ``always-for=TOOLS`` as a handler; a handler as it is; ``None``: every
    ``ask`` is denied (nobody answers)."""
    if not isinstance(approve, str):
        return approve
    allowed = parse_approve(approve)
    return policy_handler(allowed) if allowed is not None else None


def _warnings(on_warning: Callable[[str], None] | None) -> Callable[[Diagnostic], None] | None:
    if on_warning is None:
        return None

    def warn(diagnostic: Diagnostic) -> None:
        on_warning(diagnostic.render())

    return warn


@contextlib.contextmanager
def live_display(progress: object) -> Iterator[None]:
    """A progress callback that is also a context manager (a live display) is entered
    around the children themselves: after every check and the environment's setup."""
    if isinstance(progress, contextlib.AbstractContextManager):
        with progress:
            yield
    else:
        yield


def _with_review(config: UserConfig, *, granted: bool) -> UserConfig:
    """``config`` with review commands granted when the caller grants them
    (``--review-commands``); it cannot take back your config's grant."""
    if not granted or config.review.commands:
        return config
    review = config.review.model_copy(update={"commands": True})
    return config.model_copy(update={"review": review})


def settings_for(corral: Corral, registry: LoadResult, ledger: Path, *, environment: bool,
                 setup_network: bool | None, on_setup_output: Callable[[str], None] | None,
                 on_warning: Callable[[str], None] | None,
                 backend: BackendConfig | None = None, **extra: Any) -> RunSettings:
    """The settings of a run (or a fanout, a continuation, a shell) of ``corral``, the
    project's environment prepared; ``backend`` instead of the Corral's own."""
    backend = backend or corral.backend_config()
    if backend.type == "host" and on_warning is not None:
        on_warning(HOST_WARNING)
    if on_warning is not None and (memory := memory_warning(backend)) is not None:
        on_warning(memory)  # bubblewrap without a memory cgroup: RLIMIT_AS, and its cost
    config = _with_review(with_allow_net(load_user_config(), corral.allow_net),
                          granted=corral.review_commands)
    settings = RunSettings(
        root=corral.root.resolve(), backend=backend, config=config,
        egress=check_egress(corral.net, config),
        registry=registry, ledger=ledger, env=Environment.from_env(),
        trust_project=corral.trust_project, config_file=config_path(),
        state_root=corral.state_dir, **extra)
    return with_environment(settings, no_env=not environment, network=setup_network,
                            on_output=on_setup_output, warn=_warnings(on_warning))


def run_one(corral: Corral, prompt: str, *, agent: str | None, mode: str,
            script: str | os.PathLike[str] | Replay | None, model: str | None,
            approve: str | ApprovalHandler | None, timeout: float | None, environment: bool,
            setup_network: bool | None, progress: Progress | None,
            cancel: Cancellation | None, on_setup_output: Callable[[str], None] | None,
            on_warning: Callable[[str], None] | None,
            welcome: Callable[[str, str], None] | None) -> RunResult:
    """:meth:`Corral.run`."""
    if script is not None and model is not None:
        raise usage("a script and a model are exclusive", "replay a script, or run a model")
    mode_ceiling = _mode(mode)
    ledger = corral.ledger()  # refuses a state dir a child could write, before anything
    sources = corral.sources()
    registry = load(sources)
    if agent is not None or registry.default_agent is not None:  # run_agent says when neither
        find_agent(agent or str(registry.default_agent), registry, sources)
    replay = replay_model(script)
    settings = settings_for(
        corral, registry, ledger, environment=environment, setup_network=setup_network,
        on_setup_output=on_setup_output, on_warning=on_warning, mode_ceiling=mode_ceiling,
        model_override=model, script=replay, approval=approval_handler(approve),
        progress=progress, timeout_seconds=timeout, welcome=welcome, cancellation=cancel)
    with live_display(progress):
        return RunResult(run_agent(settings, agent, prompt))


def _local(jobs: int, deadline: Deadline, cancellation: Cancellation) -> Scheduler:
    return LocalScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation,
                          name="corral-fanout")


def fanout_many(corral: Corral, prompt: str, *, agents: Sequence[str], n: int | None,
                scripts: Sequence[str | os.PathLike[str] | Replay], models: Sequence[str],
                check: str | None, check_timeout: float, jobs: int, timeout: float | None,
                approve: str | None, environment: bool, setup_network: bool | None,
                progress: Progress | None, cancel: Cancellation | None,
                on_plan: Callable[[list[ChildPlan]], None] | None,
                on_setup_output: Callable[[str], None] | None,
                on_warning: Callable[[str], None] | None,
                scheduler: SchedulerFactory | None, on: str = "local") -> FanoutResult:
    """:meth:`Corral.fanout`."""
    remote = is_remote(on)  # where children run, whoever schedules them
    scheduler = scheduler or scheduler_for(on)  # a bad ``on``, or no Ray: before anything
    ledger = corral.ledger()  # refuses a state dir a child could write, before anything
    sources = corral.sources()
    registry = load(sources)
    named = list(agents) or ([registry.default_agent] if registry.default_agent else [])
    keys = [Path(item.source) if isinstance(item, Replay) else Path(item) for item in scripts]
    plans = plan_children(count=n, agents=named, models=models, scripts=keys)
    for name in dict.fromkeys(plan.agent for plan in plans):
        find_agent(name, registry, sources)
    replays: dict[str, list[object]] = {}
    for item, key in zip(scripts, keys, strict=True):
        if str(key) not in replays:
            replays[str(key)] = list(item.turns if isinstance(item, Replay)
                                     else Replay.from_file(key).turns)
    if check is not None and not check.strip():
        raise usage("the check command is empty",
                    "leave the check out, or give a command such as 'pytest -q'")
    settings = settings_for(corral, registry, ledger, environment=environment and not remote,
                            setup_network=setup_network, on_setup_output=on_setup_output,
                            on_warning=on_warning)
    spec = None  # children on other machines: their environment is built there
    if remote and environment:
        spec, diagnostics = describe(settings, network=setup_network)
        for diagnostic in diagnostics:
            if on_warning is not None:
                on_warning(diagnostic.render())
    request = FanoutRequest(settings=settings, prompt=prompt, plans=plans, approve=approve,
                            check_command=check, check_timeout=check_timeout, jobs=jobs,
                            timeout_seconds=timeout, replays=replays,
                            remote_environment=spec)
    if on_plan is not None:
        on_plan(plans)
    with live_display(progress):
        pool = (scheduler or _local)(jobs, Deadline.after(timeout),
                                     cancel if cancel is not None else CancelToken())
        try:
            record = run_fanout(request, scheduler=pool, report=progress)
        finally:
            pool.close()
    if cancel is not None and cancel.cancelled and record.status != "cancelled":
        # Cancelled by the caller while the children were ending on their own.
        record = record.model_copy(update={"status": "cancelled"})
        write_fanout(ledger, record)
    return FanoutResult.read(record, ledger)
