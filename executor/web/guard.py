"""Who may talk to ``corral serve``: this machine's browser, holding the token, on this page.

An ASGI middleware in front of every request (:class:`Guard`):

- its ``Host`` must be the server's own address (``127.0.0.1:PORT`` or
  ``localhost:PORT``), or it gets 400: a DNS-rebinding page reaches the port under
  another name;
- an ``Origin`` it carries must be the server's own (the exact port: a page of another
  local server is a foreign origin), and a ``Sec-Fetch-Site`` it carries must not say
  ``cross-site`` or ``same-site``, or it gets 403. ``Origin: null`` is what a browser
  sends for the app's own form posts (its pages set ``Referrer-Policy: no-referrer``):
  it passes only with ``Sec-Fetch-Site: same-origin``, which the browser alone sets;
- its path must start with the token (``/TOKEN/...``, compared whole in constant time
  with :func:`hmac.compare_digest`), or it gets 403: the token is the printed URL's;
- a ``POST`` (every change of state; a ``GET`` never changes one) must also carry the
  token in its form (:func:`form_token_ok`, checked by each handler), and only ``GET``,
  ``HEAD`` and ``POST`` are served.

Every response, a refusal included, carries a strict Content-Security-Policy (scripts,
styles and requests from the app itself only, no inline script, no framing, forms post
only to the app), ``Referrer-Policy: no-referrer`` (the token never leaves in a
``Referer``), ``X-Content-Type-Options: nosniff``, ``Cache-Control: no-store`` and
cross-origin isolation headers, so nothing is served to another origin.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["CSP", "SECURITY_HEADERS", "Guard", "form_token_ok"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Nothing but the app's own scripts, styles and requests; no inline script or style.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def form_token_ok(given: object, token: str) -> bool:
    """Whether a POSTed form's ``token`` field is the server's token (whole, constant time)."""
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())


class Guard:
    """The checks of the module docstring, then ``app``."""

    def __init__(self, app: App, token: str, *, port: int) -> None:
        self.app = app
        self.token = token.encode()
        hosts = (f"127.0.0.1:{port}", f"localhost:{port}")
        self.hosts = frozenset(host.encode() for host in hosts)
        self.origins = frozenset(f"http://{host}".encode() for host in hosts)

    def _token_ok(self, path: str) -> bool:
        first = path.encode("utf-8", "surrogateescape").lstrip(b"/").split(b"/", 1)[0]
        return hmac.compare_digest(first, self.token)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why the request is refused (status, message), or None."""
        headers: dict[bytes, list[bytes]] = {}
        for name, value in scope.get("headers") or []:
            headers.setdefault(name.lower(), []).append(value)
        host = headers.get(b"host", [])
        if not (len(host) == 1 and host[0] in self.hosts):
            return 400, "this server answers only to its own address (127.0.0.1 or localhost)"
        same_origin = headers.get(b"sec-fetch-site") == [b"same-origin"]
        if any(origin not in self.origins and not (origin == b"null" and same_origin)
               for origin in headers.get(b"origin", [])):
            return 403, "requests from another origin are refused"
        if any(site in (b"cross-site", b"same-site")
               for site in headers.get(b"sec-fetch-site", [])):
            return 403, "requests from another site are refused"
        if scope.get("method") not in ("GET", "HEAD", "POST"):
            return 405, "only GET and POST are served"
        if not self._token_ok(str(scope.get("path", ""))):
            return 403, "open the URL `corral serve` printed (its token is missing or wrong)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # websockets: none served

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in SECURITY_HEADERS}
                kept = [(n, v) for n, v in message.get("headers", []) if n.lower() not in names]
                message["headers"] = [*kept, *SECURITY_HEADERS]
            await send(message)

        refused = self.refusal(scope)
        if refused is not None:
            status, text = refused
            await secured({"type": "http.response.start", "status": status,
                           "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await secured({"type": "http.response.body", "body": f"{text}\n".encode()})
            return
        await self.app(scope, receive, secured)
