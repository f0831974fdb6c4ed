"""The one seam between the executor and every backend: :class:`Sandbox`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, runtime_checkable

from policies.contract import SandboxMode
from sandbox.config import BackendName, Limits
from sandbox.files.confined import ConfinedFiles
from sandbox.results import DiffResult, ExcludedPath, ExecResult, TeardownReport
from sandbox.workspaces.scratch import Discarded

__all__ = ["Sandbox"]


@runtime_checkable
class Sandbox(Protocol):
    """Where one child runs. Built by :func:`sandbox.factory.open_sandbox`.

    The workspace is visible at the same absolute path inside every backend,
    so paths in a command's output are valid for :attr:`files` too. Commands
    run one at a time per sandbox (a second ``exec`` waits for the first).
    """

    @property
    def id(self) -> str:
        """Unique id; also names the worktree, the container and the cgroup."""

    @property
    def backend(self) -> BackendName:
        """``host``, ``bubblewrap``, ``docker`` or ``fake``."""

    @property
    def mode(self) -> SandboxMode:
        """What the child may write."""

    @property
    def root(self) -> Path:
        """The workspace's absolute path (the same on the host and inside the sandbox)."""

    @property
    def base_commit(self) -> str | None:
        """The snapshot commit diffs are relative to (``None`` in read-only mode).

        It is stored in the child's private git dir; the parent's repository
        never receives it.
        """

    @property
    def workspace_kind(self) -> Literal["checkout", "worktree", "overlay"]:
        """``checkout`` (the parent's checkout: read-only, workspace-write), ``worktree`` (a
        checkout of its own) or ``overlay`` (a copy-on-write layer over a shared snapshot)."""

    @property
    def workspace_fallback(self) -> str | None:
        """Why this worktree-mode sandbox got a plain worktree instead of an overlay over its
        shared snapshot (``None``: it got what it asked for)."""

    @property
    def snapshot_id(self) -> str | None:
        """The shared snapshot it was opened on (it holds a lease on it until teardown)."""

    @property
    def files(self) -> ConfinedFiles:
        """The host-side file API, confined to :attr:`root` (read-only in read-only mode)."""

    @property
    def limits(self) -> Limits:
        """The limits every command runs under."""

    @property
    def warning(self) -> str | None:
        """A line the CLI must print when this sandbox is used (the host backend's caveat)."""

    @property
    def snapshot_excluded(self) -> tuple[ExcludedPath, ...]:
        """Parent paths left out of the child's starting snapshot (nested repositories...)."""

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
        """Run ``argv`` (no shell) in the sandbox; ``cwd`` is relative to :attr:`root`;
        ``on_output(stream, chunk)`` sees the output as it arrives.

        ``env`` is added to a fixed allowlist (``PATH``, ``HOME``, ``LANG``,
        ``TERM``, ``TMPDIR``); nothing else of the parent's environment is seen.
        A timeout is a result (``timed_out``), not an exception; call
        ``result.check()`` to raise :class:`sandbox.errors.CommandTimeout`.
        """

    def stop_processes(self) -> None:
        """Kill every process of the child now (running commands return ``stopped``)."""

    def cancel(self) -> None:
        """Stop the child for good: kill its processes now, and every later command returns
        ``stopped`` without running (a command that was starting is stopped too)."""

    def discarded_writes(self) -> Discarded | None:
        """What a read-only child's commands wrote into its throwaway layer so far (review
        commands: :mod:`sandbox.workspaces.scratch`), all dropped at teardown; ``None``:
        it has no such layer."""

    def collect_diff(self) -> DiffResult:
        """Stop the child's processes, clear setuid/setgid bits in the writable workspace,
        then compute, persist and return its diff.

        Each call computes the latest diff and replaces the stored one; a call
        that fails leaves no stored diff, so teardown (or gc) collects again.
        """

    def teardown(self, *, discard: bool = False) -> TeardownReport:
        """Stop everything, capture the latest diff (unless ``discard``), then remove what was
        made.

        The diff is collected again unless the stored one is still the latest
        (no command and no file-API write since). A worktree is only removed
        after its diff was captured; if capturing fails, the worktree (an overlay
        stays mounted) is kept for :func:`sandbox.gc.gc` and the error raised. An
        overlay is unmounted before its layers are removed, and the sandbox's lease on
        its shared snapshot dropped (after the last one it stays idle, for reuse; see
        :mod:`sandbox.workspaces.snapstore`). A workspace that stays
        (workspace-write) is swept for setuid/setgid files once the child is gone.
        """

    def __enter__(self) -> Sandbox:
        """The sandbox itself."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """:meth:`teardown`."""
