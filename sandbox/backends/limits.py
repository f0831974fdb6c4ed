"""Process-count and memory limits for local sandboxes (bubblewrap).

Memory: a cgroup ``memory`` controller caps what the whole sandbox (its supervisor and
every process of every command, together) really uses, as a container's limit does
(:class:`MemoryCgroup`: ``memory.max`` and ``memory.swap.max = 0`` on cgroup v2,
``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` on v1, at
``<memory hierarchy>/corral/<state-root hash>/<id>``, joined like the pids cgroup below).
Reserving address space is free under it (V8 reserves ~10 GiB per WebAssembly memory);
touching more than the cap gets a process killed by the kernel's OOM killer, inside the
sandbox only, and the cgroup's ``oom_kill`` counter tells the command's result so. Only
without a writable memory hierarchy does ``prlimit`` set ``RLIMIT_AS`` instead (per
process, counting reservations: :data:`MEMORY_RLIMIT_COST`, said in a warning).

File size: ``prlimit`` sets ``RLIMIT_FSIZE`` before the sandbox's one ``bwrap`` starts;
it is inherited by its supervisor and every process of every command.

Process count (threats B6.30): ``RLIMIT_NPROC`` does not contain a fork bomb
when corral runs as root: processes whose real uid is root are exempt, and a
bwrap user namespace maps the child to root. So the limit comes from a cgroup
``pids`` controller when one is writable (cgroup v1 ``pids`` hierarchy, or the
cgroup v2 root with ``pids`` delegated): one cgroup per sandbox,
``/sys/fs/cgroup/pids/corral/<state-root hash>/<id>``, joined once per warm sandbox by a
two-line ``sh`` wrapper before ``bwrap`` execs, so no process of any command is ever outside
it (the supervisor counts as one). The cgroup also lets a stop or teardown kill everything
at once. Without a writable
cgroup, an unprivileged user gets ``RLIMIT_NPROC`` instead: inside the fresh
user namespace bwrap creates, it counts only that sandbox's processes (kernel
>= 5.14 per-namespace ucounts). Root without a writable cgroup cannot contain
a fork bomb: the backend refuses to start unless ``limits.pids`` is ``None``.

"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import time
from pathlib import Path
from typing import Literal

from sandbox.config import AutoConfig, BackendConfig, BubblewrapConfig, FakeConfig
from sandbox.errors import BackendUnavailable

__all__ = ["MEMORY_RLIMIT_COST", "MemoryCgroup", "PidsCgroup", "cgroup_group", "find_hierarchy",
           "find_pids_hierarchy", "memory_cgroup_missing", "memory_cgroup_of", "memory_warning",
           "prlimit_argv"]

_SETTLE_SECONDS = 5.0


def _mountinfo() -> list[tuple[Path, str, set[str]]]:
    mounts: list[tuple[Path, str, set[str]]] = []
    with contextlib.suppress(OSError), Path("/proc/self/mountinfo").open() as handle:
        for line in handle:
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], fields[sep + 3]
            mounts.append((Path(fields[4]), fstype, set(options.split(","))))
    return mounts


def find_pids_hierarchy() -> tuple[Literal["v1", "v2"], Path] | None:
    """A writable cgroup hierarchy with the ``pids`` controller, or ``None``."""
    return find_hierarchy("pids")


def find_hierarchy(controller: str) -> tuple[Literal["v1", "v2"], Path] | None:
    """A writable cgroup hierarchy with ``controller`` (``pids``, ``memory``), or ``None``."""
    for mountpoint, fstype, options in _mountinfo():
        if fstype == "cgroup" and controller in options and os.access(mountpoint, os.W_OK):
            return "v1", mountpoint
    for mountpoint, fstype, _ in _mountinfo():
        if fstype != "cgroup2" or not os.access(mountpoint, os.W_OK):
            continue
        with contextlib.suppress(OSError):
            if controller in (mountpoint / "cgroup.controllers").read_text().split():
                return "v2", mountpoint
    return None


#: Times a sandbox makes its state root's cgroup group again when another process's last
#: sandbox removed it in between (each removal needs that group empty, so few ever repeat).
_GROUP_ATTEMPTS = 16


class PidsCgroup:
    """One sandbox's ``pids`` cgroup."""

    def __init__(self, path: Path, version: Literal["v1", "v2"]) -> None:
        self.path = path
        self.version = version

    @classmethod
    def create(cls, group: str, sandbox_id: str, limit: int) -> PidsCgroup | None:
        """Create ``corral/<group>/<id>`` with ``pids.max = limit``; ``None`` without a hierarchy.

        ``group`` keeps the sandboxes of one state root together, so gc of one
        state root never touches another's.
        """
        found = find_pids_hierarchy()
        if found is None:
            return None
        version, mountpoint = found
        parent = mountpoint / "corral" / group
        path = parent / sandbox_id
        try:
            for attempt in range(_GROUP_ATTEMPTS):
                parent.mkdir(parents=True, exist_ok=True)
                if version == "v2":
                    _enable_pids(mountpoint)
                    _enable_pids(parent.parent)
                    _enable_pids(parent)
                try:
                    path.mkdir()
                    break
                except FileNotFoundError:
                    # The group went between the two: the last sandbox of this state root
                    # (another process: a Ray node's workers share one) removed it as it
                    # ended. Made again, it stays while this one is in it.
                    if attempt == _GROUP_ATTEMPTS - 1:
                        raise
            (path / "pids.max").write_text(str(limit))
        except OSError as exc:
            raise BackendUnavailable(
                f"cannot create a pids cgroup under {parent}: {exc}",
                code="pids_limit_unavailable", operation="create_cgroup",
                hint="set limits.pids to null to run without a process-count limit",
            ) from exc
        return cls(path, version)

    @classmethod
    def attach(cls, path: Path) -> PidsCgroup:
        """An existing cgroup (for gc)."""
        version: Literal["v1", "v2"] = "v2" if (path / "cgroup.kill").exists() else "v1"
        return cls(path, version)

    def join_argv(self) -> list[str]:
        """An argv prefix that moves the command into this cgroup, then execs the rest."""
        script = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "corral-cgroup", str(self.path / "cgroup.procs")]

    def pids(self) -> list[int]:
        """Processes in the cgroup now."""
        try:
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill_all(self) -> bool:
        """SIGKILL every member until the cgroup is empty; ``False`` if it did not empty."""
        deadline = time.monotonic() + _SETTLE_SECONDS
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            if self.version == "v2":
                with contextlib.suppress(OSError):
                    (self.path / "cgroup.kill").write_text("1")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)  # members are dying; their exit is not observable otherwise

    def remove(self) -> None:
        """Kill what is left and remove the cgroup."""
        self.kill_all()
        deadline = time.monotonic() + _SETTLE_SECONDS
        while True:
            try:
                self.path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)  # zombies still being reaped by their parents
        with contextlib.suppress(OSError):  # the state root's group, once its last one is gone
            self.path.parent.rmdir()


