"""corral's own seccomp filter for the bubblewrap backend: kernel surface no command needs.

The namespaces of :mod:`sandbox.backends.bwrap` decide what a command can *see*;
this filter narrows which parts of the kernel it can *call*, so a bug in one of
them (the usual way out of a namespace) is out of reach. It allows everything
but the calls below, which fail with ``EPERM`` (``clone3``: ``ENOSYS``), never a
kill, so a tool that probes for a feature degrades as it would on a kernel
without it. The filter is built with libseccomp (``libseccomp.so.2``, through
:mod:`ctypes`), compiled once per process, and handed to ``bwrap --seccomp FD``,
which installs it on the sandbox's PID 1 (the warm supervisor), so every command
inherits it and none can remove it.

Denied, and why:

- ``ptrace``, ``process_vm_readv``, ``process_vm_writev``, ``pidfd_getfd``: reading
  and writing another process's memory and descriptors (the supervisor is not
  dumpable too; ``pidfd_getfd`` is ptrace by another name);
- ``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``: a second system call
  interface no filter can see into, and a long record of kernel escalations;
- a new user namespace: ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` (its creator
  holds every capability inside it: the door to mount, netfilter and other
  capability-gated kernel code; bwrap's ``--disable-userns`` stops it too, later).
  ``clone3`` passes its flags in memory, which a filter cannot read, so it is
  refused whole with ``ENOSYS``: glibc, Rust and Go then fall back to ``clone``,
  whose flags register is filtered;
- ``setns``: joining another namespace;
- ``add_key``, ``request_key``, ``keyctl``: the kernel keyring, shared beyond the
  sandbox and a frequent source of kernel bugs;
- ``perf_event_open``, ``bpf``, ``userfaultfd``: kernel profiling, eBPF and page
  fault handling from user space, each a known exploitation primitive;
- ``kexec_load``, ``kexec_file_load``, ``init_module``, ``finit_module``,
  ``delete_module``: replacing the kernel or changing its modules;
- ``mount``, ``umount2``, ``pivot_root`` and the new mount API (``open_tree``,
  ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``, ``mount_setattr``):
  the sandbox's mounts are made by bwrap and must stay as made;
- ``ioctl`` ``TIOCSTI`` and ``TIOCLINUX``: pushing keystrokes into a terminal
  (bubblewrap's CVE-2017-5226; ``--new-session`` already detaches the command from
  corral's terminal). The request is compared on its low 32 bits, as the kernel
  reads it, so setting high bits does not slip past (flatpak's CVE-2019-10063);
- ``socket`` and ``socketpair`` of any family but ``AF_UNIX``, ``AF_INET``,
  ``AF_INET6``, and ``AF_NETLINK`` with ``NETLINK_ROUTE``: no packet sockets, no
  ``AF_VSOCK`` (the hypervisor's sockets, which no network namespace confines), no
  ``AF_ALG``, ``AF_KEY``, Bluetooth, TIPC, RDS and the other rarely used families whose
  modules the kernel loads on demand. ``NETLINK_ROUTE`` stays: glibc's
  ``getaddrinfo``, ``getifaddrs`` and ``if_nameindex`` read the addresses through it
  (Node's ``os.networkInterfaces()`` fails without it), and it reaches only the
  sandbox's own network namespace, where the command holds no capability to change
  anything. ``AF_UNIX`` stays too: build tools, Python's ``multiprocessing``, git's
  credential cache and language servers talk over it, and it reaches no host
  daemon (no host socket is bound in, and the abstract namespace belongs to the
  network namespace); ``AF_INET``/``AF_INET6`` meet only the namespace's loopback.
  The family is compared on the whole register: a value with high bits set is
  refused, whatever the kernel would have read.

Not filtered: ``personality``. Its dangerous flags (``ADDR_NO_RANDOMIZE``,
``READ_IMPLIES_EXEC``) only weaken the command's own processes, the kernel clears
them on a set-id exec, and an allow-by-default libseccomp filter cannot keep the
query value ``0xffffffff`` while refusing them (one comparison per argument).

Other architectures: the filter is for the native ABI only. A 32-bit system call
(``int 0x80``, or the x32 ABI on x86_64) would index another table, where none of
these rules holds, so it kills the process (``SIGSYS``) instead: 32-bit programs
do not run under bubblewrap.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import threading
from dataclasses import dataclass

from sandbox.errors import BackendUnavailable

__all__ = ["DENIED", "LIBRARY", "Arg", "Rule", "filter_program", "program_fd"]

#: The C library the filter is built with (``seccomp_export_bpf`` writes the program).
LIBRARY = "libseccomp.so.2"
_HINT = ("install libseccomp (Debian/Ubuntu: apt-get install libseccomp2), or set "
         "seccomp = false in the bubblewrap config to run without corral's filter")

# libseccomp's constants (seccomp.h): actions, filter attributes, comparison operators.
_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_ACT_ERRNO = 0x00050000
_ATTR_ACT_BADARCH = 2
_CMP_NE, _CMP_EQ, _CMP_GE, _CMP_MASKED_EQ = 1, 4, 5, 7
_NR_SCMP_ERROR = -1

_CLONE_NEWUSER = 0x10000000
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_AF_NETLINK, _NETLINK_ROUTE = 16, 0
#: Families below ``AF_NETLINK`` that are refused (every one above it is): all but
#: ``AF_UNIX`` (1), ``AF_INET`` (2) and ``AF_INET6`` (10).
_LOW_FAMILIES = (0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15)
_LOW32 = 0xFFFFFFFF


@dataclass(frozen=True)
class Arg:
    """One comparison of a system call argument (libseccomp's ``struct scmp_arg_cmp``)."""

    index: int
    op: int
    datum_a: int
    datum_b: int = 0


@dataclass(frozen=True)
class Rule:
    """The call ``syscall`` fails with ``error`` when every comparison of ``args`` holds."""

    syscall: str
    args: tuple[Arg, ...] = ()
    error: int = errno.EPERM


def _flag(index: int, flag: int) -> Arg:
    """Argument ``index`` has ``flag`` set."""
    return Arg(index, _CMP_MASKED_EQ, flag, flag)


def _low32(index: int, value: int) -> Arg:
    """Argument ``index`` is ``value`` in its low 32 bits (an ``int`` the kernel truncates)."""
    return Arg(index, _CMP_MASKED_EQ, _LOW32, value)


def _whole(syscalls: tuple[str, ...]) -> tuple[Rule, ...]:
    return tuple(Rule(name) for name in syscalls)


def _families(syscall: str) -> tuple[Rule, ...]:
    return (
        Rule(syscall, (Arg(0, _CMP_GE, _AF_NETLINK + 1),)),
        *(Rule(syscall, (Arg(0, _CMP_EQ, family),)) for family in _LOW_FAMILIES),
        Rule(syscall, (Arg(0, _CMP_EQ, _AF_NETLINK), Arg(2, _CMP_NE, _NETLINK_ROUTE))),
    )


#: Every rule of the filter (see the module docstring for why each).
DENIED: tuple[Rule, ...] = (
    *_whole(("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")),
    *_whole(("io_uring_setup", "io_uring_enter", "io_uring_register")),
    Rule("unshare", (_flag(0, _CLONE_NEWUSER),)),
    Rule("clone", (_flag(0, _CLONE_NEWUSER),)),
    Rule("clone3", error=errno.ENOSYS),
    *_whole(("setns", "add_key", "request_key", "keyctl")),
    *_whole(("perf_event_open", "bpf", "userfaultfd")),
    *_whole(("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")),
    *_whole(("mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
             "fsconfig", "fsmount", "fspick", "mount_setattr")),
    Rule("ioctl", (_low32(1, _TIOCSTI),)),
    Rule("ioctl", (_low32(1, _TIOCLINUX),)),
    *_families("socket"),
    *_families("socketpair"),
)


class _Cmp(ctypes.Structure):
    _fields_ = (("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64))


class _Version(ctypes.Structure):
    _fields_ = (("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint))


def _unavailable(message: str, code: str, **context: object) -> BackendUnavailable:
    return BackendUnavailable(message, code=code, operation="seccomp", hint=_HINT,
                              context=context)


def _load() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(LIBRARY, use_errno=True)
    except OSError as exc:
        raise _unavailable(
            f"libseccomp could not be loaded ({exc}): bubblewrap's commands run under "
            "corral's seccomp filter, which it builds", "seccomp_unavailable",
            library=LIBRARY) from exc
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.restype = None
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_Cmp))
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_version.argtypes = ()
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    return lib


def _version(lib: ctypes.CDLL) -> str:
    found = lib.seccomp_version()
    return f"{found.contents.major}.{found.contents.minor}.{found.contents.micro}"


def _compile(rules: tuple[Rule, ...]) -> bytes:
    lib = _load()
    version = _version(lib)
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise _unavailable("seccomp_init failed", "seccomp_failed", version=version)
    try:
        def check(rc: int, what: str) -> None:
            if rc < 0:
                raise _unavailable(f"libseccomp {version}: {what} failed: "
                                   f"{os.strerror(-rc)}", "seccomp_failed", version=version)

        check(lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _ACT_KILL_PROCESS),
              "killing a system call of another architecture")
        for rule in rules:
            number = lib.seccomp_syscall_resolve_name(rule.syscall.encode())
            if number == _NR_SCMP_ERROR:
                raise _unavailable(
                    f"libseccomp {version} does not know the system call {rule.syscall}: "
                    "the filter would miss it", "seccomp_failed", version=version)
            cmps = (_Cmp * max(len(rule.args), 1))(
                *(_Cmp(a.index, a.op, a.datum_a, a.datum_b) for a in rule.args))
            check(lib.seccomp_rule_add_array(ctx, _ACT_ERRNO | rule.error, number,
                                             len(rule.args), cmps),
                  f"the rule for {rule.syscall}")
        out = os.memfd_create("corral-seccomp-export")
        try:
            check(lib.seccomp_export_bpf(ctx, out), "exporting the program")
            size = os.fstat(out).st_size
            program = os.pread(out, size, 0)
        finally:
            os.close(out)
    finally:
        lib.seccomp_release(ctx)
    if not program or len(program) % 8:
        raise _unavailable(f"libseccomp {version} wrote no usable program "
                           f"({len(program)} bytes)", "seccomp_failed", version=version)
    return program


_lock = threading.Lock()
_program: bytes | None = None


def filter_program() -> bytes:
    """The compiled filter (``struct sock_filter[]``, as ``bwrap --seccomp`` reads it), built
    on first use and kept for the process; :class:`BackendUnavailable` when libseccomp is
    missing or cannot build it (never a weaker filter)."""
    global _program  # noqa: PLW0603 - the one per-process cache
    with _lock:
        if _program is None:
            _program = _compile(DENIED)
        return _program


def program_fd(program: bytes) -> int:
    """A new memfd holding ``program`` from offset 0, for one ``bwrap --seccomp FD`` (each bwrap
    reads its own to the end; close-on-exec until ``pass_fds`` hands it over). The caller
    closes it once bwrap started."""
    fd = os.memfd_create("corral-seccomp")
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd
