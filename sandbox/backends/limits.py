"""Process-count and memory limits for local sandboxes (bubblewrap).

Memory, file size: ``prlimit`` sets ``RLIMIT_AS`` and ``RLIMIT_FSIZE`` before
the sandbox's one ``bwrap`` starts; both are inherited by its supervisor and
every process of every command. The
address-space cap is per process (a command of N processes may use N times
it), which is why the process count is capped as well.

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

from sandbox.errors import BackendUnavailable

__all__ = ["PidsCgroup", "cgroup_group", "find_pids_hierarchy", "prlimit_argv"]

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
    for mountpoint, fstype, options in _mountinfo():
        if fstype == "cgroup" and "pids" in options and os.access(mountpoint, os.W_OK):
            return "v1", mountpoint
    for mountpoint, fstype, _ in _mountinfo():
        if fstype != "cgroup2" or not os.access(mountpoint, os.W_OK):
            continue
        with contextlib.suppress(OSError):
            if "pids" in (mountpoint / "cgroup.controllers").read_text().split():
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


def cgroup_group(state_root: Path) -> str:
    """The cgroup directory name of one state root's sandboxes."""
    return hashlib.sha256(str(state_root).encode()).hexdigest()[:12]


def _enable_pids(cgroup: Path) -> None:
    control = cgroup / "cgroup.subtree_control"
    if "pids" not in control.read_text().split():
        control.write_text("+pids")


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

