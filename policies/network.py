"""Network grants: the hosts ``web_fetch`` may reach, given only by the user.

The grant comes from the user's corral config (``[network]``) and the command line
(``--allow-net DOMAIN``), never from a repository or a definition: an agent's
definition can only narrow it (by not holding ``web_fetch``, or by ``web_fetch``
permission rules over the URL). With no ``allow`` entry nothing is granted, and
``web_fetch`` is not offered.

.. code-block:: toml

    [network]
    allow = ["docs.python.org", "*.pypi.org", "localhost.test:8080"]
    deny = ["upload.pypi.org"]             # wins over allow
    allow_private = []                     # DANGEROUS: exact private addresses a granted
                                           # name may resolve to (tests: ["127.0.0.1"])
    max_bytes = 2097152                    # one response body, at most
    timeout_seconds = 30                   # one fetch, redirects included

A pattern is a host name (exact: ``docs.python.org`` matches only itself), a
``*.`` wildcard (``*.pypi.org`` matches every subdomain, never ``pypi.org``
itself), or an IP address written exactly (``203.0.113.7``, ``[2001:db8::1]``):
a URL whose host is an IP literal is fetched only when that literal is granted.
A pattern may name a port (``host:8080``, ``host:*`` for every port); without one
it grants the web ports, 80 and 443. Names are compared after IDNA encoding
(``bücher.example`` is ``xn--bcher-kva.example``), in lower case, without a
trailing dot.

After the name is granted, every address it resolves to must be a public
unicast address: private, loopback, link-local, multicast, reserved,
unspecified, shared (CGNAT), documentation and IPv4-mapped, NAT64, 6to4 or
Teredo forms of those are refused, and a cloud metadata address always is.
``allow_private`` names exact addresses exempt from that (a test server on
127.0.0.1, an intranet documentation host): only a granted name may reach them.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

import idna
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "METADATA_ADDRESSES",
    "NO_GRANT",
    "HostName",
    "NetworkConfig",
    "NetworkGrant",
    "address_refusal",
    "check_pattern",
    "normalize_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Why ``web_fetch`` is not offered without a grant (the offer, the loader, ``agents show``).
NO_GRANT = ("the sandbox has no network and you granted no host: add [network] allow = "
            "[\"docs.example.org\"] to your corral config, or pass --allow-net DOMAIN to "
            "corral run/fanout; until then it is never offered")

#: Cloud instance metadata services: never reachable, ``allow_private`` or not.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"))

#: The ports a pattern without one grants.
WEB_PORTS = frozenset({80, 443})

_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
#: A label an URL parser could read as a number (decimal, octal ``0177``, hex ``0x7f``).
_NUMERIC = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_DOTTED = re.compile(r"^(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
                     r"(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}$")


@dataclass(frozen=True)
class HostName:
    """A host as corral compares it: a normalized DNS name, or an IP address."""

    name: str
    address: IPAddress | None = None

    @property
    def literal(self) -> bool:
        """Whether the host is an IP literal (not a name to resolve)."""
        return self.address is not None

    def __str__(self) -> str:
        if isinstance(self.address, ipaddress.IPv6Address):
            return f"[{self.name}]"
        return self.name


def normalize_host(text: str) -> HostName:
    """The host ``text`` (from a URL or a pattern; IPv6 in brackets) normalized, or a
    :class:`ValueError` saying what is wrong with it.

    Refused: an empty host, control characters and whitespace (a NUL among them),
    userinfo (``@``), percent-encoding, backslashes, a numeric host in any form but
    dotted decimal (``2130706433``, ``0177.0.0.1``, ``0x7f.1``), an IPv6 zone, and a
    name IDNA (UTS 46, STD3 rules) cannot encode."""
    if not text:
        raise ValueError("the host is empty")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError("the host holds a control character or whitespace")
    for bad, what in (("@", "userinfo (@)"), ("%", "percent-encoding"),
                      ("\\", "a backslash"), ("/", "a slash")):
        if bad in text:
            raise ValueError(f"the host holds {what}")
    if text.startswith("["):
        if not text.endswith("]"):
            raise ValueError("an IPv6 host is not closed by ']'")
        try:
            v6 = ipaddress.IPv6Address(text[1:-1])
        except ValueError as exc:
            raise ValueError(f"{text!r} is not an IPv6 address") from exc
        return HostName(v6.compressed, v6)
    if ":" in text:
        raise ValueError("an IPv6 address must be written in brackets ([::1])")
    name = text.lower()
    name = name[:-1] if name.endswith(".") else name
    if _DOTTED.fullmatch(name):
        return HostName(name, ipaddress.IPv4Address(name))
    try:
        encoded = idna.encode(name, uts46=True, std3_rules=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise ValueError(f"{text!r} is not a valid host name: {exc}") from exc
    if len(encoded) > 253 or not all(_LABEL.fullmatch(label) for label in encoded.split(".")):
        raise ValueError(f"{text!r} is not a valid host name")
    if _NUMERIC.fullmatch(encoded.split(".")[-1]):  # 2130706433, 0177.0.0.1, 0x7f.1, 127.1
        raise ValueError(f"{text!r} is a numeric host in a non-standard form (decimal, "
                         "octal or hex): write an address as a.b.c.d, and grant it exactly")
    return HostName(encoded)


@dataclass(frozen=True)
class _Pattern:
    host: HostName
    wildcard: bool
    #: ``None``: the web ports; ``-1``: every port.
    port: int | None

    def matches(self, host: HostName, port: int) -> bool:
        return self.port_matches(port) and self.host_matches(host)

    def port_matches(self, port: int) -> bool:
        if self.port is None:
            return port in WEB_PORTS
        return self.port in (-1, port)

    def host_matches(self, host: HostName) -> bool:
        if self.wildcard:
            return not host.literal and host.name.endswith("." + self.host.name)
        return host.name == self.host.name and host.literal == self.host.literal

    def __str__(self) -> str:
        text = ("*." if self.wildcard else "") + str(self.host)
        return text if self.port is None else f"{text}:{'*' if self.port == -1 else self.port}"


def _parse_pattern(text: str) -> _Pattern:
    if not isinstance(text, str):
        raise ValueError("a network pattern must be a string")
    raw = text.strip()
    if "://" in raw or "/" in raw:
        raise ValueError(f"{text!r} is a URL: grant a host (docs.python.org, *.pypi.org, "
                         "host:8080)")
    port: int | None = None
    hostpart = raw
    if raw.startswith("["):
        close = raw.find("]")
        if close != -1 and raw[close + 1:].startswith(":"):
            hostpart, portpart = raw[:close + 1], raw[close + 2:]
            port = _port(portpart, text)
    elif raw.count(":") == 1:
        hostpart, portpart = raw.split(":")
        port = _port(portpart, text)
    wildcard = hostpart.startswith("*.")
    if wildcard:
        hostpart = hostpart[2:]
    if "*" in hostpart:
        raise ValueError(f"{text!r}: '*' may only begin a pattern, as '*.' (grant hosts one "
                         "by one: nothing grants every host)")
    try:
        host = normalize_host(hostpart)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from exc
    if wildcard and host.literal:
        raise ValueError(f"{text!r}: a wildcard needs a domain, not an address")
    if wildcard and "." not in host.name:
        raise ValueError(f"{text!r}: a wildcard over a top-level domain is too wide")
    return _Pattern(host, wildcard, port)


def _port(text: str, pattern: str) -> int:
    if text == "*":
        return -1
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{pattern!r}: the port must be 1-65535 or '*'")
    return int(text)


def check_pattern(text: str) -> str:
    """``text`` as a canonical pattern string, or a :class:`ValueError` naming the forms."""
    return str(_parse_pattern(text))


class NetworkConfig(BaseModel):
    """``[network]`` of the user's corral config (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    #: DANGEROUS: exact non-public addresses a granted name (or literal) may reach.
    allow_private: tuple[str, ...] = ()
    max_bytes: int = Field(default=2 << 20, ge=1024, le=64 << 20)
    timeout_seconds: float = Field(default=30.0, gt=0, le=600)

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_pattern(item) for item in value)

    @field_validator("allow_private")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for item in value:
            try:
                address = ipaddress.ip_address(item.strip().strip("[]"))
            except ValueError as exc:
                raise ValueError(f"{item!r} is not an IP address (allow_private lists exact "
                                 "addresses, such as 127.0.0.1)") from exc
            if address in METADATA_ADDRESSES:
                raise ValueError(f"{item!r} is a cloud metadata address: never reachable")
            out.append(address.compressed)
        return tuple(out)

    def grant(self, extra: tuple[str, ...] = ()) -> NetworkGrant:
        """The grant this config gives, with ``extra`` (``--allow-net``) allowed too."""
        return NetworkGrant(
            allow=tuple(_parse_pattern(p) for p in (*self.allow, *extra)),
            deny=tuple(_parse_pattern(p) for p in self.deny),
            private=frozenset(ipaddress.ip_address(a) for a in self.allow_private),
            max_bytes=self.max_bytes, timeout_seconds=self.timeout_seconds)


