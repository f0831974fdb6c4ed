"""The scripted backend for tests: a real workspace, scripted commands.

:class:`FakeSandbox` creates the same workspace as every other backend (real
snapshot, worktree, file API and diff), but runs no process: each ``exec``
must match the next scripted :class:`FakeStep` exactly, whose ``effect`` (a
function of the confined file API) stands in for what the command would have
done. An unexpected command fails at once; a step never consumed fails
teardown. Both raise :class:`FakeScriptError`, an ``AssertionError``: a broken
script is a bug in the test, never data the executor handles.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sandbox.base import BaseSandbox, ExecSpec
from sandbox.config import BackendName, FakeConfig
from sandbox.errors import PathDenied
from sandbox.files.confined import ConfinedFiles
from sandbox.results import ExecResult, TeardownReport
from sandbox.state import SandboxMeta, SandboxState
from sandbox.workspaces.model import Workspace

__all__ = ["FakeSandbox", "FakeScriptError", "FakeStep"]


class FakeScriptError(AssertionError):
    """The script and the calls disagree (unexpected, mismatched or unconsumed step)."""


@dataclass(frozen=True)
class FakeStep:
    """One expected command and what it does.

    ``duration`` is simulated: a step longer than the call's timeout gives the
    same timed-out result every backend gives. An ``effect`` that hits a
    refusal (a write in read-only mode) makes the command fail with exit code 1.
    """

    argv: tuple[str, ...]
    exit_code: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    duration: float = 0.0
    effect: Callable[[ConfinedFiles], None] | None = None


class FakeSandbox(BaseSandbox):
    """Scripted commands over a real workspace (see the module docstring)."""

    backend: ClassVar[BackendName] = "fake"

    def __init__(
        self, *, config: FakeConfig, workspace: Workspace, state: SandboxState, meta: SandboxMeta,
    ) -> None:
        super().__init__(workspace=workspace, state=state, meta=meta, limits=config.limits)
        self.config = config
        self._steps: deque[FakeStep] = deque()

    def expect(
        self,
        argv: Sequence[str],
        *,
        exit_code: int = 0,
        stdout: bytes = b"",
        stderr: bytes = b"",
        duration: float = 0.0,
        effect: Callable[[ConfinedFiles], None] | None = None,
    ) -> FakeSandbox:
        """Append one expected command to the script; returns ``self`` for chaining."""
        self._steps.append(FakeStep(tuple(argv), exit_code, stdout, stderr, duration, effect))
        return self

    @property
    def pending(self) -> tuple[FakeStep, ...]:
        """Steps not consumed yet."""
        return tuple(self._steps)

    def _start(self) -> None:
        return None

    def _run(self, spec: ExecSpec) -> ExecResult:
        if not self._steps:
            raise FakeScriptError(f"unexpected command {list(spec.argv)!r}: the script is empty")
        step = self._steps[0]
        if step.argv != spec.argv:
            raise FakeScriptError(
                f"unexpected command {list(spec.argv)!r}: the script expects {list(step.argv)!r}"
            )
        self._steps.popleft()
        timed_out = step.duration > spec.timeout
        exit_code: int | None = None if timed_out else step.exit_code
        stderr = step.stderr
        if step.effect is not None and not timed_out:
            try:
                step.effect(self.files)
            except PathDenied as exc:
                exit_code = 1
                stderr += f"{exc.message}\n".encode()
        cap = spec.output_cap
        if spec.on_output is not None:
            for stream, data in (("stdout", step.stdout), ("stderr", stderr)):
                if data:
                    spec.on_output(stream, data)
        return ExecResult(
            argv=spec.argv, exit_code=exit_code, stdout=step.stdout[:cap], stderr=stderr[:cap],
            stdout_bytes=len(step.stdout), stderr_bytes=len(stderr), timed_out=timed_out,
            duration_seconds=min(step.duration, spec.timeout),
        )

    def _stop(self) -> None:
        return None

    def _close(self) -> None:
        return None

    def teardown(self, *, discard: bool = False, keep: Path | None = None) -> TeardownReport:
        """Tear down as every backend does, then fail if the script was not consumed."""
        report = super().teardown(discard=discard, keep=keep)
        if self._steps:
            left = [list(step.argv) for step in self._steps]
            self._steps.clear()
            raise FakeScriptError(f"scripted commands never ran: {left!r}")
        return report
