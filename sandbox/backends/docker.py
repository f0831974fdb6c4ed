"""The ``docker`` backend: one container per child, commands through ``docker exec``.

The only module that imports ``docker``; every docker or connection error is
translated here. The container (``corral-sandbox:latest`` by default, built by
``scripts/build_sandbox_image.sh``, never pulled) runs ``sleep infinity``
under ``--init`` for the child's life, with ``--network none``, ``--cap-drop
ALL``, ``no-new-privileges``, ``--pids-limit``, ``--memory`` (= swap),
``RLIMIT_FSIZE``, a read-only root with size-capped tmpfs ``/tmp``,
``/tmp/home`` and ``/dev/shm``, no socket mounts, and the workspace mounts of
:meth:`sandbox.workspaces.model.Workspace.mounts` at the same paths.

Users: commands run as a non-root uid (the workspace owner, or 1000 with a
corral-made worktree chowned to it); the keep-alive process runs as another
uid (65534). After every command (normal end, timeout, engine error) a
separate exec runs ``kill -9 -1`` as the command's uid and waits until no
process of that uid is left: everything the command started (``setsid``,
double fork, ``nohup``) dies before ``exec`` returns, even when the command
killed its own wrapper (``kill -9 $PPID``), and the keep-alive survives
because that uid may not signal it. The wrapper also runs ``"$@"; kill -9 -1``
so a background process holding the output pipe cannot keep the exec open;
that one is only an optimisation, the separate exec is the guarantee. A
timeout or :meth:`stop_processes` runs the same kill exec. (Docker bind mounts
cannot be made ``nosuid``; ``no-new-privileges`` keeps a setuid file the child
makes inert inside the container, and :mod:`sandbox.workspaces.setid` clears it on the
host.) Peak RSS is the container's memory
high-water mark (cgroup v1 only); CPU seconds are the container's usage
during the command.

Paths: the workspace is mounted at its host path; an image directory above a
mount that the command's uid cannot traverse (the image's ``/root`` when corral
runs as root) gets a read-only stand-in (:mod:`sandbox.backends.standins`), found from
the modes docker reports (archive ``HEAD``) on the created container, which is
then created again.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import docker
from docker.types import Mount, Ulimit
from docker.utils import decode_json_header

from policies.contract import SandboxMode
from sandbox.backends.limits import CgroupUsage
from sandbox.backends.process import DRAIN_GRACE_SECONDS, OutputCapture
from sandbox.backends.standins import closed_ancestors, make_stand_ins
from sandbox.backends.streams import SocketStream
from sandbox.base import BaseSandbox, ExecSpec
from sandbox.config import BackendName, DockerConfig
from sandbox.errors import (
    BackendUnavailable,
    OverlayUnavailable,
    SandboxConfigError,
    SandboxError,
)
from sandbox.results import ExecResult
from sandbox.state import SandboxMeta, SandboxState
from sandbox.workspaces.model import Workspace

__all__ = ["LABEL", "DockerSandbox", "list_corral_containers", "plan_users", "probe_docker",
           "remove_container"]

LABEL = "org.corral.sandbox"
STATE_LABEL = "org.corral.state-root"
# Runs the command, then kills whatever it left. The first line lets the child's own git
# read the root-owned (read-only) git dir: safe.directory is only read from global config.
_RUN_WRAPPER = (
    "/bin/sh", "-c",
    '[ -e "$HOME/.gitconfig" ] || printf "[safe]\\n\\tdirectory = *\\n" > "$HOME/.gitconfig"\n'
    '"$@"; rc=$?; kill -9 -1 2>/dev/null; exit $rc',
    "sh",
)
# Kills every process of the command's uid (never PID 1, the keep-alive's uid, or itself), then
# waits until none is left alive (zombies are fine: docker-init reaps them); exit 1 if some
# process survives 200 rounds (stuck in the kernel).
_KILL_ALL = ["/bin/sh", "-c", """kill -9 -1 2>/dev/null
n=0
while :; do
  left=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    if [ "$p" = "$$" ] || [ "$p" = 1 ] || ! [ -O "$d" ]; then continue; fi
    read -r line < "$d/stat" 2>/dev/null || continue
    state=${line##*) }
    case $state in Z*|X*) ;; *) left=1 ;; esac
  done
  [ $left = 0 ] && exit 0
  n=$((n + 1))
  [ $n -ge 200 ] && exit 1
  kill -9 -1 2>/dev/null
  sleep 0.01