@dataclass(frozen=True)
class NetworkGrant:
    """The hosts one run may fetch from (its user's grant)."""

    allow: tuple[_Pattern, ...] = ()
    deny: tuple[_Pattern, ...] = ()
    private: frozenset[IPAddress] = frozenset()
    max_bytes: int = 2 << 20
    timeout_seconds: float = 30.0

    @property
    def empty(self) -> bool:
        """Whether nothing is granted (``web_fetch`` is then not offered)."""
        return not self.allow

    def refusal(self, host: HostName, port: int) -> str | None:
        """Why ``host:port`` may not be fetched, or ``None`` when the grant allows it."""
        where = f"{host}:{port}"
        for pattern in self.deny:
            if pattern.matches(host, port):
                return f"{where} is denied by your [network] deny {str(pattern)!r}"
        if any(pattern.matches(host, port) for pattern in self.allow):
            return None
        same_host = [p for p in self.allow if p.host_matches(host)]
        if same_host:
            return (f"{where}: port {port} is not granted (granted: "
                    + ", ".join(map(str, same_host)) + ")")
        what = "the IP address" if host.literal else "the host"
        return (f"{what} {where} is not granted (granted: "
                + ", ".join(str(p) for p in self.allow) + "); only you can grant more: "
                "[network] allow in your corral config, or --allow-net")

    def to_json(self) -> dict[str, Any]:
        """The effective grant as ``agents show`` and a run record show it."""
        return {"allow": [str(p) for p in self.allow], "deny": [str(p) for p in self.deny],
                "allow_private": sorted(a.compressed for a in self.private),
                "max_bytes": self.max_bytes, "timeout_seconds": self.timeout_seconds}


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, NAT64, 6to4, Teredo)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in ipaddress.IPv6Network("64:ff9b::/96") or (
            address in ipaddress.IPv6Network("::/96") and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: IPAddress, private: frozenset[IPAddress] = frozenset()) -> str | None:
    """Why a connection to ``address`` is refused, or ``None`` (a public unicast address,
    or one listed exactly in ``private``)."""
    if address in METADATA_ADDRESSES or (
            isinstance(address, ipaddress.IPv6Address)
            and (embedded := _embedded_v4(address)) is not None
            and embedded in METADATA_ADDRESSES):
        return f"{address} is a cloud metadata address: never reachable"
    if address in private:
        return None
    inner: IPAddress = address
    if isinstance(address, ipaddress.IPv6Address) and (v4 := _embedded_v4(address)):
        inner = v4
    if inner.is_multicast or not inner.is_global or not address.is_global:
        kind = next((name for name, flag in (
            ("loopback", inner.is_loopback), ("link-local", inner.is_link_local),
            ("multicast", inner.is_multicast), ("unspecified", inner.is_unspecified),
            ("reserved", inner.is_reserved), ("private", inner.is_private)) if flag),
            "special-purpose")
        return (f"{address} is not a public address ({kind}): refused; [network] "
                "allow_private lists exact addresses you vouch for (dangerous)")
    return None
