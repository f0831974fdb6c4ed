"""corral's seccomp filter under bubblewrap (:mod:`sandbox.backends.seccomp`), attack by attack.

Every rule of the filter is proven by the call it refuses, made from inside a real
bubblewrap sandbox opened through :func:`sandbox.factory.open_sandbox`: a probe
(``python3 -c``, the call through ``ctypes``' ``syscall``) must get ``EPERM``
(``clone3``: ``ENOSYS``). So that no assertion is vacuous, the same probe runs in
a sandbox of the same namespaces with the filter turned off (``seccomp=False``),
where the call must be reachable: it succeeds, or the kernel answers for itself
(``EBADF``, ``EINVAL``, ``ENOSPC``, ...). A call the kernel refuses to a command
without capabilities anyway (``pivot_root``, the new mount API) is shown reachable
on the host instead, as root, with arguments the kernel rejects before acting.

Then what must still work: ``NETLINK_ROUTE``, ``AF_UNIX``, threads (``clone3`` falls
back to ``clone``), ``fork``, Python's ``multiprocessing``, git, shell pipelines
and Node (libuv's io_uring falls back too); and what happens around the filter: a
32-bit system call kills the process, the filter is compiled once per process and
its descriptor reaches no command, and without libseccomp the backend fails closed
unless the config turns the filter off.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sbx_support import TEST_LIMITS, make_repo

from policies.contract import SandboxMode
from sandbox.backends import seccomp
from sandbox.config import BubblewrapConfig, Limits
from sandbox.errors import BackendUnavailable
from sandbox.factory import clear_probe_cache, open_sandbox
from sandbox.results import ExecResult
from tests.backends import require_backend
from tests.timescale import scaled

pytestmark = [
    pytest.mark.bubblewrap,
    pytest.mark.skipif(platform.machine() != "x86_64",
                       reason="the probes use x86_64 system call numbers"),
]

#: The probe, run inside the sandbox: each call in a forked child (a call that succeeds
#: must not change the probe: a namespace, a tracer, a terminal), its outcome printed as
#: ``ok``, an errno name, or ``signal:NAME`` when the call killed the child. ``argv[1:]``
#: names the probes to run (default all), and the socket-family sweeps are added then.
PROBE = r"""
import ctypes, errno, fcntl, json, mmap, os, signal, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
C = ctypes.c_char_p

def call(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr),
                      *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

def forked(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as exc:
            out = "exception:" + type(exc).__name__
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "signal:" + signal.Signals(os.WTERMSIG(status)).name
    return data.decode()

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
mine = ctypes.create_string_buffer(b"corral", 16)
theirs = ctypes.create_string_buffer(16)
src = iovec(ctypes.addressof(mine), 6)
dst = iovec(ctypes.addressof(theirs), 6)

def clone_newuser():
    ctypes.set_errno(0)
    rc = libc.syscall(*(ctypes.c_long(a) for a in (56, 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0)))
    if rc == 0:
        os._exit(0)
    if rc > 0:
        os.waitpid(rc, 0)
        return "ok"
    return errno.errorcode.get(ctypes.get_errno(), "?")

def on_my_terminal(request):
    os.setsid()
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    byte = ctypes.c_char(b"x")
    return call(16, slave, request, ctypes.byref(byte))

def i386_getpid():
    code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # mov eax, 20 (getpid); int 0x80; ret
    function = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code)))
    return "ok" if function() == os.getpid() else "wrong-result"

