"""The ``host`` backend: worktree isolation only. It isolates changes, NOT processes.

Commands run as the user, on the host, with the user's files, network and
credentials reachable; only the environment is reduced to the allowlist, with
a private ``HOME`` and ``TMPDIR`` under the sandbox's state dir. Timeout and
output cap hold; memory, process-count and file-size limits do not, and a
process that leaves its process group (``setsid``) survives the command. The
escape tests mark every one of these as an expected failure. The CLI prints
:data:`sandbox.config.HOST_WARNING` whenever this backend runs, and ``auto``
never chooses it.
"""

from __future__ import annotations

from typing import ClassVar

from sandbox.backends.process import LocalRunner, kill_process_group, kill_process_tree
from sandbox.backends.streams import StreamProcess, start_host_stream
from sandbox.base import BaseSandbox, ExecSpec
from sandbox.config import HOST_WARNING, BackendName, HostConfig
from sandbox.errors import SandboxConfigError
from sandbox.results import ExecResult
from sandbox.state import SandboxMeta, SandboxState
from sandbox.workspaces.model import Workspace

__all__ = ["HostSandbox"]

#: Resolves argv[0] on PATH in the same way on every backend (127 when missing).
EXEC_WRAPPER = ("/bin/sh", "-c", 'exec "$@"', "sh")


class HostSandbox(BaseSandbox):
    """Runs commands directly on the host (see the module docstring)."""

    backend: ClassVar[BackendName] = "host"
    warning: str | None = HOST_WARNING

    _runner: LocalRunner

    def __init__(
        self, *, config: HostConfig, workspace: Workspace, state: SandboxState, meta: SandboxMeta,
    ) -> None:
        super().__init__(workspace=workspace, state=state, meta=meta, limits=config.limits)
        self.config = config

    def _start(self) -> None:
        self._runner = LocalRunner()
        for name in ("home", "tmp"):
            (self.state.dir / name).mkdir(mode=0o700, exist_ok=True)

    def _home(self) -> str:
        return str(self.state.dir / "home")

    def _run(self, spec: ExecSpec) -> ExecResult:
        env = dict(spec.env)
        env["TMPDIR"] = str(self.state.dir / "tmp")
        outcome = self._runner.run(
            [*EXEC_WRAPPER, *spec.argv], env=env, cwd=spec.cwd, timeout=spec.timeout,
            output_cap=spec.output_cap, kill=kill_process_tree, after_exit=kill_process_group,
            on_output=spec.on_output,
        )
        return outcome.result(spec.argv)

    def _open_stream(self, spec: ExecSpec) -> StreamProcess:
        raise SandboxConfigError(
            f"cannot confine {spec.argv[0]!r}: the host backend runs everything as you, on the "
            "host, with no sandbox", code="no_confinement", operation="open_stream",
            hint="run with --backend bubblewrap or docker; or, only for a program you trust "
            "with your files, network and credentials, set confine = false in its config")

    def _open_terminal(self, spec: ExecSpec) -> StreamProcess:
        # A person's shell on a host run's workspace: as unconfined as the run's commands.
        env = dict(spec.env)
        env["TMPDIR"] = str(self.state.dir / "tmp")
        return start_host_stream([*EXEC_WRAPPER, *spec.argv], env=env, cwd=spec.cwd)

    def _stop(self) -> None:
        self._runner.stop_all()

    def _close(self) -> None:
        self._runner.stop_all()
