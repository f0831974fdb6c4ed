"""The lifecycle every backend shares; a backend only says how to run and stop commands.

:class:`BaseSandbox` validates ``exec`` arguments, builds the environment from
an allowlist, serialises commands, freezes the sandbox while a diff is
computed (stop every process first: threats B8.40), and tears down in the only
safe order: stop, capture the diff, close the backend, remove the worktree.

Every collection sweeps the writable workspace for setuid/setgid files first
(:mod:`sandbox.workspaces.setid`; for a worktree or the user's checkout in the same walk
as the diff's scan, :func:`sandbox.workspaces.diff.sweep_for_diff`), and so does
teardown of a workspace that stays (the user's checkout). The stored diff is always
the latest one: a command or a file-API write after a collection marks it stale (in
memory, and in the meta for gc), a failed collection clears it, and teardown collects
again whenever the stored diff is missing or stale.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar

from policies.contract import SandboxMode
from sandbox.backends.streams import StreamProcess
from sandbox.config import BackendName, Limits
from sandbox.errors import SandboxConfigError, SandboxError, SandboxStateError
from sandbox.files.confined import ConfinedFiles
from sandbox.gitsafe import child_git_env
from sandbox.results import DiffResult, ExcludedPath, ExecResult, TeardownReport
from sandbox.state import SandboxMeta, SandboxState, SandboxStatus
from sandbox.workspaces.diff import compute_diff, sweep_for_diff
from sandbox.workspaces.held import HELD_DIR, hold_created
from sandbox.workspaces.model import Workspace, WorkspaceKind
from sandbox.workspaces.overlay import is_mountpoint, unmount
from sandbox.workspaces.scratch import Discarded, count_discarded, unmount_scratch
from sandbox.workspaces.snapshot import drop_lease
from sandbox.workspaces.worktree import remove_tree

if TYPE_CHECKING:
    from sandbox.denials import Denial
    from sandbox.egress import EgressProxy

__all__ = ["SANDBOX_PATH", "BaseSandbox", "ExecSpec"]

#: ``PATH`` inside bubblewrap and docker.
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_FREEZE_POLL_SECONDS = 1.0
#: How often :meth:`BaseSandbox.cancel` stops again a command that was starting.
_CANCEL_RETRY_SECONDS = 0.05


@dataclass(frozen=True)
class ExecSpec:
    """One validated command."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]
    timeout: float
    output_cap: int
    #: Sees each chunk of output as it arrives: ``("stdout" | "stderr", bytes)``.
    on_output: Callable[[str, bytes], None] | None = None