PROBES = {
    "ptrace": lambda: call(101, 0, 0, 0, 0),  # PTRACE_TRACEME
    "process_vm_readv": lambda: call(310, os.getpid(), ctypes.byref(dst), 1,
                                     ctypes.byref(src), 1, 0),
    "process_vm_writev": lambda: call(311, os.getpid(), ctypes.byref(src), 1,
                                      ctypes.byref(dst), 1, 0),
    "pidfd_getfd": lambda: call(438, os.pidfd_open(os.getpid()), 0, 0),
    "io_uring_setup": lambda: call(425, 1, ctypes.create_string_buffer(120)),
    "io_uring_enter": lambda: call(426, -1, 0, 0, 0, 0, 0),
    "io_uring_register": lambda: call(427, -1, 0, 0, 0),
    "unshare": lambda: call(272, 0x10000000),  # CLONE_NEWUSER
    "clone": clone_newuser,
    "clone3": lambda: call(435, 0, 0),
    "setns": lambda: call(308, -1, 0),
    "add_key": lambda: call(248, C(b"user"), C(b"corral-probe"), C(b"x"), 1, -2),
    "request_key": lambda: call(249, C(b"user"), C(b"corral-probe-missing"), None, 0),
    "keyctl": lambda: call(250, 0, -4, 0),  # KEYCTL_GET_KEYRING_ID of the user keyring
    "perf_event_open": lambda: call(298, None, 0, -1, -1, 0xFFFFFFFF),
    "bpf": lambda: call(321, 0x7FFF, None, 0),
    "userfaultfd": lambda: call(323, 1 | os.O_CLOEXEC),  # UFFD_USER_MODE_ONLY
    "kexec_load": lambda: call(246, 0, 1000, None, 0),
    "kexec_file_load": lambda: call(320, -1, -1, 0, None, 0xFFFFFFFF),
    "init_module": lambda: call(175, None, 0, C(b"")),
    "finit_module": lambda: call(313, -1, C(b""), 0),
    "delete_module": lambda: call(176, C(b"corral_no_such_module"), os.O_NONBLOCK),
    "mount": lambda: call(165, None, None, None, 0, None),
    "umount2": lambda: call(166, C(b"/"), 0x80000000),
    "pivot_root": lambda: call(155, None, None),
    "open_tree": lambda: call(428, -1, None, 0x80000000),
    "move_mount": lambda: call(429, -1, None, -1, None, 0x80000000),
    "fsopen": lambda: call(430, None, 0x80000000),
    "fsconfig": lambda: call(431, -1, 0, None, None, 0),
    "fsmount": lambda: call(432, -1, 0x80000000, 0),
    "fspick": lambda: call(433, -1, None, 0x80000000),
    "mount_setattr": lambda: call(442, -1, None, 0x80000000, None, 0),
    "tiocsti": lambda: on_my_terminal(0x5412),
    "tiocsti_high_bits": lambda: on_my_terminal(0x1_0000_5412),
    "tioclinux": lambda: on_my_terminal(0x541C),
    "netlink_generic": lambda: call(41, 16, 3, 16),  # AF_NETLINK, SOCK_RAW, NETLINK_GENERIC
    "vsock": lambda: call(41, 40, 1, 0),  # AF_VSOCK, SOCK_STREAM
    "alg": lambda: call(41, 38, 5, 0),  # AF_ALG, SOCK_SEQPACKET
    "socketpair_vsock": lambda: call(53, 40, 1, 0, ctypes.create_string_buffer(8)),
    # What must stay allowed.
    "netlink_route": lambda: call(41, 16, 3, 0),
    "unix": lambda: call(41, 1, 1, 0),
    "inet": lambda: call(41, 2, 1, 0),
    "inet6": lambda: call(41, 10, 2, 0),
    "socketpair_unix": lambda: call(53, 1, 1, 0, ctypes.create_string_buffer(8)),
    "unshare_nothing": lambda: call(272, 0),
    "fionread": lambda: call(16, os.pipe()[0], termios.FIONREAD, ctypes.byref(ctypes.c_int())),
    # Other system call tables.
    "i386": i386_getpid,
    "x32": lambda: call(0x40000000 | 39),  # getpid through the x32 ABI
}
names = sys.argv[1:] or list(PROBES)
out = {"probes": {name: forked(PROBES[name]) for name in names}}
if not sys.argv[1:]:
    families = [*range(64), (1 << 32) | 2]  # the last: AF_INET with high bits set
    out["socket"] = {str(f): forked(lambda: call(41, f, 15, 0)) for f in families}
    out["socketpair"] = {str(f): forked(lambda: call(53, f, 15, 0,
                                                     ctypes.create_string_buffer(8)))
                         for f in families}
    status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines())
    out["status"] = {key: status.get(key) for key in ("Seccomp", "Seccomp_filters")}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Attack:
    """One probe of :data:`PROBE` and the rule it attacks."""

    syscall: str
    denied: str = "EPERM"
    #: The call is harmless on the host, as root (arguments the kernel rejects before acting).
    host_safe: bool = False


