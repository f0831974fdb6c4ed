"""The sandbox package's errors: one root, a few families, stable codes.

:class:`SandboxError` is an infrastructure failure (exit code 3): git, bwrap or
docker did not do what was asked. Two families override that:

- :class:`SandboxDenied` (exit code 4) is a refusal: a path outside the
  workspace, a write in read-only mode, a repository whose git configuration
  would run a program. The executor turns these into tool results the child
  sees, naming what it may do instead.
- :class:`SandboxConfigError` (exit code 2) is the user's input: a bad backend
  configuration, a path that is not a repository.

Foreign exceptions (``OSError``, ``docker.errors``, ``subprocess``) are
translated into these at exactly one place per backend; programming errors are
never caught.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.errors import CorralError

__all__ = [
    "BackendUnavailable",
    "CommandTimeout",
    "DiffTooLarge",
    "EnvironmentSetupFailed",
    "OverlayUnavailable",
    "PathDenied",
    "SandboxConfigError",
    "SandboxDenied",
    "SandboxError",
    "SandboxStateError",
    "UnsafeRepository",
]


class SandboxError(CorralError):
    """Root of every error the sandbox package raises: an infrastructure failure."""

    code = "sandbox_error"
    exit_code = 3


class SandboxConfigError(SandboxError):
    """The user's input is wrong: a bad configuration or a path that is not a repository."""

    code = "sandbox_config_error"
    exit_code = 2


class BackendUnavailable(SandboxError):
    """The backend cannot run here (bwrap probe failed, no docker engine, image missing).

    Never silently replaced by a weaker backend: ``auto`` fails closed with
    this error, naming everything it tried in ``context``.
    """

    code = "backend_unavailable"


class OverlayUnavailable(SandboxError):
    """An overlay workspace cannot be made here (not root, no overlayfs, the kernel refused
    the mount, an engine that cannot see it); the message says why.

    ``open_sandbox`` falls back to a plain worktree on its own and reports why;
    this error reaches a caller only when it asked for an overlay explicitly.
    """

    code = "overlay_unavailable"


class EnvironmentSetupFailed(SandboxError):
    """An environment's setup failed (:mod:`sandbox.environment`): its own exit code (5), its
    log kept, never blamed on a child (no child ran). ``cause`` (also in the context) says
    why (:mod:`sandbox.setupfailure`: ``no_network``, ``command_not_found``,
    ``out_of_memory``, ``timeout``, ``network_failed``, ``command_failed``)."""

    code = "environment_setup_failed"
    exit_code = 5

    def __init__(self, message: str, *, cause: str = "command_failed", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.cause = cause
        self.context.setdefault("cause", cause)


class CommandTimeout(SandboxError):
    """A command ran past its wall-clock timeout; raised by ``ExecResult.check()``.

    Every backend maps a timeout to the same result (``timed_out=True``,
    ``exit_code=None``) and this same error.
    """

    code = "command_timeout"
    retryable = True

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        super().__init__(message, **kwargs)


class SandboxStateError(SandboxError):
    """The sandbox is in the wrong state for the call (torn down, diff not captured)."""

    code = "sandbox_state_error"


class DiffTooLarge(SandboxError):
    """The child's diff is larger than the configured cap; nothing is returned."""

    code = "diff_too_large"


class SandboxDenied(SandboxError):
    """A refusal, not a failure: the caller asked for something the sandbox forbids."""

    code = "sandbox_denied"
    exit_code = 4


class PathDenied(SandboxDenied):
    """A file-tool path that is outside the workspace, protected, or not a regular file.

    ``code`` is one of ``path_outside_workspace``, ``path_invalid``,
    ``path_protected``, ``path_symlink_escape``, ``path_not_regular``,
    ``path_not_found``, ``path_not_directory``, ``path_not_removable``,
    ``path_exists``, ``path_changed`` (the tree changed while resolving),
    ``path_too_large``, ``read_only_workspace``, ``workspace_unavailable``.
    """

    code = "path_denied"

    def __init__(
        self,
        message: str,
        *,
        code: str,
        path: str,
        hint: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            message,
            code=code,
            operation="files",
            context={"path": path, **(context or {})},
            hint=hint,
        )
        self.path = path


class UnsafeRepository(SandboxDenied):
    """The repository's own git state could run a program on the host; refused.

    ``code`` is ``unsafe_git_config`` (an executable configuration key) or
    ``gitdir_tampered`` (the child's private git dir no longer says what corral
    wrote).
    """

    code = "unsafe_git_config"
