"""Escape suite, processes: secrets (threats.md B4), network (B5), process and kernel abuse
(B6), and a backend that is not really there (B6.35).

The fake backend runs no process, so it is left out here (except where only the
result's shape matters). The host backend has no process isolation; its
expected failures are marked, and the two attacks that would hurt the CI
machine (fork bomb, memory hog) are marked without being run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sbx_support import TEST_LIMITS, OpenSandbox, backends, kill_matching

from policies.contract import SandboxMode
from sandbox.config import AutoConfig, BubblewrapConfig, DockerConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import clear_probe_cache, open_sandbox
from sandbox.gc import gc
from sandbox.gitsafe import child_git_env
from tests.procs import pids_matching, wait_for
from tests.timescale import scaled

NO_OS_ISOLATION = "commands run on the host as the user"
PROCESS_BACKENDS = ("host", "bubblewrap", "docker")


def _py(code: str) -> list[str]:
    return ["python3", "-c", code]


# -- B4 secrets -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS), indirect=True)
def test_child_env_is_allowlist_only(open_sb: OpenSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """bwrap forwards the whole environment unless ``--clearenv`` (verified on this machine
    kind); without the allowlist (a fixed environment for every backend, plus ``--clearenv``
    for bwrap) ``SBX_CANARY_TOKEN`` and ``SSH_AUTH_SOCK`` reach the child."""
    monkeypatch.setenv("SBX_CANARY_TOKEN", "sk-canary-123")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    sb = open_sb()
    result = sb.exec(["env"])
    names = {line.split("=", 1)[0] for line in result.stdout.decode().splitlines()}
    assert b"sk-canary-123" not in result.stdout
    git = set(child_git_env([Path("/")]))  # the child's git, hardened (sandbox.gitsafe)
    assert names <= {"PATH", "HOME", "LANG", "TERM", "TMPDIR", "PWD", "HOSTNAME", *git}


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_host_home_not_visible(open_sb: OpenSandbox) -> None:
    """Without a fresh HOME and a minimal root, ``cat ~/.ssh/id_rsa`` (with the host's path)
    reads the user's key."""
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY canary\n")
    sb = open_sb()
    result = sb.exec(["cat", str(home / ".ssh" / "id_rsa")])
    assert b"canary" not in result.stdout
    # Not "permission denied": the path does not exist in the child's view at all.
    assert (result.exit_code, result.stderr) == (
        1, f"cat: {home / '.ssh' / 'id_rsa'}: No such file or directory\n".encode())


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_parent_pid_not_visible(open_sb: OpenSandbox) -> None:
    """Without a PID namespace the child reads ``/proc/<parent>/environ`` and ``cmdline``."""
    sb = open_sb()
    result = sb.exec(_py(
        "import os\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n"
        "        try: print(open(f'/proc/{p}/cmdline','rb').read().replace(b'\\0',b' ').decode())\n"
        "        except OSError: pass\n"))
    assert result.exit_code == 0
    own = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert own.strip() not in [line.strip() for line in result.stdout.decode().splitlines()]


# -- B5 network -------------------------------------------------------------------------------


@pytest.fixture
def listeners() -> Iterator[tuple[int, int]]:
    """A TCP and a UDP socket on the parent's loopback."""
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.5)
        yield tcp.getsockname()[1], udp.getsockname()[1]


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_network_none_blocks_tcp_udp_dns(open_sb: OpenSandbox, listeners: tuple[int, int]
                                         ) -> None:
    """Without a network namespace the child reaches the parent's loopback services (and,
    through the host's routes, the internet)."""
    tcp_port, udp_port = listeners
    sb = open_sb()
    result = sb.exec(_py(
        "import socket\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"u.sendto(b'x', ('127.0.0.1', {udp_port}))\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {tcp_port}), timeout=3)\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        "else:\n"
        "    print('connected')\n"))
    # The child's own loopback: up, but nobody listens there.
    assert (result.exit_code, result.stdout) == (0, b"ConnectionRefusedError\n"), result.stderr
    interfaces = sb.exec(["cat", "/proc/net/dev"]).stdout.decode()
    assert [line.split(":")[0].strip() for line in interfaces.splitlines()[2:]] == ["lo"]
    lookup = sb.exec(["getent", "hosts", "example.com"])
    assert (lookup.exit_code, lookup.stdout) == (2, b"")  # 2: not found (no resolver reachable)


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_no_host_sockets_reachable(open_sb: OpenSandbox, tmp_path: Path) -> None:
    """A path socket stands in for ``docker.sock`` / ``$SSH_AUTH_SOCK``, an abstract one for
    D-Bus. Without mount and network namespaces the child connects to both."""
    path_sock = socket.socket(socket.AF_UNIX)
    abstract = socket.socket(socket.AF_UNIX)
    name = f"corral-test-{uuid.uuid4().hex}"
    try:
        path_sock.bind(str(tmp_path / "agent.sock"))
        path_sock.listen()
        abstract.bind(f"\0{name}")
        abstract.listen()
        sb = open_sb()
        # A path socket is not in the child's mount namespace at all; an abstract one is
        # looked up in the child's own network namespace, where nobody listens.
        expected = {str(tmp_path / "agent.sock"): "FileNotFoundError",
                    f"\0{name}": "ConnectionRefusedError",
                    "/var/run/docker.sock": "FileNotFoundError"}
        for target, error in expected.items():
            result = sb.exec(_py(
                "import socket\n"
                f"try: socket.socket(socket.AF_UNIX).connect({target!r})\n"
                "except OSError as exc: print(type(exc).__name__)\n"
                "else: print('connected')\n"))
            assert (result.exit_code, result.stdout.decode()) == (0, f"{error}\n"), target
    finally:
        path_sock.close()
        abstract.close()