class BaseSandbox(ABC):
    """Shared implementation of :class:`sandbox.protocol.Sandbox`."""

    backend: ClassVar[BackendName]
    warning: str | None = None

    def __init__(
        self,
        *,
        workspace: Workspace,
        state: SandboxState,
        meta: SandboxMeta,
        limits: Limits,
        files_owner: tuple[int, int] | None = None,
    ) -> None:
        self._ws = workspace
        self._state = state
        self._meta = meta
        self._limits = limits
        self._files = ConfinedFiles(workspace.files_root, writable=workspace.writable,
                                    owner=files_owner, on_write=self._touched,
                                    protected=[*workspace.read_only_config,
                                               *workspace.protected_config()])
        self._cond = threading.Condition()
        self._busy = False
        self._freezing = 0
        #: Set by :meth:`cancel`: no command starts any more.
        self._cancelled = False
        self._diff: DiffResult | None = None
        #: Something may have changed the workspace since ``_diff`` was computed.
        self._dirty = False
        self._setid_cleared: set[str] = set()
        #: Configuration paths moved out of a workspace-write checkout (see ``_collect``).
        self._held: set[str] = set()
        self._report: TeardownReport | None = None
        #: What the throwaway layer held when teardown dropped it.
        self._discarded: Discarded | None = None
        #: Long-lived processes (MCP servers) started in this sandbox: they are the child's
        #: processes, so whatever stops the child's processes stops them too.
        self._streams: list[StreamProcess] = []
        #: Variables every command sees (an environment's ``env``), under a call's own.
        self._env_vars: dict[str, str] = {}
        #: Programs the contract denies whole (name -> pattern), set before ``_start``; the
        #: backend covers them with stand-ins (:mod:`sandbox.denials`) and says where here.
        self._denied: dict[str, str] = {}
        self.denials: list[Denial] = []
        #: The filtering proxy its commands reach on their own loopback (``--net allow``),
        #: set before ``_start``; the backend opens its port in the sandbox's namespace.
        self.egress: EgressProxy | None = None

    # -- backend hooks ----------------------------------------------------------

    @abstractmethod
    def _start(self) -> None:
        """Create what the backend needs (container, cgroup); record it in the meta first."""

    @abstractmethod
    def _run(self, spec: ExecSpec) -> ExecResult:
        """Run one command and wait for it (never raises for the child's own failures)."""

    @abstractmethod
    def _stop(self) -> None:
        """Kill every process of the child; safe to call from another thread, and twice."""

    @abstractmethod
    def _close(self) -> None:
        """Release what :meth:`_start` created; idempotent."""

    def _verify_empty(self) -> None:
        """Make sure no process of the child runs (the backend asks the kernel, not the
        supervisor), stopping the whole sandbox if one does; called with no command running,
        before anything reads the workspace. Backends that cannot tell do nothing."""
        return

    def _open_stream(self, spec: ExecSpec) -> StreamProcess:
        """Start ``spec.argv`` as a long-lived process with stdin/stdout pipes, under the
        same confinement and limits as a command (``spec.timeout`` does not apply)."""
        raise SandboxConfigError(f"the {self.backend} backend cannot run a long-lived process",
                                 code="streams_unsupported", operation="open_stream")

    def _home(self) -> str:
        """``HOME`` inside the sandbox."""
        return "/tmp/home"  # noqa: S108 - the sandbox's own tmpfs, not the host's /tmp

    def _ceilings(self) -> list[Path]:
        """The directories holding the workspace (at its path and its aliases): git looks
        for no repository above them."""
        ws = self._ws
        return list(dict.fromkeys(root.parent for root in (ws.root, *ws.aliases)))

    # -- properties -------------------------------------------------------------

    @property
    def id(self) -> str:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._state.id

    @property
    def mode(self) -> SandboxMode:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.mode

    @property
    def root(self) -> Path:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.root

    @property
    def base_commit(self) -> str | None:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.base_commit

    @property
    def files(self) -> ConfinedFiles:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._files

    @property
    def limits(self) -> Limits:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._limits

    @property
    def snapshot_excluded(self) -> tuple[ExcludedPath, ...]:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.snapshot_excluded

    @property
    def workspace_kind(self) -> WorkspaceKind:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.kind

    def discarded_writes(self) -> Discarded | None:
        """What a read-only child's commands wrote into its throwaway layer so far (all of
        it is dropped at teardown); ``None``: it has none (no review commands)."""
        scratch = self._ws.scratch
        if scratch is None:
            return None
        if self._report is not None:
            return self._discarded
        return count_discarded(scratch)

    @property
    def workspace_fallback(self) -> str | None:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.fallback

    @property
    def snapshot_id(self) -> str | None:
        """See :class:`sandbox.protocol.Sandbox`."""
        return self._ws.snapshot_id

    @property
    def state(self) -> SandboxState:
        """The on-disk state (for tests and gc)."""
        return self._state

    @property
    def workspace(self) -> Workspace:
        """The workspace description."""
        return self._ws

    # -- commands ---------------------------------------------------------------

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        output_cap: int | None = None,
        cwd: str = ".",
        env: Mapping[str, str] | None = None,
        on_output: Callable[[str, bytes], None] | None = None,
    ) -> ExecResult:
        """See :class:`sandbox.protocol.Sandbox`."""
        self._check_open()
        spec = self._spec(argv, timeout, output_cap, cwd, env)
        if on_output is not None:
            spec = replace(spec, on_output=on_output)
        # The claim is made inside the ``try``: Ctrl-C can be raised as the ``with`` ends
        # (in ``Condition.__exit__``), and a claim nobody gives back would keep every later
        # freeze (the diff of the cancelled run) waiting forever.
        claimed = False
        try:
            with self._cond:
                while self._busy or self._freezing:
                    self._cond.wait()
                self._check_open()
                if self._cancelled:  # stopped before it could start: it never runs
                    return ExecResult(argv=spec.argv, exit_code=None, stdout=b"", stderr=b"",
                                      stdout_bytes=0, stderr_bytes=0, stopped=True,
                                      duration_seconds=0.0)
                self._busy = claimed = True
            if self._ws.writable:
                self._touched()
            return self._run(spec)
        finally:
            if claimed:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _spec(
        self,
        argv: Sequence[str],
        timeout: float | None,
        output_cap: int | None,
        cwd: str,
        env: Mapping[str, str] | None,
    ) -> ExecSpec:
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
            raise SandboxConfigError("argv must be a non-empty list of strings (no shell string)",
                                     code="invalid_argv", operation="exec")
        if any("\0" in arg for arg in argv):
            raise SandboxConfigError("argv contains a NUL byte", code="invalid_argv",
                                     operation="exec")
        merged = {"PATH": SANDBOX_PATH, "HOME": self._home(), "LANG": "C.UTF-8",
                  "TERM": "dumb", "TMPDIR": "/tmp"}  # noqa: S108 - the sandbox's own tmpfs
        for key, value in {**self._env_vars, **(env or {})}.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise SandboxConfigError(f"invalid environment variable {key!r}",
                                         code="invalid_env", operation="exec")
            merged[key] = value
        # The child's own git, hardened whatever its cwd or the repository it made (last:
        # neither the environment's variables nor a caller's undo it).
        merged.update(child_git_env(self._ceilings()))
        if self.egress is not None:  # last too: the only route out is the proxy's port
            from sandbox.egress.netns import PROXY_ENV  # noqa: PLC0415 - only with egress
            merged.update(PROXY_ENV)
        if timeout is not None and timeout <= 0:
            raise SandboxConfigError("timeout must be positive", code="invalid_timeout",
                                     operation="exec")
        where = self._files.resolve_dir(cwd)
        scratch = self._ws.scratch
        if scratch is not None:  # the file API reads the layer; commands see it at the root
            where = self._ws.root / where.relative_to(scratch.merged)
        return ExecSpec(
            argv=tuple(argv), cwd=where, env=merged,
            timeout=self._limits.timeout_seconds if timeout is None else timeout,
            output_cap=self._limits.output_cap_bytes if output_cap is None else output_cap,
        )

    def _check_open(self) -> None:
        if self._report is not None:
            raise SandboxStateError(f"sandbox {self.id} was torn down", operation="exec")

    def stop_processes(self) -> None:
        """See :class:`sandbox.protocol.Sandbox`."""
        self._stop()
        self._kill_streams()

    def cancel(self) -> None:
        """See :class:`sandbox.protocol.Sandbox`.

        :meth:`stop_processes` alone races a command that is about to start: a backend
        that sees no running command has nothing to stop, and the command then runs to
        its own timeout. Here the flag is set first (under the lock every command takes
        to start), and a command already past it is stopped until it has returned.
        """
        with self._cond:
            self._cancelled = True
        while True:
            self.stop_processes()
            with self._cond:
                if not self._busy or (self._cond.wait(_CANCEL_RETRY_SECONDS)
                                      and not self._busy):
                    return

    def open_stream(self, argv: Sequence[str], *, cwd: str = ".",
                    env: Mapping[str, str] | None = None) -> StreamProcess:
        """Start a long-lived process (an MCP server) in this sandbox, with stdin/stdout
        pipes, the same namespaces, mounts, environment allowlist and limits as
        :meth:`exec`. It lives until it exits, or until anything stops the child's
        processes (:meth:`stop_processes`, a diff collection, teardown)."""
        return self._open_long(argv, cwd, env, self._open_stream)

    def open_terminal(self, argv: Sequence[str], *, cwd: str = ".",
                      env: Mapping[str, str] | None = None) -> StreamProcess:
        """:meth:`open_stream` for a person at a terminal (``corral shell``): the same
        confinement. The host backend, which confines nothing (and so refuses to start a
        stream that asked for confinement), runs it as it runs every command: as the
        user, in the workspace."""
        return self._open_long(argv, cwd, env, self._open_terminal)

    def _open_terminal(self, spec: ExecSpec) -> StreamProcess:
        """Start a person's long-lived process (see :meth:`open_terminal`)."""
        return self._open_stream(spec)

    def _open_long(self, argv: Sequence[str], cwd: str, env: Mapping[str, str] | None,
                   opener: Callable[[ExecSpec], StreamProcess]) -> StreamProcess:
        self._check_open()
        spec = self._spec(argv, None, None, cwd, env)
        with self._cond:
            # Not while a command runs: a command's end is checked for leftovers, and a
            # server started meanwhile would count as one.
            while self._freezing or self._busy:
                self._cond.wait()
            self._check_open()
            if self._cancelled:
                raise SandboxError(f"sandbox {self.id} was cancelled: no process starts in it",
                                   code="cancelled", operation="open_stream")
            stream = opener(spec)
            self._streams = [s for s in self._streams if s.alive]
            self._streams.append(stream)
        if self._ws.writable:
            self._touched()
        return stream

    def _kill_streams(self) -> None:
        with self._cond:
            streams, self._streams = self._streams, []
        for stream in streams:
            stream.kill()

    # -- diff and teardown ------------------------------------------------------

    def _unmount(self) -> bool:
        """Detach the overlay (backends closed first); whether one was mounted."""
        layers = self._ws.overlay
        return layers is not None and unmount(layers.merged)

    def _frozen(self) -> _Frozen:
        return _Frozen(self)

    def collect_diff(self) -> DiffResult:
        """See :class:`sandbox.protocol.Sandbox`."""
        with self._frozen():
            self._check_open()
            return self._collect()

    def _set_status(self, status: SandboxStatus) -> None:
        self._meta = self._meta.model_copy(update={"status": status})
        self._state.write_meta(self._meta)

    def _touched(self) -> None:
        """The workspace may change: the stored diff (if any) is no longer the latest."""
        if self._dirty:
            return
        self._dirty = True
        if self._meta.status == "captured":
            self._set_status("active")  # a crash from here on: gc captures again

    def _sweep(self) -> list[str]:
        """Clear setuid/setgid bits in a writable workspace (processes must be stopped)."""
        if not self._ws.writable:
            return []
        cleared = self._ws.sweep_setid()
        self._setid_cleared.update(cleared)
        return cleared

    def _collect(self) -> DiffResult:
        """Sweep, then compute and persist the latest diff; a failure leaves no stored diff."""
        self._diff = None
        self._dirty = False
        if self._meta.status == "captured":
            self._set_status("active")
        self._held.update(hold_created(self._ws, self._state))  # before the walk sees them
        swept = sweep_for_diff(self._ws)  # in one pass with the diff's walk, where it has one
        self._setid_cleared.update(swept.cleared)
        diff = compute_diff(self._ws, self._state, max_bytes=self._limits.max_diff_bytes,
                            swept=swept)
        if self._held:
            diff = diff.model_copy(update={"held": tuple(sorted(self._held)),
                                           "held_dir": self._state.results / HELD_DIR})
        self._diff = diff
        if not self._dirty:  # a file-API write raced the collection: leave it stale
            self._set_status("captured")
        return diff

    def teardown(self, *, discard: bool = False, keep: Path | None = None) -> TeardownReport:
        """See :class:`sandbox.protocol.Sandbox`. ``keep``: move what the child wrote (an
        overlay's upper layer, or a worktree without its ``.git``) there instead of removing
        it (an environment's setup layer, :mod:`sandbox.environment`)."""
        if self._report is not None:
            return self._report
        try:
            with self._frozen():
                return self._teardown_frozen(discard, keep)
        except BaseException:
            # Whatever failed (even stopping the child), nothing that runs the child
            # stays, the user's checkout is swept, and what is kept goes to gc.
            self._kill_streams()
            with contextlib.suppress(SandboxError):
                self._close()
            if self._ws.worktree is None:
                with contextlib.suppress(SandboxError):
                    self._sweep()
            if self._ws.scratch is not None:  # a throwaway layer never outlives its child
                with contextlib.suppress(SandboxError, OSError):
                    unmount_scratch(self._ws.scratch)
            self._meta = self._meta.model_copy(update={"owner_pid": None})
            self._state.write_meta(self._meta)
            raise

    def _teardown_frozen(self, discard: bool, keep: Path | None = None) -> TeardownReport:
        if self._report is not None:
            return self._report
        stale = self._diff is None or self._dirty
        if stale and self.mode is not SandboxMode.READ_ONLY and not discard:
            self._collect()
        self._close()
        if self._ws.worktree is None:  # the user's checkout stays: sweep it last
            self._sweep()
        removed = [f"state:{self._state.dir}"]
        scratch = self._ws.scratch
        if scratch is not None and is_mountpoint(scratch.root):
            self._discarded = count_discarded(scratch)
            unmount_scratch(scratch)
            removed.insert(0, f"scratch:{scratch.root}")
        if self._unmount():
            removed.insert(0, f"overlay:{self._ws.root}")
        if keep is not None:
            self._keep(keep)
        if self._ws.worktree is not None:
            if is_mountpoint(self._ws.worktree):  # never delete through a mount
                raise SandboxError(f"{self._ws.worktree} is still mounted", code="unmount_failed",
                                   operation="teardown")
            remove_tree(self._ws.worktree)
            removed.insert(0, f"worktree:{self._ws.worktree}")
        self._state.remove_private()
        snapshot, lease = self._meta.snapshot_id, self._meta.snapshot_lease
        if snapshot and lease and drop_lease(self._state.root, snapshot, lease):
            removed.append(f"snapshot:{snapshot}")
        self._report = TeardownReport(
            sandbox_id=self.id, diff_captured=self._diff is not None,
            patch_path=self._diff.patch_path if self._diff else None,
            removed=tuple(removed), setid_cleared=tuple(sorted(self._setid_cleared)),
        )
        return self._report

    def _keep(self, keep: Path) -> None:
        """Move what the child wrote to ``keep`` (processes stopped, overlay unmounted)."""
        layers = self._ws.overlay
        if layers is not None:
            layers.upper.rename(keep)
        elif self._ws.worktree is not None:
            (self._ws.worktree / ".git").unlink(missing_ok=True)
            self._ws.worktree.rename(keep)
        else:
            raise SandboxStateError("only a worktree or an overlay can be kept",
                                    operation="teardown")

    def __enter__(self) -> BaseSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.teardown()


