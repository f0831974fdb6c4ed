"""Local web servers and a test resolver for the web_fetch tests (127.0.0.x only).

:class:`Site` is a real HTTP server (``http.server``, a thread) on a loopback
address; every request it answers is kept in ``seen`` (path, Host header), so a
test can prove a request never arrived. :class:`Names` is the resolver hook
(``executor.tools.web_fetch.RESOLVER``): test names such as ``docs.test`` map to
loopback addresses, each answer may change per call (DNS rebinding), and every
lookup is counted. Nothing here reaches beyond 127.0.0.0/8.
"""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from executor.tools import web_fetch
from executor.tools.context import ToolContext
from executor.tools.dispatch import ToolOutput
from executor.tools.web_fetch import WebFetchArgs, WebFetchTool
from policies.network import NetworkConfig
from tests.timescale import scaled

__all__ = ["PAGE", "Names", "Site", "certificate", "fetch", "serve", "use_names"]

PAGE = ("<html><head><title>Local docs</title><script>var stolen = 'SCRIPT-TEXT';</script>"
        "<style>body {color: red}</style></head><body><h1>Install guide</h1>"
        "<p>Run <code>make install</code> then read <a href='/next'>the next page</a>.</p>"
        "<!-- COMMENT-TEXT --><ul><li>first step</li><li>second step</li></ul></body></html>")


@dataclass
class Site:
    """One HTTP server on ``host``; ``seen`` lists (path, Host header) of every request."""

    host: str
    server: ThreadingHTTPServer | None = None
    seen: list[tuple[str, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    secret: str = "PUBLIC-PAGE"

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def _send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8",
                  **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            site.seen.append((self.path, self.headers.get("Host", "")))
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/page":
                self._send(200, PAGE.encode())
            elif url.path == "/secret":
                self._send(200, site.secret.encode(), "text/plain")
            elif url.path == "/json":
                self._send(200, b'{"ok": true}', "application/json")
            elif url.path == "/binary":
                self._send(200, b"\x7fELF\x00\x00", "application/octet-stream")
            elif url.path == "/redirect":
                self._send(int(query.get("status", "302")), b"", Location=query["to"])
            elif url.path == "/loop":
                self._send(302, b"", Location="/loop")
            elif url.path == "/huge":
                self._huge(int(query.get("bytes", str(8 << 20))))
            elif url.path == "/slow":
                self._slow()
            else:
                self._send(404, b"not found", "text/plain")

        def _huge(self, size: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            with contextlib.suppress(OSError):  # the client hangs up at its bound
                for _ in range(size // len(chunk)):
                    self.wfile.write(chunk)

        def _slow(self) -> None:
            """One byte at a time, forever (until the client hangs up or the test ends)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            with contextlib.suppress(OSError):
                while not site.stop.wait(0.05):  # the attack's pace, not a test wait
                    self.wfile.write(b"s")
                    self.wfile.flush()

    return Handler


@contextlib.contextmanager
def serve(host: str = "127.0.0.1", port: int = 0,
          tls: tuple[Path, Path] | None = None) -> Iterator[Site]:
    """A :class:`Site` on ``host:port`` (0: any free port) for the ``with`` block; with
    ``tls`` (certificate, key), HTTPS."""
    site = Site(host)
    server = ThreadingHTTPServer((host, port), _handler(site))
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    site.server = server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=scaled(10))


def certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for DNS name ``name`` (and its key), made by openssl."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(  # a fixed argument list: openssl makes a test certificate
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}"], check=True, capture_output=True,
        timeout=scaled(60))
    return cert, key


Answer = Sequence[str] | Callable[[int], Sequence[str]]


class Names:
    """The test resolver: name -> addresses (or ``calls -> addresses``, to rebind)."""

    def __init__(self) -> None:
        self.table: dict[str, Answer] = {}
        self.calls: list[str] = []

    def __setitem__(self, name: str, answer: Answer) -> None:
        self.table[name] = answer

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise OSError(f"test resolver: {host!r} is not a test name")
        return answer(self.calls.count(host)) if callable(answer) else answer


def use_names(monkeypatch: pytest.MonkeyPatch) -> Names:
    """The test resolver in place of the system's (``docs.test``, ``evil.test``...)."""
    table = Names()
    monkeypatch.setattr(web_fetch, "RESOLVER", table)
    return table


def fetch(url: str, *, allow: Sequence[str], private: Sequence[str] = ("127.0.0.1",),
          deny: Sequence[str] = (), timeout: float = 10.0, max_bytes: int = 1 << 20,
          rule: Callable[[str], bool] | None = None) -> ToolOutput:
    """One web_fetch call under the grant of ``allow`` (``private``: allow_private)."""
    grant = NetworkConfig(allow=tuple(allow), deny=tuple(deny), allow_private=tuple(private),
                          timeout_seconds=timeout, max_bytes=max_bytes).grant()
    context = ToolContext(sandbox=None, agent="tester")  # type: ignore[arg-type]
    return WebFetchTool(grant, rule).run(WebFetchArgs(url=url), context)
