"""One target of the egress proxy, judged: the user's grant, one resolution, the addresses.

The grant check is :meth:`policies.network.NetworkGrant.refusal` over
:func:`policies.network.normalize_host` (the one ``web_fetch`` uses: NUL, ``@``,
percent-encoding, IDNA, numeric hosts in decimal, octal or hex forms, IPv6
without brackets are refused; a suffix such as ``docs.python.org.evil`` is
another name). The name is then resolved once (:data:`RESOLVER`), every answer
must pass :func:`policies.network.address_refusal`, and the connection goes to
the first answer (pinned: a second resolution cannot move it). This machine's
own loopback is refused even when ``allow_private`` lists it: a command is
arbitrary code, and what listens there (``corral serve``, a database) must stay
out of reach; only :data:`TEST_LOOPBACK`, which only a test sets, opens it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policies.network import HostName, NetworkGrant, address_refusal, normalize_host

__all__ = ["RESOLVER", "TEST_LOOPBACK", "Verdict", "check_target", "parse_authority",
           "system_resolve"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def system_resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to for TCP (the system resolver)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


#: resolve(host, port) -> addresses. Tests replace it with a resolver of test names.
RESOLVER: Callable[[str, int], Sequence[str]] = system_resolve
#: Loopback addresses the proxy may connect to: only a test sets this Python attribute
#: (its servers listen on 127.0.0.1); no config key, variable or definition reaches it.
TEST_LOOPBACK: frozenset[IPAddress] = frozenset()


@dataclass(frozen=True)
class Verdict:
    """The proxy's decision on one target: the address to connect to, or why not."""

    host: str
    port: int
    address: str | None = None
    refusal: str | None = None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def parse_authority(text: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) of a CONNECT or an URL; :class:`ValueError`."""
    if text.startswith("["):
        close = text.find("]")
        if close == -1 or not text[close + 1:].startswith(":"):
            raise ValueError(f"{text!r} is not [IPv6]:port")
        host, port = text[:close + 1], text[close + 2:]
    else:
        host, colon, port = text.rpartition(":")
        if not colon or ":" in host:
            raise ValueError(f"{text!r} is not host:port")
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"the port {port!r} is not 1-65535")
    return host, int(port)


def _loopback(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback or address.ipv4_mapped.is_unspecified
    return address.is_loopback or address.is_unspecified


def check_target(grant: NetworkGrant, host_text: str, port: int) -> Verdict:
    """The verdict on ``host_text:port`` under ``grant`` (see the module docstring)."""
    try:
        host: HostName = normalize_host(host_text)
    except ValueError as exc:
        return Verdict(host_text, port, refusal=f"{host_text!r}: {exc}")
    shown = str(host)
    if not 0 < port < 65536:
        return Verdict(shown, port, refusal=f"the port {port} is not 1-65535")
    refusal = grant.refusal(host, port)
    if refusal is not None:
        return Verdict(shown, port, refusal=refusal)
    if host.address is not None:
        answers: Sequence[str] = [host.address.compressed]
    else:
        try:
            answers = RESOLVER(host.name, port)
        except OSError as exc:
            return Verdict(shown, port, refusal=f"{host.name} does not resolve: {exc}")
    if not answers:
        return Verdict(shown, port, refusal=f"{host.name} resolves to no address")
    checked: list[str] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer.split("%", 1)[0])
        except ValueError:
            return Verdict(shown, port, refusal=f"{shown} resolved to {answer!r}, not an address")
        if _loopback(address) and address not in TEST_LOOPBACK:
            return Verdict(shown, port, refusal=f"{shown} resolves to {address}: this machine's "
                           "own loopback is never reachable through the proxy")
        why = None if address in TEST_LOOPBACK else address_refusal(address, grant.private)
        if why is not None:
            return Verdict(shown, port, refusal=f"{shown} resolves to {why}")
        checked.append(address.compressed)
    return Verdict(shown, port, address=checked[0])
