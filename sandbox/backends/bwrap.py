"""The ``bubblewrap`` backend: a child's commands in fresh Linux namespaces, one warm sandbox.

Each child gets one ``bwrap`` (started at its first command, and again after a
stop) whose PID 1 is the supervisor of :mod:`sandbox.backends.warm_init`; every
command of the child is a process it starts (see :mod:`sandbox.backends.warm`),
so a command costs a fork and an exec, not a ``bwrap``. The namespace has:

- ``--unshare-all --unshare-user --disable-userns``: new user, mount, PID, IPC,
  UTS, cgroup and network namespaces (only loopback), no nested user namespaces;
- ``--cap-drop ALL``: without it (and without ``--disable-userns``), bwrap run
  as root leaves the child every capability in the user namespace owning its
  mounts, enough to ``mount -o remount,rw`` the read-only binds (found on this
  project's machine; the escape suite keeps a test for it);
- ``--die-with-parent --new-session``: no survivor when corral dies, no
  controlling terminal (``TIOCSTI``); ``NoNewPrivs`` is always set by bwrap;
- ``--seccomp FD``: corral's own filter (:mod:`sandbox.backends.seccomp`: no
  ``ptrace``, io_uring, new user namespace, keyring, ``bpf``, mount or module
  calls, ``TIOCSTI``, rare socket families), compiled once per process and handed
  to each bwrap in a memfd; without libseccomp the backend refuses to start
  unless the config turns the filter off (``seccomp = false``);
- ``--clearenv``; each command gets exactly the allowlisted environment; fresh
  ``/proc`` and ``/dev``; size-capped tmpfs ``/tmp`` (``HOME`` is
  ``/tmp/home``) and ``/dev/shm``, shared by the child's commands (one
  principal) until the sandbox is stopped;
- a minimal read-only root: ``/usr`` (and the ``/bin``, ``/lib``... links), a
  short list of ``/etc`` files, nothing else of the host: no home directory,
  no ``/run`` or ``/var`` (so no docker or ssh-agent socket), ``/`` remounted
  read-only;
- the workspace mounts of :meth:`sandbox.workspaces.model.Workspace.mounts` at the
  same paths: the workspace read-write only when the mode allows it, its
  ``.git`` pointer and every git directory the child's git reads read-only.

The supervisor is the namespace's PID 1 (``--as-pid-1``): signals from inside
the namespace cannot kill it, and when a command ends (exit, deadline) it kills
every other process of the namespace (``setsid``, double forks, ``nohup``) and
reaps them before it reports, so nothing a command starts outlives it. The
pids and memory cgroups and the rlimits (:mod:`sandbox.backends.limits`) are applied
once, to ``bwrap`` itself, and hold for the supervisor and every command; a command
during which the memory cgroup's OOM kill counter grew is ``oom_killed``. The host
keeps a backstop: a supervisor silent past a command's deadline plus a grace,
gone, or unable to kill what a command left, and :meth:`stop_processes` on a
running command, kill ``bwrap`` and everything in its cgroup at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sandbox.backends.leftovers import describe, namespace_leftovers, pid_namespace
from sandbox.backends.limits import (
    MEMORY_RLIMIT_COST,
    MemoryCgroup,
    PidsCgroup,
    cgroup_group,
    memory_cgroup_missing,
    prlimit_argv,
)
from sandbox.backends.seccomp import filter_program, program_fd
from sandbox.backends.slirp import SLIRP_DNS, Slirp
from sandbox.backends.streams import PipeStream
from sandbox.backends.warm import PipeChannel, Warm, supervisor_argv
from sandbox.base import BaseSandbox, ExecSpec
from sandbox.config import BackendName, BubblewrapConfig
from sandbox.denials import denial_covers, host_denials
from sandbox.egress.netns import (
    SANDBOX_DIR,
    SANDBOX_SOCKET,
    listen_in_namespace,
    listen_on_socket,
    socket_route,
)
from sandbox.egress.proxy import Listening
from sandbox.errors import BackendUnavailable, SandboxError
from sandbox.results import ExecResult
from sandbox.state import SandboxMeta, SandboxState
from sandbox.workspaces.model import Workspace

__all__ = ["BubblewrapSandbox", "bwrap_base_argv", "seccomp_program"]

#: /etc entries programs commonly need; bound read-only when present.
ETC_FILES = (
    "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
    "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
    "/etc/host.conf", "/etc/protocols", "/etc/services", "/etc/mime.types", "/etc/ssl",
    "/etc/ca-certificates", "/etc/terminfo", "/etc/python3", "/etc/python3.11",
)
_SHM, _TMP, _HOME = "/dev/shm", "/tmp", "/tmp/home"  # noqa: S108 - paths inside the sandbox
#: The sandbox's Python (the host's /usr, bound read-only) runs the supervisor.
_PYTHON = "/usr/bin/python3"
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_NAMESPACE_FLAGS = (
    "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
    "--die-with-parent", "--new-session", "--clearenv",
)


def bwrap_base_argv(bwrap: str, *, tmp_size: int, seccomp_fd: int | None,
                    extra_ro: tuple[Path, ...] = (), resolv: Path | None = None) -> list[str]:
    """The namespace flags and the read-only system view shared by probe and commands
    (``resolv``: an environment's setup that was granted network gets its own network
    namespace, reached through slirp4netns, and this file as ``/etc/resolv.conf``;
    ``seccomp_fd``: a descriptor bwrap inherits holding the filter, see
    :func:`seccomp_program`, ``None`` only when the config turned the filter off)."""
    args = [bwrap, *_NAMESPACE_FLAGS, "--ro-bind", "/usr", "/usr"]
    if seccomp_fd is not None:
        args[1:1] = ["--seccomp", str(seccomp_fd)]
    for name in _SYSTEM_DIRS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for etc in ETC_FILES:
        args += ["--ro-bind-try", etc, etc]
    if resolv is not None:
        args += ["--ro-bind", str(resolv), "/etc/resolv.conf"]
    # The sandbox's own size-capped tmpfs mounts, not the host's /tmp.
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_size), "--tmpfs", _SHM,
             "--size", str(tmp_size), "--tmpfs", _TMP, "--dir", _HOME]
    # After the tmpfs mounts: bwrap mounts in order, so an extra path under /tmp (a
    # virtualenv there) would otherwise be hidden by the sandbox's own /tmp.
    for extra in extra_ro:
        args += ["--ro-bind", str(extra), str(extra)]
    return args


def seccomp_program(config: BubblewrapConfig) -> bytes | None:
    """The filter every bwrap of ``config`` installs (``None``: the config turned it off);
    :class:`BackendUnavailable` when libseccomp cannot build it."""
    return filter_program() if config.seccomp else None


class BubblewrapSandbox(BaseSandbox):
    """Runs each command under ``bwrap`` (see the module docstring)."""

    backend: ClassVar[BackendName] = "bubblewrap"

    _cgroup: PidsCgroup | None
    #: The whole sandbox's memory cgroup, and its OOM kills counted so far.
    _memory: MemoryCgroup | None = None
    _oom_kills: int = 0
    _prefix: list[str]
    _seccomp: bytes | None
    _covers: list[tuple[str, Path]]
    _resolv: Path | None
    _slirp: str | None = None
    #: ``--net allow`` without root: the directory of the proxy's Unix socket (bound
    #: read-only into the sandbox) and its listener; ``None``: a port in the namespace.
    _egress_dir: Path | None = None
    _egress_socket: Listening | None = None

    def __init__(
        self, *, config: BubblewrapConfig, workspace: Workspace, state: SandboxState,
        meta: SandboxMeta,
    ) -> None:
        super().__init__(workspace=workspace, state=state, meta=meta, limits=config.limits)
        self.config = config
        self._warm: _Live | None = None
        self._lock = threading.Lock()
        self._running = self._stopping = False

    def _start(self) -> None:
        self._cgroup = self._memory = None
        bwrap = shutil.which(self.config.bwrap)
        if bwrap is None:
            raise BackendUnavailable(f"bwrap not found: {self.config.bwrap}",
                                     code="bwrap_missing", operation="start")
        # Before anything is made: without libseccomp the sandbox does not start.
        self._seccomp = seccomp_program(self.config)
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
        address_space = self._memory_limit(prefix)
        prlimit = shutil.which("prlimit")
        wants_rlimit = any(v is not None for v in (address_space, limits.file_size_bytes,
                                                   nproc))
        if wants_rlimit and prlimit is None:
            raise BackendUnavailable("prlimit (util-linux) is needed for memory limits",
                                     code="prlimit_missing", operation="start")
        prefix += prlimit_argv(prlimit or "prlimit", memory=address_space,
                               file_size=limits.file_size_bytes, nproc=nproc)
        if not Path(_PYTHON).is_file():
            raise BackendUnavailable(f"{_PYTHON} is missing: the sandbox's supervisor needs it",
                                     code="python_missing", operation="start")
        self._prefix = prefix
        self._bwrap = bwrap
        self.denials = host_denials(self._denied)
        self._covers = denial_covers(self.denials, self.state.dir / "denied")
        self._resolv = None
        if self.egress is not None and socket_route():
            self._egress_dir = self.state.dir / "egress"
            self._egress_socket = self.egress.serve(listen_on_socket(self._egress_dir))
        if self.config.network:  # an environment's setup granted network: its own, via slirp
            self._slirp = shutil.which("slirp4netns")
            if self._slirp is None:
                raise BackendUnavailable(
                    "slirp4netns is needed to give a setup its own network",
                    code="slirp4netns_missing", operation="start",
                    hint="install it (Debian/Ubuntu: apt-get install slirp4netns); a setup "
                    "granted network never shares this machine's own")
            self._resolv = self.state.dir / "resolv.conf"
            self._resolv.write_text(f"nameserver {SLIRP_DNS}\n", encoding="ascii")

    def _memory_limit(self, prefix: list[str]) -> int | None:
        """Cap the whole sandbox's memory with a cgroup (joined through ``prefix``); the
        ``RLIMIT_AS`` to set instead when there is none (see :mod:`sandbox.backends.limits`)."""
        memory = self.limits.memory_bytes
        mechanism = self.config.memory_mechanism
        if memory is None or mechanism == "rlimit":
            return memory
        self._memory = MemoryCgroup.create_memory(cgroup_group(self.state.root), self.id,
                                                  memory, pids=self._cgroup)
        if self._memory is None:
            missing = memory_cgroup_missing() or "no memory cgroup"
            if mechanism == "cgroup":
                raise BackendUnavailable(
                    f"{missing}: the sandbox's memory cannot be capped as a whole",
                    code="memory_limit_unavailable", operation="start",
                    hint="give corral a writable memory cgroup, or set memory_mechanism to "
                    "rlimit (an address-space cap per process)")
            self.warning = f"{missing}: {MEMORY_RLIMIT_COST}"
            return memory
        if not self._memory.shared:
            self._meta = self._meta.model_copy(update={"memory_cgroup": self._memory.path})
            self.state.write_meta(self._meta)
        prefix += self._memory.join_argv()
        self._oom_kills = self._memory.oom_kills()
        return None

    @property
    def supervisor_pid(self) -> int | None:
        """The host pid of the warm sandbox's supervisor (bwrap's child), if one runs."""
        live = self._warm
        return None if live is None else _first_child(live.process.popen.pid)

    def _seccomp_fd(self) -> int | None:
        """A fresh descriptor of the filter for one bwrap (the caller closes it once bwrap
        started), or ``None`` when the config turned the filter off."""
        return None if self._seccomp is None else program_fd(self._seccomp)

    def _argv(self, command: Sequence[str], *, seccomp_fd: int | None, cwd: str = "/",
              env: Mapping[str, str] | None = None) -> list[str]:
        """A ``bwrap`` of this sandbox (namespaces, seccomp, mounts, cgroup, rlimits) whose
        PID 1 is ``command``: the warm supervisor, or a long-lived process
        (:meth:`_open_stream`)."""
        args = [*self._prefix, *bwrap_base_argv(self._bwrap, tmp_size=self.limits.tmp_size_bytes,
                                                seccomp_fd=seccomp_fd,
                                                extra_ro=self.config.extra_ro_paths,
                                                resolv=self._resolv)]
        for key, value in (env or {}).items():
            args += ["--setenv", key, value]
        for mount in self.workspace.mounts():
            args += ["--bind" if mount.writable else "--ro-bind", str(mount.origin),
                     str(mount.path)]
        for target, cover in self._covers:  # a program the contract denies: its stand-in
            args += ["--ro-bind", str(cover), target]
        if self._egress_dir is not None:  # the proxy's socket, relayed by the supervisor
            args += ["--ro-bind", str(self._egress_dir), SANDBOX_DIR]
        args += ["--chdir", cwd, "--remount-ro", "/", "--as-pid-1", "--", *command]
        return args

    def _warm_up(self) -> Warm:
        """The live supervisor, started now if there is none (or it died while idle)."""
        current = self._warm
        if current is not None and current.warm.usable and current.warm.idle_alive():
            return current.warm
        if current is not None:
            self._discard(current)
        seccomp_fd = self._seccomp_fd()
        process = _KeptProcess.start(
            self._argv(supervisor_argv(_PYTHON, "pid1", SANDBOX_SOCKET if self._egress_dir
                                       else None), seccomp_fd=seccomp_fd),
            pass_fd=seccomp_fd)
        channel = PipeChannel(process.stdin, process.stdout, process.stderr)
        try:
            warm = Warm.start(channel)
        except SandboxError as exc:
            process.release()
            channel.close()
            raise SandboxError(f"bwrap could not start the sandbox: {exc.message}",
                               code="bwrap_failed", operation="exec",
                               context={"exit_code": process.exit_code}) from exc
        supervisor = _first_child(process.popen.pid)
        live = _Live(process, warm, supervisor,
                     pid_namespace(supervisor) if supervisor is not None else None)
        try:
            if self._resolv is not None:
                live.network = Slirp.start(self._slirp or "slirp4netns", supervisor)
            if self.egress is not None and self._egress_dir is None:  # a port in its netns
                live.egress = self.egress.serve(listen_in_namespace(supervisor))
        except BaseException:
            self._discard(live)
            raise
        self._warm = live
        return warm

    def _discard(self, live: _Live) -> int | None:
        """Stop a supervisor and everything in its namespace; bwrap's exit code."""
        if self._warm is live:
            self._warm = None
        live.process.kill()
        if self._cgroup is not None:
            self._cgroup.kill_all()
        if self._memory is not None:
            self._memory.kill_all()
        live.warm.close()
        if live.network is not None:
            live.network.stop()
        if live.egress is not None:
            live.egress.close()
        return live.process.release()

    def _run(self, spec: ExecSpec) -> ExecResult:
        warm = self._warm_up()
        live = self._warm
        with self._lock:
            self._stopping = False
            self._running = True
        try:
            outcome = warm.run(spec)
        except BaseException:
            # Ctrl-C in this wait: the command must not go on writing while the diff is
            # taken, and the supervisor is mid-command: stop both, start afresh next time.
            if live is not None:
                self._discard(live)
            raise
        finally:
            with self._lock:
                self._running = False
                stopped = self._stopping
        lost_exit = None
        killed = list(outcome.survivors)
        if not outcome.needs_stop and live is not None:
            left = self._leftovers(live)
            if left:  # the supervisor said it killed everything; the kernel says otherwise
                killed += describe(left)
                outcome.distrusted = True
        if outcome.needs_stop and live is not None:
            # Silent past its deadline, gone, unable to kill what the command left, or
            # contradicted by the kernel: stop the whole namespace and cgroup from outside;
            # the next command starts afresh.
            code = self._discard(live)
            lost_exit = None if code is None else (code if code >= 0 else 128 - code)
        result = outcome.result(spec.argv, stopped=stopped, lost_exit=lost_exit,
                                killed=tuple(killed))
        if self._memory is not None:  # commands run one at a time: a new kill is this one's
            kills = self._memory.oom_kills()
            if kills > self._oom_kills:
                self._oom_kills = kills
                result = result.model_copy(update={"oom_killed": True})
        return result

    def _leftovers(self, live: _Live) -> list[int]:
        """Host pids in the sandbox's namespace but its supervisor (see
        :mod:`sandbox.backends.leftovers`); a supervisor the host cannot find is trusted."""
        if live.supervisor is None:
            return []
        found = namespace_leftovers(live.supervisor, live.namespace, self._cgroup)
        return [live.supervisor] if found is None else found

    def _verify_empty(self) -> None:
        """Nothing of the child may run while the host reads its workspace: if the kernel
        shows any process in the namespace but the idle supervisor, stop the sandbox."""
        live = self._warm
        if live is not None and self._leftovers(live):
            self._discard(live)

    def _open_stream(self, spec: ExecSpec) -> PipeStream:
        """The same bwrap as a command (namespaces, mounts, cgroup, rlimits); killing its
        bwrap kills the namespace's PID 1 (``--die-with-parent``) and so the namespace."""
        # A shell as PID 1 waits for the process, and ignores stray signals as a PID 1 must.
        seccomp_fd = self._seccomp_fd()
        return PipeStream.start(self._argv(("/bin/sh", "-c", '"$@"', "sh", *spec.argv),
                                           seccomp_fd=seccomp_fd, cwd=str(spec.cwd),
                                           env=spec.env),
                                env={"PATH": os.defpath}, cwd=Path("/"), kill=_kill_stream,
                                pass_fd=seccomp_fd)

    def _stop(self) -> None:
        # An idle supervisor has already killed everything its last command left; a running
        # command is stopped with its whole namespace and cgroup, at once.
        with self._lock:
            if not self._running:
                return
            self._stopping = True
            live = self._warm
        if live is not None:
            live.process.kill()
        if self._cgroup is not None:
            self._cgroup.kill_all()
        if self._memory is not None:
            self._memory.kill_all()

    def _close(self) -> None:
        live = self._warm
        if live is not None:
            self._discard(live)
        if self._egress_socket is not None:
            self._egress_socket.close()
            self._egress_socket = None
        if self._memory is not None:
            self._memory.remove()
            self._memory = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None


