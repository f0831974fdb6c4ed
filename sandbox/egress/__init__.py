"""Allow-listed egress for a child's commands (``--net allow``).

The sandbox keeps its own network namespace with nothing but loopback. corral
opens one listening socket on ``127.0.0.1:3128`` *inside* that namespace
(:func:`listen_in_namespace`: a host thread joins the namespace, binds, and ends;
the socket stays there; without root, bubblewrap's supervisor relays that port to
the proxy's Unix socket instead, :func:`~sandbox.egress.netns.listen_on_socket`)
and serves it from the host with a filtering proxy
(:class:`EgressProxy`: HTTP CONNECT, plain-HTTP GET forwarding, SOCKS5) that
checks every target against the user's grant (:mod:`policies.network`, the check
``web_fetch`` uses), resolves the name once, refuses private, loopback,
link-local and metadata addresses and connects to the checked address. Commands
get ``HTTP(S)_PROXY``/``ALL_PROXY`` (:data:`PROXY_ENV`); a client that ignores them
finds no route at all, UDP and DNS included.
"""

from sandbox.egress.checks import Verdict, check_target
from sandbox.egress.netns import PROXY_ENV, PROXY_PORT, listen_in_namespace
from sandbox.egress.proxy import EgressProxy, Listening

__all__ = ["PROXY_ENV", "PROXY_PORT", "EgressProxy", "Listening", "Verdict", "check_target",
           "listen_in_namespace"]