# -- B6 processes and the kernel --------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS), indirect=True)
def test_tiocsti_ioctl_fails_in_child(backend: str, repo: Path, state_root: Path) -> None:
    """bubblewrap CVE-2017-5226: a child sharing the parent's controlling terminal pushes
    keystrokes into it with ``TIOCSTI``. The parent here runs on a pty it controls. Defences:
    every command starts in a new session (``start_new_session``; bwrap ``--new-session``;
    docker exec without a tty); without them the child prints ``child-pushed-keys``."""
    helper = Path(__file__).with_name("sbx_tty_helper.py")
    done = subprocess.run([sys.executable, str(helper), backend, str(repo), str(state_root)],
                          capture_output=True, text=True, timeout=scaled(60), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "parent-has-tty" in done.stdout
    assert "child-has-no-tty" in done.stdout


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_no_new_privs_set(open_sb: OpenSandbox) -> None:
    """Without ``PR_SET_NO_NEW_PRIVS`` a setuid binary in the image or on the host raises the
    child's privileges."""
    sb = open_sb()
    status = sb.exec(["cat", "/proc/self/status"]).stdout.decode()
    assert "NoNewPrivs:\t1" in status


@pytest.mark.parametrize(
    "backend", backends(only=PROCESS_BACKENDS, host_not_run="no process limit: would fork-bomb "
                        "the machine running the tests"), indirect=True)
def test_fork_bomb_contained(open_sb: OpenSandbox) -> None:
    """Without a pids limit (bwrap has none of its own) the bomb exhausts the host's pid space."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"pids": 64}))
    result = sb.exec(["sh", "-c", "bomb() { bomb | bomb & }; bomb; wait"], timeout=5)
    assert result.duration_seconds < 20
    after = sb.exec(["sh", "-c", "ls -d /proc/[0-9]* | wc -l"])
    assert after.ok and int(after.stdout) <= 10, after.stdout


@pytest.mark.parametrize(
    "backend", backends(only=PROCESS_BACKENDS, host_not_run="no memory limit: would exhaust the "
                        "machine running the tests"), indirect=True)
def test_memory_limit_kills_child_not_parent(open_sb: OpenSandbox) -> None:
    """Without a memory cap the child's allocation takes the host's memory (and the OOM killer
    may pick the parent)."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"memory_bytes": 256 << 20}))
    result = sb.exec(_py("x = b'a' * (1 << 30)\nprint(len(x))"), timeout=scaled(60))
    assert not result.timed_out and result.stdout == b""
    if sb.backend == "bubblewrap" and sb.warning:  # no memory cgroup here: RLIMIT_AS fails it
        assert result.exit_code == 1 and result.stderr.endswith(b"MemoryError\n"), result.stderr
    else:  # the sandbox's memory cgroup: the kernel's OOM killer sends SIGKILL, and says so
        assert result.exit_code == 128 + signal.SIGKILL, result.stderr
        assert result.oom_killed
    assert sb.exec(["true"]).ok


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_disk_fill_stops_at_quota(open_sb: OpenSandbox) -> None:
    """Without ``RLIMIT_FSIZE`` and a size-capped tmpfs, a child fills the worktree's and the
    host's ``/tmp`` disk."""
    limits = TEST_LIMITS.model_copy(update={"file_size_bytes": 4 << 20,
                                            "tmp_size_bytes": 8 << 20})
    sb = open_sb(limits=limits)
    big = sb.exec(["sh", "-c", "head -c 16777216 /dev/zero > big.bin"])
    # RLIMIT_FSIZE: SIGXFSZ kills the writer at the limit.
    assert (big.exit_code, big.stderr) == (128 + signal.SIGXFSZ, b"File size limit exceeded\n")
    assert (sb.root / "big.bin").stat().st_size == 4 << 20
    tmp = sb.exec(["sh", "-c", 'for i in 1 2 3; do head -c 4000000 /dev/zero > "$TMPDIR/f$i" '
                               "|| exit 1; done"])
    # The size-capped tmpfs: ENOSPC before the third file is complete.
    assert tmp.exit_code == 1
    assert tmp.stderr == b"head: error writing 'standard output': No space left on device\n"


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS), indirect=True)
def test_output_truncated_at_cap_and_process_not_blocked(open_sb: OpenSandbox) -> None:
    """An undrained pipe stalls the child at 64 KiB and the parent waits forever (SWE-ReX #301);
    without a cap the parent keeps every byte in memory."""
    sb = open_sb()
    size = 64 << 20
    result = sb.exec(["head", "-c", str(size), "/dev/zero"], output_cap=65536, timeout=scaled(60))
    assert result.exit_code == 0 and not result.timed_out
    assert len(result.stdout) == 65536 and result.stdout_bytes == size and result.truncated


