"""Helpers of the egress tests: the test-only resolver, a PEP 503 index, in-sandbox clients.

Every server listens on 127.0.0.x. The proxy reaches them only through the two
test-only Python attributes of :mod:`sandbox.egress.checks` (``RESOLVER``: test
names such as ``docs.test`` -> 127.0.0.1; ``TEST_LOOPBACK``: 127.0.0.1 may be
connected to), which no config, variable or definition can set.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import ipaddress
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sandbox.egress import checks
from tests.executor.fetch_support import Names

__all__ = ["CLIENT", "Index", "pip_argv", "serve_index", "test_names"]

#: ``python3 -c CLIENT MODE HOST PORT [TARGET]``: one raw request to the proxy on
#: 127.0.0.1:3128 (or, mode ``raw``, a direct TCP connection); prints what came back.
CLIENT = r"""
import socket, sys
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def out(what):
    print(repr(what)); sys.exit(0)
if mode == "raw":
    try:
        s = socket.create_connection((host, port), timeout=5)
    except OSError as exc:
        out(("unreachable", exc.errno))
    s.sendall(b"GET /secret HTTP/1.0\r\nHost: x\r\n\r\n"); out(("reached", s.recv(200)))
if mode == "udp":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.sendto(b"exfil", (host, port)); sent = "sent"
    except OSError as exc:
        sent = exc.errno
    try:
        socket.getaddrinfo("exfil-" + "x" * 20 + ".test", 53); dns = "resolved"
    except OSError as exc:
        dns = type(exc).__name__
    out(("udp", sent, dns))
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
if mode == "connect":
    target = sys.argv[4].encode("utf-8", "surrogateescape").replace(b"\\0", b"\0")
    s.sendall(b"CONNECT " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    head = s.recv(4096)
    if head.startswith(b"HTTP/1.1 200"):
        s.sendall(b"GET /secret HTTP/1.0\r\nHost: docs.test\r\n\r\n")
        body = b""
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            body += chunk
        out(("tunnel", body[-40:]))
    out(("refused", head.split(b"\r\n")[0], head.split(b"\r\n\r\n", 1)[-1][:300]))
if mode.startswith("socks"):
    s.sendall(b"\x05\x01\x00"); assert s.recv(2) == b"\x05\x00"
    if mode == "socks-name":
        name = host.encode("utf-8", "surrogateescape").replace(b"\\0", b"\0")
        req = b"\x05\x01\x00\x03" + bytes([len(name)]) + name
    else:
        req = b"\x05\x01\x00\x01" + socket.inet_aton(host)
    s.sendall(req + port.to_bytes(2, "big"))
    reply = s.recv(10)
    if reply[1] == 0:
        s.sendall(b"GET /secret HTTP/1.0\r\nHost: docs.test\r\n\r\n")
        out(("tunnel", s.recv(4096)[-40:]))
    out(("refused", reply[1]))
"""


def test_names(monkeypatch: pytest.MonkeyPatch) -> Names:
    """The proxy's test-only resolver in place, and 127.0.0.1 reachable through it."""
    names = Names()
    monkeypatch.setattr(checks, "RESOLVER", names)
    monkeypatch.setattr(checks, "TEST_LOOPBACK", frozenset({ipaddress.ip_address("127.0.0.1")}))
    return names


test_names.__test__ = False  # type: ignore[attr-defined]


def _wheel(name: str, version: str) -> bytes:
    """A minimal pure-python wheel: one module, ``{name}.py``, printing its version."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"VERSION = {version!r}\n".encode(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
             .encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
             b"Tag: py3-none-any\n"}
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in files.items()) + f"{dist}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{dist}/RECORD", record)
    return buffer.getvalue()


class Index:
    """A PEP 503 simple index of one package on 127.0.0.1; ``seen``: the paths asked for."""

    def __init__(self, name: str = "corraltestpkg", version: str = "1.0") -> None:
        self.name, self.version = name, version
        self.filename = f"{name}-{version}-py3-none-any.whl"
        self.wheel = _wheel(name, version)
        self.seen: list[str] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                index.seen.append(self.path)
                digest = hashlib.sha256(index.wheel).hexdigest()
                pages = {"/simple/": f'<a href="/simple/{index.name}/">{index.name}</a>'.encode(),
                         f"/simple/{index.name}/": f'<a href="/files/{index.filename}#sha256='
                         f'{digest}">{index.filename}</a>'.encode()}
                if self.path in pages:
                    body, ctype = pages[self.path], "text/html"
                elif self.path == f"/files/{index.filename}":
                    body, ctype = index.wheel, "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


@contextlib.contextmanager
def serve_index() -> Iterator[Index]:
    """An :class:`Index` on 127.0.0.1 for the ``with`` block."""
    index = Index()
    index.server = ThreadingHTTPServer(("127.0.0.1", 0), index.handler())
    index.server.daemon_threads = True
    thread = threading.Thread(target=index.server.serve_forever,
                              kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        index.server.shutdown()
        index.server.server_close()
        thread.join(timeout=10)


#: pip in each backend: Debian's on the host's /usr (bubblewrap); the wheel ensurepip bundles,
#: run from its zip, in the docker image (Debian's python3-pip-whl; it installs no pip).
_DOCKER_PIP = ("import glob, runpy, sys; "
               "sys.path.insert(0, glob.glob('/usr/share/python-wheels/pip-*.whl')[0]); "
               "sys.argv[0] = 'pip'; runpy.run_module('pip', run_name='__main__', alter_sys=True)")


def pip_argv(backend: str, *args: str) -> list[str]:
    """``python -m pip ARGS`` as the backend's sandbox can run it."""
    base = (["python3", "-m", "pip"] if backend == "bubblewrap"
            else ["python3", "-c", _DOCKER_PIP])
    return [*base, "--disable-pip-version-check", "--no-cache-dir", *args]
