"""How a child runs, and corral's Python API: ``from executor import Corral``.

The public names are :mod:`executor.api`'s (:class:`~executor.api.Corral`,
:class:`~executor.api.AsyncCorral`, the results, inputs and errors), loaded when
first used: ``corral --help`` imports none of them.

Inside, by seam (each a package, imports going one way, top to bottom):
:mod:`executor.cli` and :mod:`executor.mcpserver` (the front doors, over the
API); :mod:`executor.api`; :mod:`executor.fanout`; :mod:`executor.run`;
:mod:`executor.agents` and :mod:`executor.apply`; :mod:`executor.ledger` and
:mod:`executor.tools`; :mod:`executor.models`, :mod:`executor.mcpclient` and
:mod:`executor.scheduling`; :mod:`executor.errors` and :mod:`executor.text`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from executor.api import (
        BACKENDS,
        DEFAULT_JOBS,
        EXIT_DENIED,
        EXIT_FAILURE,
        EXIT_FINDINGS,
        EXIT_INTERRUPTED,
        EXIT_OK,
        EXIT_USER,
        HOST_WARNING,
        MODES,
        Agents,
        AgentView,
        ApplyFailed,
        ApplyReport,
        ApprovalHandler,
        ApprovalRequest,
        AsyncCorral,
        AsyncProgress,
        BranchReport,
        BuiltEnvironment,
        CancelToken,
        ChildPlan,
        ChildResult,
        Corral,
        CorralError,
        Diff,
        Discarded,
        EnvironmentInfo,
        EnvironmentSetupFailed,
        ExecutorError,
        FanoutRecord,
        FanoutResult,
        GcReport,
        MergeRefused,
        ModelError,
        NewAgent,
        PatchFile,
        PatchPlan,
        PolicyError,
        ProgressEvent,
        RecordError,
        Recovered,
        Replay,
        RestoreFailed,
        RunError,
        RunList,
        RunRecord,
        RunResult,
        RunStatus,
        SandboxError,
        TrustState,
        error_json,
        fanout_status,
        parse_approve,
        prompt_handler,
        run_status,
    )

__all__ = [
    "BACKENDS",
    "DEFAULT_JOBS",
    "EXIT_DENIED",
    "EXIT_FAILURE",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USER",
    "HOST_WARNING",
    "MODES",
    "AgentView",
    "Agents",
    "ApplyFailed",
    "ApplyReport",
    "ApprovalHandler",
    "ApprovalRequest",
    "AsyncCorral",
    "AsyncProgress",
    "BranchReport",
    "BuiltEnvironment",
    "CancelToken",
    "ChildPlan",
    "ChildResult",
    "Corral",
    "CorralError",
    "Diff",
    "Discarded",
    "EnvironmentInfo",
    "EnvironmentSetupFailed",
    "ExecutorError",
    "FanoutRecord",
    "FanoutResult",
    "GcReport",
    "MergeRefused",
    "ModelError",
    "NewAgent",
    "PatchFile",
    "PatchPlan",
    "PolicyError",
    "ProgressEvent",
    "RecordError",
    "Recovered",
    "Replay",
    "RestoreFailed",
    "RunError",
    "RunList",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "SandboxError",
    "TrustState",
    "error_json",
    "fanout_status",
    "parse_approve",
    "prompt_handler",
    "run_status",
]


def __getattr__(name: str) -> object:
    """The API's names, loaded on first use (``executor.api`` loads each lazily too)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from executor import api  # noqa: PLC0415 - only when a public name is used

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
