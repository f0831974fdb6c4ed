"""Backend configurations: one frozen pydantic model per backend, discriminated by ``type``.

A user's config (or a CLI flag) becomes one of these, and
:func:`sandbox.factory.open_sandbox` builds the backend from it. ``auto`` is
resolved once, by probing (never by ``which``), to bubblewrap or docker and
fails closed when neither works; ``host`` is only ever used when asked for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_DOCKER_IMAGE",
    "HOST_WARNING",
    "USER_BACKENDS",
    "AutoConfig",
    "BackendConfig",
    "BackendName",
    "BubblewrapConfig",
    "DockerConfig",
    "FakeConfig",
    "HostConfig",
    "Limits",
    "default_memory_bytes",
    "default_pids",
]

BackendName = Literal["host", "bubblewrap", "docker", "fake"]

DEFAULT_DOCKER_IMAGE = "corral-sandbox:latest"

#: The line the CLI prints whenever the host backend runs a child.
HOST_WARNING = (
    "backend 'host' isolates changes, not processes: the child's commands run as you, "
    "with your files, network and credentials reachable; use 'bubblewrap' or 'docker' "
    "for agents you do not trust"
)

_MiB = 1024 * 1024
_FROZEN = ConfigDict(frozen=True, extra="forbid")


def default_memory_bytes() -> int:
    """Half of this machine's physical memory: what real tool chains (a test suite, a
    bundler, a compiler) need, with the rest left to the machine itself."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        total = 0
    return max(total // 2, 256 * _MiB)


#: Tasks (processes and threads) a sandbox may have per CPU of this machine: parallel tool
#: chains start one worker per CPU, each with threads of its own (a vitest or jest worker
#: is a Node process of ~12 threads; ``vitest run`` starts CPUs - 1 of them at once).
PIDS_PER_CPU = 32
#: The least a sandbox is given on a small machine.
MIN_PIDS = 512


def default_pids(cpus: int | None = None) -> int:
    """Tasks alive at once for one sandbox: :data:`PIDS_PER_CPU` per CPU this process may
    run on (``cpus``: that many instead), at least :data:`MIN_PIDS`. A fixed 512 killed
    ``vitest run`` on a machine of 48 CPUs (its 47 workers need ~560 threads); a fork bomb
    still stops at the cap."""
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
    return max(MIN_PIDS, PIDS_PER_CPU * cpus)


class Limits(BaseModel):
    """Resource limits applied to every command of a sandbox.

    ``timeout_seconds`` and ``output_cap_bytes`` are defaults that one
    ``exec`` call may lower or raise; the rest hold for the sandbox's life.
    ``None`` disables a limit explicitly (it is never dropped silently: a
    backend that cannot enforce a requested limit refuses to start).
    """

    model_config = _FROZEN

    #: Wall-clock seconds per command.
    timeout_seconds: float = Field(default=600.0, gt=0)
    #: Bytes kept per stream (stdout, stderr); the rest is drained and counted.
    output_cap_bytes: int = Field(default=1 * _MiB, ge=0)
    #: Memory the whole sandbox may use, all its processes together (a cgroup's
    #: ``memory.max`` on bubblewrap, the container's limit on docker; no swap beyond it).
    #: Default: half of this machine's memory (:func:`default_memory_bytes`).
    memory_bytes: int | None = Field(default_factory=default_memory_bytes, gt=0)
    #: Processes (and threads) alive at once, for the whole sandbox. Default: 32 per CPU of
    #: this machine, at least 512 (:func:`default_pids`).
    pids: int | None = Field(default_factory=default_pids, gt=0)
    #: Largest file a command may write (RLIMIT_FSIZE).
    file_size_bytes: int | None = Field(default=1024 * _MiB, gt=0)
    #: Size of the child's tmpfs ``/tmp`` (and ``HOME``).
    tmp_size_bytes: int = Field(default=512 * _MiB, gt=0)
    #: Largest patch ``collect_diff`` returns; larger is refused (``diff_too_large``).
    max_diff_bytes: int = Field(default=64 * _MiB, gt=0)


class _Base(BaseModel):
    model_config = _FROZEN

    limits: Limits = Field(default_factory=Limits)


class HostConfig(_Base):
    """Worktree isolation only: commands run as the user, on the host.

    It isolates *changes*, not *processes*: the child can read your home
    directory, use the network, and leave processes behind. Its memory, pids
    and file-size limits are not enforced (only timeout and output cap are).
    The CLI prints :data:`HOST_WARNING` whenever it is used, and ``auto``
    never picks it.
    """

    type: Literal["host"] = "host"


class BubblewrapConfig(_Base):
    """Linux namespaces through ``bwrap``: no network, fresh ``/proc``, read-only system."""

    type: Literal["bubblewrap"] = "bubblewrap"
    #: The bwrap executable (a name looked up on ``PATH``, or a path).
    bwrap: str = "bwrap"
    #: Extra host directories made visible read-only at the same path (toolchains).
    extra_ro_paths: tuple[Path, ...] = ()
    #: Where a ``pids`` limit comes from: ``auto`` tries a cgroup, then (when not
    #: root) ``RLIMIT_NPROC`` inside the user namespace.
    pids_mechanism: Literal["auto", "cgroup", "rlimit"] = "auto"
    #: Where ``limits.memory_bytes`` comes from: ``auto`` a memory cgroup for the whole
    #: sandbox, else (with a warning naming the cost) ``RLIMIT_AS`` per process;
    #: ``cgroup`` refuses to start without one; ``rlimit`` always the per-process cap.
    memory_mechanism: Literal["auto", "cgroup", "rlimit"] = "auto"
    #: Share the host's network. Only an environment's setup, when you granted it network
    #: (:mod:`sandbox.environment`), runs so; a child never does.
    network: bool = False
    #: Run every command under corral's seccomp filter (:mod:`sandbox.backends.seccomp`:
    #: no ptrace, io_uring, new user namespaces, keyring, bpf, mounts, TIOCSTI, rare socket
    #: families...). It needs libseccomp; without it the backend refuses to start. Set
    #: ``false`` only to run without the filter (the namespaces still hold, the kernel
    #: surface behind them is wider).
    seccomp: bool = True


class DockerConfig(_Base):
    """One container per child, commands through ``docker exec``; never pulls an image."""

    type: Literal["docker"] = "docker"
    image: str = DEFAULT_DOCKER_IMAGE
    #: Docker engine URL; ``None`` uses the environment (``DOCKER_HOST``) or the local socket.
    base_url: str | None = None
    #: ``uid:gid`` commands run as; ``None`` picks the workspace owner, or 1000
    #: (chowning a corral-made worktree) when the owner is root.
    user: str | None = None
    #: Let commands run as uid 0 (still without capabilities) when the workspace is a
    #: root-owned checkout corral must not chown (workspace-write). ``None``: only when
    #: corral itself runs as root (the owner's own rights); the sandbox then carries a warning.
    allow_root_user: bool | None = None
    #: Seconds allowed for engine API calls (not for the child's commands).
    api_timeout_seconds: float = Field(default=60.0, gt=0)
    #: The host's network instead of none (as bubblewrap's setup shares it). Only an
    #: environment's setup, when you granted it network (:mod:`sandbox.environment`),
    #: runs so; a child never does.
    network: bool = False


class AutoConfig(_Base):
    """Bubblewrap when its probe runs, else docker; otherwise fail closed.

    The ``limits`` given here replace those of the chosen backend's config.
    """

    type: Literal["auto"] = "auto"
    bubblewrap: BubblewrapConfig = Field(default_factory=BubblewrapConfig)
    docker: DockerConfig = Field(default_factory=DockerConfig)


class FakeConfig(_Base):
    """The scripted test backend (:mod:`sandbox.backends.fake`): real workspace, scripted
    commands."""

    type: Literal["fake"] = "fake"


BackendConfig = Annotated[
    HostConfig | BubblewrapConfig | DockerConfig | AutoConfig,
    Field(discriminator="type"),
]
"""What a user may select; the fake backend is only reachable from code."""

#: The ``--backend`` choices of every command, each with its default configuration.
USER_BACKENDS: dict[str, type[HostConfig | BubblewrapConfig | DockerConfig | AutoConfig]] = {
    "auto": AutoConfig, "host": HostConfig, "bubblewrap": BubblewrapConfig, "docker": DockerConfig,
}