#: What the address-space fallback costs, named in its warning.
MEMORY_RLIMIT_COST = (
    "each process's address space is capped instead (RLIMIT_AS), which counts what a process "
    "reserves, not what it uses: tool chains that reserve large ranges (Node/V8 WebAssembly, "
    "JVMs, Go, sanitizers) fail under it, and a command of N processes may use N times it")


def memory_cgroup_missing() -> str | None:
    """Why no sandbox here can have a memory cgroup (``None``: one can)."""
    if find_hierarchy("memory") is None:
        return ("no writable cgroup memory controller (a cgroup v1 memory hierarchy, or "
                "cgroup v2 with memory delegated to corral)")
    return None


def memory_warning(config: BackendConfig) -> str | None:
    """What a run on ``config`` must say when its sandboxes' memory will be capped per
    process by ``RLIMIT_AS`` (bubblewrap, ``memory_mechanism = "auto"``, no memory cgroup
    here); ``None`` otherwise (``auto`` is resolved as opening a sandbox resolves it)."""
    from sandbox.factory import resolve_backend  # noqa: PLC0415 - the factory imports backends

    chosen: BackendConfig | FakeConfig = config
    if isinstance(config, AutoConfig):
        try:
            chosen = resolve_backend(config)
        except BackendUnavailable:
            return None  # opening the sandbox says why
    if (not isinstance(chosen, BubblewrapConfig) or chosen.limits.memory_bytes is None
            or chosen.memory_mechanism != "auto"):
        return None
    missing = memory_cgroup_missing()
    return None if missing is None else f"{missing}: {MEMORY_RLIMIT_COST}"


