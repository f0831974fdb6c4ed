"""The filtering proxy commands reach on their sandbox's ``127.0.0.1:3128``.

One port, three protocols, told apart by the first byte: SOCKS5 (``0x05``; no
authentication, CONNECT only, a host name, IPv4 or IPv6 target), HTTP
``CONNECT host:port`` (a tunnel, for https), and plain-HTTP ``GET``/``HEAD`` of an
absolute URI (forwarded in origin form with ``Connection: close``). Every target
is judged by :func:`sandbox.egress.checks.check_target` before any connection is
made; a refusal is ``403`` (HTTP, the reason in the body and ``X-Corral-Egress:
denied``) or reply ``0x02`` (SOCKS5). Bounded: at most ``max_connections`` at
once (more are refused), each closed after ``idle_seconds`` without a byte
either way. Every decision, allowed or denied, is one event (``on_event`` and
:attr:`EgressProxy.events`): protocol, host, port, allowed, reason, address.
"""

from __future__ import annotations

import contextlib
import ipaddress
import selectors
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from policies.network import NetworkGrant
from sandbox.egress.checks import Verdict, check_target, parse_authority

__all__ = ["MAX_EVENTS", "EgressProxy", "Listening"]

#: Events kept in :attr:`EgressProxy.events` (more are counted).
MAX_EVENTS = 1000
_HEADER_LIMIT = 16 << 10
_CHUNK = 1 << 16
_HOP = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                  "proxy-authenticate", "te", "trailer", "upgrade", "host"})


class _Refused(Exception):
    """A request the proxy does not serve (malformed, or an unsupported method)."""


