"""The executor's error root and its families."""

from __future__ import annotations

from policies.errors import CorralError

__all__ = ["ExecutorError", "ModelError", "RunError"]


class ExecutorError(CorralError):
    """Root of the executor's errors."""

    code = "executor_error"


class ModelError(ExecutorError):
    """A model provider failed: a run (infrastructure) error, not the user's input.

    ``code`` is one of ``auth``, ``bad_request``, ``rate_limited``, ``server``,
    ``timeout``, ``connection``, ``protocol``, ``unavailable``,
    ``script_exhausted``, ``config``.
    """

    code = "model_error"
    exit_code = 3


class RunError(ExecutorError):
    """A run could not start or finish (bad agent, unresolved model, sandbox failure)."""

    code = "run_error"
