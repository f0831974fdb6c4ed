"""Errors as data.

Every error corral raises carries a stable ``snake_case`` code, the operation
that failed, a context mapping, whether retrying can help, and a hint that
tells the user how to fix it. The CLI renders all of them in one place; library
code never prints. Each top-level package has its own root
(:class:`PolicyError` here, ``SandboxError`` and ``ExecutorError`` below it in
the layering), all sharing :class:`CorralError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CorralError", "PolicyError", "ToolNameError"]


class CorralError(Exception):
    """Root of every error corral raises on purpose."""

    code: str = "corral_error"
    #: Exit code family used by the CLI (2 = user input, 3 = infrastructure, 4 = denied).
    exit_code: int = 2

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        operation: str | None = None,
        context: Mapping[str, Any] | None = None,
        hint: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.operation = operation
        self.context: dict[str, Any] = dict(context or {})
        self.hint = hint
        self.retryable = retryable

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready rendering, used by ``--json`` output and run records."""
        return {
            "code": self.code,
            "message": self.message,
            "operation": self.operation,
            "context": {k: str(v) for k, v in self.context.items()},
            "hint": self.hint,
            "retryable": self.retryable,
        }


class PolicyError(CorralError):
    """A definition, contract or capability problem: always the user's input."""

    code = "policy_error"


class ToolNameError(PolicyError):
    """A tool name that is not exactly a known or well-formed name."""

    code = "invalid_tool_name"
