"""The ``docker`` backend: one container per child, commands through ``docker exec``.

The only module that imports ``docker``; every docker or connection error is
translated here. The container (``corral-sandbox:latest`` by default, built by
``corral image build``, never pulled) runs ``sleep infinity``
under ``--init`` for the child's life, with ``--network none``, ``--cap-drop
ALL``, ``no-new-privileges``, ``--pids-limit``, ``--memory`` (= swap),
``RLIMIT_FSIZE``, a read-only root with size-capped tmpfs ``/tmp``,
``/tmp/home`` and ``/dev/shm``, no socket mounts, and the workspace mounts of
:meth:`sandbox.workspaces.model.Workspace.mounts` at the same paths.

Users: commands run as a non-root uid (the workspace owner, or 1000 with a
corral-made worktree chowned to it); the keep-alive process runs as another
uid (65534). Commands go through a warm sandbox: one exec per container (and
again after it is lost) runs the supervisor of :mod:`sandbox.backends.warm_init`
as the command's uid, attached to its stdin and stdout, and every command is a
process it starts (:mod:`sandbox.backends.warm`), so a command costs a fork and
an exec inside the container, not an API exec. When a command ends (exit,
deadline) the supervisor kills every process of the uid but itself (``kill -9
-1``: ``setsid``, double fork, ``nohup``) and waits until none is left before it
reports; the keep-alive survives because that uid may not signal it. Peak RSS
and CPU seconds come from ``wait4`` inside the container. The supervisor runs as
the command's uid, so a command can kill it (``kill -9 $PPID``): then, and when
it is silent past the deadline plus a grace or cannot kill everything, a
separate exec runs ``kill -9 -1`` as the uid and waits until no process of it is
left (the container is killed from the engine if that fails) before ``exec``
returns, and the next command starts a new supervisor. :meth:`stop_processes`
on a running command runs the same kill exec. (Docker bind mounts cannot be
made ``nosuid``; ``no-new-privileges`` keeps a setuid file the child makes inert
inside the container, and :mod:`sandbox.workspaces.setid` clears it on the
host.)

Paths: the workspace is mounted at its host path; an image directory above a
mount that the command's uid cannot traverse (the image's ``/root`` when corral
runs as root) gets a read-only stand-in (:mod:`sandbox.backends.standins`), found from
the modes docker reports (archive ``HEAD``) on the created container, which is
then created again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import docker
from docker.types import Mount, Ulimit
from docker.utils import decode_json_header

from policies.contract import SandboxMode
from sandbox.backends.leftovers import cgroup_dir_of, describe, uid_members
from sandbox.backends.limits import MemoryCgroup, memory_cgroup_of
from sandbox.backends.slirp import SLIRP_DNS, Slirp
from sandbox.backends.standins import ImageModes, closed_ancestors, make_stand_ins
from sandbox.backends.streams import SocketStream
from sandbox.backends.warm import DockerChannel, Warm, supervisor_argv
from sandbox.base import SANDBOX_PATH, BaseSandbox, ExecSpec
from sandbox.config import DEFAULT_DOCKER_IMAGE, BackendName, DockerConfig
from sandbox.denials import denial_covers, image_denials
from sandbox.egress.netns import listen_in_namespace
from sandbox.egress.proxy import Listening
from sandbox.errors import (
    BackendUnavailable,
    OverlayUnavailable,
    SandboxConfigError,
    SandboxError,
)
from sandbox.results import ExecResult
from sandbox.state import SandboxMeta, SandboxState
from sandbox.workspaces.model import Workspace

__all__ = ["LABEL", "DockerSandbox", "build_image", "image_id", "list_corral_containers",
           "plan_users", "probe_docker", "pull_image", "remove_container", "remove_image"]

LABEL = "org.corral.sandbox"
STATE_LABEL = "org.corral.state-root"
# The fallback reaper, where the host cannot read the container's cgroup: kills every process
# of the command's uid (never PID 1 or itself), then waits until none of them has a live
# thread (a zombie leader whose other threads run is alive; plain zombies are fine:
# docker-init reaps them); exit 1 if some process survives 200 rounds (stuck in the kernel).
_KILL_ALL = ["/bin/sh", "-c", """me=$(id -u)
kill -9 -1 2>/dev/null
n=0
while :; do
  left=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    if [ "$p" = "$$" ] || [ "$p" = 1 ]; then continue; fi
    mine=0
    while read -r key real effective rest; do
      if [ "$key" = Uid: ]; then
        { [ "$real" = "$me" ] || [ "$effective" = "$me" ]; } && mine=1
        break
      fi
    done < "$d/status" 2>/dev/null
    [ $mine = 1 ] || continue
    for t in "$d"/task/[0-9]*; do
      read -r line < "$t/stat" 2>/dev/null || continue
      state=${line##*) }
      case $state in Z*|X*) ;; *) left=1 ;; esac
    done
  done
  [ $left = 0 ] && exit 0
  n=$((n + 1))
  [ $n -ge 200 ] && exit 1
  kill -9 -1 2>/dev/null
  sleep 0.01
