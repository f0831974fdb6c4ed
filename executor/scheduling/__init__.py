"""Where fanout children and parallel delegated children run: one seam, local today.

See :mod:`executor.scheduling.base` for the protocol and
:mod:`executor.scheduling.local` for the thread pool behind it.
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
