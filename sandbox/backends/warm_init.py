"""The warm sandbox's supervisor: the one long-lived process inside a child's sandbox.

This file runs *inside* the sandbox, under the sandbox's own ``python3 -I -S``
(3.11 in bubblewrap and in the docker image), so it imports the standard
library only and nothing of corral. The host sends its source as the first
frame of the control channel (:data:`BOOTSTRAP` reads it), then one frame per
command; the supervisor starts each command, enforces its deadline and output
cap from inside, and, when the command ends (exit, deadline, lost host), kills
every other process it may signal and reaps them before it reports, so
nothing a command starts outlives it.

Control channel: the supervisor's stdin (host -> supervisor) and stdout
(supervisor -> host). A frame is one kind byte, a 4-byte big-endian length and
the payload. Host -> supervisor: ``C`` a command (JSON). Supervisor -> host:
``H`` hello (JSON, once), ``s`` started, ``o``/``e`` kept stdout/stderr bytes,
``R`` the result (JSON). Commands never see the channel: each gets its own
pipes and ``/dev/null`` as stdin, every other descriptor closed, and the
supervisor is not dumpable (``PR_SET_DUMPABLE`` 0), so a command of the same
uid can neither ptrace it nor open ``/proc/<supervisor>/fd/*`` or ``mem``.

Modes (``argv[1]``): ``pid1`` (bubblewrap: the namespace's PID 1; signals
from inside the namespace cannot kill it, ``kill(-1)`` reaches every other
process of the namespace, orphans are reparented to it) and ``uid`` (docker:
an exec as the command's uid; ``kill(-1)`` reaches every process of that uid
but itself, and it is a child subreaper so orphans come back to it). A command
can kill a ``uid`` supervisor; the host then falls back to its own reaper.
"""

# os.path and open() on purpose: importing pathlib would slow every supervisor's start.
# ruff: noqa: PTH113, PTH118, PTH123, PTH208

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time

#: The ``python3 -c`` program that reads this file's source from stdin and runs it.
BOOTSTRAP = (
    "import os\n"
    "def _r(n):\n"
    "    b = b''\n"
    "    while len(b) < n:\n"
    "        c = os.read(0, n - len(b))\n"
    "        if not c:\n"
    "            raise SystemExit(0)\n"
    "        b += c\n"
    "    return b\n"
    "exec(compile(_r(int.from_bytes(_r(4), 'big')), 'corral-warm-init', 'exec'))\n"
)

_READ = 1 << 16
_HEADER = 5
_MAX_INPUT = 64 << 20
#: How long output pipes may stay open once every process is dead (a pipe held by a
#: process stuck in the kernel must not stall the report).
_DRAIN_GRACE = 1.0
#: How long killing every survivor may take before the supervisor gives up (the host
#: then stops the whole sandbox from outside).
_REAP_LIMIT = 5.0
_PR_SET_DUMPABLE, _PR_GET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 3, 36


class _HostGone(Exception):
    """The control channel closed: corral is gone."""


def _prctl(option: int, value: int = 0) -> int:
    import ctypes  # noqa: PLC0415 - only the supervisor needs it

    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.prctl(option, value, 0, 0, 0))
    if result < 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")
    return result