done"""]
_TMP, _HOME = "/tmp", "/tmp/home"  # noqa: S108 - the container's own tmpfs mounts
_KEEPALIVE_UID = 65534
_HOST_CERTS = "/etc/ssl/certs"
_DEFAULT_UID = 1000
_ENGINE_ERRORS = (docker.errors.DockerException, OSError)


def _build_hint(image: str) -> str:
    """How to make a missing image: the packaged builder (:mod:`sandbox.image`)."""
    tag = "" if image == DEFAULT_DOCKER_IMAGE else f" --tag {image}"
    return f"build it with `corral image build{tag}` (corral never pulls images)"


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


@contextmanager
def _engine(config: DockerConfig, failure: str, *, operation: str, code: str = "docker_failed",
            error: type[SandboxError] = SandboxError,
            context: dict[str, str] | None = None) -> Iterator[Any]:
    """A client for one call to the engine, closed after it. An engine error the call does
    not handle itself is raised as ``error`` saying ``"{failure}: {the engine's error}"``."""
    client = _client(config)
    try:
        yield client
    except _ENGINE_ERRORS as exc:
        raise error(f"{failure}: {exc}", code=code, operation=operation,
                    context=context) from exc
    finally:
        client.close()


def probe_docker(config: DockerConfig) -> None:
    """Raise :class:`BackendUnavailable` unless the engine answers and the image exists."""
    with _engine(config, "the docker engine does not answer", code="docker_unavailable",
                 operation="probe", error=BackendUnavailable) as client:
        try:
            client.ping()
            client.images.get(config.image)
        except docker.errors.ImageNotFound as exc:
            raise BackendUnavailable(
                f"the sandbox image {config.image} is not present", code="image_missing",
                operation="probe", hint=_build_hint(config.image),
            ) from exc


def list_corral_containers(config: DockerConfig, *, state_root: Path) -> dict[str, str]:
    """Container name -> sandbox id, for every container corral made for ``state_root``."""
    with _engine(config, "cannot list containers", code="docker_unavailable", operation="gc",
                 error=BackendUnavailable) as client:
        found = client.containers.list(
            all=True, filters={"label": [LABEL, f"{STATE_LABEL}={state_root}"]})
        return {c.name: c.labels.get(LABEL, "") for c in found}


def remove_container(config: DockerConfig, name: str) -> bool:
    """Force-remove a container; ``False`` if it did not exist."""
    with _engine(config, f"cannot remove container {name}",
                 operation="remove_container") as client:
        try:
            client.api.remove_container(name, force=True)
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc):
                # A removal a killed corral started goes on in the engine: wait for it to end.
                return _wait_removed(client, name, config.api_timeout_seconds)
            raise


def _wait_removed(client: Any, name: str, timeout: float) -> bool:
    """Wait for the engine's own removal of ``name`` (an engine error is the caller's,
    :func:`remove_container`'s, to translate)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(name)
        except docker.errors.NotFound:
            return True
        time.sleep(0.05)  # the engine's own removal: no event to wait on here
    raise SandboxError(f"the container {name} is still being removed after {timeout:.0f}s",
                       code="docker_failed", operation="remove_container",
                       hint="run `corral gc` again")