class _Frozen:
    """No command runs inside: new ones wait, running ones are killed."""

    def __init__(self, sandbox: BaseSandbox) -> None:
        self._sandbox = sandbox

    def __enter__(self) -> None:
        sb = self._sandbox
        with sb._cond:
            sb._freezing += 1
        holding = False
        try:
            sb._stop()
            sb._kill_streams()
            with sb._cond:
                while sb._busy:
                    if not sb._cond.wait(_FREEZE_POLL_SECONDS):
                        sb._stop()  # a command started just before the freeze
                sb._busy = True
                holding = True
            sb._stop()  # anything a finished command left behind
            sb._verify_empty()  # and the kernel agrees that nothing is left
        except BaseException:
            # A failed freeze must not leave later commands waiting forever.
            with sb._cond:
                if holding:
                    sb._busy = False
                sb._freezing -= 1
                sb._cond.notify_all()
            raise

    def __exit__(self, *exc: object) -> None:
        sb = self._sandbox
        given = False
        try:
            with sb._cond:
                sb._busy = False
                sb._freezing -= 1
                given = True
                sb._cond.notify_all()
        finally:
            if not given:  # Ctrl-C raised as the lock was taken: give the freeze back all
                sb._busy = False  # the same, or the next freeze (teardown) waits forever
                sb._freezing -= 1
