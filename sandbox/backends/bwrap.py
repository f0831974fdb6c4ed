"""The ``bubblewrap`` backend: each command in fresh Linux namespaces.

Every command is its own ``bwrap`` (≈4 ms) with:

- ``--unshare-all --unshare-user --disable-userns``: new user, mount, PID, IPC,
  UTS, cgroup and network namespaces (only loopback), no nested user namespaces;
- ``--cap-drop ALL``: without it (and without ``--disable-userns``), bwrap run
  as root leaves the child every capability in the user namespace owning its
  mounts, enough to ``mount -o remount,rw`` the read-only binds (found on this
  project's machine; the escape suite keeps a test for it);
- ``--die-with-parent --new-session``: no survivor when corral dies, no
  controlling terminal (``TIOCSTI``); ``NoNewPrivs`` is always set by bwrap;
- ``--clearenv`` plus the allowlist; fresh ``/proc`` and ``/dev``; size-capped
  tmpfs ``/tmp`` (``HOME`` is ``/tmp/home``) and ``/dev/shm``;
- a minimal read-only root: ``/usr`` (and the ``/bin``, ``/lib``... links), a
  short list of ``/etc`` files, nothing else of the host: no home directory,
  no ``/run`` or ``/var`` (so no docker or ssh-agent socket), ``/`` remounted
  read-only;
- the workspace mounts of :meth:`sandbox.workspaces.model.Workspace.mounts` at the
  same paths: the workspace read-write only when the mode allows it, its
  ``.git`` pointer and every git directory the child's git reads read-only.

The namespace's PID 1 is a shell waiting for the command (``--as-pid-1``);
when it exits the kernel kills the whole namespace, so nothing a command
starts (``setsid``, double fork) outlives it. Limits: see :mod:`sandbox.backends.limits`.
Setup failures are told apart from the command's own exit status with
``--json-status-fd``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any, ClassVar

from sandbox.backends.limits import PidsCgroup, cgroup_group, prlimit_argv
from sandbox.backends.process import LocalRunner, RunningProcess
from sandbox.backends.streams import PipeStream
from sandbox.base import BaseSandbox, ExecSpec
from sandbox.config import BackendName, BubblewrapConfig
from sandbox.errors import BackendUnavailable, SandboxError
from sandbox.results import ExecResult
from sandbox.state import SandboxMeta, SandboxState
from sandbox.workspaces.model import Workspace

__all__ = ["BubblewrapSandbox", "bwrap_base_argv"]

#: /etc entries programs commonly need; bound read-only when present.
ETC_FILES = (
    "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
    "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
    "/etc/host.conf", "/etc/protocols", "/etc/services", "/etc/mime.types", "/etc/ssl",
    "/etc/ca-certificates", "/etc/terminfo", "/etc/python3", "/etc/python3.11",
)
_SHM, _TMP, _HOME = "/dev/shm", "/tmp", "/tmp/home"  # noqa: S108 - paths inside the sandbox
# The namespace's PID 1 is this shell (``--as-pid-1``): bwrap's own init exits before its monitor
# reaps it, losing the command's resource use; a shell that waits for the command keeps it in
# wait4's accounting, ignores stray signals as a PID 1 must, and ends the namespace when done.
_PID1_WRAPPER = ("/bin/sh", "-c", '"$@"', "sh")
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_NAMESPACE_FLAGS = (
    "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
    "--die-with-parent", "--new-session", "--clearenv",
)


def bwrap_base_argv(bwrap: str, *, tmp_size: int, extra_ro: tuple[Path, ...] = ()) -> list[str]:
    """The namespace flags and the read-only system view shared by probe and commands."""
    args = [bwrap, *_NAMESPACE_FLAGS, "--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_DIRS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for etc in ETC_FILES:
        args += ["--ro-bind-try", etc, etc]
    for extra in extra_ro:
        args += ["--ro-bind", str(extra), str(extra)]
    # The sandbox's own size-capped tmpfs mounts, not the host's /tmp.
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_size), "--tmpfs", _SHM,
             "--size", str(tmp_size), "--tmpfs", _TMP, "--dir", _HOME]
    return args


class BubblewrapSandbox(BaseSandbox):
    """Runs each command under ``bwrap`` (see the module docstring)."""

    backend: ClassVar[BackendName] = "bubblewrap"

    _runner: LocalRunner
    _cgroup: PidsCgroup | None
    _prefix: list[str]

    def __init__(
        self, *, config: BubblewrapConfig, workspace: Workspace, state: SandboxState,
        meta: SandboxMeta,
    ) -> None:
        super().__init__(workspace=workspace, state=state, meta=meta, limits=config.limits)
        self.config = config

    def _start(self) -> None:
        self._runner = LocalRunner()
        self._cgroup = None
        bwrap = shutil.which(self.config.bwrap)
        if bwrap is None:
            raise BackendUnavailable(f"bwrap not found: {self.config.bwrap}",
                                     code="bwrap_missing", operation="start")
        limits = self.limits
        nproc = None
        prefix: list[str] = []
        if limits.pids is not None:
            mechanism = self.config.pids_mechanism
            if mechanism in ("auto", "cgroup"):
                self._cgroup = PidsCgroup.create(cgroup_group(self.state.root), self.id,
                                                limits.pids)
                if self._cgroup is not None:
                    self._meta = self._meta.model_copy(update={"cgroup": self._cgroup.path})
                    self.state.write_meta(self._meta)
                    prefix = self._cgroup.join_argv()
            if self._cgroup is None:
                if mechanism == "cgroup" or os.geteuid() == 0:
                    raise BackendUnavailable(
                        "no writable cgroup pids controller, and RLIMIT_NPROC cannot limit root",
                        code="pids_limit_unavailable", operation="start",
                        hint="run as a non-root user, give corral a writable pids cgroup, "
                        "or set limits.pids to null (no fork-bomb protection)",
                    )
                nproc = limits.pids
        prlimit = shutil.which("prlimit")
        wants_rlimit = any(v is not None for v in (limits.memory_bytes, limits.file_size_bytes,
                                                   nproc))
        if wants_rlimit and prlimit is None:
            raise BackendUnavailable("prlimit (util-linux) is needed for memory limits",
                                     code="prlimit_missing", operation="start")
        prefix += prlimit_argv(prlimit or "prlimit", memory=limits.memory_bytes,
                               file_size=limits.file_size_bytes, nproc=nproc)
        self._prefix = prefix
        self._bwrap = bwrap

    def _argv(self, spec: ExecSpec, status_fd: int) -> list[str]:
        args = [*self._prefix, *bwrap_base_argv(self._bwrap, tmp_size=self.limits.tmp_size_bytes,
                                                extra_ro=self.config.extra_ro_paths)]
        for key, value in spec.env.items():
            args += ["--setenv", key, value]
        for mount in self.workspace.mounts():
            args += ["--bind" if mount.writable else "--ro-bind", str(mount.path), str(mount.path)]
        args += ["--chdir", str(spec.cwd), "--remount-ro", "/", "--as-pid-1", "--json-status-fd",
                 str(status_fd), "--", *_PID1_WRAPPER, *spec.argv]
        return args

    def _kill(self, running: RunningProcess) -> None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(running.pidfd, signal.SIGKILL)
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _run(self, spec: ExecSpec) -> ExecResult:
        read_fd, write_fd = os.pipe()
        outcome = self._runner.run(
            self._argv(spec, write_fd), env={"PATH": os.defpath}, cwd=Path("/"),
            timeout=spec.timeout, output_cap=spec.output_cap, kill=self._kill,
            status_fd=(read_fd, write_fd),
        )
        reports = _json_lines(outcome.status)
        if not any("child-pid" in report for report in reports) and not (
            outcome.timed_out or outcome.stopped
        ):
            stderr = outcome.stderr.data.decode("utf-8", "replace").strip()
            raise SandboxError(
                f"bwrap could not start the command: {stderr[:500]}", code="bwrap_failed",
                operation="exec", context={"exit_code": outcome.exit_code},
            )
        return outcome.result(spec.argv)

    def _open_stream(self, spec: ExecSpec) -> PipeStream:
        """The same bwrap as a command (namespaces, mounts, cgroup, rlimits); killing its
        bwrap kills the namespace's PID 1 (``--die-with-parent``) and so the namespace."""
        read_fd, write_fd = os.pipe()
        return PipeStream.start(self._argv(spec, write_fd), env={"PATH": os.defpath},
                                cwd=Path("/"), kill=_kill_stream, pass_fd=write_fd,
                                keep_fd=read_fd)

    def _stop(self) -> None:
        self._runner.stop_all()
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _close(self) -> None:
        self._runner.stop_all()
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None


def _kill_stream(stream: PipeStream) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(stream.pidfd, signal.SIGKILL)


def _json_lines(data: bytes) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            reports.append(value)
    return reports