@pytest.mark.parametrize(
    "backend", backends(only=PROCESS_BACKENDS, host_xfail="a double-forked setsid process "
                        "leaves the process group and outlives the command"), indirect=True)
def test_no_survivors_after_timeout(open_sb: OpenSandbox, marker: str,
                                    markers: Callable[[], str]) -> None:
    """Without a PID namespace (or a kill of the whole container), ``setsid`` and double-forked
    children outlive the timed-out command."""
    other = markers()
    sb = open_sb()
    result = sb.exec(["sh", "-c", f"(setsid sleep {marker} &); sleep {other} & sleep 30"],
                     timeout=2)
    assert result.timed_out
    assert wait_for(lambda: not pids_matching(f"sleep {marker}")
                    and not pids_matching(f"sleep {other}"), timeout=scaled(3))


@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_process_limit_stops_forks(open_sb: OpenSandbox) -> None:
    """The bounded version of the fork bomb, safe to run without the defence: 64 sleeping
    children under a limit of 32. Without the pids cgroup (bubblewrap) or ``pids_limit``
    (docker) all 64 start."""
    sb = open_sb(limits=TEST_LIMITS.model_copy(update={"pids": 32}))
    result = sb.exec(_py(
        "import os, time\n"
        "started = 0\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('fork failed:', exc.strerror)\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    started += 1\n"
        "print('started', started)\n"), timeout=scaled(60))
    assert result.exit_code == 0, result.stderr
    failed, started = result.stdout.decode().splitlines()
    assert failed == "fork failed: Resource temporarily unavailable"
    assert 20 <= int(started.split()[1]) < 32, started


@pytest.mark.parametrize("backend", backends(only=PROCESS_BACKENDS), indirect=True)
def test_command_session_leader_is_inside_the_sandbox(open_sb: OpenSandbox) -> None:
    """``--new-session`` (bubblewrap; the runner's own new session backs it, so the TIOCSTI
    test alone cannot see it go): the command's session leader is a process of the sandbox.
    Without it the session belongs to a process outside bubblewrap's PID namespace, which
    the child sees as session 0 (and shares with whatever corral's runner started)."""
    sb = open_sb()
    result = sb.exec(_py("import os\nsid = os.getsid(0)\n"
                         "print(sid, sid > 0 and os.path.exists(f'/proc/{sid}'))"))
    assert result.exit_code == 0, result.stderr
    session, visible = result.stdout.decode().split()
    assert int(session) > 0 and visible == "True", result.stdout  # a process the child sees


def _exact_command(argv: list[str]) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == argv:
            found.append(proc.pid)
    return found


_OPEN_AND_WAIT = """
import sys
from pathlib import Path
from policies.contract import SandboxMode
from sandbox.config import BubblewrapConfig
from sandbox.factory import open_sandbox
sb = open_sandbox(BubblewrapConfig(), repo=Path(sys.argv[1]), mode=SandboxMode.WORKTREE,
                  state_root=Path(sys.argv[2]))
print("opened", flush=True)
sb.exec(["sleep", sys.argv[3]], timeout=120)
"""


