"""Back into a finished run: :meth:`Corral.continue_run` and :meth:`Corral.shell`.

Both rebuild the run's workspace (:mod:`executor.run.resume`): a fresh sandbox
of the run's backend (the Corral's own must be ``auto`` or the same), over
the checkout as it is now, with the run's verified diff applied. Every check a
user's input needs comes first, in this order: the state dir, the run (not
running, applied, discarded or continued), the agent (a continuation: the same
contract), the diff (its digest, its headers, and that it applies to the
checkout now), then the project's environment, then the sandbox. A refusal
therefore costs nothing.

- :func:`continue_run`: a new run (a new id, ``continues`` naming the old one)
  of the same agent and contract, in the old run's mode, whose session starts
  with the old conversation and whose diff is cumulative; the old run is then
  marked ``discarded`` with ``continued_by`` (:func:`executor.run.top.continue_agent`).
- :func:`shell`: one command, or an interactive shell on the caller's
  terminal, in the run's workspace; what it changed is recorded in the same run
  as changed by hand (:mod:`executor.run.handwork`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor.agents.registry import find_agent, load
from executor.api.inputs import Replay
from executor.api.memory import sized
from executor.api.results import RunResult
from executor.api.running import (
    approval_handler,
    live_display,
    replay_model,
    settings_for,
    usage,
)
from executor.ledger import RunRecord, conversation, find_run
from executor.run import continue_agent
from executor.run.handwork import shell_on_run
from executor.run.resume import Resume, check_reopenable, replayable_patch
from policies.contract import SandboxMode
from policies.loader import LoadResult
from sandbox.config import USER_BACKENDS, AutoConfig, BackendConfig
from sandbox.terminal import TerminalIO

if TYPE_CHECKING:
    from executor.api.corral import Corral
    from executor.api.running import Progress
    from executor.scheduling import Cancellation
    from executor.tools.dispatch import ApprovalHandler

__all__ = ["ShellResult", "TerminalIO", "continue_run", "shell"]


@dataclass(frozen=True)
class ShellResult:
    """One ``corral shell`` session: the run as recorded after it (``run``), the command's
    or the shell's ``exit_code`` (``None``: stopped, or ``timed_out``), and the paths it
    changed by hand (``changed``; empty: the record was left as it was)."""

    run: RunResult
    exit_code: int | None
    changed: tuple[str, ...]
    timed_out: bool = False

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def hand_changes(self) -> list[str]:
        """Every path of the run ever changed by hand (``corral shell``)."""
        return self.run.record.hand_changes

    def to_json(self) -> dict[str, Any]:
        """The session as JSON: the run's id, the exit code, the paths changed now and
        every path of the run ever changed by hand."""
        return {"run_id": self.run.run_id, "exit_code": self.exit_code,
                "timed_out": self.timed_out, "changed": list(self.changed),
                "hand_changes": list(self.run.record.hand_changes)}


def _backend(corral: Corral, record: RunRecord) -> BackendConfig:
    """The backend ``record`` ran on, as the Corral configures it: the run's isolation is
    kept, and a Corral set to another backend is a user error."""
    wanted = record.backend
    given = corral.backend
    name = given if isinstance(given, str) else given.type
    if name not in ("auto", wanted) or wanted not in USER_BACKENDS:
        raise usage(f"run {record.run_id} ran on the {wanted} backend; corral works on it "
                    "there, with its isolation", f"leave --backend out (or pass {wanted})")
    if isinstance(given, AutoConfig) and wanted in ("bubblewrap", "docker"):
        chosen: BackendConfig = getattr(given, wanted)
        return sized(corral, chosen.model_copy(update={"limits": given.limits}))
    if isinstance(given, (str, AutoConfig)):
        return sized(corral, USER_BACKENDS[wanted]())
    return sized(corral, given)


def continue_run(corral: Corral, run_id: str, prompt: str, *,
                 script: str | os.PathLike[str] | Replay | None, model: str | None,
                 approve: str | ApprovalHandler | None, timeout: float | None,
                 environment: bool, setup_network: bool | None, progress: Progress | None,
                 cancel: Cancellation | None,
                 on_setup_output: Callable[[str], None] | None,
                 on_warning: Callable[[str], None] | None,
                 welcome: Callable[[str, str], None] | None) -> RunResult:
    """:meth:`Corral.continue_run`."""
    if script is not None and model is not None:
        raise usage("a script and a model are exclusive", "replay a script, or run a model")
    ledger = corral.ledger()  # refuses a state dir a child could write, before anything
    record = find_run(ledger, run_id)
    check_reopenable(record, doing="continue")
    if record.parent_run is not None:
        raise usage(f"run {record.run_id} was started by run {record.parent_run} (a delegated "
                    "child or a reviewer): only a run you started can be continued",
                    f"continue run {record.parent_run}, whose agent can send it a follow-up")
    backend = _backend(corral, record)
    sources = corral.sources()
    registry = load(sources)
    find_agent(record.agent, registry, sources)  # an agent gone since: unknown_agent
    patch = replayable_patch(corral.root.resolve(), ledger, record)
    resume = Resume(record, patch, tuple(conversation(ledger, record.run_id)))
    settings = settings_for(
        corral, registry, ledger, environment=environment, setup_network=setup_network,
        on_setup_output=on_setup_output, on_warning=on_warning, backend=backend,
        mode_ceiling=SandboxMode(record.mode), model_override=model,
        script=replay_model(script), approval=approval_handler(approve), progress=progress,
        timeout_seconds=timeout, welcome=welcome, cancellation=cancel)
    with live_display(progress):
        return RunResult(continue_agent(settings, resume, prompt))


def shell(corral: Corral, run_id: str, command: Sequence[str] | None, *,
          terminal: TerminalIO | None, timeout: float | None, environment: bool,
          on_output: Callable[[str, bytes], None] | None,
          on_setup_output: Callable[[str], None] | None,
          on_warning: Callable[[str], None] | None) -> ShellResult:
    """:meth:`Corral.shell`."""
    if command is not None and (isinstance(command, str) or not command
                                or not all(isinstance(a, str) for a in command)):
        raise usage("the command is a non-empty list of arguments",
                    "pass ['sh', '-c', 'echo x >> f'] for a shell line")
    if command is None and terminal is None:
        raise usage("an interactive shell needs a terminal", "pass a command to run")
    ledger = corral.ledger()
    record = find_run(ledger, run_id)
    check_reopenable(record, doing="open a shell on")
    if record.mode != SandboxMode.WORKTREE.value:
        raise usage(f"run {record.run_id} ran in {record.mode} mode: it has no workspace of "
                    "its own to change", "its changes are in your checkout (workspace-write)"
                    " or it changed nothing (read-only): work in your checkout")
    backend = _backend(corral, record)
    patch = replayable_patch(corral.root.resolve(), ledger, record)
    settings = settings_for(corral, LoadResult(), ledger, environment=environment,
                            setup_network=None, on_setup_output=on_setup_output,
                            on_warning=on_warning, backend=backend)
    work = shell_on_run(root=settings.root, ledger=ledger, record=record, patch=patch,
                        backend=settings.backend, state_root=corral.state_dir,
                        environment=settings.environment, command=command,
                        terminal=terminal, timeout=timeout, on_output=on_output)
    return ShellResult(RunResult(work.record), work.exit_code, work.changed, work.timed_out)