done"""]
_TMP, _HOME = "/tmp", "/tmp/home"  # noqa: S108 - the container's own tmpfs mounts
_KEEPALIVE_UID = 65534
_DEFAULT_UID = 1000
_ENGINE_ERRORS = (docker.errors.DockerException, OSError)
_BUILD_HINT = "build it with scripts/build_sandbox_image.sh (corral never pulls images)"


def _check_socket(config: DockerConfig) -> None:
    """Connect to a unix-socket engine ourselves first: docker-py leaks the socket of a
    failed connection (a ResourceWarning later), and the error is clearer."""
    url = config.base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not url.startswith(("unix://", "http+unix://")):
        return
    path = url.split("://", 1)[1]
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(config.api_timeout_seconds)
        try:
            probe.connect(path)
        except OSError as exc:
            raise BackendUnavailable(f"no docker engine at {path}: {exc.strerror or exc}",
                                     code="docker_unavailable", operation="connect",
                                     hint="start dockerd (scripts/ci_setup.sh does)") from exc


def _client(config: DockerConfig) -> Any:
    _check_socket(config)
    try:
        if config.base_url:
            return docker.DockerClient(base_url=config.base_url,
                                       timeout=int(config.api_timeout_seconds))
        return docker.from_env(timeout=int(config.api_timeout_seconds))
    except _ENGINE_ERRORS as exc:
        raise BackendUnavailable(f"no docker engine: {exc}", code="docker_unavailable",
                                 operation="connect") from exc


def probe_docker(config: DockerConfig) -> None:
    """Raise :class:`BackendUnavailable` unless the engine answers and the image exists."""
    client = _client(config)
    try:
        client.ping()
        client.images.get(config.image)
    except docker.errors.ImageNotFound as exc:
        raise BackendUnavailable(
            f"the sandbox image {config.image} is not present", code="image_missing",
            operation="probe", hint=_BUILD_HINT,
        ) from exc
    except _ENGINE_ERRORS as exc:
        raise BackendUnavailable(f"the docker engine does not answer: {exc}",
                                 code="docker_unavailable", operation="probe") from exc
    finally:
        client.close()


def list_corral_containers(config: DockerConfig, *, state_root: Path) -> dict[str, str]:
    """Container name -> sandbox id, for every container corral made for ``state_root``."""
    client = _client(config)
    try:
        found = client.containers.list(
            all=True, filters={"label": [LABEL, f"{STATE_LABEL}={state_root}"]})
        return {c.name: c.labels.get(LABEL, "") for c in found}
    except _ENGINE_ERRORS as exc:
        raise BackendUnavailable(f"cannot list containers: {exc}", code="docker_unavailable",
                                 operation="gc") from exc
    finally:
        client.close()


def remove_container(config: DockerConfig, name: str) -> bool:
    """Force-remove a container; ``False`` if it did not exist."""
    client = _client(config)
    try:
        client.api.remove_container(name, force=True)
        return True
    except docker.errors.NotFound:
        return False
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot remove container {name}: {exc}", code="docker_failed",
                           operation="remove_container") from exc
    finally:
        client.close()


def _stream_socket(stream: Any) -> Any:
    """The socket under an exec stream (docker-py leaves it open when the stream ends)."""
    fp = getattr(getattr(getattr(stream, "_response", None), "raw", None), "_fp", None)
    raw = getattr(getattr(fp, "fp", None), "raw", None)
    return getattr(raw, "_sock", None) or getattr(raw, "sock", None)


def _close_stream(stream: Any, sock: Any) -> None:
    stream.close()
    if sock is not None:
        sock.close()
    stream._response.close()


def _ids(text: str) -> tuple[int, int]:
    uid, _, gid = text.partition(":")
    return int(uid), int(gid or uid)


def plan_users(
    config: DockerConfig, workspace_owner: tuple[int, int], mode: SandboxMode
) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """(uid:gid commands run as, uid:gid to chown a new worktree to, if any)."""
    root = os.geteuid() == 0
    if config.user is not None:
        user = _ids(config.user)
    elif mode is SandboxMode.WORKTREE:
        user = (_DEFAULT_UID, _DEFAULT_UID) if root else (os.getuid(), os.getgid())
    elif workspace_owner[0] != 0:
        user = workspace_owner
    elif mode is SandboxMode.READ_ONLY:
        user = (_DEFAULT_UID, _DEFAULT_UID)
    else:
        user = (0, 0)
    allowed = config.allow_root_user if config.allow_root_user is not None else root
    if user[0] == 0 and not allowed:
        raise SandboxConfigError(
            "docker commands would run as root: the workspace belongs to root",
            code="docker_root_user", operation="open_sandbox",
            hint="use worktree mode (corral chowns its own worktree to uid 1000), or set "
            "allow_root_user: true (still no capabilities) in the docker backend config",
        )
    chown = user if mode is SandboxMode.WORKTREE and root and user != (0, 0) else None
    return user, chown


class DockerSandbox(BaseSandbox):
    """One long-lived container per child (see the module docstring)."""

    backend: ClassVar[BackendName] = "docker"

    def __init__(
        self, *, config: DockerConfig, workspace: Workspace, state: SandboxState,
        meta: SandboxMeta, user: tuple[int, int],
    ) -> None:
        root = os.geteuid() == 0
        super().__init__(workspace=workspace, state=state, meta=meta, limits=config.limits,
                         files_owner=user if root and user != (0, 0) else None)
        self.config = config
        if user[0] == 0:
            self.warning = ("docker commands run as uid 0 (no capabilities, no new privileges): "
                            "the workspace is a root-owned checkout")
        self._user = f"{user[0]}:{user[1]}"
        self._uid = user
        self._client: Any = None
        self._cpu_ns = 0
        self._cgroup: CgroupUsage | None = None
        self._kill_lock = threading.Lock()

    def _translate(self, exc: BaseException, operation: str) -> SandboxError:
        return SandboxError(f"docker {operation} failed: {exc}", code="docker_failed",
                            operation=operation, context={"container": self.id})

    def _start(self) -> None:
        self._client = _client(self.config)
        self._meta = self._meta.model_copy(
            update={"container": self.id, "docker_base_url": self.config.base_url})
        self.state.write_meta(self._meta)
        limits = self.limits
        keepalive = _KEEPALIVE_UID if self._uid[0] != _KEEPALIVE_UID else _KEEPALIVE_UID - 1
        tmp = f"rw,nosuid,nodev,size={limits.tmp_size_bytes}"
        options: dict[str, Any] = {
            "command": ["sleep", "infinity"], "name": self.id, "init": True,
            "labels": {LABEL: self.id, STATE_LABEL: str(self.state.root)},
            "network_mode": "none", "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
            "read_only": True, "user": f"{keepalive}:{keepalive}", "hostname": "sandbox",
            "tmpfs": {_TMP: tmp, _HOME: f"{tmp},uid={self._uid[0]},gid={self._uid[1]},mode=700"},
            "shm_size": limits.tmp_size_bytes, "environment": {},
            "mounts": [Mount(target=str(m.path), source=str(m.path), type="bind",
                             read_only=not m.writable) for m in self.workspace.mounts()],
        }
        if limits.pids is not None:
            options["pids_limit"] = limits.pids + 2  # docker-init and the keep-alive
        if limits.memory_bytes is not None:
            options["mem_limit"] = options["memswap_limit"] = limits.memory_bytes
        if limits.file_size_bytes is not None:
            size = limits.file_size_bytes
            options["ulimits"] = [Ulimit(name="fsize", soft=size, hard=size)]
        container = self._create(options)
        targets = [mount.path for mount in self.workspace.mounts()]
        masks = closed_ancestors(targets, image_mode=self._image_mode, uid=self._uid[0],
                                 fresh=(_TMP,))
        if masks:  # give the image's closed directories an open, empty stand-in
            self._remove()
            stand_ins = make_stand_ins(masks, targets, under=self.state.dir / "stand-ins")
            options["mounts"] = [
                *(Mount(target=str(mask), source=str(source), type="bind", read_only=True)
                  for mask, source in stand_ins),
                *options["mounts"]]
            container = self._create(options)
        try:
            container.start()
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "start") from exc
        try:
            attrs = self._client.api.inspect_container(self.id)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "inspect") from exc
        self._cgroup = CgroupUsage.of_pid(int(attrs.get("State", {}).get("Pid") or 0))
        if self.workspace.overlay is not None and self._image_mode(
                str(self.workspace.root / ".git")) is None:
            raise OverlayUnavailable(
                f"the docker engine does not see the overlay mounted at {self.workspace.root} "
                "(it runs in another mount namespace)", operation="start",
                context={"container": self.id})
        self._cpu_ns = self._stats()[1] or 0

    def _create(self, options: dict[str, Any]) -> Any:
        try:
            return self._client.containers.create(self.config.image, **options)
        except docker.errors.ImageNotFound as exc:
            raise BackendUnavailable(f"the sandbox image {self.config.image} is not present",
                                     code="image_missing", operation="start",
                                     hint=_BUILD_HINT) from exc
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "create") from exc

    def _image_mode(self, path: str) -> int | None:
        """The Go file mode of ``path`` in the created container, ``None`` if it is absent."""
        api = self._client.api
        url = f"{api.base_url}/v{api.api_version}/containers/{self.id}/archive"
        try:
            response = api.head(url, params={"path": path}, timeout=self.config.api_timeout_seconds)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "stat") from exc
        with response:
            if response.status_code == 404:
                return None
            header = response.headers.get("X-Docker-Container-Path-Stat")
            if response.status_code != 200 or not header:
                raise SandboxError(f"docker cannot stat {path} in the image "
                                   f"(HTTP {response.status_code})", code="docker_failed",
                                   operation="stat", context={"container": self.id})
            return int(decode_json_header(header)["mode"])

    def _stats(self) -> tuple[int | None, int | None]:
        """(memory high-water bytes, CPU nanoseconds) of the container, when readable."""
        return self._cgroup.read() if self._cgroup else (None, None)

    def _run(self, spec: ExecSpec) -> ExecResult:
        try:
            return self._exec(spec)
        finally:
            # Its own exec: the command may have killed its wrapper (``kill -9 $PPID``) and
            # with it the wrapper's kill; nothing of the command outlives this call.
            self._kill_all()
            self._cpu_ns = self._stats()[1] or self._cpu_ns  # the kill's own CPU is no one's

    def _exec(self, spec: ExecSpec) -> ExecResult:
        api = self._client.api
        out, err = OutputCapture(spec.output_cap), OutputCapture(spec.output_cap)
        start = time.monotonic()
        try:
            exec_id = api.exec_create(self.id, [*_RUN_WRAPPER, *spec.argv], stdout=True,
                                      stderr=True, user=self._user, workdir=str(spec.cwd),
                                      environment=spec.env)["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=True)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "exec") from exc
        done = threading.Event()
        failure: list[BaseException] = []
        self._stop_requested = False

        def pump() -> None:
            try:
                for chunk_out, chunk_err in stream:
                    if chunk_out:
                        out.feed(chunk_out)
                    if chunk_err:
                        err.feed(chunk_err)
            except BaseException as exc:  # handed to the calling thread below
                failure.append(exc)
            finally:
                done.set()

        reader = threading.Thread(target=pump, name=f"{self.id}-exec", daemon=True)
        sock = _stream_socket(stream)
        reader.start()
        try:
            timed_out = not done.wait(spec.timeout)
            if timed_out:
                self._stop()
                done.wait(DRAIN_GRACE_SECONDS + 5)
            duration = time.monotonic() - start
        finally:
            _close_stream(stream, sock)
            reader.join(DRAIN_GRACE_SECONDS)
        if failure:
            raise self._translate(failure[0], "exec_stream") from failure[0]
        try:
            info = api.exec_inspect(exec_id)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "exec_inspect") from exc
        code = info.get("ExitCode")
        stopped = not timed_out and self._stop_requested
        peak, cpu = self._stats()
        cpu_seconds = None if cpu is None else max(0, cpu - self._cpu_ns) / 1e9
        self._cpu_ns = cpu or self._cpu_ns
        return ExecResult(
            argv=spec.argv, exit_code=None if (timed_out or stopped) else code,
            stdout=out.data, stderr=err.data, stdout_bytes=out.total, stderr_bytes=err.total,
            timed_out=timed_out, stopped=stopped, duration_seconds=duration,
            peak_rss_bytes=peak, cpu_seconds=cpu_seconds,
        )

    def _open_stream(self, spec: ExecSpec) -> SocketStream:
        """An exec with stdin attached, as the command uid (so every reap of that uid after a
        command, a timeout or a freeze ends it too); killing it reaps the uid's processes."""
        api = self._client.api
        try:
            exec_id = api.exec_create(self.id, ["/bin/sh", "-c", 'exec "$@"', "sh", *spec.argv],
                                      stdin=True, stdout=True, stderr=True, user=self._user,
                                      workdir=str(spec.cwd), environment=spec.env)["Id"]
            sock = api.exec_start(exec_id, socket=True)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "exec") from exc

        def running() -> bool:
            try:
                return bool(api.exec_inspect(exec_id).get("Running"))
            except _ENGINE_ERRORS:
                return False

        return SocketStream(sock, kill=self._kill_all, alive=running)

    _stop_requested = False

    def _stop(self) -> None:
        self._stop_requested = True
        self._kill_all()

    def _kill_all(self) -> None:
        """Run :data:`_KILL_ALL` in its own exec and wait for it (one at a time)."""
        with self._kill_lock:
            client = self._client
            if client is None:
                return
            api = client.api
            try:
                exec_id = api.exec_create(self.id, _KILL_ALL, user=self._user)["Id"]
                stream = api.exec_start(exec_id, stream=True)
                sock = _stream_socket(stream)
                try:
                    for _ in stream:
                        pass
                finally:
                    _close_stream(stream, sock)
                code = api.exec_inspect(exec_id).get("ExitCode")
            except docker.errors.NotFound:
                return  # the container is gone, and every process with it
            except _ENGINE_ERRORS:
                code = None
            if code != 0:
                # The child resisted (a process of its uid can signal our reaper): stop
                # the whole container from the host, which no process inside can refuse.
                self._kill_container(api)

    def _kill_container(self, api: Any) -> None:
        """SIGKILL the container's init from the engine and wait until it is down; the
        sandbox runs no command any more (its workspace and diff stay usable)."""
        try:
            api.kill(self.id, signal="SIGKILL")
            api.wait(self.id, timeout=30)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # not running any more: already stopped
                return
            raise self._translate(exc, "stop") from exc
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "stop") from exc

    def _remove(self) -> None:
        try:
            self._client.api.remove_container(self.id, force=True)
        except docker.errors.NotFound:
            pass
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "remove") from exc

    def _close(self) -> None:
        if self._client is None:
            return
        try:
            self._remove()
        finally:
            self._client.close()
            self._client = None