@pytest.mark.parametrize("backend", backends(only=("bubblewrap",)), indirect=True)
def test_sandbox_dies_with_corral(backend: str, repo: Path, state_root: Path,
                                  marker: str) -> None:
    """corral killed (SIGKILL: no cleanup runs) while a command runs. Without
    ``--die-with-parent`` bwrap and the command live on, orphaned, for as long as the
    command likes. (Docker keeps its container until ``corral gc``, by design.)"""
    proc = subprocess.Popen([sys.executable, "-c", _OPEN_AND_WAIT, str(repo), str(state_root),
                             marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "opened\n"
        # The command itself, not bwrap or the namespace's PID 1 (whose command lines hold
        # the same words): once it runs, bwrap's setup (die-with-parent included) is done.
        assert wait_for(lambda: bool(_exact_command(["sleep", marker])), timeout=scaled(30))
        proc.kill()
        proc.wait(timeout=scaled(30))
        assert wait_for(lambda: not pids_matching(f"sleep {marker}"), timeout=scaled(10)), \
            "the sandboxed command outlived corral"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=scaled(30))
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        kill_matching(f"sleep {marker}")
        gc(state_root)  # the crashed run's worktree and cgroup


@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_memory_and_cpu_are_recorded(open_sb: OpenSandbox) -> None:
    sb = open_sb()
    result = sb.exec(_py("x = b'a' * (64 << 20)\nsum(range(3_000_000))"))
    assert result.ok, result.stderr
    assert result.peak_rss_bytes is not None and result.peak_rss_bytes >= 64 << 20
    assert result.cpu_seconds is not None and result.cpu_seconds > 0


# -- B6.35 a backend that is not there --------------------------------------------------------


def test_backend_unavailable_refuses_to_run(repo: Path, state_root: Path) -> None:
    """A sandbox silently not applied (missing bwrap, userns disabled, no engine) must refuse,
    never fall back to running unsandboxed (cade #103, qwen-code #11614)."""
    clear_probe_cache()
    broken_bwrap = BubblewrapConfig(bwrap="/bin/false")
    no_engine = DockerConfig(base_url="unix:///nonexistent/docker.sock")
    for config, code in ((broken_bwrap, "bwrap_unavailable"), (no_engine, "docker_unavailable")):
        with pytest.raises(BackendUnavailable) as failed:
            open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE, state_root=state_root)
        assert failed.value.code == code
    with pytest.raises(BackendUnavailable) as raised:
        open_sandbox(AutoConfig(bubblewrap=broken_bwrap, docker=no_engine), repo=repo,
                     mode=SandboxMode.WORKTREE, state_root=state_root)
    assert raised.value.code == "no_isolation_backend"
    assert set(raised.value.context) == {"bubblewrap", "docker"}
    assert "host" in (raised.value.hint or "")
    assert not (state_root / "sandboxes").exists() or not any((state_root / "sandboxes").iterdir())


@pytest.mark.parametrize("backend", backends(only=("docker",)), indirect=True)
def test_missing_image_names_the_build_command(backend: str, repo: Path, state_root: Path) -> None:
    """Never pull: a missing image is an error that says how to build it, with its tag
    (the command an installed corral has, not a checkout's script)."""
    config = DockerConfig(image="corral-sandbox:does-not-exist")
    with pytest.raises(BackendUnavailable) as raised:
        open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE, state_root=state_root)
    assert raised.value.code == "image_missing"
    assert "`corral image build --tag corral-sandbox:does-not-exist`" in (raised.value.hint or "")


@pytest.mark.parametrize(
    "backend", backends(only=PROCESS_BACKENDS, host_not_run="the command's parent is the test "
                        "process itself: kill -9 $PPID would kill pytest"), indirect=True)
def test_no_survivors_after_command_kills_its_wrapper(open_sb: OpenSandbox, marker: str,
                                                     markers: Callable[[], str]) -> None:
    """Found in review (docker): the exec wrapper killed what a command left only if the wrapper
    itself survived; ``kill -9 $PPID`` killed it, and the double-forked processes lived on into
    the next command (the reviewer raced a symlink swap against host-side reads with one).
    Defences: docker runs the kill-all as its own exec after every command, and waits until no
    process of the child's uid is left; bubblewrap's PID namespace dies with its PID 1."""
    other = markers()
    sb = open_sb()
    result = sb.exec(["sh", "-c", f"(setsid sleep {marker} >/dev/null 2>&1 &); "
                                  f"(sleep {other} >/dev/null 2>&1 &); kill -9 $PPID"],
                     timeout=scaled(30))
    assert not result.timed_out
    for value in (marker, other):  # gone when exec returns, not later
        assert not pids_matching(f"sleep {value}")
    left = sb.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
    assert marker not in left.stdout.decode() and other not in left.stdout.decode()
