"""Allow-listed egress (``--net allow``), attacked on bubblewrap and docker.

Each test opens a real sandbox whose commands reach corral's filtering proxy on
their own 127.0.0.1:3128 (:mod:`sandbox.egress`), and tries to get out: through
the proxy to a host the grant does not name (in every spelling a parser may get
wrong), or around it (a raw socket, UDP, DNS). Every server listens on
127.0.0.x; the test-only resolver maps test names to them
(:func:`egress_support.test_names`), so a refusal here is the proxy's check, not
a missing route. Each attack has its positive control: the granted host, reached
the same way.
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from egress_support import CLIENT, pip_argv, serve_index, test_names
from sbx_support import TEST_LIMITS, backend_config, backends

from policies.contract import SandboxMode
from policies.network import NetworkConfig
from sandbox.base import BaseSandbox
from sandbox.egress import EgressProxy
from sandbox.factory import open_sandbox
from tests.backends import host_ipv4_addresses
from tests.executor.fetch_support import Names, Site, serve

ISOLATING = backends(only=("bubblewrap", "docker"))
EACH = pytest.mark.parametrize("backend", ISOLATING, indirect=True)
BUBBLEWRAP = pytest.mark.parametrize("backend", backends(only=("bubblewrap",)), indirect=True)


def grant(*allow: str, deny: tuple[str, ...] = ()) -> Any:
    return NetworkConfig(allow=allow, deny=deny).grant()


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> Names:
    return test_names(monkeypatch)


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as one:
        yield one


@pytest.fixture
def other() -> Iterator[Site]:
    """A second server on 127.0.0.1 (another port): never granted."""
    with serve() as one:
        one.secret = "OTHER-PORT"
        yield one


Opener = Callable[..., tuple[BaseSandbox, EgressProxy]]


@pytest.fixture
def egress_sb(backend: str, repo: Path, state_root: Path) -> Iterator[Opener]:
    made: list[tuple[BaseSandbox, EgressProxy | None]] = []

    def _open(*allow: str, egress: bool = True) -> tuple[BaseSandbox, EgressProxy]:
        proxy = EgressProxy(grant(*allow), idle_seconds=30)
        sb = open_sandbox(backend_config(backend, TEST_LIMITS), repo=repo,
                          mode=SandboxMode.WORKTREE, state_root=state_root,
                          egress=proxy if egress else None)
        made.append((sb, proxy))
        return sb, proxy

    yield _open
    for sb, proxy in made:
        sb.teardown(discard=True)
        if proxy is not None:
            proxy.close()


def client(sb: BaseSandbox, *args: str) -> Any:
    result = sb.exec(["python3", "-c", CLIENT, *args], timeout=60)
    assert result.exit_code == 0, result.stderr
    return ast.literal_eval(result.stdout.decode().strip().splitlines()[-1])


def fetch(sb: BaseSandbox, url: str, backend: str) -> tuple[int, str]:
    """GET ``url`` through the proxy variables: curl where the sandbox has it (bubblewrap),
    python's urllib in the docker image (which has no curl)."""
    if backend == "bubblewrap":
        result = sb.exec(["curl", "-sS", "-m", "20", "-w", "\n%{http_code}", url], timeout=60)
        *body, code = result.stdout.decode().rsplit("\n", 1)
        return int(code or 0), "".join(body)
    script = ("import sys, urllib.request, urllib.error\n"
              "try:\n    r = urllib.request.urlopen(sys.argv[1], timeout=20); "
              "print(r.read().decode()); print(r.status)\n"
              "except urllib.error.HTTPError as e:\n    print(e.read().decode()); print(e.code)\n")
    result = sb.exec(["python3", "-c", script, url], timeout=60)
    *body, code = result.stdout.decode().strip().rsplit("\n", 1)
    return int(code), "".join(body)


