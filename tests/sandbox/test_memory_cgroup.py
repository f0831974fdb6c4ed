"""The whole sandbox's memory is capped the way a container's is (issue 29, item 1).

bubblewrap: a cgroup ``memory`` controller over every process of the sandbox (no
``RLIMIT_AS``: reserving address space is free, as V8 does for each WebAssembly memory);
docker: the container's own limit from the same ``limits.memory_bytes``. Past the cap the
kernel's OOM killer kills inside the sandbox only and the command's result says
``oom_killed``; the sandbox (and the test process) go on.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sbx_support import TEST_LIMITS, OpenSandbox, backends

from sandbox.backends.limits import MEMORY_RLIMIT_COST, MemoryCgroup, memory_cgroup_missing
from sandbox.config import Limits, default_memory_bytes
from tests.backends import require
from tests.timescale import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]
MEMORY_BACKENDS = ("bubblewrap", "docker")

#: Reserve 8 GiB of address space without touching it (what V8 does per wasm memory).
RESERVE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
PROT_NONE, MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0, 0x02, 0x20, 0x4000
size = 8 << 30
address = libc.mmap(None, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
if address in (None, ctypes.c_void_p(-1).value):
    raise SystemExit(os.strerror(ctypes.get_errno()))
print("reserved", size)
"""

#: Touch 256 MiB, page by page.
TOUCH = """
import mmap
size = 256 << 20
m = mmap.mmap(-1, size)
for offset in range(0, size, 4096):
    m[offset] = 1
print("touched")
"""


backend_bwrap = pytest.mark.parametrize("backend", backends(only=("bubblewrap",), fake=False),
                                        indirect=True)


def _py(code: str) -> list[str]:
    return ["python3", "-c", code]


def _no_rlimit_as() -> str:
    return "grep '^Max address space' /proc/self/limits"


def test_default_is_half_the_machine() -> None:
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert default_memory_bytes() == total // 2
    assert Limits().memory_bytes == total // 2


@pytest.mark.parametrize("backend", backends(only=MEMORY_BACKENDS, fake=False), indirect=True)
def test_default_lets_a_process_reserve_address_space(open_sb: OpenSandbox) -> None:
    """The old 2 GiB RLIMIT_AS made this fail (and with it every V8 WebAssembly memory)."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": Limits().memory_bytes}))
    done = sb.exec(_py(RESERVE))
    assert done.exit_code == 0, done.stderr
    assert done.stdout == f"reserved {8 << 30}\n".encode()
    assert not done.oom_killed
    limits = sb.exec(["sh", "-c", _no_rlimit_as()])
    assert limits.stdout.split()[3:5] == [b"unlimited", b"unlimited"], limits.stdout


WASM = "new WebAssembly.Memory({initial: 1}); console.log('wasm memory made')"


@pytest.mark.parametrize("backend", backends(only=MEMORY_BACKENDS, fake=False), indirect=True)
def test_a_child_can_make_a_wasm_memory(open_sb: OpenSandbox) -> None:
    """What killed every vitest run under bubblewrap: V8 reserves ~10 GiB per wasm memory."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": Limits().memory_bytes}))
    if not sb.exec(["sh", "-c", "command -v node"]).ok:
        pytest.skip("node is not in this sandbox")
    done = sb.exec(["node", "-e", WASM])
    assert done.exit_code == 0, done.stderr
    assert done.stdout == b"wasm memory made\n"


@backend_bwrap
def test_the_old_address_space_cap_kills_a_wasm_memory(open_sb: OpenSandbox) -> None:
    """The measurement behind the change: the same under the old 2 GiB ``RLIMIT_AS``."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": 2 << 30}),
                 memory_mechanism="rlimit")
    if not sb.exec(["sh", "-c", "command -v node"]).ok:
        pytest.skip("node is not in this sandbox")
    done = sb.exec(["node", "-e", WASM])
    assert done.exit_code != 0 and b"memory" in done.stderr, done.stderr


@pytest.mark.parametrize("backend", backends(only=MEMORY_BACKENDS, fake=False), indirect=True)
def test_past_the_cap_is_oom_killed_and_the_sandbox_lives(open_sb: OpenSandbox) -> None:
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": 64 << 20}))
    small = sb.exec(_py(RESERVE))  # reserving is still free under a small cap
    assert small.ok and not small.oom_killed, small.stderr
    hog = sb.exec(_py(TOUCH))
    assert hog.oom_killed
    assert hog.exit_code == 128 + signal.SIGKILL and b"touched" not in hog.stdout
    after = sb.exec(["echo", "alive"])  # the next command runs, and is not an OOM
    assert after.ok and after.stdout == b"alive\n" and not after.oom_killed


@backend_bwrap
def test_bubblewrap_caps_the_sandbox_with_a_cgroup(open_sb: OpenSandbox) -> None:
    """The cgroup holds every process of the sandbox, at the configured cap, with no swap;
    it is gone after teardown."""
    if memory_cgroup_missing() is not None:
        pytest.skip(str(memory_cgroup_missing()))
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": 96 << 20}))
    assert sb.exec(["true"]).ok
    memory = sb._memory  # type: ignore[attr-defined]
    assert isinstance(memory, MemoryCgroup)
    if memory.version == "v1":
        assert (memory.path / "memory.limit_in_bytes").read_text().strip() == str(96 << 20)
        memsw = memory.path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            assert memsw.read_text().strip() == str(96 << 20)
    else:
        assert (memory.path / "memory.max").read_text().strip() == str(96 << 20)
        assert (memory.path / "memory.swap.max").read_text().strip() == "0"
    assert memory.pids(), "the supervisor is in the cgroup"
    path = memory.path
    sb.teardown(discard=True)
    assert not path.exists()


@backend_bwrap
def test_rlimit_mechanism_keeps_the_address_space_cap(open_sb: OpenSandbox) -> None:
    """``memory_mechanism = "rlimit"``: the per-process cap of before, and its cost."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": 1 << 30}),
                 memory_mechanism="rlimit")
    done = sb.exec(_py(RESERVE))
    assert done.exit_code == 1 and done.stderr == b"Cannot allocate memory\n", done.stderr
    assert sb._memory is None  # type: ignore[attr-defined]


