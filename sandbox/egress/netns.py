"""The proxy's port inside a sandbox's own network namespace.

A socket belongs to the network namespace it was created in, whichever thread
later uses it. :func:`listen_in_namespace` starts a short-lived host thread that
joins the sandbox's namespace (``setns``, which changes only the calling
thread's network namespace), binds ``127.0.0.1:PROXY_PORT`` there, listens, and
ends; the listening socket stays in the sandbox's namespace and the host's
proxy accepts on it. No process, file or mount is added to the sandbox, so
nothing there can kill, replace or re-point the route; the namespace keeps
nothing else but loopback. ``setns`` needs ``CAP_SYS_ADMIN`` over the namespace:
corral as root (bubblewrap's and docker's namespaces alike). Without root,
bubblewrap takes the socket route (:func:`socket_route`): the proxy listens on a Unix
socket bound read-only into the sandbox, which its supervisor relays the port to.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from pathlib import Path

from sandbox.errors import SandboxError

__all__ = ["PROXY_ENV", "PROXY_PORT", "SANDBOX_SOCKET", "TEST_SOCKET_ROUTE",
           "listen_in_namespace", "listen_on_socket", "socket_route"]

#: Where a sandbox without root's route sees the proxy's Unix socket (a read-only bind of
#: a directory of its own state dir); its supervisor relays ``127.0.0.1:3128`` there.
SANDBOX_DIR = "/run/corral-egress"
SANDBOX_SOCKET = f"{SANDBOX_DIR}/proxy.sock"
#: Test-only: take the Unix socket route as root too (so the suite, run as root, covers it).
TEST_SOCKET_ROUTE = False

#: The proxy's port on the sandbox's own loopback.
PROXY_PORT = 3128
_PROXY = f"http://127.0.0.1:{PROXY_PORT}"
#: What every command of a sandbox with egress sees (SOCKS5 and HTTP on the one port).
PROXY_ENV: dict[str, str] = {
    **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), _PROXY),
    **dict.fromkeys(("ALL_PROXY", "all_proxy"), f"socks5h://127.0.0.1:{PROXY_PORT}"),
    "NO_PROXY": "", "no_proxy": ""}
_CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def _namespace(pid: int) -> int:
    return Path(f"/proc/{pid}/ns/net").stat().st_ino


def listen_in_namespace(pid: int | None, port: int = PROXY_PORT) -> socket.socket:
    """A socket listening on ``127.0.0.1:port`` in the network namespace of ``pid`` (a
    sandbox's supervisor or init); ``egress_unavailable`` when it cannot be made there,
    or when that namespace is this machine's own."""
    def failed(why: str) -> SandboxError:
        return SandboxError(f"the egress proxy cannot listen in the sandbox: {why}",
                            code="egress_unavailable", operation="start",
                            hint="--net allow needs corral to run as root, on bubblewrap or "
                            "docker; run without --net allow to keep the sandbox offline")

    if pid is None:
        raise failed("the sandbox's process was not found")
    try:
        if _namespace(pid) == _namespace(os.getpid()):
            raise failed("the sandbox shares this machine's network namespace")
    except OSError as exc:
        raise failed(str(exc)) from exc
    made: list[socket.socket] = []
    errors: list[OSError] = []

    def inside() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(64)
            made.append(listener)
        except OSError as exc:
            errors.append(exc)

    # This thread ends in the sandbox's namespace: no other code ever runs in it.
    thread = threading.Thread(target=inside, name="corral-egress-netns", daemon=True)
    thread.start()
    thread.join()
    if errors or not made:
        raise failed(str(errors[0]) if errors else "no socket was made")
    return made[0]


def socket_route() -> bool:
    """Whether bubblewrap reaches the proxy over a Unix socket and a relay in the sandbox's
    supervisor (corral is not root: it cannot join the namespace) instead of a port
    :func:`listen_in_namespace` opens there."""
    return os.geteuid() != 0 or TEST_SOCKET_ROUTE


def listen_on_socket(directory: Path) -> socket.socket:
    """A Unix socket listening as ``directory/proxy.sock`` (made here, mode 0700; bound
    through ``/proc/self/fd`` so a long state dir fits the 108-byte socket path limit)."""
    directory.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(f"/proc/self/fd/{fd}/proxy.sock")
        listener.listen(64)
    except OSError as exc:
        listener.close()
        raise SandboxError(f"the egress proxy cannot listen on {directory}: {exc}",
                           code="egress_unavailable", operation="start") from exc
    finally:
        os.close(fd)
    return listener
