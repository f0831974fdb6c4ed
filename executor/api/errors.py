"""The API's errors: corral's one error family, and its JSON shape.

Every error corral raises on purpose is a :class:`CorralError` with a stable
``snake_case`` ``code``, a ``message``, a ``context`` mapping, a ``hint`` that
says how to fix it, whether a retry can help (``retryable``), the
``operation`` that failed, and the ``exit_code`` the CLI exits with (2 a user
error, nothing ran; 3 an infrastructure failure; 4 a denial or refusal; 5 the
project's environment could not be set up). Catch :class:`CorralError` for
all of them; :mod:`executor.api` re-exports the families worth telling apart
(:class:`~executor.errors.RunError`, :class:`~executor.apply.MergeRefused`,
:class:`~executor.ledger.RecordError`, :class:`~sandbox.errors.SandboxError`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from executor.errors import (
    EXIT_DENIED,
    EXIT_FAILURE,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER,
    ExecutorError,
    ModelError,
    RunError,
)
from policies.errors import CorralError, PolicyError

__all__ = ["EXIT_DENIED", "EXIT_FAILURE", "EXIT_FINDINGS", "EXIT_INTERRUPTED", "EXIT_OK",
           "EXIT_USER", "CorralError", "ExecutorError", "ModelError", "PolicyError",
           "RunError", "error_json"]


def error_json(error: CorralError | Mapping[str, Any], exit_code: int | None = None,
               ) -> dict[str, Any]:
    """The JSON error object every front door gives (``--json``, MCP's ``isError``
    results): ``{"error": {code, message, context, hint, retryable, operation,
    exit_code}}``; the same shape whatever failed. ``error`` is a :class:`CorralError`
    (its own exit code unless ``exit_code`` is given) or its :meth:`~CorralError.to_dict`
    mapping."""
    if isinstance(error, CorralError):
        code = error.exit_code if exit_code is None else exit_code
        error = error.to_dict()
    else:
        code = EXIT_USER if exit_code is None else exit_code
    body = {"code": error.get("code") or "error", "message": error.get("message") or "",
            "context": {str(k): str(v) for k, v in (error.get("context") or {}).items()},
            "hint": error.get("hint"), "retryable": bool(error.get("retryable")),
            "operation": error.get("operation")}
    return {"error": body | {"exit_code": code}}