#: How long the processes a host-side kill hit may take to leave the container's cgroup.
_HOST_KILL_SETTLE_SECONDS = 5.0
#: How long a thaw keeps asking the engine to unpause a container it still reports paused.
_THAW_SECONDS = 5.0


def image_id(config: DockerConfig, name: str) -> str | None:
    """The id of the local image ``name``, ``None`` when it is not here."""
    with _engine(config, f"docker cannot inspect image {name}", operation="image") as client:
        try:
            return str(client.images.get(name).id)
        except docker.errors.ImageNotFound:
            return None


def build_image(config: DockerConfig, *, context: Path, dockerfile: Path, tag: str,
                build_args: dict[str, str], network: bool,
                on_output: Callable[[str], None] | None = None) -> str:
    """``docker build`` ``dockerfile`` in ``context`` as ``tag`` (never pulling a base image
    unless ``network``; with no network at all unless ``network``); the image id."""
    where = {"dockerfile": str(dockerfile)}
    with _engine(config, f"docker build of {dockerfile} failed", code="docker_build_failed",
                 operation="build_image", context=where) as client:
        stream = client.api.build(
            path=str(context), dockerfile=str(dockerfile), tag=tag, buildargs=build_args,
            network_mode="host" if network else "none", pull=network, rm=True,
            forcerm=True, decode=True, labels={LABEL: "environment"})
        for chunk in stream:
            if "error" in chunk:
                raise SandboxError(f"docker build of {dockerfile} failed: {chunk['error']}",
                                   code="docker_build_failed", operation="build_image",
                                   context=where)
            text = chunk.get("stream") or chunk.get("status")
            if text and on_output is not None:
                on_output(str(text))
        return str(client.images.get(tag).id)


def pull_image(config: DockerConfig, name: str) -> str:
    """Pull ``name`` (only where you granted the environment network); its id."""
    with _engine(config, f"docker cannot pull {name}", operation="pull_image") as client:
        return str(client.images.pull(name).id)


def remove_image(config: DockerConfig, name: str) -> bool:
    """Remove a local image; ``False`` when it was not there."""
    with _engine(config, f"docker cannot remove image {name}",
                 operation="remove_image") as client:
        try:
            client.images.remove(name, force=True)
            return True
        except docker.errors.ImageNotFound:
            return False


@dataclass(eq=False)
class _Live:
    exec_id: str
    warm: Warm
    #: The supervisor's host pid (``None``: not known, so not excluded from the checks).
    supervisor: int | None = None


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


