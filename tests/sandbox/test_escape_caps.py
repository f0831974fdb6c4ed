"""Escape suite, privileges (threats.md B6): what every sandboxed command holds and may change.

A command must hold no capability in any set (inheritable, permitted,
effective, bounding, ambient), run with ``no_new_privs``, and, on docker,
under the engine's seccomp filter; this holds in every mode and whatever uid
the command runs as: corral often runs as root (CI does), and then the
bubblewrap child is uid 0 in its namespace and a docker child in
``workspace-write`` mode on a root-owned checkout is uid 0 too.

Why each set: without ``--cap-drop ALL`` a bubblewrap child started by root
holds every capability (``CapEff`` ``000001fffeffffff``) and reads files no
uid may read (``CAP_DAC_OVERRIDE``: the file test below performs that attack);
without ``cap_drop: ["ALL"]`` a docker child keeps docker's default bounding
set (``00000000a80425fb``), which a setuid-root binary turns into effective
capabilities as soon as ``no-new-privileges`` is gone too. Docker 20.10 starts
even a uid-0 exec with empty effective and permitted sets, so there the drop
shows only in ``CapBnd``: the status test reads every set for that reason.

Two more ways to privileges: a nested user namespace (whose creator holds every
capability inside it) is refused, and the system view (``/usr``, ``/etc``,
``/``) is read-only in every mode, whatever uid the command has.

The host backend runs commands as the user, with the user's capabilities and
without ``no_new_privs``: a documented non-defence, a strict expected failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from tests.backends import require
from tests.timescale import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]
CAP_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
NO_CAPS = dict.fromkeys(CAP_SETS, "0000000000000000")
#: ``Seccomp: 2`` is filter mode: docker's default profile (``seccomp=unconfined`` shows 0).
SECCOMP_FILTER = "2"
MODES = [pytest.param(mode, id=mode.value) for mode in SandboxMode]
HOST_HAS_PRIVILEGES = ("commands run as the user, with the user's capabilities and without "
                       "no_new_privs")


def status_of(sb: BaseSandbox, argv: list[str]) -> dict[str, str]:
    """The ``/proc/<pid>/status`` fields a command printed (``argv`` prints its own)."""
    result = sb.exec(argv)
    assert result.exit_code == 0, result.stderr
    fields = {}
    for line in result.stdout.decode().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def privileges(fields: dict[str, str]) -> dict[str, str]:
    """The fields this suite pins: the capability sets and ``NoNewPrivs``."""
    return {key: fields.get(key, "<missing>") for key in (*CAP_SETS, "NoNewPrivs")}


EXPECTED = {**NO_CAPS, "NoNewPrivs": "1"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "backend", backends(only=("host", "bubblewrap", "docker"), host_xfail=HOST_HAS_PRIVILEGES),
    indirect=True)
def test_commands_hold_no_capabilities(open_sb: OpenSandbox, backend: str,
                                       mode: SandboxMode) -> None:
    """The command itself (no shell: read-only children get none) and a process it starts
    (``sh -c``, then ``cat``), in every mode. Pinned by value, so a partial drop (only the
    effective set, say) fails as much as none."""
    sb = open_sb(mode)
    direct = status_of(sb, ["cat", "/proc/self/status"])
    nested = status_of(sb, ["sh", "-c", "cat /proc/self/status"])
    assert privileges(direct) == EXPECTED, direct
    assert privileges(nested) == EXPECTED, nested
    if backend == "docker":
        assert direct["Seccomp"] == SECCOMP_FILTER, direct
        assert nested["Seccomp"] == SECCOMP_FILTER, nested


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_unreadable_file_stays_unreadable(open_sb: OpenSandbox, mode: SandboxMode) -> None:
    """The attack behind the capability sets: a mode-000 file of the workspace's owner is
    readable only with ``CAP_DAC_OVERRIDE``/``CAP_DAC_READ_SEARCH``. Run by root, bubblewrap
    without ``--cap-drop ALL`` prints it. The file is made on the host, after the sandbox
    opened, with the workspace's owner."""
    sb = open_sb(mode)
    locked = sb.root / "locked.txt"
    locked.write_text("CANARY-DAC\n")
    owner = sb.root.stat()
    os.chown(locked, owner.st_uid, owner.st_gid)
    locked.chmod(0)
    try:
        result = sb.exec(["cat", str(locked)])
        assert b"CANARY-DAC" not in result.stdout
        assert result.exit_code == 1
        assert b"Permission denied" in result.stderr, result.stderr
    finally:
        locked.unlink()


