"""What a command left behind, as the kernel groups it, read from the host.

The warm supervisor (:mod:`sandbox.backends.warm_init`) kills everything a
command left before it reports, but the host never takes its word for it: after
every report, and before anything reads a workspace (a diff, a change scan, a
check), the backend asks the kernel's own grouping whether anything but the
supervisor is left, and stops the whole sandbox if so.

- bubblewrap: the sandbox's PID namespace, whose PID 1 is the supervisor. Every
  process of the namespace descends from PID 1, so its children (``/proc/PID/
  task/PID/children``) are empty exactly when the namespace holds nothing else;
  where the sandbox has a pids cgroup, every member of it that lives in the
  supervisor's namespace is counted too (the children file can miss a process
  that is being reparented at the instant it is read).
- docker: the container's cgroup (found from its init's ``/proc/PID/cgroup``):
  every member whose real or effective uid is the command's, other than the
  supervisor, is left over.

A process counts while it exists in those sets, zombie or not: a zombie leader
whose other threads still run (``syscall(SYS_exit)`` on the main thread) is
listed like any other.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from sandbox.backends.limits import PidsCgroup

__all__ = ["cgroup_dir_of", "describe", "namespace_leftovers", "pid_namespace", "uid_members"]


def pid_namespace(pid: int) -> str | None:
    """The PID namespace of ``pid`` (``pid:[inode]``), ``None`` when it cannot be read."""
    try:
        return str(Path(f"/proc/{pid}/ns/pid").readlink())
    except OSError:
        return None


def _children(pid: int) -> list[int] | None:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return None


def namespace_leftovers(supervisor: int, namespace: str | None,
                        cgroup: PidsCgroup | None) -> list[int] | None:
    """Host pids of the processes in the supervisor's namespace other than itself; ``None``
    when the supervisor is gone (its namespace went with it, or it can no longer be read)."""
    children = _children(supervisor)
    if children is None:
        return None
    found = set(children)
    if cgroup is not None and namespace is not None:
        for pid in cgroup.pids():
            if pid != supervisor and pid_namespace(pid) == namespace:
                found.add(pid)
    return sorted(found)


def cgroup_dir_of(pid: int) -> Path | None:
    """The cgroup directory holding ``pid``: its ``pids`` hierarchy (cgroup v1) or its
    unified one (v2), on this host's ``/proc/self/mountinfo``; ``None`` if not found."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    mounts = _cgroup_mounts()
    if "pids" in paths and "pids" in mounts:
        return mounts["pids"] / paths["pids"].lstrip("/")
    if "" in paths and "" in mounts:
        return mounts[""] / paths[""].lstrip("/")
    return None


def _cgroup_mounts() -> dict[str, Path]:
    """``pids`` -> the v1 pids mountpoint, ``""`` -> the cgroup2 mountpoint."""
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError), Path("/proc/self/mountinfo").open() as handle:
        for line in handle:
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], fields[sep + 3].split(",")
            if fstype == "cgroup" and "pids" in options:
                found.setdefault("pids", Path(fields[4]))
            elif fstype == "cgroup2":
                found.setdefault("", Path(fields[4]))
    return found


def _uids(pid: int) -> tuple[int, int] | None:
    try:
        with Path(f"/proc/{pid}/status").open("rb") as handle:
            for line in handle:
                if line.startswith(b"Uid:"):
                    real, effective = line.split()[1:3]
                    return int(real), int(effective)
    except OSError:
        return None
    return None


def uid_members(cgroup_dir: Path, uid: int, *, exclude: set[int]) -> list[int] | None:
    """Members of ``cgroup_dir`` whose real or effective uid is ``uid``, but ``exclude``;
    ``None`` when the cgroup cannot be read (the container is gone)."""
    try:
        members = [int(p) for p in (cgroup_dir / "cgroup.procs").read_text().split()]
    except OSError:
        return None
    found = []
    for pid in members:
        if pid in exclude:
            continue
        uids = _uids(pid)
        if uids is not None and uid in uids:
            found.append(pid)
    return found


def describe(pids: list[int]) -> list[str]:
    """``pid comm`` for each pid (the host's pids)."""
    described = []
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            comm = "?"
        described.append(f"{pid} {comm}")
    return described
