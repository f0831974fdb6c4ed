"""Local HTTP servers that speak the providers' protocols, strictly.

A :class:`ProtocolServer` is a stdlib ``ThreadingHTTPServer`` on
``127.0.0.1:0`` in a background thread. It checks every request against its
:class:`Dialect` (path, method, headers, body keys, message shapes, and that
every tool result answers a tool call of the message before it) and answers
with the next scripted :class:`Reply` (a success, an error status, a 429 with
``Retry-After``, a delayed answer). A malformed request is recorded as a
problem and answered 400; an unexpected request (no reply left) is a problem
too. The fixture that owns a server fails the test if any problem was
recorded or any scripted reply was left unconsumed. Delayed answers wait on an
event that :meth:`ProtocolServer.stop` sets, so shutting down never sleeps.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dialects import DIALECTS, Dialect, Received, Reply

__all__ = ["DIALECTS", "KEY", "ProtocolServer", "Received", "Reply"]

#: The API key the servers expect by default; no error text may ever contain it.
KEY = "sk-test-SECRET-0123456789abcdef"


class ProtocolServer:
    """A strict local server for one dialect; see the module docstring."""

    def __init__(self, dialect: Dialect, *, api_key: str | None) -> None:
        self.dialect = dialect
        self.api_key = api_key
        self.received: list[Received] = []
        self.problems: list[str] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = False
        self._httpd.block_on_close = True  # stop() joins every handler thread
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """What a provider config's ``base_url`` is for this server."""
        return self.url + self.dialect.prefix

    @property
    def pending(self) -> list[Reply]:
        with self._lock:
            return list(self._replies)

    def reply(self, *replies: Reply) -> None:
        """Queue answers, consumed one per request in order."""
        with self._lock:
            self._replies.extend(replies)

    def start(self) -> ProtocolServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        with self._lock:  # kept-alive connections: their handlers wait for a next request
            open_now = list(self._connections)
        for connection in open_now:
            with contextlib.suppress(OSError):  # closed meanwhile
                connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join()

    def _answer(self, req: Received) -> Reply:
        problems = self.dialect.check(req, self.api_key)
        with self._lock:
            self.received.append(req)
            if problems:
                self.problems += [f"request {len(self.received)}: {p}" for p in problems]
                return self.dialect.error(400, "malformed request: " + "; ".join(problems))
            if not self._replies:
                self.problems.append(f"request {len(self.received)}: no reply was scripted")
                return self.dialect.error(400, "unexpected request")
            return self._replies.popleft()


def _handler(server: ProtocolServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers: clients may pool

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server._connections.add(self.connection)

        def finish(self) -> None:
            with server._lock:
                server._connections.discard(self.connection)
            super().finish()

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {key.lower(): value for key, value in self.headers.items()}
            reply = server._answer(Received(self.command, self.path, headers, body,
                                            self.client_address[:2]))
            if reply.delay:
                server._release.wait(reply.delay)
            data = (reply.body if isinstance(reply.body, str)
                    else json.dumps(reply.body)).encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        do_POST = do_GET = do_PUT = _serve

        def log_message(self, format: str, *args: object) -> None:
            """Silent: tests read ``server.received``."""

    return Handler