@EACH
def test_granted_host_reached_unlisted_refused(egress_sb: Opener, names: Names, site: Site,
                                               backend: str) -> None:
    names["docs.test"] = ["127.0.0.1"]
    names["evil.test"] = ["127.0.0.1"]
    sb, proxy = egress_sb(f"docs.test:{site.port}")
    assert fetch(sb, f"http://docs.test:{site.port}/secret", backend) == (200, "PUBLIC-PAGE")
    status, body = fetch(sb, f"http://evil.test:{site.port}/secret", backend)
    assert status == 403 and "evil.test" in body and "not granted" in body
    assert client(sb, "connect", "", "0", f"docs.test:{site.port}")[0] == "tunnel"
    assert client(sb, "socks-name", "docs.test", str(site.port))[0] == "tunnel"
    assert site.paths().count("/secret") == 3  # the unlisted host's request never arrived
    denied = [e for e in proxy.events if not e["allowed"]]
    assert [(e["host"], e["port"]) for e in denied] == [("evil.test", site.port)]


@EACH
def test_a_redirect_from_a_listed_host_to_an_unlisted_one_gets_nothing(
        egress_sb: Opener, names: Names, site: Site, other: Site, backend: str) -> None:
    """The client follows the redirect (curl -L, urllib by default): its request for the
    unlisted host is the proxy's to judge like any other, and is refused."""
    names["docs.test"] = ["127.0.0.1"]
    names["evil.test"] = ["127.0.0.1"]
    sb, proxy = egress_sb(f"docs.test:{site.port}")
    target = f"http://evil.test:{other.port}/secret"
    url = f"http://docs.test:{site.port}/redirect?to={target}"
    if backend == "bubblewrap":
        result = sb.exec(["curl", "-sS", "-L", "-m", "20", "-w", "\n%{http_code}", url],
                         timeout=60)
        *body, code = result.stdout.decode().rsplit("\n", 1)
        status, text = int(code or 0), "".join(body)
    else:
        status, text = fetch(sb, url, backend)
    assert status == 403 and "OTHER-PORT" not in text, (status, text)
    assert other.paths() == []  # the unlisted host never saw a request
    assert [("docs.test", site.port)] == [(e["host"], e["port"]) for e in proxy.events
                                          if e["allowed"]]
    assert any(not e["allowed"] and e["host"] == "evil.test" for e in proxy.events)


@EACH
def test_pip_through_the_proxy_and_not_without_the_grant(egress_sb: Opener, names: Names,
                                                         backend: str) -> None:
    names["index.test"] = ["127.0.0.1"]
    with serve_index() as index:
        sb, proxy = egress_sb(f"index.test:{index.port}")
        url = f"http://index.test:{index.port}/simple/"
        args = ("--index-url", url, "--trusted-host", "index.test", "--no-deps")
        got = sb.exec(pip_argv(backend, "download", *args, "-d", "/tmp/dl", index.name),
                      timeout=120)
        assert got.exit_code == 0, got.stderr.decode()[-2000:]
        assert f"/files/{index.filename}" in index.seen
        got = sb.exec(pip_argv(backend, "install", *args, "--target", "/tmp/site", index.name),
                      timeout=120)
        assert got.exit_code == 0, got.stderr.decode()[-2000:]
        ran = sb.exec(["python3", "-c", f"import {index.name}; print({index.name}.VERSION)"],
                      env={"PYTHONPATH": "/tmp/site"})
        assert ran.stdout.strip() == b"1.0"
        proxy.grant = grant("pypi.test")  # the grant removed: pip finds nothing
        asked = len(index.seen)
        got = sb.exec(pip_argv(backend, "download", *args, "-d", "/tmp/dl2", index.name,
                               "--retries", "0", "--timeout", "10"), timeout=120)
        assert got.exit_code != 0
        assert len(index.seen) == asked
        assert any(not e["allowed"] and e["host"] == "index.test" for e in proxy.events)


TRICKS = {
    "suffix": "docs.test.evil:{port}",             # a listed name with a suffix
    "userinfo": "docs.test@evil.test:{port}",
    "userinfo-listed-last": "evil.test@docs.test:{port}",
    "nul": "docs.test\\0.evil.test:{port}",        # a NUL in the host
    "percent-nul": "docs.test%00.evil.test:{port}",
    "idna-homograph": "d\u043ecs.test:{port}",       # a Cyrillic o
    "ip-literal": "127.0.0.1:{port}",              # an IP literal, not granted
    "loopback-decimal": "2130706433:{port}",       # 127.0.0.1 in decimal
    "loopback-octal": "0177.0.0.1:{port}",
    "loopback-hex-short": "0x7f.1:{port}",
    "loopback-v6": "[::1]:{port}",
    "loopback-v4-mapped": "[::ffff:127.0.0.1]:{port}",
    "metadata-decimal": "2852039166:80",           # 169.254.169.254 in decimal
    "metadata": "169.254.169.254:80",
    "metadata-v4-mapped": "[::ffff:169.254.169.254]:80",
    "metadata-v6": "[fd00:ec2::254]:80",
    "other-port": "docs.test:{other}",             # the listed name on another port
}


@EACH
@pytest.mark.parametrize("target", list(TRICKS.values()), ids=list(TRICKS))
def test_connect_tricks_refused(egress_sb: Opener, names: Names, site: Site, other: Site,
                                target: str) -> None:
    for name in ("docs.test", "docs.test.evil", "evil.test", "docs.test.evil.test"):
        names[name] = ["127.0.0.1"]
    sb, proxy = egress_sb(f"docs.test:{site.port}")
    outcome = client(sb, "connect", "", "0", target.format(port=site.port, other=other.port))
    assert outcome[0] == "refused" and outcome[1].startswith(b"HTTP/1.1 4"), outcome
    assert site.seen == [] and other.seen == []
    assert proxy.events and not any(e["allowed"] for e in proxy.events)


@pytest.mark.parametrize(("how", "host"), [
    pytest.param("socks-name", "docs.test\\0.evil.test", id="nul"),
    pytest.param("socks-name", "docs.test.evil", id="suffix"),
    pytest.param("socks-name", "d\u043ecs.test", id="idna-homograph"),
    pytest.param("socks-name", "evil.test@docs.test", id="userinfo"),
    pytest.param("socks-name", "2130706433", id="loopback-decimal"),
    pytest.param("socks-ip", "127.0.0.1", id="ip-literal"),
    pytest.param("socks-ip", "169.254.169.254", id="metadata"),
])
@EACH
def test_socks_tricks_refused(egress_sb: Opener, names: Names, site: Site, how: str,
                              host: str) -> None:
    names["docs.test.evil"] = ["127.0.0.1"]
    sb, _ = egress_sb(f"docs.test:{site.port}")
    assert client(sb, how, host, str(site.port)) == ("refused", 2)
    assert site.seen == []


@EACH
def test_granted_literals_of_loopback_and_metadata_still_refused(
        egress_sb: Opener, names: Names, site: Site) -> None:
    """Even granted exactly, this machine's loopback (other than the test hook's address)
    and a metadata address stay out of reach: the address check follows the grant."""
    sb, proxy = egress_sb("[::1]:*", "169.254.169.254:*", "[::ffff:127.0.0.1]:*")
    for target in (f"[::1]:{site.port}", "169.254.169.254:80",
                   f"[::ffff:127.0.0.1]:{site.port}"):
        outcome = client(sb, "connect", "", "0", target)
        assert outcome[0] == "refused", (target, outcome)
    reasons = [e["reason"] for e in proxy.events]
    assert any("loopback" in r for r in reasons) and any("metadata" in r for r in reasons)


@EACH
def test_dns_rebinding_between_check_and_connect(egress_sb: Opener, names: Names, site: Site
                                                 ) -> None:
    """The name is resolved once, checked, and that address is connected to: a resolver
    that answers 127.0.0.2 (refused) from the second question on never moves it."""
    with serve("127.0.0.2") as inside:
        names["docs.test"] = lambda calls: ["127.0.0.1"] if calls == 1 else ["127.0.0.2"]
        sb, _ = egress_sb(f"docs.test:{site.port}", f"docs.test:{inside.port}")
        assert client(sb, "connect", "", "0", f"docs.test:{site.port}")[0] == "tunnel"
        assert names.calls == ["docs.test"]
        outcome = client(sb, "connect", "", "0", f"docs.test:{inside.port}")
        assert outcome[0] == "refused" and b"127.0.0.2" in outcome[2]
        assert inside.seen == [] and site.paths() == ["/secret"]