_AS_USER = r"""
import json, sys
from pathlib import Path
from policies.contract import SandboxMode
from sandbox.config import BubblewrapConfig, Limits
from sandbox.factory import open_sandbox
repo, state = Path(sys.argv[1]), Path(sys.argv[2])
limits = Limits(timeout_seconds=60, memory_bytes=1 << 30, pids=256)
sb = open_sandbox(BubblewrapConfig(limits=limits), repo=repo, mode=SandboxMode.WORKTREE,
                  state_root=state)
try:
    done = sb.exec(["sh", "-c", "grep '^Max address space' /proc/self/limits"])
finally:
    sb.teardown(discard=True)
# The same through the CLI: `corral run` says so on stderr, before the child runs.
agents = repo / ".ngn" / "agents"
agents.mkdir(parents=True)
(agents / "w.md").write_text("---\nname: w\ndescription: w\ntools: [shell]\n---\nDo it.\n")
(state / "s.yaml").write_text('- text: done\n')
import contextlib, io
from executor.cli import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    try:
        main(["run", "--root", str(repo), "--trust-project", "--no-personal", "--backend",
              "bubblewrap", "--agent", "w", "--script", str(state / "s.yaml"), "go"])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"warning": sb.warning, "limits": done.stdout.decode(), "code": code,
                  "stderr": err.getvalue()}))
"""
_USER_UID = 1000


@pytest.mark.bubblewrap
def test_without_a_cgroup_a_normal_user_gets_the_rlimit_and_its_cost(tmp_path: Path) -> None:
    """corral run by a normal user (uid 1000: the memory hierarchy is root's, nothing is
    delegated): the sandbox still starts, capped per process by RLIMIT_AS, and its
    warning says there is no memory cgroup and what the fallback costs."""
    require("bubblewrap")
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run corral as another user")
    home = Path(subprocess.run(["mktemp", "-d", "/tmp/corral-user-XXXXXX"],
                               capture_output=True, text=True, check=True).stdout.strip())
    try:
        os.chown(home, _USER_UID, _USER_UID)
        user = [setpriv, "--reuid", str(_USER_UID), "--regid", str(_USER_UID),
                "--clear-groups"]
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home),
               "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        repo = home / "repo"
        subprocess.run([*user, sys.executable, "-c",
                        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                        "from sbx_support import make_repo; from pathlib import Path; "
                        f"make_repo(Path({str(repo)!r}))"],
                       check=True, capture_output=True, cwd=REPO_ROOT, env=env)
        done = subprocess.run([*user, sys.executable, "-c", _AS_USER,
                               str(repo), str(home / "state")], capture_output=True, text=True,
                              cwd=REPO_ROOT, env=env, timeout=scaled(100), check=False)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1] if done.stdout else "null")
    assert result, (done.stdout, done.stderr)
    assert result["limits"].split()[3:5] == [str(1 << 30)] * 2, result["limits"]
    assert result["warning"] == f"{memory_cgroup_missing_for_user()}: {MEMORY_RLIMIT_COST}"
    assert "RLIMIT_AS" in result["warning"] and "WebAssembly" in result["warning"]
    assert result["code"] == 0, result["stderr"]
    assert f"warning: {result['warning']}" in result["stderr"]


def memory_cgroup_missing_for_user() -> str:
    return ("no writable cgroup memory controller (a cgroup v1 memory hierarchy, or "
            "cgroup v2 with memory delegated to corral)")
