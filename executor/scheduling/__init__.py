"""Where fanout children and parallel delegated children run: one seam, two pools.

See :mod:`executor.scheduling.base` for the protocol,
:mod:`executor.scheduling.local` for the thread pool on this machine, and
:mod:`executor.scheduling.cluster` for the Ray cluster (imported only when asked
for: Ray is an optional extra); :mod:`executor.scheduling.node` is what a
cluster node offers (its probed sandbox resource, its own directory).
"""

from executor.scheduling.base import (
    Cancellation,
    Deadline,
    Handle,
    Job,
    JobContext,
    JobNotRun,
    Outcome,
    Scheduler,
)
from executor.scheduling.local import DEFAULT_JOBS, LocalScheduler

__all__ = [
    "DEFAULT_JOBS",
    "Cancellation",
    "Deadline",
    "Handle",
    "Job",
    "JobContext",
    "JobNotRun",
    "LocalScheduler",
    "Outcome",
    "Scheduler",
]
