"""The egress proxy's own bounds and checks, on a host socket (no sandbox needed).

The attack suite (``test_egress_attacks.py``) drives the proxy from inside real
sandboxes; here it is served on a plain 127.0.0.1 listener so its bounds (connection
count, idle time), its HTTP forwarding and its refusals of what a user *can* set
are pinned quickly. Waits are on sockets closing, each with a bound.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from egress_support import test_names
from sbx_support import make_repo

from policies.contract import SandboxMode
from policies.network import NetworkConfig
from sandbox.config import HostConfig
from sandbox.egress import EgressProxy, check_target, listen_in_namespace
from sandbox.errors import SandboxError
from sandbox.factory import open_sandbox
from tests.executor.fetch_support import Names, Site, serve


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> Names:
    found = test_names(monkeypatch)
    found["docs.test"] = ["127.0.0.1"]
    return found


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as one:
        yield one


def start(proxy: EgressProxy) -> tuple[str, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    proxy.serve(listener)
    return listener.getsockname()


def closed_by_peer(sock: socket.socket, within: float = 20.0) -> bool:
    """Whether the other end closes ``sock`` within ``within`` seconds (reading what comes)."""
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def tunnel(address: tuple[str, int], target: str) -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def test_connections_beyond_the_bound_are_refused(names: Names, site: Site) -> None:
    proxy = EgressProxy(NetworkConfig(allow=(f"docs.test:{site.port}",)).grant(),
                        max_connections=1)
    try:
        address = start(proxy)
        held = tunnel(address, f"docs.test:{site.port}")
        extra = socket.create_connection(address, timeout=10)
        assert closed_by_peer(extra)
        assert any("more than 1 connections" in (e["reason"] or "") for e in proxy.events)
        held.close()
        extra.close()
    finally:
        proxy.close()


def test_an_idle_tunnel_is_closed(names: Names, site: Site) -> None:
    proxy = EgressProxy(NetworkConfig(allow=(f"docs.test:{site.port}",)).grant(),
                        idle_seconds=0.5)
    try:
        held = tunnel(start(proxy), f"docs.test:{site.port}")
        assert closed_by_peer(held)
        held.close()
    finally:
        proxy.close()


def test_close_ends_open_tunnels(names: Names, site: Site) -> None:
    proxy = EgressProxy(NetworkConfig(allow=(f"docs.test:{site.port}",)).grant())
    held = tunnel(start(proxy), f"docs.test:{site.port}")
    proxy.close()
    assert closed_by_peer(held)
    held.close()


def request(address: tuple[str, int], text: str) -> bytes:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(text.encode())
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
        return data


def test_plain_http_forwarding(names: Names, site: Site) -> None:
    proxy = EgressProxy(NetworkConfig(allow=(f"docs.test:{site.port}",)).grant())
    try:
        address = start(proxy)
        url = f"http://docs.test:{site.port}/secret"
        got = request(address, f"GET {url} HTTP/1.1\r\nHost: evil.test\r\n"
                      "Proxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive\r\n\r\n")
        assert got.endswith(b"PUBLIC-PAGE")
        assert site.seen == [("/secret", f"docs.test:{site.port}")]  # the URL's host, sent
        posted = request(address, f"POST {url} HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert posted.startswith(b"HTTP/1.1 403") and b"POST is not forwarded" in posted
        tls = request(address, f"GET https://docs.test:{site.port}/ HTTP/1.1\r\n\r\n")
        assert tls.startswith(b"HTTP/1.1 400")
        userinfo = request(address, f"GET http://docs.test@evil.test:{site.port}/ HTTP/1.1"
                           "\r\n\r\n")
        assert userinfo.startswith(b"HTTP/1.1 400")
        assert len(site.seen) == 1
    finally:
        proxy.close()


def test_allow_private_never_opens_this_machines_loopback(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """What a user can set (``allow_private``) does not reach 127.0.0.1 through the proxy:
    only the test-only attribute does."""
    names = Names()
    names["docs.test"] = ["127.0.0.1"]
    monkeypatch.setattr("sandbox.egress.checks.RESOLVER", names)
    user = NetworkConfig(allow=("docs.test:*",), allow_private=("127.0.0.1", "::1")).grant()
    verdict = check_target(user, "docs.test", 8080)
    assert not verdict.allowed and "loopback" in (verdict.refusal or "")
    assert not check_target(user, "[::1]", 8080).allowed
    assert not check_target(user, "0.0.0.0", 8080).allowed  # noqa: S104 - a target, refused
    intranet = NetworkConfig(allow=("wiki.test",), allow_private=("10.1.2.3",)).grant()
    names["wiki.test"] = ["10.1.2.3"]
    assert check_target(intranet, "wiki.test", 443).address == "10.1.2.3"


def test_no_listener_in_this_machines_namespace() -> None:
    with pytest.raises(SandboxError) as caught:
        listen_in_namespace(os.getpid())
    assert caught.value.code == "egress_unavailable"


def test_host_backend_refuses_egress(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    proxy = EgressProxy(NetworkConfig(allow=("docs.test",)).grant())
    with pytest.raises(SandboxError) as caught:
        open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE,
                     state_root=tmp_path / "state", egress=proxy)
    assert caught.value.code == "egress_unavailable"
