"""What a command left behind, as the host reads it from the kernel
(``sandbox/backends/leftovers.py``), on real processes, namespaces and cgroups.

Each test makes its own pids cgroup (under a group of its own) and its own processes in
it, and removes both: a PID namespace whose PID 1 stands for the warm supervisor, with a
child and a grandchild of it, beside the namespace's host-side ``unshare`` (in the cgroup,
outside the namespace); and processes of one uid as their real or effective uid only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sandbox.backends.leftovers import (
    cgroup_dir_of,
    namespace_leftovers,
    pid_namespace,
    uid_members,
)
from sandbox.backends.limits import PidsCgroup
from tests.procs import pids_matching, wait_for

PYTHON = "/usr/bin/python3"
WAIT = 60.0
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def cgroup() -> Iterator[PidsCgroup]:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    made = PidsCgroup.create(f"test-{uuid.uuid4().hex[:12]}", "corral-leftovers", 64)
    if made is None:
        pytest.skip("no pids cgroup hierarchy on this machine")
    try:
        yield made
    finally:
        made.remove()


def _start(cgroup: PidsCgroup, argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*cgroup.join_argv(), *argv])


def _one(pattern: str) -> int:
    assert wait_for(lambda: len(pids_matching(pattern)) == 1, WAIT), pattern
    return pids_matching(pattern)[0]


def test_the_namespace_holds_every_descendant_of_the_supervisor_and_nothing_else(
        cgroup: PidsCgroup) -> None:
    """The supervisor's own children, and (through the cgroup) a grandchild that is not its
    child; never the supervisor itself nor the cgroup's member outside the namespace (the
    host-side ``unshare``); ``None`` once the supervisor and its namespace are gone."""
    marker = f"{600 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    inner = f"sh -c 'sleep {marker} & wait'"
    proc = _start(cgroup, ["unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
                           f"{inner} & wait"])
    try:
        grandchild = _one(f"sleep {marker}")
        child = psutil.Process(grandchild).ppid()
        supervisor = psutil.Process(child).ppid()
        namespace = pid_namespace(supervisor)
        assert namespace is not None and namespace != pid_namespace(os.getpid())
        assert psutil.Process(supervisor).ppid() == proc.pid  # unshare, in the cgroup too
        assert set(cgroup.pids()) == {proc.pid, supervisor, child, grandchild}

        assert namespace_leftovers(supervisor, namespace, None) == [child]
        assert namespace_leftovers(supervisor, namespace, cgroup) == sorted([child, grandchild])
        assert cgroup_dir_of(grandchild) == cgroup.path

        os.kill(supervisor, 9)  # PID 1 gone: the kernel kills its namespace
        assert wait_for(lambda: not pids_matching(f"sleep {marker}"), WAIT)
        proc.wait(timeout=WAIT)
        assert namespace_leftovers(supervisor, namespace, cgroup) is None
    finally:
        cgroup.kill_all()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=WAIT)


def _as(real: int, effective: int, marker: str) -> list[str]:
    """A sleep whose real and effective uids are the given ones."""
    return [PYTHON, "-I", "-S", "-c", f"import os; os.setresuid({real}, {effective}, 0); "
            f"os.execv('/bin/sleep', ['sleep', '{marker}'])"]


def test_a_uid_counts_as_real_or_effective_and_the_excluded_never(
        cgroup: PidsCgroup) -> None:
    """Members running as uid 1000 by their real uid alone, by their effective uid alone, or
    both, are the uid's; a root member is not; an excluded pid (the supervisor) never is;
    a cgroup that is gone reads as ``None``."""
    if not Path(PYTHON).is_file():
        pytest.skip("needs the system python3")
    base = f"{700 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    shapes = {"both": (1000, 1000), "real": (1000, 0), "effective": (0, 1000), "root": (0, 0)}
    procs = {name: _start(cgroup, _as(*uids, f"{base}{i}"))
             for i, (name, uids) in enumerate(shapes.items())}
    try:
        pids = {name: _one(f"sleep {base}{i}") for i, name in enumerate(shapes)}
        assert wait_for(lambda: set(cgroup.pids()) == set(pids.values()), WAIT)
        for name, (real, effective) in shapes.items():
            assert psutil.Process(pids[name]).uids()[:2] == (real, effective)
        mine = sorted(pids[n] for n in ("both", "real", "effective"))
        assert uid_members(cgroup.path, 1000, exclude=set()) == mine
        assert uid_members(cgroup.path, 1000, exclude={pids["both"]}) == sorted(
            [pids["real"], pids["effective"]])
        assert uid_members(cgroup.path / "gone", 1000, exclude=set()) is None
    finally:
        cgroup.kill_all()
        for proc in procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=WAIT)