@EACH
def test_client_ignoring_the_proxy_reaches_nothing(egress_sb: Opener, names: Names,
                                                   site: Site) -> None:
    names["docs.test"] = ["127.0.0.1"]
    sb, _ = egress_sb(f"docs.test:{site.port}")
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))  # noqa: S104 - where a leak would land
    listener.listen(4)
    listener.setblocking(False)
    try:
        for address in ("127.0.0.1", *host_ipv4_addresses().values()):
            for port in (site.port, listener.getsockname()[1]):
                outcome = client(sb, "raw", address, str(port))
                assert outcome[0] == "unreachable", (address, port, outcome)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert site.seen == []


@EACH
def test_udp_and_dns_exfiltration_get_nothing(egress_sb: Opener, names: Names,
                                              site: Site) -> None:
    sb, proxy = egress_sb(f"docs.test:{site.port}")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("0.0.0.0", 0))  # noqa: S104 - where a leak would land
    udp.setblocking(False)
    try:
        for address in ("127.0.0.1", *host_ipv4_addresses().values()):
            _, sent, dns = client(sb, "udp", address, str(udp.getsockname()[1]))
            assert dns == "gaierror"
            assert sent != "sent" or address == "127.0.0.1"  # its own loopback: nobody there
        with pytest.raises(BlockingIOError):
            udp.recvfrom(100)
    finally:
        udp.close()
    assert names.calls == [] and proxy.events == []


@EACH
def test_without_net_allow_nothing_changes(egress_sb: Opener, names: Names, site: Site) -> None:
    names["docs.test"] = ["127.0.0.1"]
    sb, proxy = egress_sb(f"docs.test:{site.port}", egress=False)
    env = sb.exec(["env"]).stdout.decode()
    assert "PROXY" not in env.upper()
    assert client(sb, "raw", "127.0.0.1", "3128")[0] == "unreachable"
    assert site.seen == [] and proxy.events == []


@BUBBLEWRAP
def test_the_socket_route_without_root(egress_sb: Opener, names: Names, site: Site,
                                       backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root (forced here: the suite runs as root), bubblewrap reaches the proxy over a
    Unix socket bound read-only into the sandbox, relayed from 127.0.0.1:3128 by the
    supervisor: the same grant, the same refusals, and still no route around it."""
    monkeypatch.setattr("sandbox.egress.netns.TEST_SOCKET_ROUTE", True)
    names["docs.test"] = names["evil.test"] = ["127.0.0.1"]
    sb, proxy = egress_sb(f"docs.test:{site.port}")
    assert fetch(sb, f"http://docs.test:{site.port}/secret", backend) == (200, "PUBLIC-PAGE")
    assert fetch(sb, f"http://evil.test:{site.port}/secret", backend)[0] == 403
    assert client(sb, "socks-name", "docs.test\\0.evil.test", str(site.port)) == ("refused", 2)
    assert client(sb, "connect", "", "0", f"docs.test:{site.port}")[0] == "tunnel"
    assert client(sb, "raw", "127.0.0.1", str(site.port))[0] == "unreachable"
    touched = sb.exec(["sh", "-c", "rm -f /run/corral-egress/proxy.sock; echo x > "
                       "/run/corral-egress/new"])
    assert touched.exit_code != 0  # the socket's directory is read-only to commands
    assert fetch(sb, f"http://docs.test:{site.port}/secret", backend)[0] == 200
    assert site.paths() == ["/secret", "/secret", "/secret"]
    assert [e["allowed"] for e in proxy.events] == [True, False, False, True, True]
