"""The executor's error root and its families, and the CLI's exit codes.

The exit codes are one table (the README's "Exit codes" section says the same):

== ==========================================================================
0  success
1  the command ran and found problems to fix: ``agents check`` rejected a
   definition
2  a user error, before anything ran: a bad option or argument, an unknown
   agent, a missing ``--config`` or ``--script``, a model that needs an
   override or a provider the config lacks, a misplaced state dir
3  an infrastructure failure or a failed run: no isolating backend, git or
   docker failed, the model server failed or is unreachable, the run failed or
   timed out, a corrupted run record, an internal error (a bug)
4  a denial: the sandbox refused the run (its status is ``denied``), or the run
   completed and at least one tool call was denied (its answer and diff are
   recorded as usual; ``denied_calls`` lists them)
5  the project's environment could not be set up (its setup failed): no child ran
130 interrupted (Ctrl-C), or a run cancelled
== ==========================================================================
"""

from __future__ import annotations

from policies.errors import CorralError

__all__ = [
    "EXIT_DENIED",
    "EXIT_FAILURE",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USER",
    "ExecutorError",
    "ModelError",
    "RunError",
    "RunInterrupted",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USER = 2
EXIT_FAILURE = 3
EXIT_DENIED = 4
EXIT_INTERRUPTED = 130


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


class RunInterrupted(ExecutorError):
    """The user stopped a run (Ctrl-C, SIGTERM, SIGHUP): it was recorded ``cancelled``."""

    code = "interrupted"
    exit_code = EXIT_INTERRUPTED


class RunError(ExecutorError):
    """A run could not start or finish (bad agent, unresolved model, sandbox failure)."""

    code = "run_error"
