"""web_fetch(url): one GET, run by corral on the host side (the sandbox keeps no network).

Only what the user granted (:mod:`policies.network`: ``[network] allow`` in the
user's config, ``--allow-net``) is reachable, narrowed by the agent's own
``web_fetch`` permission rules (the dispatcher judges the URL; this tool judges
every redirect target by the same rules). One fetch:

1. **parse** the URL strictly: ``http``/``https`` only, ``scheme://`` spelled
   out, no userinfo (``@``), no whitespace, control characters (NUL among
   them) or backslashes anywhere, a port 1-65535; the host IDNA-encoded, an IP
   literal only in its standard form (no ``2130706433``, ``0177.0.0.1``, ``0x7f.1``);
2. **grant**: the host and port must be allowed by the grant and not denied; an
   IP literal only when exactly that literal is granted;
3. **resolve once** (:data:`RESOLVER`) and check *every* address: public unicast
   only, unless listed exactly in ``allow_private``; metadata addresses never;
4. **connect to the checked address** (the answer is pinned for the request:
   a second resolution, DNS rebinding, cannot move it), with the name in the
   ``Host`` header and the TLS SNI (the certificate is checked against the name);
5. every **redirect** (at most :data:`MAX_REDIRECTS`) goes through 1-4 again;
6. only ``text/*``, JSON and XML bodies are read, up to the grant's ``max_bytes``
   (truncated, and said so), within its ``timeout_seconds`` for the whole
   fetch (stopped, and said so); HTML comes back as Markdown.

No proxy variable, netrc or cookie of the host applies (``http.client``, one
connection per request, ``Connection: close``). Every fetch, refused or not, reports ``url``,
``final_url``, ``status``, ``bytes`` and ``denied`` (the reason) as its
``fetch`` data: the run's journal and its record's audit entry keep it.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from executor.tools.context import Args, ToolContext, truncate
from executor.tools.dispatch import ToolDenied, ToolFailure, ToolOutput
from policies.network import HostName, NetworkGrant, address_refusal, normalize_host

__all__ = ["MAX_REDIRECTS", "RESOLVER", "TLS_CONTEXT", "WebFetchTool", "parse_url",
           "system_resolve"]

MAX_REDIRECTS = 5
#: Characters of page text the model is shown (the body itself is bounded by the grant).
MAX_TEXT = 100_000
MAX_URL = 4096
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_USER_AGENT = "corral-web-fetch/1"
#: What a path or query keeps as it is (everything else is percent-encoded).
_SAFE = "/%:@!$&'()*+,;=-._~"


def system_resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to for TCP (the system resolver)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


#: resolve(host, port) -> addresses. Tests replace it with a resolver of test names.
RESOLVER: Callable[[str, int], Sequence[str]] = system_resolve
#: The TLS context of an https fetch (the system's CAs; tests trust their own CA with it).
TLS_CONTEXT: Callable[[], ssl.SSLContext] = ssl.create_default_context


@dataclass(frozen=True)
class Target:
    """One URL, parsed and normalized."""

    url: str
    scheme: str
    host: HostName
    port: int
    #: The path and query as sent (percent-encoded).
    raw_path: bytes

    @property
    def host_header(self) -> str:
        default = {"http": 80, "https": 443}[self.scheme]
        return str(self.host) if self.port == default else f"{self.host}:{self.port}"


def parse_url(url: str) -> Target:
    """``url`` parsed strictly (see the module docstring), or a :class:`ValueError`."""
    if len(url) > MAX_URL:
        raise ValueError(f"the URL is longer than {MAX_URL} characters")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise ValueError("the URL holds whitespace or a control character")
    if "\\" in url:
        raise ValueError("the URL holds a backslash")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not url[:len(scheme) + 3].lower() == scheme + "://":
        raise ValueError("only http:// and https:// URLs are fetched")
    netloc = parts.netloc
    if "@" in netloc:
        raise ValueError("the URL holds userinfo (user@host): refused")
    if netloc.startswith("["):
        close = netloc.find("]")
        if close == -1:
            raise ValueError("an IPv6 host is not closed by ']'")
        host_text, rest = netloc[:close + 1], netloc[close + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError("text follows the IPv6 host")
    elif netloc.count(":") > 1:
        raise ValueError("an IPv6 address must be written in brackets ([::1])")
    else:
        host_text, colon, port_part = netloc.partition(":")
        rest = colon + port_part
    port_text = rest[1:]
    if rest and not (port_text.isascii() and port_text.isdigit()
                     and 0 < int(port_text) < 65536):
        raise ValueError(f"the port {port_text!r} is not 1-65535")
    host = normalize_host(host_text)
    port = int(port_text) if rest else {"http": 80, "https": 443}[scheme]
    path = urllib.parse.quote(parts.path or "/", safe=_SAFE)
    query = urllib.parse.quote(parts.query, safe=_SAFE + "?[]")
    raw_path = (path + (f"?{query}" if query else "")).encode("ascii")
    return Target(url=url, scheme=scheme, host=host, port=port, raw_path=raw_path)


class WebFetchArgs(Args):
    url: str = Field(min_length=1, max_length=MAX_URL,
                     description="An http:// or https:// URL on a host you were granted.")


class _Fetch:
    """One fetch's report (the record's ``fetch`` data)."""

    def __init__(self, url: str) -> None:
        self.data: dict[str, Any] = {"url": url, "final_url": None, "status": None,
                                     "bytes": 0, "denied": None, "redirects": []}

    def denied(self, reason: str) -> ToolDenied:
        self.data["denied"] = reason
        return ToolDenied(f"web_fetch refused: {reason}", data={"fetch": self.data})

    def failed(self, reason: str) -> ToolFailure:
        self.data["error"] = reason
        return ToolFailure(f"web_fetch failed: {reason}", data={"fetch": self.data})


class WebFetchTool:
    """web_fetch(url): a granted page's text (see the module docstring)."""

    name = "web_fetch"
    description = ("Fetch an http(s) URL with GET (only hosts the user granted; redirects are "
                   "followed and checked) and return its text; HTML comes back as Markdown.")
    args = WebFetchArgs

    def __init__(self, grant: NetworkGrant | None = None,
                 rule: Callable[[str], bool] | None = None) -> None:
        self.grant = grant or NetworkGrant()
        #: rule(url): whether the agent's own rules allow fetching ``url`` (redirects).
        self.rule = rule

    def subjects(self, args: WebFetchArgs) -> list[str | None]:
        return [args.url]

    def run(self, args: WebFetchArgs, context: ToolContext) -> ToolOutput:
        fetch = _Fetch(args.url)
        deadline = time.monotonic() + context.time_left(self.grant.timeout_seconds)
        current = args.url
        for hop in range(MAX_REDIRECTS + 1):
            if hop and self.rule is not None and not self.rule(current):
                raise fetch.denied(f"the redirect to {current!r} is outside this agent's "
                                   "web_fetch rules")
            target = self._check(current, fetch)
            address = _connect_address(target, _checked(target, self.grant, fetch))
            connection, response = _send(target, address, deadline, fetch)
            try:
                location = response.getheader("Location")
                if response.status in _REDIRECTS and location:
                    current = urllib.parse.urljoin(current, location)
                    fetch.data["redirects"].append({"status": response.status, "to": current})
                    continue
                return self._read(connection, response, target, deadline, fetch)
            finally:
                connection.close()
        raise fetch.denied(f"more than {MAX_REDIRECTS} redirects")

    def _check(self, url: str, fetch: _Fetch) -> Target:
        try:
            target = parse_url(url)
        except ValueError as exc:
            raise fetch.denied(f"{url!r}: {exc}") from exc
        refusal = self.grant.refusal(target.host, target.port)
        if refusal is not None:
            raise fetch.denied(refusal)
        return target

    def _read(self, connection: http.client.HTTPConnection,
              response: http.client.HTTPResponse, target: Target,
              deadline: float, fetch: _Fetch) -> ToolOutput:
        from executor.tools.webtext import allowed_type, decode, page_text  # noqa: PLC0415

        status = response.status
        fetch.data.update(final_url=target.url, status=status)
        ctype = response.getheader("Content-Type") or ""
        mime = ctype.split(";")[0].strip().lower()
        fetch.data["content_type"] = mime
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if not allowed_type(mime):
            raise fetch.denied(f"content type {mime or 'none'!r} is not fetched (text/*, "
                               "JSON and XML only)")
        if encoding not in ("", "identity"):
            raise fetch.failed(f"the server sent a {encoding!r}-encoded body after being "
                               "asked for identity")
        body, truncated, stopped = self._body(connection, response, deadline)
        fetch.data.update(bytes=len(body), truncated=truncated, timed_out=stopped)
        charset = next((part.split("=", 1)[1].strip().strip('"') for part in ctype.split(";")[1:]
                        if part.strip().lower().startswith("charset=")), None)
        text = page_text(decode(body, charset), mime)
        notes = [f"status {status}", mime, f"{len(body)} bytes"]
        if truncated:
            notes.append(f"truncated at the bound of {self.grant.max_bytes} bytes")
        if stopped:
            notes.append(f"stopped at the time bound of {self.grant.timeout_seconds:g} s")
        header = f"fetched {target.url} ({', '.join(notes)})\n\n"
        return ToolOutput(header + truncate(text, MAX_TEXT, what="the page"),
                          is_error=status >= 400, data={"fetch": fetch.data})

    def _body(self, connection: http.client.HTTPConnection,
              response: http.client.HTTPResponse,
              deadline: float) -> tuple[bytes, bool, bool]:
        """The body up to the size bound, read until the time bound (each read waits at
        most what is left of it): (body, truncated, stopped by time)."""
        body = bytearray()
        limit = self.grant.max_bytes
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(body), False, True
            if connection.sock is not None:
                connection.sock.settimeout(left)
            try:
                chunk = response.read1(min(65536, limit + 1 - len(body)))
            except TimeoutError:
                return bytes(body), False, True
            except (OSError, http.client.HTTPException):
                return bytes(body), False, False  # the server broke off: what came is all
            if not chunk:
                return bytes(body), False, False
            body += chunk
            if len(body) > limit:
                return bytes(body[:limit]), True, False