ATTACKS = {
    "ptrace": Attack("ptrace"),
    "process_vm_readv": Attack("process_vm_readv"),
    "process_vm_writev": Attack("process_vm_writev"),
    "pidfd_getfd": Attack("pidfd_getfd"),
    "io_uring_setup": Attack("io_uring_setup"),
    "io_uring_enter": Attack("io_uring_enter"),
    "io_uring_register": Attack("io_uring_register"),
    "unshare": Attack("unshare"),
    "clone": Attack("clone"),
    "clone3": Attack("clone3", denied="ENOSYS"),
    "setns": Attack("setns"),
    "add_key": Attack("add_key"),
    "request_key": Attack("request_key"),
    "keyctl": Attack("keyctl"),
    "perf_event_open": Attack("perf_event_open"),
    "bpf": Attack("bpf"),
    "userfaultfd": Attack("userfaultfd"),
    **{name: Attack(name, host_safe=True) for name in (
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
        "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
        "fsmount", "fspick", "mount_setattr")},
    "tiocsti": Attack("ioctl"),
    "tiocsti_high_bits": Attack("ioctl"),
    "tioclinux": Attack("ioctl"),
    "netlink_generic": Attack("socket"),
    "vsock": Attack("socket"),
    "alg": Attack("socket"),
    "socketpair_vsock": Attack("socketpair"),
}
ALLOWED = ("netlink_route", "unix", "inet", "inet6", "socketpair_unix", "unshare_nothing",
           "fionread")
#: Socket families the filter lets through (``AF_NETLINK`` with ``NETLINK_ROUTE`` only).
ALLOWED_FAMILIES = {"1", "2", "10", "16"}


@dataclass(frozen=True)
class Outcome:
    """What one sandbox said: the probe's JSON and the real tools' results."""

    probe: dict[str, Any]
    unshare: ExecResult
    strace: ExecResult | None


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("seccomp") / "repo")


@pytest.fixture(scope="module")
def outcomes(repo: Path) -> dict[bool, Outcome]:
    """The probe and the tools in a filtered sandbox (``True``) and an unfiltered one."""
    require_backend("bubblewrap")
    found = {}
    for on in (True, False):
        config = BubblewrapConfig(limits=TEST_LIMITS, seccomp=on)
        with open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                          state_root=repo.parent / "state") as sb:
            done = sb.exec(["python3", "-c", PROBE])
            assert done.exit_code == 0, done.stderr
            strace = sb.exec(["strace", "-o", "/dev/null", "true"]) if shutil.which(
                "strace") else None
            found[on] = Outcome(json.loads(done.stdout), sb.exec(["unshare", "-U", "true"]),
                                strace)
    return found


def on_host(probe: str) -> str:
    """One probe run by this test's own Python on the host."""
    done = subprocess.run([sys.executable, "-c", PROBE, probe], capture_output=True,
                          text=True, timeout=scaled(60), check=True)
    result: str = json.loads(done.stdout)["probes"][probe]
    return result


def test_the_filter_is_installed(outcomes: dict[bool, Outcome]) -> None:
    """Every command runs under one filter (mode 2); with ``seccomp=False``, none."""
    assert outcomes[True].probe["status"] == {"Seccomp": "2", "Seccomp_filters": "1"}
    assert outcomes[False].probe["status"] == {"Seccomp": "0", "Seccomp_filters": "0"}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_rule_refuses_its_attack(outcomes: dict[bool, Outcome], name: str) -> None:
    """The call fails with the rule's errno inside, and is reachable without the filter (the
    same namespaces), or, where they refuse it too (no capability), on the host as root."""
    attack = ATTACKS[name]
    inside = outcomes[True].probe["probes"][name]
    unfiltered = outcomes[False].probe["probes"][name]
    assert inside == attack.denied, (name, inside)
    if unfiltered != attack.denied:
        return
    if not attack.host_safe or os.geteuid() != 0:
        pytest.fail(f"{name}: the namespaces alone refuse it ({unfiltered}) and no control "
                    "shows it reachable")
    host = on_host(name)
    assert host != attack.denied, (name, host)