def _kill_member(pid: int, cgroup_dir: Path) -> None:
    """SIGKILL ``pid`` through a pidfd, only if it is still a member of ``cgroup_dir`` (a pid
    that ended and was reused meanwhile is never signalled)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        members = (cgroup_dir / "cgroup.procs").read_text().split()
        if str(pid) in members:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def _ids(text: str) -> tuple[int, int]:
    uid, _, gid = text.partition(":")
    return int(uid), int(gid or uid)


def plan_users(
    config: DockerConfig, workspace_owner: tuple[int, int], mode: SandboxMode, *,
    scratch: bool = False,
) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """(uid:gid commands run as, uid:gid to chown a new worktree to, if any). A read-only
    checkout with a throwaway layer (``scratch``) runs as its owner, as workspace-write
    does: the commands write the layer's copies of the owner's files."""
    root = os.geteuid() == 0
    if config.user is not None:
        user = _ids(config.user)
    elif mode is SandboxMode.WORKTREE:
        user = (_DEFAULT_UID, _DEFAULT_UID) if root else (os.getuid(), os.getgid())
    elif workspace_owner[0] != 0:
        user = workspace_owner
    elif mode is SandboxMode.READ_ONLY and not scratch:
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
        self._kill_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._running = self._stop_requested = False
        self._warm: _Live | None = None
        #: The container's init (host pid) and cgroup: the kernel's grouping of everything
        #: in the container, read from the host after every command.
        self._init_pid: int | None = None
        self._cgroup_dir: Path | None = None
        #: The container's memory cgroup and its OOM kills so far (``None``: the host cannot
        #: read it; the container's sticky ``State.OOMKilled`` is asked instead).
        self._memory: MemoryCgroup | None = None
        self._oom_kills = 0
        #: corral's end of the keep-alive's stdin: the container lives while it is open.
        self._lifeline: Any = None
        #: A setup's own network (slirp4netns on the container's namespace), if granted.
        self._network: Slirp | None = None
        #: The egress proxy's port in the container's namespace (``--net allow``).
        self._egress_port: Listening | None = None

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
            # The keep-alive waits on its stdin, which corral holds open (StdinOnce): when
            # corral's end closes (it exited, or was SIGKILLed), the container ends with it
            # and the engine removes it; nothing keeps running until `corral gc`.
            "command": ["/bin/sh", "-c", "read -r _; exit 0"], "stdin_open": True,
            "auto_remove": True,
            "name": self.id, "init": True,
            "labels": {LABEL: self.id, STATE_LABEL: str(self.state.root)},
            "network_mode": self._network_mode(),
            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
            "read_only": True, "user": f"{keepalive}:{keepalive}", "hostname": "sandbox",
            "tmpfs": {_TMP: tmp, _HOME: f"{tmp},uid={self._uid[0]},gid={self._uid[1]},mode=700"},
            "shm_size": limits.tmp_size_bytes, "environment": {},
            "mounts": [Mount(target=str(m.path), source=str(m.origin), type="bind",
                             read_only=not m.writable) for m in self.workspace.mounts()],
        }
        if limits.pids is not None:
            options["pids_limit"] = limits.pids + 2  # docker-init and the keep-alive
        if limits.memory_bytes is not None:
            options["mem_limit"] = options["memswap_limit"] = limits.memory_bytes
        if limits.file_size_bytes is not None:
            size = limits.file_size_bytes
            options["ulimits"] = [Ulimit(name="fsize", soft=size, hard=size)]
        if self._slirp is not None:  # slirp's DNS forwarder, not the engine's resolv.conf
            resolv = self.state.dir / "resolv.conf"
            resolv.write_text(f"nameserver {SLIRP_DNS}\n", encoding="ascii")
            options["mounts"].append(Mount(target="/etc/resolv.conf", source=str(resolv),
                                           type="bind", read_only=True))
        if self.config.network and Path(_HOST_CERTS).is_dir():
            # An environment's setup reaches the network as this machine does: with its
            # trust store too (a proxy's own CA), read-only.
            options["mounts"].append(Mount(target=_HOST_CERTS, source=_HOST_CERTS, type="bind",
                                           read_only=True))
        targets = [mount.path for mount in self.workspace.mounts()]
        modes = ImageModes.of(self.state.root, self._image_id())
        try:  # what an earlier sandbox of this image learnt: one create, not two
            masks: list[PurePosixPath] | None = closed_ancestors(
                targets, image_mode=modes.known, uid=self._uid[0], fresh=(_TMP,))
            self.denials = image_denials(self._denied, modes.known_stat)
        except KeyError:
            masks = None
        container = None
        if masks is None:
            container = self._create(options)
            masks = closed_ancestors(targets, image_mode=modes.learning(self._image_mode),
                                     uid=self._uid[0], fresh=(_TMP,))
            self.denials = image_denials(self._denied, modes.learning_stat(self._image_stat))
            modes.save()
            if masks or any(denial.targets for denial in self.denials):
                self._remove()
                container = None
        # A program the contract denies: its files covered by a stand-in (sandbox.denials).
        options["mounts"] += [Mount(target=target, source=str(cover), type="bind",
                                    read_only=True)
                              for target, cover in denial_covers(self.denials,
                                                             self.state.dir / "denied")]
        if masks:  # give the image's closed directories an open, empty stand-in
            stand_ins = make_stand_ins(masks, targets, under=self.state.dir / "stand-ins")
            options["mounts"] = [
                *(Mount(target=str(mask), source=str(source), type="bind", read_only=True)
                  for mask, source in stand_ins),
                *options["mounts"]]
        if container is None:
            container = self._create(options)
        try:
            self._lifeline = self._client.api.attach_socket(
                self.id, params={"stdin": 1, "stream": 1})
            container.start()
            state = self._client.api.inspect_container(self.id).get("State") or {}
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "start") from exc
        pid = state.get("Pid")
        if isinstance(pid, int) and pid > 0:
            self._init_pid = pid
            self._cgroup_dir = cgroup_dir_of(pid)
            self._memory = memory_cgroup_of(pid)
            self._oom_kills = self._memory.oom_kills() if self._memory is not None else 0
        if self._slirp is not None:
            self._network = Slirp.start(self._slirp, self._init_pid)
        if self.egress is not None:  # the proxy's port on the container's own loopback
            self._egress_port = self.egress.serve(listen_in_namespace(self._init_pid))
        if self.workspace.overlay is not None and self._image_mode(
                str(self.workspace.root / ".git")) is None:
            raise OverlayUnavailable(
                f"the docker engine does not see the overlay mounted at {self.workspace.root} "
                "(it runs in another mount namespace)", operation="start",
                context={"container": self.id})

    @property
    def _slirp(self) -> str | None:
        """slirp4netns, when a setup granted network gets it: corral is root (it joins the
        container's network namespace, which the engine's root owns) and it is installed."""
        if not self.config.network or os.geteuid() != 0:
            return None
        return shutil.which("slirp4netns")

    def _network_mode(self) -> str:
        """``none`` for every child; a setup granted network gets a namespace of its own
        with no route to this machine's loopback: ``none`` joined by slirp4netns as root,
        else the engine's ``bridge`` (its own namespace too, NATed where the engine
        manages the firewall), never the host's network."""
        if not self.config.network or self._slirp is not None:
            return "none"
        return "bridge"

    def _image_id(self) -> str:
        """The id of the sandbox image (:class:`BackendUnavailable` when it is not here)."""
        try:
            return str(self._client.api.inspect_image(self.config.image)["Id"])
        except docker.errors.ImageNotFound as exc:
            raise BackendUnavailable(f"the sandbox image {self.config.image} is not present",
                                     code="image_missing", operation="start",
                                     hint=_build_hint(self.config.image)) from exc
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "inspect") from exc

    def _create(self, options: dict[str, Any]) -> Any:
        try:
            return self._client.containers.create(self.config.image, **options)
        except docker.errors.ImageNotFound as exc:
            raise BackendUnavailable(f"the sandbox image {self.config.image} is not present",
                                     code="image_missing", operation="start",
                                     hint=_build_hint(self.config.image)) from exc
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "create") from exc

    def _image_mode(self, path: str) -> int | None:
        """The Go file mode of ``path`` in the created container, ``None`` if it is absent."""
        found = self._image_stat(path)
        return None if found is None else found[0]

    def _image_stat(self, path: str) -> tuple[int, str] | None:
        """The Go file mode and link target of ``path`` in the created container (its last
        component not followed), ``None`` if it is absent."""
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
            found = decode_json_header(header)
            return int(found["mode"]), str(found.get("linkTarget") or "")

    @property
    def supervisor_pid(self) -> int | None:
        """The host pid of the warm sandbox's supervisor exec, if one runs."""
        live = self._warm
        if live is None or self._client is None:
            return None
        try:
            info = self._client.api.exec_inspect(live.exec_id)
        except _ENGINE_ERRORS:
            return None
        return int(info["Pid"]) if info.get("Running") and info.get("Pid") else None

    def _warm_up(self) -> Warm:
        """The live supervisor, started now (one exec) if there is none or it died idle."""
        current = self._warm
        if current is not None and current.warm.usable and current.warm.idle_alive():
            return current.warm
        if current is not None:
            self._discard(current)
        api = self._client.api
        try:
            exec_id = self._exec_create(
                api, supervisor_argv("python3", "uid"), stdin=True, stdout=True,
                stderr=True, user=self._user, workdir="/",
                environment={"PATH": SANDBOX_PATH, "HOME": _HOME, "LANG": "C.UTF-8"})
            attached = api.exec_start(exec_id, socket=True)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "exec") from exc
        channel = DockerChannel(attached)
        try:
            warm = Warm.start(channel)
        except SandboxError:
            channel.close()
            raise
        try:
            pid = api.exec_inspect(exec_id).get("Pid")
        except _ENGINE_ERRORS:
            pid = None
        self._warm = _Live(exec_id, warm, pid if isinstance(pid, int) and pid > 0 else None)
        return warm

    def _discard(self, live: _Live) -> None:
        if self._warm is live:
            self._warm = None
        live.warm.close()

    def _run(self, spec: ExecSpec) -> ExecResult:
        warm = self._warm_up()
        live = self._warm
        with self._run_lock:
            self._stop_requested = False
            self._running = True
        try:
            outcome = warm.run(spec)
        except BaseException:
            # Ctrl-C in this wait: stop the command and the mid-command supervisor (as bwrap)
            if live is not None:
                self._discard(live)
            self._kill_all()
            raise
        finally:
            with self._run_lock:
                self._running = False
                stopped = self._stop_requested
        lost_exit = None
        killed = list(outcome.survivors)
        if not outcome.needs_stop and live is not None:
            left = self._leftovers(live)
            if left:  # the supervisor said it killed everything; the kernel says otherwise
                killed += describe(left)
                outcome.distrusted = True
        if outcome.needs_stop and live is not None:
            # The supervisor runs as the command's uid, so a command can kill it (or it was
            # silent, could not kill everything, or the container's cgroup contradicts it):
            # every process of the uid is killed and gone (the container goes if that
            # fails) before this call returns; the next command starts a new supervisor.
            self._discard(live)
            self._kill_all()
            lost_exit = self._exit_code(live.exec_id)
        result = outcome.result(spec.argv, stopped=stopped, lost_exit=lost_exit,
                                killed=tuple(killed))
        return result.model_copy(update={"oom_killed": True}) if self._oom_killed(
            result) else result

    def _oom_killed(self, result: ExecResult) -> bool:
        """Whether the OOM killer killed a process of the command just run: the container's
        memory cgroup's counter grew (commands run one at a time), or, where the host cannot
        read it, the engine's ``State.OOMKilled`` turned true with a SIGKILLed command."""
        if self._memory is not None:
            kills = self._memory.oom_kills()
            grew, self._oom_kills = kills > self._oom_kills, kills
            return grew
        if result.exit_code != 128 + signal.SIGKILL or self._oom_kills:
            return False
        try:
            state = self._client.api.inspect_container(self.id).get("State") or {}
        except _ENGINE_ERRORS:
            return False
        self._oom_kills = 1 if state.get("OOMKilled") is True else 0
        return bool(self._oom_kills)

    def _leftovers(self, live: _Live | None) -> list[int]:
        """Host pids of the container's cgroup running as the command's uid, but the
        supervisor (the container's init is never one); ``[]`` where it cannot be read."""
        if self._cgroup_dir is None:
            return []
        exclude = {p for p in (self._init_pid, live.supervisor if live else None) if p}
        return uid_members(self._cgroup_dir, self._uid[0], exclude=exclude) or []

    def _verify_empty(self) -> None:
        """Before the host reads the workspace: nothing of the uid runs but the idle
        supervisor, as the container's cgroup shows; else every process of it is killed."""
        live = self._warm
        if self._leftovers(live):
            if live is not None:
                self._discard(live)
            self._kill_all()

    def _exit_code(self, exec_id: str) -> int | None:
        try:
            code = self._client.api.exec_inspect(exec_id).get("ExitCode")
        except _ENGINE_ERRORS:
            return None
        return code if isinstance(code, int) else None

    def _open_stream(self, spec: ExecSpec) -> SocketStream:
        """An exec with stdin attached, as the command uid (so every reap of that uid after a
        command, a timeout or a freeze ends it too); killing it reaps the uid's processes."""
        api = self._client.api
        try:
            exec_id = self._exec_create(api, ["/bin/sh", "-c", 'exec "$@"', "sh", *spec.argv],
                                        stdin=True, stdout=True, stderr=True, user=self._user,
                                        workdir=str(spec.cwd), environment=spec.env)
            sock = api.exec_start(exec_id, socket=True)
        except _ENGINE_ERRORS as exc:
            raise self._translate(exc, "exec") from exc

        def running() -> bool:
            try:
                return bool(api.exec_inspect(exec_id).get("Running"))
            except _ENGINE_ERRORS:
                return False

        return SocketStream(sock, kill=self._kill_all, alive=running)

    def _stop(self) -> None:
        # An idle supervisor has already killed everything its last command left; otherwise
        # the reaper exec kills every process of the uid (the supervisor among them) at once.
        with self._run_lock:
            if not self._running and self._warm is not None and self._warm.warm.usable:
                return
            self._stop_requested = True
        self._kill_all()

    def _kill_all(self) -> None:
        """Kill every process of the command's uid and wait until it is gone (one call at a
        time): from the host through the container's cgroup where it can be read, else by
        :data:`_KILL_ALL` in its own exec; the container is killed if either fails."""
        with self._kill_lock:
            client = self._client
            if client is None:
                return
            api = client.api
            if self._cgroup_dir is not None:
                if not self._host_kill(api):
                    self._kill_container(api)
                return
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

    def _host_kill(self, api: Any) -> bool:
        """Freeze the container (the engine's pause), SIGKILL every process of the uid in
        its cgroup, thaw it, and wait until none is left; whether it emptied."""
        directory = self._cgroup_dir
        if directory is None:
            return False
        members = uid_members(directory, self._uid[0], exclude={self._init_pid or 0})
        if not members:
            return True  # nothing of the uid (or the container is gone)
        try:
            try:
                api.pause(self.id)
            except docker.errors.NotFound:
                return True
            except _ENGINE_ERRORS:
                pass  # paused or not (an answer lost to a timeout): kill all the same, thaw below
            for pid in uid_members(directory, self._uid[0], exclude={self._init_pid or 0}) or []:
                _kill_member(pid, directory)
        finally:
            self._thaw(api)
        deadline = time.monotonic() + _HOST_KILL_SETTLE_SECONDS
        while time.monotonic() < deadline:
            if not uid_members(directory, self._uid[0], exclude={self._init_pid or 0}):
                return True
            time.sleep(0.005)  # killed processes leave the cgroup as they are reaped
        return False

    def _thaw(self, api: Any) -> None:
        """Unpause the container if it is paused; a container that is not, or is gone, is
        fine (a pause must never outlive the kill it was for: the next exec would fail).
        Under load the engine may finish a pause whose answer was lost after we looked:
        it is asked again until it says the container runs (a few seconds at most)."""
        deadline = time.monotonic() + _THAW_SECONDS
        while True:
            try:
                if not (api.inspect_container(self.id).get("State") or {}).get("Paused"):
                    return
                api.unpause(self.id)
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if exc.status_code != 409 or time.monotonic() > deadline:  # 409: not paused
                    raise self._translate(exc, "unpause") from exc
            except _ENGINE_ERRORS as exc:
                raise self._translate(exc, "unpause") from exc
            if time.monotonic() > deadline:
                raise SandboxError(f"container {self.id[:12]} stays paused",
                                   code="docker_error", operation="unpause",
                                   hint="`docker unpause` it, or `corral gc` removes it")
            time.sleep(0.02)

    def _exec_create(self, api: Any, argv: list[str], **options: Any) -> str:
        """``exec_create``; a container the engine still reports paused (a pause that
        landed after its thaw) is thawed and the exec made again, once."""
        try:
            return str(api.exec_create(self.id, argv, **options)["Id"])
        except docker.errors.APIError as exc:
            if exc.status_code != 409 or "paused" not in str(exc.explanation or exc):
                raise
        self._thaw(api)
        return str(api.exec_create(self.id, argv, **options)["Id"])

    def _kill_container(self, api: Any) -> None:
        """SIGKILL the container's init from the engine and wait until it is down; the
        sandbox runs no command any more (its workspace and diff stay usable)."""
        self._thaw(api)  # a paused container refuses the kill (409)
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
        if self._warm is not None:
            self._discard(self._warm)
        if self._client is None:
            return
        try:
            self._remove()
        finally:
            network, self._network = self._network, None
            if network is not None:
                network.stop()
            port, self._egress_port = self._egress_port, None
            if port is not None:
                port.close()
            lifeline, self._lifeline = self._lifeline, None
            for closable in (getattr(lifeline, "_response", None), lifeline,
                             getattr(lifeline, "_sock", None)):
                if closable is not None:
                    with contextlib.suppress(OSError, ValueError):
                        closable.close()
            self._client.close()
            self._client = None