class Listening:
    """One listening socket served by the proxy (a sandbox's namespace); :meth:`close`."""

    def __init__(self, proxy: EgressProxy, listener: socket.socket) -> None:
        self.proxy, self.listener = proxy, listener
        self._wake_r, self._wake_w = socket.socketpair()
        self.thread = threading.Thread(target=self._accept, name="corral-egress", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._wake_r in ready:
                    return
                try:
                    conn, _ = self.listener.accept()
                except OSError:
                    continue
                self.proxy.admit(conn)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self.thread.join(timeout=10)
        for sock in (self.listener, self._wake_r, self._wake_w):
            sock.close()


class EgressProxy:
    """The user's grant, served to a run's sandboxes (see the module docstring)."""

    def __init__(self, grant: NetworkGrant, *, on_event: Callable[[dict[str, Any]], None]
                 | None = None, max_connections: int = 64, idle_seconds: float = 120.0,
                 connect_seconds: float = 15.0) -> None:
        self.grant, self.on_event = grant, on_event
        self.idle_seconds, self.connect_seconds = idle_seconds, connect_seconds
        self.max_connections = max_connections
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listening: list[Listening] = []
        self._closed = False

    def serve(self, listener: socket.socket) -> Listening:
        """Serve ``listener`` (:func:`~sandbox.egress.listen_in_namespace`) until closed."""
        listening = Listening(self, listener)
        with self._lock:
            self._listening.append(listening)
        return listening

    def close(self) -> None:
        """Stop serving every listener and close every open connection."""
        with self._lock:
            self._closed = True
            listening, self._listening = self._listening, []
            conns = list(self._open)
        for item in listening:
            item.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def summary(self) -> dict[str, Any]:
        """The grant and every decision, for the run's record."""
        with self._lock:
            events = list(self.events)
        return {"egress": True, "grant": self.grant.to_json(), "connections": events,
                "dropped": self.dropped,
                "denied": sum(1 for event in events if not event["allowed"])}

    def _event(self, protocol: str, verdict: Verdict, **extra: Any) -> None:
        event = {"t": round(time.time(), 3), "protocol": protocol, "host": verdict.host,
                 "port": verdict.port, "allowed": verdict.allowed, "reason": verdict.refusal,
                 "address": verdict.address, **extra}
        with self._lock:
            if len(self.events) < MAX_EVENTS:
                self.events.append(event)
            else:
                self.dropped += 1
        if self.on_event is not None:
            self.on_event(event)

    def admit(self, conn: socket.socket) -> None:
        """Serve ``conn`` in a thread of its own, or refuse it past the bound."""
        with self._lock:
            full = self._closed or len(self._open) >= self.max_connections
            if not full:
                self._open.add(conn)
        if full:
            self._event("tcp", Verdict("", 0, refusal=f"more than {self.max_connections} "
                                       "connections at once"))
            conn.close()
            return
        threading.Thread(target=self._serve_one, args=(conn,), name="corral-egress-conn",
                         daemon=True).start()

    def _serve_one(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            conn.settimeout(self.idle_seconds)
            first = conn.recv(1, socket.MSG_PEEK)
            if first == b"\x05":
                upstream = self._socks(conn)
            elif first:
                upstream = self._http(conn)
            if upstream is not None:
                self._relay(conn, upstream)
        except (OSError, _Refused):
            pass
        finally:
            with self._lock:
                self._open.discard(conn)
            for sock in (conn, upstream):
                if sock is not None:
                    sock.close()

    def _connect(self, verdict: Verdict) -> socket.socket | None:
        if verdict.address is None:
            return None
        try:
            return socket.create_connection((verdict.address, verdict.port),
                                            timeout=self.connect_seconds)
        except OSError:
            return None

    # -- SOCKS5 -----------------------------------------------------------------------

    def _socks(self, conn: socket.socket) -> socket.socket | None:
        head = _exact(conn, 2)
        methods = _exact(conn, head[1])
        if 0 not in methods:
            conn.sendall(b"\x05\xff")
            return None
        conn.sendall(b"\x05\x00")
        version, command, _, kind = _exact(conn, 4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(_exact(conn, 4)))
        elif kind == 4:
            host = f"[{ipaddress.IPv6Address(_exact(conn, 16))}]"
        elif kind == 3:
            raw = _exact(conn, _exact(conn, 1)[0])
            host = raw.decode("utf-8", "backslashreplace")
        else:
            conn.sendall(b"\x05\x08\x00\x01" + bytes(6))
            return None
        port = int.from_bytes(_exact(conn, 2), "big")
        if version != 5 or command != 1:
            self._event("socks5", Verdict(host, port, refusal="only SOCKS5 CONNECT is served"))
            conn.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return None
        verdict = check_target(self.grant, host, port)
        self._event("socks5", verdict)
        upstream = self._connect(verdict) if verdict.allowed else None
        if upstream is None:
            conn.sendall((b"\x05\x02" if not verdict.allowed else b"\x05\x05")
                         + b"\x00\x01" + bytes(6))
            return None
        conn.sendall(b"\x05\x00\x00\x01" + bytes(6))
        return upstream

    # -- HTTP ---------------------------------------------------------------------------

    def _http(self, conn: socket.socket) -> socket.socket | None:
        data = bytearray()
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(_CHUNK)
            if not chunk:
                raise _Refused
            data += chunk
            if len(data) > _HEADER_LIMIT:
                return _answer(conn, 431, "the request's header is too large")
        head, _, rest = bytes(data).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _answer(conn, 400, "not an HTTP/1 request line")
        method, target, version = parts
        if method == "CONNECT":
            try:
                host, port = parse_authority(target)
            except ValueError as exc:
                verdict = Verdict(target, 0, refusal=str(exc))
            else:
                verdict = check_target(self.grant, host, port)
            self._event("connect", verdict)
            if not verdict.allowed:
                return _answer(conn, 403, f"corral egress refused: {verdict.refusal}")
            upstream = self._connect(verdict)
            if upstream is None:
                return _answer(conn, 502, f"{verdict.host}:{verdict.port} did not answer")
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            return upstream
        return self._forward(conn, method, target, version, lines[1:], rest)

    def _forward(self, conn: socket.socket, method: str, target: str, version: str,
                 headers: list[str], rest: bytes) -> socket.socket | None:
        url = urllib.parse.urlsplit(target)
        if url.scheme != "http" or not target.startswith("http://") or "@" in url.netloc:
            verdict = Verdict(target[:200], 0, refusal="only absolute http:// URIs (no "
                              "userinfo) are forwarded; use CONNECT for https")
            self._event("http", verdict)
            return _answer(conn, 400, verdict.refusal or "")
        authority = url.netloc if (":" in url.netloc.rsplit("]", 1)[-1]) else f"{url.netloc}:80"
        try:
            host, port = parse_authority(authority)
        except ValueError as exc:
            verdict = Verdict(url.netloc, 0, refusal=str(exc))
        else:
            verdict = check_target(self.grant, host, port)
        if verdict.allowed and method not in ("GET", "HEAD"):
            verdict = Verdict(verdict.host, verdict.port, refusal=f"{method} is not forwarded "
                              "over plain HTTP (GET and HEAD are; https goes through CONNECT)")
        self._event("http", verdict, method=method)
        if not verdict.allowed:
            return _answer(conn, 403, f"corral egress refused: {verdict.refusal}")
        upstream = self._connect(verdict)
        if upstream is None:
            return _answer(conn, 502, f"{verdict.host}:{verdict.port} did not answer")
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = [line for line in headers if line.split(":", 1)[0].strip().lower() not in _HOP]
        request = [f"{method} {path} {version}", f"Host: {url.netloc}", *kept,
                   "Connection: close", "", ""]
        upstream.sendall("\r\n".join(request).encode("latin-1") + rest)
        return upstream

    def _relay(self, conn: socket.socket, upstream: socket.socket) -> None:
        """Copy both ways until either side closes or nothing moves for ``idle_seconds``."""
        conn.setblocking(False)
        upstream.setblocking(False)
        peers = {conn: upstream, upstream: conn}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while True:
                ready = selector.select(self.idle_seconds)
                if not ready:
                    return
                for key, _ in ready:
                    source = conn if key.fileobj is conn else upstream
                    try:
                        chunk = source.recv(_CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        return
                    target = peers[source]
                    target.settimeout(self.idle_seconds)
                    target.sendall(chunk)
                    target.setblocking(False)


def _exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise _Refused
        data += chunk
    return data


def _answer(conn: socket.socket, status: int, text: str) -> socket.socket | None:
    reasons = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
               502: "Bad Gateway"}
    body = (text.replace("\r", " ").replace("\n", " ") + "\n").encode("utf-8", "replace")
    conn.sendall(f"HTTP/1.1 {status} {reasons[status]}\r\nContent-Type: text/plain; "
                 f"charset=utf-8\r\nX-Corral-Egress: denied\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode("ascii") + body)
    return None