def test_every_rule_has_an_attack() -> None:
    """A rule added to the filter without a probe here fails this test."""
    assert {rule.syscall for rule in seccomp.DENIED} == {a.syscall for a in ATTACKS.values()}


def test_tiocsti_is_refused_on_the_low_32_bits(outcomes: dict[bool, Outcome]) -> None:
    """The kernel reads an ioctl request as 32 bits: ``TIOCSTI | 1 << 32`` pushes a keystroke
    without the filter (CVE-2019-10063 was flatpak's filter comparing 64), not with it."""
    assert outcomes[False].probe["probes"]["tiocsti_high_bits"] == "ok"
    assert outcomes[True].probe["probes"]["tiocsti_high_bits"] == "EPERM"


@pytest.mark.parametrize("call", ["socket", "socketpair"])
def test_every_socket_family_but_four_is_refused(outcomes: dict[bool, Outcome],
                                                 call: str) -> None:
    """A sweep of families 0-63 (and ``AF_INET`` with high bits set) with an invalid socket
    type: the kernel answers ``EINVAL`` (``EAFNOSUPPORT`` past its last family) without the
    filter; with it, every family but ``AF_UNIX``, ``AF_INET``, ``AF_INET6`` and
    ``AF_NETLINK`` is refused before the kernel looks."""
    inside, unfiltered = outcomes[True].probe[call], outcomes[False].probe[call]
    assert "EPERM" not in unfiltered.values(), unfiltered
    refused = {family for family, result in inside.items() if result == "EPERM"}
    assert refused == set(inside) - ALLOWED_FAMILIES, inside
    for family in ALLOWED_FAMILIES:
        assert inside[family] == unfiltered[family], (family, inside[family])


@pytest.mark.parametrize("name", ALLOWED)
def test_what_tools_need_stays_allowed(outcomes: dict[bool, Outcome], name: str) -> None:
    """``NETLINK_ROUTE`` (glibc's ``getaddrinfo``, ``getifaddrs``), ``AF_UNIX``, loopback
    sockets, ``unshare`` without a user namespace, other ioctls."""
    assert outcomes[True].probe["probes"][name] == "ok"


def test_no_user_namespace_from_the_tools(outcomes: dict[bool, Outcome]) -> None:
    """``unshare -U`` (util-linux): ``EPERM`` from the filter; without it bwrap's
    ``--disable-userns`` refuses it still, later (``ENOSPC``)."""
    inside, unfiltered = outcomes[True].unshare, outcomes[False].unshare
    assert inside.exit_code == 1
    assert inside.stderr == b"unshare: unshare failed: Operation not permitted\n"
    assert unfiltered.stderr == b"unshare: unshare failed: No space left on device\n"


def test_disable_userns_holds_without_the_filter(outcomes: dict[bool, Outcome]) -> None:
    """The layer under the filter: with ``seccomp=False`` a new user namespace is still
    refused, by bwrap's ``--disable-userns`` (``ENOSPC``: a namespace limit of zero), both
    through ``unshare`` and ``clone``. Without that flag both succeed."""
    probes = outcomes[False].probe["probes"]
    assert (probes["unshare"], probes["clone"]) == ("ENOSPC", "ENOSPC")


def test_strace_cannot_trace(outcomes: dict[bool, Outcome]) -> None:
    """``strace true``: refused inside (``PTRACE_TRACEME``), works without the filter."""
    inside, unfiltered = outcomes[True].strace, outcomes[False].strace
    if inside is None or unfiltered is None:
        pytest.skip("strace is not installed (the ctypes probe still covers ptrace)")
    assert inside.exit_code != 0
    assert b"PTRACE_TRACEME" in inside.stderr and b"Operation not permitted" in inside.stderr
    assert unfiltered.exit_code == 0, unfiltered.stderr


