"""Environments: a project's dependencies under every child, built once per key.

An :class:`policies.environment.EnvironmentSpec` says how a project's
environment is made; :func:`prepare_environment` makes it, once per **key**,
and hands back an :class:`EnvironmentRef` that :func:`sandbox.factory.open_sandbox`
puts under a child (and under a check's or a reviewer's replay).

The key is a digest of the description (setup commands, variables, image,
read-only paths), of the content of each of its ``inputs`` (lock files), of the
backend, the uid setup runs as, the docker image's id, and of what the layer's
absolute paths can name (:func:`_key`): the workspace's path inside the sandbox
(``/workspaces/<name>``), not the checkout's path, so a fresh clone of the same
project (same lock files, same directory name) anywhere reuses the layer. The
same key is never built twice: a fanout of N pays setup at most once, and the
next run with the same lock files pays nothing. Its record (``env.json``) names
the checkout that used it last and every one that used it.

Setup runs in the same backend and isolation as the children (a fresh
worktree-mode sandbox over a snapshot of your current state, the same limits,
no capabilities, read-only system), with two differences you grant: network,
only where ``setup_network`` is true (your config or ``--setup-network``, never
a repository), and ``secrets``, variables of yours passed to setup and to
nothing else. Each command runs with ``sh -c`` at ``/workspaces/<name>``, where
the workspace is mounted too (as in a devcontainer), so the absolute paths
setup writes (a venv's scripts name their interpreter by path) hold in every
child, whose workspace is mounted there as well.

What setup wrote in the workspace is kept as the environment's **layer**
(``<state>/environments/<key>/layer``, the setup overlay's upper layer, or its
worktree without ``.git`` where overlays cannot be used):

- under an overlay child (corral as root), it is a read-only layer *under* the
  snapshot checkout: it adds what the snapshot lacks (``.venv``,
  ``node_modules``) and never changes a file of the snapshot; a child may write
  on top (copy-up), and its diff is still taken against the snapshot alone;
- under a worktree child (a normal user), each of its top paths that the
  worktree lacks is bound read-only at its place (the child cannot change
  them);
- read-only and workspace-write children work on your checkout, which has its
  own environment: they get the variables, paths and image, not the layer.

What setup writes outside the workspace is not kept: the children's ``HOME``
and ``/tmp`` are fresh tmpfs mounts and their root is read-only, so setup's are
too. Install into the workspace (a venv, ``node_modules``) or into the image
(a Dockerfile).

``carry`` paths (ignored paths of your checkout, a ready ``.venv``) are bound
read-only into worktree-mode children at the same place and at their original
absolute path (so a venv's absolute paths hold); a child can never write
through to yours. What a carried venv, conda env or ``node_modules`` links to
outside itself (a pyenv or uv interpreter) is bound by :mod:`sandbox.interpreters`.

A failed setup is :class:`sandbox.errors.EnvironmentSetupFailed` (exit code 5),
its log kept (``environments/<key>/setup.log``) and listed by
:func:`list_environments` with its cause (:mod:`sandbox.setupfailure`: no network,
a command not found, out of memory, ...); it is never cached, never blamed on a child.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from policies.contract import SandboxMode
from policies.environment import EnvironmentSpec
from sandbox.config import BackendConfig, BubblewrapConfig, DockerConfig, FakeConfig, HostConfig
from sandbox.errors import EnvironmentSetupFailed, SandboxConfigError, SandboxError
from sandbox.setupfailure import TAIL_BYTES, SetupFailure, classify, timed_out
from sandbox.state import atomic_write, default_state_root, private_dir
from sandbox.workspaces.model import Mount

if TYPE_CHECKING:
    from sandbox.egress import EgressProxy
    from sandbox.protocol import Sandbox

__all__ = [
    "ALIAS_ROOT",
    "ENVIRONMENTS",
    "EnvironmentInfo",
    "EnvironmentRef",
    "alias_for",
    "environment_mounts",
    "list_environments",
    "prepare_environment",
    "prune_environments",
    "require_layer",
    "verify_layer",
]

#: The directory of the state root that holds environments.
ENVIRONMENTS = "environments"
#: Where the workspace is mounted too, inside a sandbox with an environment layer.
ALIAS_ROOT = Path("/workspaces")
_FORMAT = 2
#: How many checkouts an environment's record names (the most recent ones).
_MAX_REPOS = 16
#: How many paths of a layer a worktree child gets bound at most.
_MAX_BINDS = 256
_OUTPUT_CAP = 16 << 20
_KEY_LENGTH = 16
#: How many of a layer's paths a new sandbox looks for (:func:`verify_layer`).
_PROBES = 3
_PROBE_TIMEOUT = 60.0
# Each path given that the sandbox does not show is printed; any missing exits 3.
_PROBE = ('missing=0\nfor p do\n  if [ ! -e "$p" ] && [ ! -L "$p" ]; then\n'
          '    printf "%s\\n" "$p"; missing=1\n  fi\ndone\n[ "$missing" = 0 ] || exit 3\n')
Status = Literal["ready", "failed", "building"]
OnOutput = Callable[[str], None]


@dataclass(frozen=True)
class EnvironmentRef:
    """One prepared environment, as children get it."""

    key: str
    spec: EnvironmentSpec
    #: The repository it was made for.
    repo: Path
    #: What setup wrote in the workspace (``None``: no setup).
    layer: Path | None
    #: Where the workspace is mounted too inside a sandbox (``None`` without a layer).
    alias: Path | None
    #: The docker image children run (``None``: the backend's own).
    image: str | None = None

    @property
    def env(self) -> dict[str, str]:
        """Variables every command sees."""
        return dict(self.spec.env)

    @property
    def ro_paths(self) -> tuple[Path, ...]:
        """Host paths children may read (bubblewrap)."""
        return tuple(Path(p) for p in self.spec.ro_paths)


class EnvironmentInfo(BaseModel):
    """What ``corral env show`` lists of one environment (``env.json``)."""

    model_config = ConfigDict(extra="ignore")

    key: str
    status: Status
    backend: str
    #: The checkout that used it last.
    repo: str
    #: Every checkout that used it (a clone of the same project elsewhere shares it), the
    #: most recent last.
    repos: tuple[str, ...] = ()
    #: Where setup ran inside the sandbox (the path its layer's absolute paths name);
    #: ``None`` without setup, or on host (setup's own worktree, gone since).
    workspace: str | None = None
    sources: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    image: str | None = None
    created_at: float
    last_used: float
    setup_seconds: float = 0.0
    size_bytes: int = 0
    error: str | None = None
    #: Why setup failed (:data:`sandbox.setupfailure.Cause`) and what to do about it.
    cause: str | None = None
    hint: str | None = None
    #: The directory on disk (not stored: where it was read from).
    directory: str = ""

    @property
    def log(self) -> Path:
        """The setup log."""
        return Path(self.directory) / "setup.log"

    def used_by(self, repo: Path) -> EnvironmentInfo:
        """This record, used just now by the checkout ``repo``."""
        repos = (*(r for r in (self.repos or (self.repo,)) if r != str(repo)), str(repo))
        return self.model_copy(update={"last_used": time.time(), "repo": str(repo),
                                       "repos": repos[-_MAX_REPOS:]})


def alias_for(repo: Path, name: str | None = None) -> Path:
    """``/workspaces/<name>`` (default: the repository's directory name), as a name every
    tool accepts."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name or repo.name).strip(".") or "workspace"
    return ALIAS_ROOT / safe


def _root(state_root: Path | None) -> Path:
    return (state_root or default_state_root()) / ENVIRONMENTS


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    private_dir(path.parent, parents=True)
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _digest_inputs(repo: Path, inputs: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for name in inputs:
        path = repo / name
        try:
            if path.is_symlink() or not path.is_file():
                found[name] = "absent"
                continue
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            found[name] = "unreadable"
    return found


def _key(spec: EnvironmentSpec, *, backend: str, repo: Path, owner: tuple[int, int],
         image: str | None, alias: Path | None = None) -> str:
    """The environment's key. Of paths, only what the layer's absolute paths can name:

    - ``alias`` (bubblewrap, docker; default ``alias_for(repo)``): setup runs at
      ``/workspaces/<name>`` and every child has its workspace there, so a venv's scripts
      and an editable install's ``.pth`` name it; it holds in any clone whose directory has
      the same name, never in another;
    - on host, setup runs in a worktree of its own that no child has (its path dies with
      it), so the layer can name no path a child sees: no path is keyed;
    - the checkout, only where a carried path exists there: setup sees it at its absolute
      path in the checkout (:func:`environment_mounts`), which another clone does not have.
    """
    alias = alias or alias_for(repo)
    carried = bool(spec.setup) and any(os.path.lexists(repo / rel) for rel in spec.carry)
    description = {
        "format": _FORMAT, "backend": backend, "owner": list(owner),
        "workspace": str(alias) if spec.setup and backend != "host" else None,
        "checkout": str(repo) if carried else None,
        "image": image, "setup": list(spec.setup), "env": spec.env,
        "secrets": sorted(spec.secrets), "ro_paths": list(spec.ro_paths),
        "inputs": _digest_inputs(repo, spec.inputs),
    }
    data = json.dumps(description, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:_KEY_LENGTH]


def _owner(config: BackendConfig | FakeConfig) -> tuple[int, int]:
    if isinstance(config, DockerConfig) and os.geteuid() == 0 and config.user is None:
        return (1000, 1000)  # a worktree child as root runs as 1000 (sandbox.backends.docker)
    return (os.geteuid(), os.getegid())


def _concrete(config: BackendConfig | FakeConfig) -> HostConfig | BubblewrapConfig | DockerConfig:
    from sandbox.factory import resolve_backend  # noqa: PLC0415 - the factory imports us

    chosen = resolve_backend(config)
    if isinstance(chosen, FakeConfig):
        raise SandboxConfigError("the fake backend cannot build an environment",
                                 operation="prepare_environment")
    return chosen


def _docker_image(spec: EnvironmentSpec, config: DockerConfig, repo: Path,
                  log: Callable[[str], None]) -> tuple[str, str]:
    """(image name, image id) children of this environment run."""
    from sandbox.backends.docker import build_image, image_id, pull_image  # noqa: PLC0415

    if spec.dockerfile:
        dockerfile = repo / spec.dockerfile
        context = repo / (spec.context or str(Path(spec.dockerfile).parent))
        if not dockerfile.is_file():
            raise SandboxConfigError(f"dockerfile {spec.dockerfile} does not exist",
                                     operation="prepare_environment",
                                     context={"repository": repo})
        text = dockerfile.read_bytes() + json.dumps(spec.build_args, sort_keys=True).encode()
        tag = f"corral-env-image:{hashlib.sha256(text).hexdigest()[:_KEY_LENGTH]}"
        found = image_id(config, tag)
        if found is not None:
            return tag, found
        log(f"$ docker build -f {spec.dockerfile} {context.relative_to(repo)}\n")
        return tag, build_image(config, context=context, dockerfile=dockerfile, tag=tag,
                                build_args=spec.build_args, network=spec.setup_network,
                                on_output=log)
    name = spec.image or config.image
    found = image_id(config, name)
    if found is not None:
        return name, found
    if spec.image and spec.setup_network:
        log(f"$ docker pull {name}\n")
        return name, pull_image(config, name)
    raise SandboxConfigError(
        f"the docker image {name} is not on this machine", operation="prepare_environment",
        hint="build it (or give a dockerfile); corral pulls an environment's image only "
        "when you grant setup network (setup_network = true, or --setup-network)")


def prepare_environment(
    spec: EnvironmentSpec,
    *,
    repo: Path,
    config: BackendConfig | FakeConfig,
    state_root: Path | None = None,
    on_output: OnOutput | None = None,
    rebuild: bool = False,
    name: str | None = None,
) -> EnvironmentRef:
    """The environment ``spec`` describes for ``repo`` on ``config``'s backend, built now
    unless its key is built already (``rebuild``: build it again). ``name``: the workspace's
    name inside the sandbox (``/workspaces/<name>``; default: ``repo``'s directory name),
    as a node that unpacked the parent's snapshot under a commit id gives the parent's."""
    repo = repo.resolve()
    alias = alias_for(repo, name)
    concrete = _concrete(config)
    root = _root(state_root)
    image: str | None = None
    image_ref: str | None = None
    early: list[str] = []

    def log(text: str) -> None:
        early.append(text)
        if on_output is not None:
            on_output(text)

    if isinstance(concrete, DockerConfig):
        image, image_ref = _docker_image(spec, concrete, repo, log)
    key = _key(spec, backend=concrete.type, repo=repo, alias=alias, owner=_owner(concrete),
               image=image_ref)
    directory = root / key
    if not spec.setup:
        _touch(directory, spec, key, concrete.type, repo, image)
        return EnvironmentRef(key=key, spec=spec, repo=repo, layer=None, alias=None,
                              image=image)
    with _locked(root / f"{key}.lock"):
        info = _read_info(directory)
        layer = directory / "layer"
        if rebuild and key in _in_use(state_root):
            raise SandboxConfigError(
                f"environment {key} is in use by a running sandbox: its layer cannot be "
                "built again under it", operation="prepare_environment",
                hint="rebuild it once those runs ended (`corral runs` shows them)")
        if info is not None and info.status == "ready" and layer.is_dir() and not rebuild:
            _write_info(directory, info.used_by(repo))
            if on_output is not None:
                on_output(f"environment {key}: ready (built {_age(info.created_at)} ago)\n")
            return EnvironmentRef(key=key, spec=spec, repo=repo, layer=layer, alias=alias,
                                  image=image)
        holder = EnvironmentRef(key=key, spec=spec, repo=repo, layer=None, alias=alias,
                                image=image)
        _build(holder, directory=directory, config=concrete, state_root=state_root,
               log_lines=early, on_output=on_output,
               repos=info.repos if info is not None else ())
        return EnvironmentRef(key=key, spec=spec, repo=repo, layer=layer, alias=alias,
                              image=image)


def _age(then: float) -> str:
    seconds = max(0.0, time.time() - then)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _setup_config(concrete: HostConfig | BubblewrapConfig | DockerConfig, spec: EnvironmentSpec,
                  image: str | None) -> HostConfig | BubblewrapConfig | DockerConfig:
    limits = concrete.limits.model_copy(update={"timeout_seconds": spec.setup_timeout})
    if isinstance(concrete, BubblewrapConfig):
        return concrete.model_copy(update={
            "limits": limits, "network": spec.setup_network,
            "extra_ro_paths": (*concrete.extra_ro_paths, *(Path(p) for p in spec.ro_paths))})
    if isinstance(concrete, DockerConfig):
        return concrete.model_copy(update={"limits": limits, "network": spec.setup_network,
                                           "image": image or concrete.image})
    return concrete.model_copy(update={"limits": limits})


def _setup_egress(spec: EnvironmentSpec, backend: str,
                  emit: Callable[[str], None]) -> EgressProxy | None:
    """The proxy of a setup granted a domain list (``setup_allow``) and not the whole network
    (``setup_network``); its refusals go to the setup's log. ``None`` on the host backend,
    which has this machine's network anyway."""
    if not spec.setup_allow or spec.setup_network or backend == "host":
        return None
    from policies.network import NetworkConfig  # noqa: PLC0415 - only with setup_allow
    from sandbox.egress import EgressProxy  # noqa: PLC0415

    def refused(event: dict[str, object]) -> None:
        if not event["allowed"]:
            emit(f"egress refused: {event['host']}:{event['port']}: {event['reason']}\n")

    return EgressProxy(NetworkConfig(allow=spec.setup_allow).grant(), on_event=refused)


def _build(holder: EnvironmentRef, *, directory: Path,
           config: HostConfig | BubblewrapConfig | DockerConfig, state_root: Path | None,
           log_lines: list[str], on_output: OnOutput | None, repos: tuple[str, ...]) -> None:
    """Run ``holder``'s setup into ``directory`` (``repos``: the checkouts that used a
    previous build of this key, still named by the new record)."""
    if directory.exists():
        _chmod_rmtree(directory)
    private_dir(directory, parents=True)
    started = time.time()
    spec, repo = holder.spec, holder.repo
    info = EnvironmentInfo(
        key=holder.key, status="building", backend=config.type, repo=str(repo),
        workspace=str(holder.alias) if config.type != "host" else None, sources=spec.sources,
        setup=spec.setup, image=holder.image, created_at=started, last_used=started,
        repos=repos).used_by(repo)
    _write_info(directory, info)
    try:
        _run_setup(holder, directory=directory, config=config, state_root=state_root,
                   log_lines=log_lines, on_output=on_output, info=info)
    except BaseException as exc:
        current = _read_info(directory)
        if current is not None and current.status == "building":
            _write_info(directory, info.model_copy(update={
                "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}))
        raise


def _run_setup(holder: EnvironmentRef, *, directory: Path,
               config: HostConfig | BubblewrapConfig | DockerConfig, state_root: Path | None,
               log_lines: list[str], on_output: OnOutput | None,
               info: EnvironmentInfo) -> None:
    from sandbox.factory import open_sandbox  # noqa: PLC0415 - the factory imports us
    from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot  # noqa: PLC0415

    spec, key, repo, image = holder.spec, holder.key, holder.repo, holder.image
    started = info.created_at
    log_path = directory / "setup.log"
    tail = bytearray()  # the end of the running command's output, for its cause
    with log_path.open("wb") as log:
        log.write("".join(log_lines).encode())

        def emit(text: str) -> None:
            log.write(text.encode())
            log.flush()
            if on_output is not None:
                on_output(text)

        def chunk(_stream: str, data: bytes) -> None:
            log.write(data)
            log.flush()
            tail.extend(data)
            del tail[:-TAIL_BYTES]
            if on_output is not None:
                on_output(data.decode("utf-8", "replace"))

        secrets = {name: os.environ[name] for name in spec.secrets if name in os.environ}
        if spec.setup_network:
            secrets = {**_network_env(spec), **secrets}
        missing = [name for name in spec.secrets if name not in os.environ]
        if missing:
            emit(f"note: secrets not set in your environment: {', '.join(missing)}\n")
        failure: SetupFailure | None = None
        setup_config = _setup_config(config, spec, image)
        egress = _setup_egress(spec, config.type, emit)
        ref = acquire_snapshot(repo, state_root=state_root)
        try:
            sandbox = open_sandbox(setup_config, repo=repo, mode=SandboxMode.WORKTREE,
                                   state_root=state_root, snapshot=ref, environment=holder,
                                   disposable=True, egress=egress)
        finally:
            release_snapshot(ref)
        kept = directory / "layer.new"
        try:
            where = str(holder.alias) if config.type != "host" else str(sandbox.root)
            deadline = time.monotonic() + spec.setup_timeout
            for command in spec.setup:
                emit(f"$ {command}\n")
                left = deadline - time.monotonic()
                if left <= 0:
                    failure = timed_out(None, spec.setup_timeout)
                    break
                tail.clear()
                done = sandbox.exec(["sh", "-c", 'cd "$1" && exec sh -c "$2"', "corral-setup",
                                     where, command], env=secrets, timeout=left,
                                    output_cap=_OUTPUT_CAP, on_output=chunk)
                if done.timed_out:
                    failure = timed_out(command, spec.setup_timeout)
                elif not done.ok:
                    failure = classify(
                        command, done, bytes(tail), network=spec.setup_network,
                        backend=config.type, image=getattr(setup_config, "image", None),
                        memory_bytes=setup_config.limits.memory_bytes)
                if failure is not None:
                    break
        except BaseException:
            sandbox.teardown(discard=True)
            raise
        finally:
            if egress is not None:
                egress.close()
        sandbox.teardown(discard=True, keep=None if failure else kept)
        seconds = time.time() - started
        if failure is not None:
            emit(f"setup failed: {failure.summary}\n")
            hint = (f"{failure.hint}; then run again (the log: {log_path}, or `corral env show "
                    f"{key}`; --no-env runs without the environment)")
            _write_info(directory, info.model_copy(update={
                "status": "failed", "error": failure.summary, "cause": failure.cause,
                "hint": failure.hint, "setup_seconds": round(seconds, 3)}))
            context: dict[str, object] = {"environment": key, "log": log_path,
                                          "cause": failure.cause}
            if failure.missing:
                context["command"] = failure.missing
            raise EnvironmentSetupFailed(
                f"the environment's setup failed: {failure.summary}", cause=failure.cause,
                operation="prepare_environment", context=context, hint=hint)
        _strip_git(kept)
        kept.rename(directory / "layer")
        emit(f"environment {key}: ready in {seconds:.1f}s\n")
    _write_info(directory, info.model_copy(update={
        "status": "ready", "setup_seconds": round(seconds, 3),
        "size_bytes": _size(directory / "layer")}))


#: Your machine's proxy settings, which a setup granted network uses as your machine does.
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
#: The variables that point TLS clients (OpenSSL, Python, pip, Node, curl, git) at a CA bundle.
_CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS",
                 "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")
_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def _network_env(spec: EnvironmentSpec) -> dict[str, str]:
    """What a setup granted network needs to reach it as your machine does: your proxy
    variables, and every TLS client pointed at your machine's CA bundle (bubblewrap binds
    ``/etc/ssl``; docker binds ``/etc/ssl/certs`` into setup's container): a proxy that signs
    with its own CA is trusted by setup as by you. The description's own ``env`` wins."""
    found = {name: os.environ[name] for name in _PROXIES if name in os.environ}
    if _CA_BUNDLE.is_file():
        found |= dict.fromkeys(_CA_VARIABLES, str(_CA_BUNDLE))
    return {name: value for name, value in found.items() if name not in spec.env}


def _strip_git(layer: Path) -> None:
    """The layer carries no ``.git`` of its own (a worktree's pointer, a setup's clone)."""
    dot_git = layer / ".git"
    if dot_git.is_symlink() or dot_git.is_file():
        dot_git.unlink()
    elif dot_git.is_dir():
        shutil.rmtree(dot_git, ignore_errors=True)


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size  # noqa: PTH118
    return total


def _info_path(directory: Path) -> Path:
    return directory / "env.json"


def _read_info(directory: Path) -> EnvironmentInfo | None:
    try:
        data = json.loads(_info_path(directory).read_text(encoding="utf-8"))
        return EnvironmentInfo.model_validate({**data, "directory": str(directory)})
    except (OSError, ValueError):
        return None


def _write_info(directory: Path, info: EnvironmentInfo) -> None:
    data = info.model_dump(mode="json", exclude={"directory"})
    atomic_write(_info_path(directory), json.dumps(data, indent=2).encode())


def _touch(directory: Path, spec: EnvironmentSpec, key: str, backend: str, repo: Path,
           image: str | None) -> None:
    """Record an environment that needs no build (no setup), so ``env show`` lists it."""
    with contextlib.suppress(OSError):
        private_dir(directory, parents=True)
        now = time.time()
        info = _read_info(directory) or EnvironmentInfo(
            key=key, status="ready", backend=backend, repo=str(repo), sources=spec.sources,
            image=image, created_at=now, last_used=now)
        _write_info(directory, info.used_by(repo))


def list_environments(state_root: Path | None = None) -> list[EnvironmentInfo]:
    """Every environment under the state root, most recently used first."""
    root = _root(state_root)
    found = [info for directory in sorted(root.iterdir()) if directory.is_dir()
             if (info := _read_info(directory)) is not None] if root.is_dir() else []
    return sorted(found, key=lambda info: info.last_used, reverse=True)


def _in_use(state_root: Path | None) -> set[str]:
    """Keys of environments a live sandbox runs in."""
    from sandbox.state import SandboxState, owner_alive  # noqa: PLC0415

    base = (state_root or default_state_root()) / "sandboxes"
    used: set[str] = set()
    for directory in base.iterdir() if base.is_dir() else []:
        try:
            meta = SandboxState(base.parent, directory.name).read_meta()
        except (OSError, ValueError):
            continue
        if meta.environment and owner_alive(meta.owner_host, meta.owner_pid, meta.owner_started):
            used.add(meta.environment)
    return used


def prune_environments(state_root: Path | None = None, *, older_than: float | None = None,
                       keys: tuple[str, ...] = (), docker: DockerConfig | None = None,
                       ) -> list[EnvironmentInfo]:
    """Remove environments (all, those named by ``keys``, or those unused for ``older_than``
    seconds) that no live sandbox runs in, with the images built for them; what went."""
    root = _root(state_root)
    busy = _in_use(state_root)
    now = time.time()
    removed = []
    for info in list_environments(state_root):
        if keys and not any(info.key.startswith(k) for k in keys):
            continue
        if older_than is not None and now - info.last_used < older_than:
            continue
        if info.key in busy or info.status == "building":
            continue
        with _locked(root / f"{info.key}.lock"):
            shutil.rmtree(info.directory, ignore_errors=True)
            _chmod_rmtree(Path(info.directory))
        (root / f"{info.key}.lock").unlink(missing_ok=True)
        if info.image and info.image.startswith("corral-env-image:") and not any(
                other.image == info.image for other in list_environments(state_root)):
            from sandbox.backends.docker import remove_image  # noqa: PLC0415

            with contextlib.suppress(SandboxError):
                remove_image(docker or DockerConfig(), info.image)
        removed.append(info)
    return removed


def _chmod_rmtree(path: Path) -> None:
    """A layer a child made read-only: make it writable, then remove it."""
    if not path.exists():
        return
    for dirpath, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, name), 0o700)  # noqa: PTH101, PTH118
    shutil.rmtree(path, ignore_errors=True)


def environment_mounts(ref: EnvironmentRef, *, root: Path, overlay: bool) -> list[Mount]:
    """The read-only binds a worktree-mode child at ``root`` gets: each carried path at its
    place and at its original path, and (no overlay) the layer's paths ``root`` lacks."""
    mounts: list[Mount] = []
    for rel in ref.spec.carry:
        source = ref.repo / rel
        if not source.exists():
            continue
        mounts.append(Mount(root / rel, False, source))
        if source != root / rel:
            mounts.append(Mount(source, False, source))
    if ref.layer is not None and not overlay:
        mounts += [Mount(root / rel, False, ref.layer / rel)
                   for rel in _missing(ref.layer, root)]
    return mounts


def _missing(layer: Path, root: Path, limit: int = _MAX_BINDS) -> list[str]:
    """The topmost paths of ``layer`` that ``root`` lacks (at most ``limit``)."""
    found: list[str] = []

    def walk(rel: str) -> None:
        try:
            entries = sorted(os.scandir(layer / rel if rel else layer), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.name == ".git" or len(found) >= limit:
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISCHR(mode):  # an overlay whiteout: nothing to show
                continue
            target = root / path
            if not os.path.lexists(target):
                found.append(path)
            elif stat.S_ISDIR(mode) and target.is_dir() and not target.is_symlink():
                walk(path)

    walk("")
    return found


def require_layer(ref: EnvironmentRef) -> None:
    """``environment_missing`` when ``ref`` has a layer that is no longer on disk (pruned
    by hand, or by another process, between its preparation and this sandbox)."""
    if ref.layer is not None and not ref.layer.is_dir():
        raise SandboxError(
            f"environment {ref.key} is not under this sandbox: its layer {ref.layer} is gone",
            code="environment_missing", operation="open_sandbox",
            context={"environment": ref.key, "layer": ref.layer},
            hint="nothing ran without it; `corral env build` builds it again (was it pruned "
            "while a run used it?)")


def verify_layer(sandbox: Sandbox, ref: EnvironmentRef, *, base: Path) -> None:
    """Look, inside a new ``sandbox``, for a few of the paths ``ref``'s layer adds to
    ``base`` (what the workspace holds without it: the snapshot checkout under an overlay, the
    worktree otherwise); ``environment_missing`` when one is not there.

    A child or a check that ran without the layer its run asked for would fail for a reason
    that is not the candidate's (a test suite without its dependencies) and be recorded as a
    failure of the candidate: this is what makes that an error instead. It asks the sandbox
    itself, after every mount is made, so it sees what the commands will see."""
    if ref.layer is None:
        return
    require_layer(ref)
    probes = _missing(ref.layer, base, _PROBES)
    if not probes:
        return  # the layer adds nothing this workspace lacks: nothing to miss
    done = sandbox.exec(["sh", "-c", _PROBE, "corral-env-probe", *probes],
                        timeout=_PROBE_TIMEOUT, output_cap=64 * 1024)
    if done.ok:
        return
    said = done.stdout.decode("utf-8", "replace").split("\n")
    missing = [line for line in said if line in probes]
    why = (f"{', '.join(missing)} of its layer not in the workspace" if missing else
           "the look for its layer did not finish "
           f"({'timed out' if done.timed_out else f'exit {done.exit_code}'})")
    raise SandboxError(
        f"environment {ref.key} is not under this sandbox: {why}",
        code="environment_missing", operation="open_sandbox",
        context={"environment": ref.key, "layer": ref.layer, "sandbox": sandbox.id},
        hint="nothing ran without it; run again, and if it persists `corral env show "
        f"{ref.key}` shows the layer and `corral env build --rebuild` builds it again")
