"""corral's Python API: the one thing every front door calls.

::

    from executor import Corral

    corral = Corral(".", config_file="examples/agents.json", backend="host")
    result = corral.fanout("Add a changelog", agents=["patcher"], scripts=[...], check="...")
    corral.apply(result.best().run_id)  # the first that passed, conflicting with nothing applied

- :class:`Corral` (and :class:`AsyncCorral` for event loops): agents, runs,
  fanouts, the ledger (runs, show, diff, transcript, journal and follow, apply,
  recover, discard, gc), the project's environment;
- inputs: :class:`CancelToken`, :class:`Replay`; outputs: :class:`RunResult`,
  :class:`FanoutResult` (with :class:`ChildResult` each), :class:`RunList`,
  :class:`Diff`, :class:`LogEvent`, :class:`ApplyReport`, :class:`Discarded`, :class:`Recovered`,
  :class:`GcReport`, :class:`BuiltEnvironment`, :class:`Agents`, :class:`AgentView`,
  :class:`NewAgent`, :class:`ShellResult` (with :class:`TerminalIO` in),
  :class:`ImageBuild` (of :func:`build_sandbox_image`, the docker backend's image),
  each wrapping corral's own records (:class:`RunRecord`, :class:`FanoutRecord`);
- errors: :class:`CorralError` and its families, each with ``code``,
  ``message``, ``context``, ``hint`` and ``exit_code``; :func:`error_json`
  gives the JSON every front door prints.

The CLI (:mod:`executor.cli`) and the MCP server (:mod:`executor.mcpserver`) are
adapters over it and never import each other. Names are loaded when first used,
so ``import executor.api`` costs nothing and listing agents never loads the
sandboxes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from executor.agents.trust import TrustState
    from executor.api.agents import Agents, AgentView, NewAgent, runnable
    from executor.api.aio import AsyncCorral, AsyncProgress
    from executor.api.corral import BACKENDS, MODES, Corral
    from executor.api.environments import BuiltEnvironment
    from executor.api.errors import (
        EXIT_DENIED,
        EXIT_FAILURE,
        EXIT_FINDINGS,
        EXIT_INTERRUPTED,
        EXIT_OK,
        EXIT_USER,
        CorralError,
        ExecutorError,
        ModelError,
        PolicyError,
        RunError,
        error_json,
    )
    from executor.api.fanouts import ChildResult, FanoutResult
    from executor.api.images import ImageBuild, build_sandbox_image
    from executor.api.inputs import CancelToken, Replay
    from executor.api.journal import LogEvent
    from executor.api.records import GcReport
    from executor.api.replays import replay_from_diff
    from executor.api.reports import ApplyReport, BranchReport, Discarded, Recovered
    from executor.api.results import Diff, RunList, RunResult
    from executor.api.sessions import ShellResult
    from executor.apply import ApplyFailed, MergeRefused, PatchFile, PatchPlan, RestoreFailed
    from executor.fanout import ChildPlan
    from executor.fanout.check import check_verdict
    from executor.fanout.choice import Candidate, NoBestCandidate
    from executor.ledger import (
        RUN_STATES,
        Entry,
        FanoutRecord,
        RecordError,
        RunRecord,
        RunStatus,
        RunSummary,
        fanout_status,
        run_status,
    )
    from executor.run.approval import parse_approve, prompt_handler
    from executor.run.session import ProgressEvent
    from executor.scheduling import DEFAULT_JOBS
    from executor.tools.dispatch import ApprovalHandler, ApprovalRequest
    from executor.version import corral_version
    from sandbox.config import HOST_WARNING
    from sandbox.environment import EnvironmentInfo
    from sandbox.errors import EnvironmentSetupFailed, SandboxError
    from sandbox.terminal import TerminalIO

#: Public name -> the module that defines it (imported on first use).
_WHERE = {
    **dict.fromkeys(("Agents", "AgentView", "NewAgent", "runnable"), "executor.api.agents"),
    **dict.fromkeys(("Candidate", "NoBestCandidate"), "executor.fanout.choice"),
    **dict.fromkeys(("AsyncCorral", "AsyncProgress"), "executor.api.aio"),
    **dict.fromkeys(("BACKENDS", "MODES", "Corral"), "executor.api.corral"),
    "BuiltEnvironment": "executor.api.environments",
    **dict.fromkeys(("EXIT_DENIED", "EXIT_FAILURE", "EXIT_FINDINGS", "EXIT_INTERRUPTED",
                     "EXIT_OK", "EXIT_USER", "CorralError", "ExecutorError", "ModelError",
                     "PolicyError", "RunError", "error_json"), "executor.api.errors"),
    **dict.fromkeys(("CancelToken", "Replay"), "executor.api.inputs"),
    **dict.fromkeys(("ImageBuild", "build_sandbox_image"), "executor.api.images"),
    "LogEvent": "executor.api.journal",
    "GcReport": "executor.api.records",
    "replay_from_diff": "executor.api.replays",
    **dict.fromkeys(("ApplyReport", "BranchReport", "Discarded", "Recovered"),
                    "executor.api.reports"),
    **dict.fromkeys(("ChildResult", "FanoutResult"), "executor.api.fanouts"),
    **dict.fromkeys(("Diff", "RunList", "RunResult"), "executor.api.results"),
    **dict.fromkeys(("ApplyFailed", "MergeRefused", "PatchFile", "PatchPlan",
                     "RestoreFailed"), "executor.apply"),
    "ChildPlan": "executor.fanout",
    "check_verdict": "executor.fanout.check",
    **dict.fromkeys(("RUN_STATES", "Entry", "FanoutRecord", "RecordError", "RunRecord", "RunStatus",
                     "RunSummary", "fanout_status", "run_status"), "executor.ledger"),
    **dict.fromkeys(("parse_approve", "prompt_handler"), "executor.run.approval"),
    "ProgressEvent": "executor.run.session",
    "DEFAULT_JOBS": "executor.scheduling",
    **dict.fromkeys(("ApprovalHandler", "ApprovalRequest"), "executor.tools.dispatch"),
    "HOST_WARNING": "sandbox.config",
    "corral_version": "executor.version",
    "TrustState": "executor.agents.trust",
    "EnvironmentInfo": "sandbox.environment",
    **dict.fromkeys(("EnvironmentSetupFailed", "SandboxError"), "sandbox.errors"),
    "ShellResult": "executor.api.sessions",
    "TerminalIO": "sandbox.terminal",
}

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
    "RUN_STATES",
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
    "Candidate",
    "ChildPlan",
    "ChildResult",
    "Corral",
    "CorralError",
    "Diff",
    "Discarded",
    "Entry",
    "EnvironmentInfo",
    "EnvironmentSetupFailed",
    "ExecutorError",
    "FanoutRecord",
    "FanoutResult",
    "GcReport",
    "ImageBuild",
    "LogEvent",
    "MergeRefused",
    "ModelError",
    "NewAgent",
    "NoBestCandidate",
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
    "RunSummary",
    "SandboxError",
    "ShellResult",
    "TerminalIO",
    "TrustState",
    "build_sandbox_image",
    "check_verdict",
    "corral_version",
    "error_json",
    "fanout_status",
    "parse_approve",
    "prompt_handler",
    "replay_from_diff",
    "run_status",
    "runnable",
]


def __getattr__(name: str) -> object:
    """Load a public name's module on first use (see the module docstring)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