def test_a_32_bit_system_call_kills_the_process(outcomes: dict[bool, Outcome]) -> None:
    """``int 0x80`` indexes the i386 table, where none of the rules holds, and the x32 ABI
    another: both kill the process (``SIGSYS``) instead of running unfiltered."""
    unfiltered = outcomes[False].probe["probes"]
    inside = outcomes[True].probe["probes"]
    assert inside["x32"] == "signal:SIGSYS"
    assert unfiltered["x32"] in ("ok", "ENOSYS")
    if unfiltered["i386"] != "ok":
        pytest.skip(f"this kernel runs no 32-bit system calls ({unfiltered['i386']})")
    assert inside["i386"] == "signal:SIGSYS"


# -- ordinary work ---------------------------------------------------------------------------

_PYTHON_WORK = r"""
import asyncio, concurrent.futures, multiprocessing, socket, subprocess, threading

def square(x):
    return x * x

if __name__ == "__main__":
    results = []
    thread = threading.Thread(target=lambda: results.append("thread"))
    thread.start(); thread.join()
    print(*results)
    print(subprocess.run(["echo", "subprocess"], capture_output=True, text=True).stdout.strip())
    for method in ("fork", "spawn", "forkserver"):
        context = multiprocessing.get_context(method)
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
            print(method, sum(pool.map(square, range(10))))
    a, b = socket.socketpair()
    a.sendall(b"pair"); print(b.recv(4).decode())
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept(); client.sendall(b"tcp"); print(peer.recv(3).decode())
    print(sorted(name for _, name in socket.if_nameindex()))
    print(len(socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)) > 0)
    async def main():
        proc = await asyncio.create_subprocess_exec("echo", "asyncio",
                                                    stdout=asyncio.subprocess.PIPE)
        return (await proc.communicate())[0].decode().strip()
    print(asyncio.run(main()))
"""

_GIT_WORK = (
    "set -e; cd /tmp; git init -q w; cd w; echo a > f; git add f; "
    "git -c user.name=c -c user.email=c@example.com commit -q -m one; "
    "git log --format=%s; git status --porcelain | wc -l"
)

_NODE_WORK = r"""
const fs = require('fs'), os = require('os'), cp = require('child_process');
const { Worker } = require('worker_threads');
fs.writeFileSync('/tmp/n.txt', 'node');
fs.readFile('/tmp/n.txt', 'utf8', (err, data) => {
  if (err) throw err;
  console.log(data, Object.keys(os.networkInterfaces()).join(','),
              cp.execSync('echo child').toString().trim());
  const worker = new Worker('require("worker_threads").parentPort.postMessage(6 * 7)',
                            { eval: true });
  worker.on('message', (m) => { console.log('worker', m); });
});
"""


#: The default address-space cap: V8 reserves more than the tests' 1 GiB before it starts.
WORK_LIMITS = TEST_LIMITS.model_copy(update={"memory_bytes": Limits().memory_bytes})


@pytest.fixture(scope="module")
def filtered(repo: Path) -> Iterator[Any]:
    require_backend("bubblewrap")
    with open_sandbox(BubblewrapConfig(limits=WORK_LIMITS), repo=repo,
                      mode=SandboxMode.WORKTREE, state_root=repo.parent / "state-work") as sb:
        yield sb