def _send(target: Target, address: str, deadline: float,
          fetch: _Fetch) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """GET ``target`` over a connection to ``address`` (the checked one), with the name in
    the Host header and, for https, in the SNI (the certificate is checked against it)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise fetch.failed("the time bound ran out before the request")
    fetch.data["address"] = address
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = _PinnedHTTPS(address, target.port, server_name=target.host.name,
                                  timeout=left)
    else:
        connection = http.client.HTTPConnection(address, target.port, timeout=left)
    try:
        connection.putrequest("GET", target.raw_path.decode("ascii"), skip_host=True,
                              skip_accept_encoding=True)
        for key, value in (("Host", target.host_header), ("User-Agent", _USER_AGENT),
                           ("Accept", "text/html, text/*;q=0.9, application/json, "
                            "application/xml;q=0.8"),
                           ("Accept-Encoding", "identity"), ("Connection", "close")):
            connection.putheader(key, value)
        connection.endheaders()
        return connection, connection.getresponse()
    except TimeoutError as exc:
        connection.close()
        raise fetch.failed(f"{target.host_header}: no answer within the time bound") from exc
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise fetch.failed(f"{target.host_header}: {exc}") from exc


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the given (checked) address, naming the host in the TLS handshake: the SNI,
    and the name the certificate is checked against."""

    def __init__(self, address: str, port: int, *, server_name: str, timeout: float) -> None:
        self._tls = TLS_CONTEXT()
        super().__init__(address, port, timeout=timeout, context=self._tls)
        self.server_name = server_name

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.server_name)


def _checked(target: Target, grant: NetworkGrant, fetch: _Fetch) -> list[str]:
    """The addresses of ``target``'s host, each checked (an IP literal: itself)."""
    if target.host.address is not None:
        answers: Sequence[str] = [target.host.address.compressed]
    else:
        try:
            answers = RESOLVER(target.host.name, target.port)
        except OSError as exc:
            raise fetch.failed(f"{target.host.name} does not resolve: {exc}") from exc
    if not answers:
        raise fetch.failed(f"{target.host.name} resolves to no address")
    checked = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer.split("%", 1)[0])
        except ValueError as exc:
            raise fetch.denied(f"{target.host} resolved to {answer!r}, not an address") from exc
        refusal = address_refusal(address, grant.private)
        if refusal is not None:
            raise fetch.denied(f"{target.host} resolves to {refusal}")
        checked.append(address.compressed)
    return checked


def _connect_address(target: Target, checked: list[str]) -> str:
    """Pinning: the request goes to the first address that was checked, never to a
    second answer of the resolver."""
    del target
    return checked[0]
