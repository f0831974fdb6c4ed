"""What a run needs that is not the agent or the prompt (:class:`RunSettings`).

One object carries it down a run tree: the root and backend, the user's
config and the loaded definitions, the ledger, the ceiling of the mode, a
model override or replay, approvals, progress, budgets and deadlines, and what
a fanout shares (its snapshot, cancellation and id). A delegated child gets
its parent's settings, a fanout child its own (:mod:`executor.fanout`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from executor.models import ScriptedModel
from executor.run.session import ProgressEvent, SharedLimits
from executor.scheduling import Cancellation, Deadline, LocalScheduler, Scheduler
from executor.tools.dispatch import ApprovalHandler
from policies.config import UserConfig
from policies.contract import SandboxMode
from policies.loader import Environment, LoadResult
from sandbox.config import BackendConfig
from sandbox.environment import EnvironmentRef
from sandbox.workspaces.snapshot import SnapshotRef

__all__ = ["RunSettings", "SchedulerFactory", "deadline_after", "local_scheduler"]

#: (jobs at once, shared deadline, cancellation) -> the scheduler of one parallel delegate
#: call. The default runs them in threads here (:class:`LocalScheduler`).
SchedulerFactory = Callable[[int, Deadline, Cancellation], Scheduler]


def local_scheduler(jobs: int, deadline: Deadline, cancellation: Cancellation) -> Scheduler:
    """The default :data:`SchedulerFactory`: a thread pool of this process."""
    return LocalScheduler(jobs=jobs, deadline=deadline, cancellation=cancellation,
                          name="corral-delegate")


def deadline_after(*limits: float | None) -> float | None:
    """The monotonic time the shortest of ``limits`` (seconds from now) ends; ``None``
    when there is none."""
    present = [limit for limit in limits if limit is not None]
    return time.monotonic() + min(present) if present else None


@dataclass
class RunSettings:
    """Everything a run needs that is not the agent or the prompt."""

    root: Path
    backend: BackendConfig
    config: UserConfig
    registry: LoadResult
    ledger: Path
    env: Environment
    trust_project: bool = False
    mode_ceiling: SandboxMode = SandboxMode.WORKTREE
    model_override: str | None = None
    script: ScriptedModel | None = None
    approval: ApprovalHandler | None = None
    progress: Callable[[ProgressEvent], None] | None = None
    timeout_seconds: float | None = None
    limits: SharedLimits = field(default_factory=SharedLimits)
    state_root: Path | None = None
    use_ripgrep: bool = True
    #: Where ``config`` was read from, to name it when it lacks what the run needs.
    config_file: Path | None = None
    #: Shows an agent's welcome message (catalog ``welcomeMessage``) when its top-level
    #: session starts: (agent, message).
    welcome: Callable[[str, str], None] | None = None
    #: The one snapshot a fanout took before its children started; passed to
    #: ``open_sandbox`` so every child starts from it. ``None``: each run snapshots the
    #: checkout when its sandbox opens.
    snapshot: SnapshotRef | None = None
    #: Polled by every session of the tree (a fanout's, or a parallel delegate call's);
    #: a cancelled run ends ``cancelled``, its diff recorded.
    cancellation: Cancellation | None = None
    #: The fanout this run belongs to (recorded in its record).
    fanout: str | None = None
    #: Where the tasks of a parallel delegate call run (the scheduling seam).
    scheduler: SchedulerFactory = local_scheduler
    #: How many tasks of one parallel delegate call run at once (pi: 4).
    parallel_jobs: int = 4
    #: The project's environment under every sandbox of the run (children, checks,
    #: reviewers), prepared before anything ran (:mod:`executor.run.environment`).
    environment: EnvironmentRef | None = None
    #: Why the repository's own environment file was not used (not trusted, or its trust
    #: lapsed), with the command that enables it; every run record of the run says it.
    environment_note: str | None = None
    #: ``--net allow``: commands reach the user's granted hosts through corral's proxy.
    egress: bool = False