@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_no_nested_user_namespace(open_sb: OpenSandbox, backend: str) -> None:
    """A new user namespace gives its creator every capability inside it (the remount attack
    of test_escape_fs, and the kernel's user-namespace attack surface). bubblewrap's
    ``--disable-userns`` leaves the child a namespace limit of zero (``ENOSPC``); docker's
    seccomp profile refuses ``unshare(CLONE_NEWUSER)`` to a command without capabilities
    (``EPERM``). Without them ``unshare --user --map-root-user`` succeeds."""
    sb = open_sb()
    result = sb.exec(["unshare", "--user", "--map-root-user", "sh", "-c",
                      "grep CapEff /proc/self/status"])
    # bubblewrap: corral's seccomp filter refuses it first (without the filter,
    # --disable-userns's "No space left on device": test_disable_userns_holds_without_the_filter)
    error = "Operation not permitted"
    assert (result.exit_code, result.stdout) == (1, b""), result.stdout
    assert result.stderr == f"unshare: unshare failed: {error}\n".encode()


#: Directories of the system view a command must not change (``/`` is bubblewrap's own tmpfs
#: root, remounted read-only, and the container's read-only root filesystem).
SYSTEM_DIRS = ("/usr", "/usr/bin", "/etc", "/bin", "/")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_system_is_read_only(open_sb: OpenSandbox, mode: SandboxMode) -> None:
    """Every mode, including ``workspace-write`` where a docker command on a root-owned
    checkout is uid 0 and owns ``/usr``: ``EROFS`` is checked before permissions, so a missing
    ``--ro-bind`` (a ``--bind`` of ``/usr`` would write the host's ``/usr``), a missing
    ``--remount-ro /`` or docker without ``read_only`` shows whatever the uid. Pinned per
    directory; anything a mutant managed to create on the host is removed."""
    sb = open_sb(mode)
    name = f"corral-probe-{sb.id}"
    script = "".join(f'touch "{d.rstrip("/")}/{name}" 2>&1; echo "$?"\n' for d in SYSTEM_DIRS)
    try:
        result = sb.exec(["sh", "-c", script])
        lines = result.stdout.decode().splitlines()
        expected = []
        for directory in SYSTEM_DIRS:
            path = f"{directory.rstrip('/')}/{name}"
            expected += [f"touch: cannot touch '{path}': Read-only file system", "1"]
        assert lines == expected
    finally:
        for directory in SYSTEM_DIRS:
            leaked = Path(directory, name)
            if leaked.exists():
                leaked.unlink()


# -- corral itself run by a normal user ----------------------------------------------------

_AS_USER = """
import json, sys
from pathlib import Path
from policies.contract import SandboxMode
from sandbox.config import BubblewrapConfig, Limits
from sandbox.factory import open_sandbox
repo, state = Path(sys.argv[1]), Path(sys.argv[2])
limits = Limits(timeout_seconds=60, memory_bytes=1 << 30, pids=256)
out = {}
for mode in SandboxMode:
    sb = open_sandbox(BubblewrapConfig(limits=limits), repo=repo, mode=mode, state_root=state)
    try:
        result = sb.exec(["cat", "/proc/self/status"])
        out[mode.value] = {"exit": result.exit_code, "stdout": result.stdout.decode(),
                           "stderr": result.stderr.decode()}
    finally:
        sb.teardown(discard=True)
print(json.dumps(out))
"""
#: The uid corral runs as in the unprivileged case (no passwd entry is needed).
_USER_UID = 1000


@pytest.fixture
def user_dir() -> Iterator[Path]:
    """A directory the unprivileged uid owns (``tmp_path`` is private to root)."""
    path = Path(subprocess.run(["mktemp", "-d", "/tmp/corral-user-XXXXXX"], capture_output=True,
                               text=True, check=True).stdout.strip())
    os.chown(path, _USER_UID, _USER_UID)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.bubblewrap
def test_commands_hold_no_capabilities_when_corral_is_not_root(user_dir: Path) -> None:
    """The same pin with corral itself run by a normal user (uid 1000, no groups): bubblewrap
    is then unprivileged and drops everything on its own, so this guards the other half of
    the promise, not ``--cap-drop``. Needs root to switch users; docker is left out (a
    normal user reaches the engine only through the docker group, i.e. as root)."""
    require("bubblewrap")
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run corral as another user")
    user = ["--reuid", str(_USER_UID), "--regid", str(_USER_UID), "--clear-groups"]
    repo = user_dir / "repo"
    subprocess.run([setpriv, *user, sys.executable, "-c",
                    f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                    f"from sbx_support import make_repo; from pathlib import Path; "
                    f"make_repo(Path({str(repo)!r}))"],
                   check=True, capture_output=True, cwd=REPO_ROOT,
                   env=_user_env(user_dir))
    done = subprocess.run([setpriv, *user, sys.executable, "-c", _AS_USER, str(repo),
                           str(user_dir / "state")], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=_user_env(user_dir), timeout=scaled(100), check=False)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert sorted(results) == sorted(mode.value for mode in SandboxMode)
    for mode, result in results.items():
        assert result["exit"] == 0, (mode, result["stderr"])
        fields = dict(line.split(":\t", 1) for line in result["stdout"].splitlines()
                      if ":\t" in line)
        assert fields["Uid"].split()[0] == str(_USER_UID), (mode, fields["Uid"])
        assert privileges({k: v.strip() for k, v in fields.items()}) == EXPECTED, mode


def _user_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home),
            "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