class Supervisor:
    """One sandbox's command loop (see the module docstring)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.pid = os.getpid()
        self.uid = os.getuid()
        self.inbox = bytearray()

    # -- the control channel -------------------------------------------------------------

    def send(self, kind: bytes, payload: bytes) -> None:
        data = kind + len(payload).to_bytes(4, "big") + payload
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    def send_json(self, kind: bytes, value: object) -> None:
        self.send(kind, json.dumps(value).encode())

    def fill(self) -> None:
        """Read what the host sent; :class:`_HostGone` at end of file."""
        chunk = os.read(0, _READ)
        if not chunk:
            raise _HostGone
        self.inbox += chunk
        if len(self.inbox) > _MAX_INPUT:
            raise _HostGone  # not a host that speaks this protocol

    def next_frame(self) -> tuple[bytes, bytes]:
        while True:
            if len(self.inbox) >= _HEADER:
                size = int.from_bytes(self.inbox[1:_HEADER], "big")
                if len(self.inbox) >= _HEADER + size:
                    kind = bytes(self.inbox[:1])
                    payload = bytes(self.inbox[_HEADER:_HEADER + size])
                    del self.inbox[:_HEADER + size]
                    return kind, payload
            self.fill()

    # -- life -----------------------------------------------------------------------------

    def setup(self) -> None:
        # PID 1 of a namespace gets only the signals it has a handler for: keep none
        # (Python's own SIGINT handler would let a command raise KeyboardInterrupt here).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _prctl(_PR_SET_DUMPABLE, 0)
        if _prctl(_PR_GET_DUMPABLE) != 0:
            raise OSError("the supervisor is still dumpable")
        if self.mode == "uid":
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def serve(self) -> None:
        self.setup()
        self.send_json(b"H", {"pid": self.pid, "mode": self.mode})
        try:
            while True:
                kind, payload = self.next_frame()
                if kind == b"C":
                    self.run(json.loads(payload))
        except _HostGone:
            self.kill_all()

    # -- one command ----------------------------------------------------------------------

    def run(self, command: dict[str, object]) -> None:
        argv = [str(a) for a in command["argv"]]  # type: ignore[attr-defined]
        env = {str(k): str(v) for k, v in command["env"].items()}  # type: ignore[attr-defined]
        cwd = str(command["cwd"])
        timeout = float(command["timeout"])  # type: ignore[arg-type]
        cap = int(command["cap"])  # type: ignore[call-overload]
        if self.mode == "uid":
            _trust_git_dirs(env.get("HOME"))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        try:
            proc = _spawn(argv, cwd, env)
        except OSError as exc:
            in_cwd = exc.filename == cwd
            code = 127 if isinstance(exc, FileNotFoundError) and not in_cwd else 126
            what = f"cannot enter {cwd}" if in_cwd else argv[0]
            message = f"corral: {what}: {exc.strerror or exc}\n".encode()
            self.send(b"s", b"")
            self.send(b"e", message[:cap])
            self.send_json(b"R", {"exit": code, "timed_out": False, "duration": 0.0,
                                  "peak_rss": 0, "cpu": 0.0, "out_bytes": 0,
                                  "err_bytes": len(message), "survivors": [], "clean": True})
            return
        self.send(b"s", str(proc.pid).encode())
        self.supervise(proc, start, start + timeout, cap, before)

    def supervise(self, proc: subprocess.Popen[bytes], start: float, deadline: float, cap: int,
                  before: resource.struct_rusage) -> None:
        if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE above
            raise RuntimeError("command pipes missing")
        kinds = {proc.stdout.fileno(): b"o", proc.stderr.fileno(): b"e"}
        kept = {b"o": 0, b"e": 0}
        total = {b"o": 0, b"e": 0}
        pidfd = os.pidfd_open(proc.pid)
        selector = selectors.DefaultSelector()
        for fd in (*kinds, pidfd, 0):
            selector.register(fd, selectors.EVENT_READ)
        status: int | None = None
        peak = 0
        timed_out = False
        survivors: list[str] = []
        clean = True
        drain_until = deadline
        try:
            while status is None or (kinds and time.monotonic() < drain_until):
                if status is None and time.monotonic() >= deadline:
                    timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    status, peak = self.finish(proc.pid, pidfd, selector)
                    survivors, clean = self.reap_survivors()
                    drain_until = time.monotonic() + _DRAIN_GRACE
                limit = deadline if status is None else drain_until
                for key, _ in selector.select(max(0.0, limit - time.monotonic())):
                    fd = int(key.fd)
                    if fd == 0:
                        try:
                            self.fill()
                        except _HostGone:
                            self.kill_all()
                            raise
                    elif fd == pidfd:
                        status, peak = self.finish(proc.pid, pidfd, selector)
                        survivors, clean = self.reap_survivors()
                        drain_until = time.monotonic() + _DRAIN_GRACE
                    else:
                        chunk = os.read(fd, _READ)
                        kind = kinds.get(fd)
                        if kind is None:
                            continue
                        if not chunk:
                            selector.unregister(fd)
                            del kinds[fd]
                            continue
                        total[kind] += len(chunk)
                        room = cap - kept[kind]
                        if room > 0:
                            kept[kind] += min(room, len(chunk))
                            self.send(kind, chunk[:room])
        finally:
            selector.close()
            os.close(pidfd)
            proc.stdout.close()
            proc.stderr.close()
        duration = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        code = os.waitstatus_to_exitcode(status)
        self.send_json(b"R", {
            "exit": None if timed_out else (code if code >= 0 else 128 - code),
            "timed_out": timed_out, "duration": duration, "peak_rss": peak,
            "cpu": max(0.0, cpu), "out_bytes": total[b"o"], "err_bytes": total[b"e"],
            "survivors": survivors, "clean": clean,
        })

    def finish(self, pid: int, pidfd: int, selector: selectors.BaseSelector) -> tuple[int, int]:
        """Reap the command (it has exited or was killed): (wait status, peak RSS bytes)."""
        selector.unregister(pidfd)
        _, status, usage = os.wait4(pid, 0)
        return status, usage.ru_maxrss * 1024

    def others(self) -> list[str]:
        """Every process this supervisor must not leave behind, as ``pid comm``.

        A process counts while any of its threads is not dead: a leader that ended only
        its own thread (``syscall(SYS_exit)``) shows ``Z`` in ``/proc/PID/stat`` while its
        other threads run on, so each thread is read (``/proc/PID/task/*/stat``). Only a
        process whose every thread is a zombie (``Z``/``X``) runs no code and is left to
        be reaped.
        """
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == self.pid:
                continue
            try:
                if self.mode == "uid" and not _runs_as(name, self.uid):
                    continue
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
                live = _live_threads(name)
            except OSError:
                continue
            if live:
                comm = stat.partition(b"(")[2].rpartition(b")")[0]
                found.append(f"{name} {comm.decode('utf-8', 'replace')}")
        return found

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def reap_survivors(self) -> tuple[list[str], bool]:
        """Kill every other process (``kill -9 -1``) until none is left: (what was, clean).

        The kill is sent whatever a listing shows (a listing can miss what the kernel still
        runs): as the namespace's PID 1 (bubblewrap) it reaches every other process of the
        namespace, as the command's uid (docker) every process of that uid. As PID 1 the
        kernel's own answer says whether anything else exists at all (``ESRCH``: no other
        process in the namespace), so the common case reads no ``/proc``; otherwise the
        supervisor lists what is there (a process counts while any of its threads lives)
        and kills until none is left.
        """
        self.reap()
        if self.mode == "pid1":
            try:
                os.kill(-1, 0)  # signal 0: is there any other process in the namespace?
            except ProcessLookupError:
                return [], True  # the kernel says none: nothing to list, nothing to kill
        survivors = self.others()
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not survivors:
            self.reap()
            return [], True
        limit = time.monotonic() + _REAP_LIMIT
        while True:
            self.reap()
            if not self.others():
                self.reap()
                return survivors, True
            if time.monotonic() > limit:
                return survivors, False
            time.sleep(0.002)  # dying processes: their exit is not observable otherwise
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)

    def kill_all(self) -> None:
        self.reap_survivors()


def _runs_as(pid: str, uid: int) -> bool:
    """Whether ``pid``'s real or effective uid is ``uid`` (``/proc/PID/status``: the owner of
    ``/proc/PID`` is root for a process that made itself non-dumpable)."""
    with open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            if line.startswith(b"Uid:"):
                real, effective = line.split()[1:3]
                return uid in (int(real), int(effective))
    return False


def _live_threads(pid: str) -> int:
    """How many threads of ``pid`` are not dead (``Z``/``X``); 0 once it is gone."""
    live = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2][1:2]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            live += 1
    return live


def _spawn(argv: list[str], cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start one command in its own session, its own pipes, nothing else inherited."""
    try:
        proc = subprocess.Popen(  # noqa: S603 - the command the host asked for, never a shell
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
        )
    except OSError as exc:
        import errno  # noqa: PLC0415 - rare path

        if exc.errno != errno.ENOEXEC:
            raise
        # What a shell does with a file that has no ``#!``: run it as a shell script.
        path = _which(argv[0], env.get("PATH", os.defpath))
        proc = subprocess.Popen(  # noqa: S603 - the same command, read by /bin/sh as a shell would
            ["/bin/sh", path, *argv[1:]], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            close_fds=True,
        )
    # Never let subprocess reap (and lose) a status this supervisor collects itself.
    proc.returncode = 0
    return proc


def _which(name: str, path: str) -> str:
    if "/" in name:
        return name
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate):
            return candidate
    return name


def _trust_git_dirs(home: str | None) -> None:
    """docker: the child's own git reads the root-owned (read-only) git dir only when
    ``safe.directory`` says so, which git reads from the global config alone."""
    if not home:
        return
    path = os.path.join(home, ".gitconfig")
    if not os.path.lexists(path):
        with contextlib.suppress(OSError), open(path, "x") as handle:
            handle.write("[safe]\n\tdirectory = *\n")


def _egress_relay(path: str, port: int = 3128) -> None:
    """``--net allow`` without root: listen on ``127.0.0.1:port`` of this namespace and relay
    each connection to the host's egress proxy on the Unix socket ``path`` (bind-mounted
    read-only); a thread of this supervisor, which no command can signal or trace."""
    import socket  # noqa: PLC0415 - only with egress
    import threading  # noqa: PLC0415

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)

    def relay(conn: socket.socket) -> None:
        with conn, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
            try:
                upstream.connect(path)
            except OSError:
                return
            peers = {conn: upstream, upstream: conn}
            with selectors.DefaultSelector() as selector:
                for sock in peers:
                    selector.register(sock, selectors.EVENT_READ)
                while True:
                    for key, _ in selector.select():
                        source = conn if key.fileobj is conn else upstream
                        try:
                            chunk = source.recv(_READ)
                            if not chunk:
                                return
                            peers[source].sendall(chunk)
                        except OSError:
                            return

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=relay, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def main(argv: list[str]) -> None:
    """Serve the control channel until the host goes away."""
    mode = argv[1] if len(argv) > 1 else "pid1"
    if len(argv) > 2 and argv[2].startswith("egress="):
        _egress_relay(argv[2][len("egress="):])
    Supervisor(mode).serve()


if __name__ in {"corral-warm-init", "__main__"}:
    main(sys.argv)