@dataclass(eq=False)
class _Live:
    process: _KeptProcess
    warm: Warm
    #: The supervisor's host pid and PID namespace, for the host's own check.
    supervisor: int | None = None
    namespace: str | None = None
    #: The user-mode network of a setup granted network (``None``: only loopback).
    network: Slirp | None = None
    #: The egress proxy's port in its namespace (``--net allow``; ``None``: no route out).
    egress: Listening | None = None


def _first_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


class _KeptProcess:
    """``bwrap`` started from a thread that lives as long as it does: ``--die-with-parent``
    (``PR_SET_PDEATHSIG``) fires when the *thread* that started bwrap ends, and commands
    come from whichever thread calls ``exec``."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int, fds: tuple[int, int, int],
                 release: threading.Event, keeper: threading.Thread) -> None:
        self.popen = popen
        self.pidfd = pidfd
        self.stdin, self.stdout, self.stderr = fds
        self._release = release
        self._keeper = keeper
        self._pidfd_lock = threading.Lock()
        self.exit_code: int | None = None

    @classmethod
    def start(cls, argv: list[str], *, pass_fd: int | None = None) -> _KeptProcess:
        """Start ``argv``; ``pass_fd`` (the filter's memfd) is handed to it, then closed here."""
        try:
            return cls._start(argv, pass_fd)
        finally:
            if pass_fd is not None:
                os.close(pass_fd)

    @classmethod
    def _start(cls, argv: list[str], pass_fd: int | None) -> _KeptProcess:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        started: list[subprocess.Popen[bytes] | BaseException] = []
        ready, release = threading.Event(), threading.Event()

        def keep() -> None:
            try:
                started.append(subprocess.Popen(  # noqa: S603 - argv built above, never a shell
                    argv, stdin=stdin_r, stdout=stdout_w, stderr=stderr_w,
                    env={"PATH": os.defpath}, cwd=Path("/"), start_new_session=True,
                    close_fds=True, pass_fds=() if pass_fd is None else (pass_fd,),
                ))
            except BaseException as exc:  # handed to the starting thread below
                started.append(exc)
            finally:
                ready.set()
            release.wait()

        keeper = threading.Thread(target=keep, name="corral-bwrap-keeper", daemon=True)
        keeper.start()
        ready.wait()
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        popen = started[0]
        if not isinstance(popen, subprocess.Popen):
            release.set()
            for fd in (stdin_w, stdout_r, stderr_r):
                os.close(fd)
            raise SandboxError(f"could not start {argv[0]}: {popen}", code="spawn_failed",
                               operation="exec") from popen
        return cls(popen, os.pidfd_open(popen.pid), (stdin_w, stdout_r, stderr_r), release,
                   keeper)

    def kill(self) -> None:
        """SIGKILL bwrap (another thread may be releasing it: never a recycled descriptor)."""
        with self._pidfd_lock:
            if self.pidfd >= 0:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def release(self) -> int | None:
        """Reap bwrap (kill it first) and let the keeper thread end; its exit code."""
        if self.exit_code is None:
            self.kill()
            self.exit_code = self.popen.wait()
            with self._pidfd_lock:
                os.close(self.pidfd)
                self.pidfd = -1
        self._release.set()
        self._keeper.join()
        return self.exit_code


def _kill_stream(stream: PipeStream) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(stream.pidfd, signal.SIGKILL)