def test_python_still_works(filtered: Any) -> None:
    """Threads (``clone3`` refused, glibc falls back to ``clone``), subprocesses,
    ``multiprocessing`` by fork, spawn and forkserver (``AF_UNIX``), loopback TCP,
    ``if_nameindex`` and ``getaddrinfo`` (``NETLINK_ROUTE``), asyncio."""
    # A file, not ``-c``: spawn and forkserver children import the main module.
    wrote = filtered.exec(["python3", "-c", "import sys; open('/tmp/work.py', 'w')"
                           ".write(sys.argv[1])", _PYTHON_WORK])
    assert wrote.ok, wrote.stderr
    result = filtered.exec(["python3", "/tmp/work.py"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.decode().splitlines() == [
        "thread", "subprocess", "fork 285", "spawn 285", "forkserver 285", "pair", "tcp",
        "['lo']", "True", "asyncio"]


def test_git_and_shell_pipelines_still_work(filtered: Any) -> None:
    result = filtered.exec(["sh", "-c", _GIT_WORK])
    assert (result.exit_code, result.stdout) == (0, b"one\n0\n"), result.stderr
    pipeline = filtered.exec(["sh", "-c", "printf 'b\\na\\nb\\n' | sort | uniq -c | wc -l"])
    assert (pipeline.exit_code, pipeline.stdout.strip()) == (0, b"2"), pipeline.stderr


def test_node_still_works(filtered: Any) -> None:
    """Node's libuv tries io_uring for file operations and falls back; its
    ``os.networkInterfaces()`` reads the addresses over ``NETLINK_ROUTE``."""
    node = shutil.which("node")
    if node is None or not node.startswith("/usr/"):
        pytest.skip("no node under /usr (the sandbox sees the host's /usr only)")
    result = filtered.exec(["node", "-e", _NODE_WORK])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.decode().splitlines() == ["node lo child", "worker 42"]


# -- around the filter -----------------------------------------------------------------------


def test_no_descriptor_of_the_filter_reaches_the_sandbox(filtered: Any) -> None:
    """bwrap reads the memfd and closes it: neither the supervisor (read from the host) nor
    a command holds it."""
    assert filtered.exec(["true"]).ok
    supervisor = filtered.supervisor_pid
    assert supervisor is not None
    targets = [str(fd.readlink()) for fd in Path(f"/proc/{supervisor}/fd").iterdir()]
    assert not [t for t in targets if "seccomp" in t], targets
    listing = filtered.exec(["sh", "-c", "ls -l /proc/$$/fd"])
    assert b"seccomp" not in listing.stdout, listing.stdout


def test_the_filter_is_compiled_once_per_process(filtered: Any, repo: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Later sandboxes reuse the program: with the compiler broken, a new one still runs."""
    assert filtered.exec(["true"]).ok
    program = seccomp.filter_program()

    def broken(rules: object) -> bytes:
        raise AssertionError("compiled twice")

    monkeypatch.setattr(seccomp, "_compile", broken)
    assert seccomp.filter_program() is program
    with open_sandbox(BubblewrapConfig(limits=TEST_LIMITS), repo=repo,
                      mode=SandboxMode.WORKTREE, state_root=repo.parent / "state-once") as sb:
        assert sb.exec(["grep", "-q", "^Seccomp:.2", "/proc/self/status"]).ok


@pytest.fixture
def no_libseccomp(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """libseccomp missing: its name unloadable, the process's program not built yet; the
    probe cache forgotten before and after (a failed probe is cached)."""
    require_backend("bubblewrap")
    monkeypatch.setattr(seccomp, "LIBRARY", "libcorral-no-such-seccomp.so.0")
    monkeypatch.setattr(seccomp, "_program", None)
    clear_probe_cache()
    yield
    clear_probe_cache()


@pytest.mark.usefixtures("no_libseccomp")
def test_without_libseccomp_the_backend_fails_closed(repo: Path) -> None:
    """No sandbox without the filter unless the config says so; the error names the library
    and how to get it."""
    with pytest.raises(BackendUnavailable) as caught:
        open_sandbox(BubblewrapConfig(limits=TEST_LIMITS), repo=repo,
                     mode=SandboxMode.WORKTREE, state_root=repo.parent / "state-missing")
    error = caught.value
    assert error.code == "seccomp_unavailable"
    assert "libseccomp" in error.message
    assert error.hint is not None and "apt-get install libseccomp2" in error.hint
    assert "seccomp = false" in error.hint


@pytest.mark.usefixtures("no_libseccomp")
def test_without_libseccomp_the_filter_can_be_turned_off(repo: Path) -> None:
    with open_sandbox(BubblewrapConfig(limits=TEST_LIMITS, seccomp=False), repo=repo,
                      mode=SandboxMode.WORKTREE, state_root=repo.parent / "state-off") as sb:
        status = sb.exec(["grep", "^Seccomp:", "/proc/self/status"])
    assert status.stdout == b"Seccomp:\t0\n"


def test_the_program_is_whole_instructions() -> None:
    """``struct sock_filter`` is 8 bytes; the program ends in a return (``BPF_RET``)."""
    program = seccomp.filter_program()
    assert program and len(program) % 8 == 0
    assert program[-8] & 0x07 == 0x06  # BPF_CLASS(code) == BPF_RET