class MemoryCgroup(PidsCgroup):
    """One sandbox's memory cgroup (the pids cgroup's life cycle): ``memory.max`` with
    ``memory.swap.max = 0`` (cgroup v2) or ``memory.limit_in_bytes`` with
    ``memory.memsw.limit_in_bytes`` (v1) over every process of the sandbox together. A
    process that reserves address space costs nothing until it touches it; past the cap the
    kernel's OOM killer kills inside the sandbox only, and :meth:`oom_kills` counts it.

    On cgroup v2 a process is in one cgroup: when the sandbox has a pids cgroup there, that
    cgroup gets the memory controller too (``shared``: joined and removed as the pids one).
    """

    def __init__(self, path: Path, version: Literal["v1", "v2"], *,
                 shared: bool = False) -> None:
        super().__init__(path, version)
        self.shared = shared

    @classmethod
    def create_memory(cls, group: str, sandbox_id: str, limit: int, *,
                      pids: PidsCgroup | None = None) -> MemoryCgroup | None:
        """Create ``corral/<group>/<id>`` capped at ``limit`` bytes (or cap ``pids``'s own
        v2 cgroup); ``None`` without a writable memory hierarchy."""
        found = find_hierarchy("memory")
        if found is None:
            return None
        version, mountpoint = found
        parent = mountpoint / "corral" / group
        path = parent / sandbox_id
        shared = version == "v2" and pids is not None and pids.path == path
        try:
            for attempt in range(_GROUP_ATTEMPTS):
                parent.mkdir(parents=True, exist_ok=True)
                if version == "v2":
                    for level in (mountpoint, parent.parent, parent):
                        _enable(level, "memory")
                if shared:
                    break
                try:
                    path.mkdir()
                    break
                except FileNotFoundError:  # the group went in between (see PidsCgroup)
                    if attempt + 1 == _GROUP_ATTEMPTS:
                        raise
            if version == "v2":
                (path / "memory.max").write_text(str(limit))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
            else:  # memory first: memsw may never be below it
                (path / "memory.limit_in_bytes").write_text(str(limit))
                if (path / "memory.memsw.limit_in_bytes").exists():
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
        except OSError as exc:
            raise BackendUnavailable(
                f"cannot create a memory cgroup under {parent}: {exc}",
                code="memory_limit_unavailable", operation="create_cgroup",
                hint="set memory_mechanism to rlimit (an address-space cap per process), or "
                "limits.memory_bytes to null (no memory limit)",
            ) from exc
        return cls(path, version, shared=shared)

    def join_argv(self) -> list[str]:
        return [] if self.shared else super().join_argv()

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer killed in this cgroup so far."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            lines = (self.path / name).read_text().splitlines()
        except OSError:
            return 0
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self) -> None:
        if not self.shared:
            super().remove()


def memory_cgroup_of(pid: int) -> MemoryCgroup | None:
    """The memory cgroup holding ``pid`` (a container's init), read-only use: its
    :meth:`MemoryCgroup.oom_kills`; ``None`` where this host cannot see it."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    for mountpoint, fstype, options in _mountinfo():
        if fstype == "cgroup" and "memory" in options and "memory" in paths:
            found = mountpoint / paths["memory"].lstrip("/")
            return MemoryCgroup(found, "v1", shared=True) if found.is_dir() else None
    for mountpoint, fstype, _ in _mountinfo():
        if fstype == "cgroup2" and "" in paths:
            found = mountpoint / paths[""].lstrip("/")
            if (found / "memory.events").is_file():
                return MemoryCgroup(found, "v2", shared=True)
    return None


def cgroup_group(state_root: Path) -> str:
    """The cgroup directory name of one state root's sandboxes."""
    return hashlib.sha256(str(state_root).encode()).hexdigest()[:12]


def _enable_pids(cgroup: Path) -> None:
    _enable(cgroup, "pids")


def _enable(cgroup: Path, controller: str) -> None:
    control = cgroup / "cgroup.subtree_control"
    if controller not in control.read_text().split():
        control.write_text(f"+{controller}")


def prlimit_argv(
    prlimit: str, *, memory: int | None, file_size: int | None, nproc: int | None
) -> list[str]:
    """An argv prefix setting rlimits on the command (empty when there are none)."""
    options = []
    if memory is not None:
        options.append(f"--as={memory}")
    if file_size is not None:
        options.append(f"--fsize={file_size}")
    if nproc is not None:
        options.append(f"--nproc={nproc}")
    return [prlimit, *options, "--"] if options else []

