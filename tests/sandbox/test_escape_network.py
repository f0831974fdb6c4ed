"""Escape suite, network (threats.md B5): a child reaches no address of the host.

``test_network_none_blocks_tcp_udp_dns`` (test_escape_process.py) covers the
parent's loopback; this module covers the routes out of the sandbox: the
docker bridge's gateway (the host, as seen from a container on the default
network) and every other address the host has. Each attack starts with a
positive control proving that the leak is possible on this machine (a plain
container on the ``bridge`` network, or the parent itself, connects), so the
test can only pass because the sandbox stopped it.

On an engine started with ``--bridge=none`` a container that is not on
``network_mode: none`` has nowhere to go, and the leak tests skip (CI sets
``CORRAL_REQUIRE=docker-bridge`` and runs an engine with a default bridge, so
there they fail instead). The ``docker inspect`` pin holds on every engine.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
from collections.abc import Iterator

import pytest
from sbx_support import OpenSandbox, backends

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import DockerConfig
from tests.backends import bridge_gateway, host_ipv4_addresses, require
from tests.timescale import scaled

MODES = [pytest.param(mode, id=mode.value) for mode in SandboxMode]
NO_OS_ISOLATION = "commands run on the host as the user"
#: Tries TCP and UDP to every address given; prints one JSON line per attempt.
_PROBE = """
import json, socket, sys
port = int(sys.argv[1])
for address in sys.argv[2:]:
    for kind in ("tcp", "udp"):
        try:
            if kind == "tcp":
                socket.create_connection((address, port), timeout=5).close()
            else:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                    udp.sendto(b"leak", (address, port))
            outcome = "reached"
        except OSError as exc:
            outcome = exc.errno
        print(json.dumps([kind, address, outcome]))
"""


class Listeners:
    """A TCP and a UDP socket on one port of every host address (0.0.0.0)."""

    def __init__(self) -> None:
        self.tcp = socket.socket()
        self.tcp.bind(("0.0.0.0", 0))  # noqa: S104 - the point: listen where a leak would land
        self.tcp.listen(16)
        self.tcp.setblocking(False)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", self.port))  # noqa: S104 - as above
        self.udp.setblocking(False)

    def accepted(self) -> list[str]:
        """Peers whose TCP connection completed since the last call."""
        peers = []
        while True:
            try:
                conn, peer = self.tcp.accept()
            except BlockingIOError:
                return peers
            conn.close()
            peers.append(peer[0])

    def received(self) -> list[str]:
        """Peers whose UDP datagram arrived since the last call."""
        peers = []
        while True:
            try:
                _, peer = self.udp.recvfrom(64)
            except BlockingIOError:
                return peers
            peers.append(peer[0])

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    found = Listeners()
    try:
        yield found
    finally:
        found.close()


def probe_from(sb: BaseSandbox, port: int, addresses: list[str]) -> list[list[object]]:
    result = sb.exec(["python3", "-c", _PROBE, str(port), *addresses], timeout=scaled(60))
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def outside_addresses() -> dict[str, str]:
    """Every non-loopback IPv4 address of the host (the bridge's gateway among them)."""
    return {name: address for name, address in host_ipv4_addresses().items()
            if not address.startswith("127.")}


def docker_inspect(name: str) -> dict[str, object]:
    done = subprocess.run(["docker", "inspect", name], capture_output=True, text=True,
                          check=True, timeout=scaled(60))
    [found] = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


# -- the container's configuration, on every engine ------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", backends(only=("docker",)), indirect=True)
def test_container_is_on_network_none(open_sb: OpenSandbox, mode: SandboxMode) -> None:
    """Without ``network_mode: none`` the container's ``NetworkMode`` is ``default`` (the
    engine's bridge); this holds even where the engine has no bridge to leak to."""
    sb = open_sb(mode)
    info = docker_inspect(sb.id)
    host_config = info["HostConfig"]
    settings = info["NetworkSettings"]
    assert isinstance(host_config, dict) and isinstance(settings, dict)
    assert host_config["NetworkMode"] == "none"
    assert sorted(settings["Networks"]) == ["none"]
    assert not settings["Ports"] and not host_config.get("PortBindings")
    assert not host_config.get("ExtraHosts") and not host_config.get("Links")
    routes = sb.exec(["cat", "/proc/net/route"]).stdout.decode().splitlines()
    assert routes[1:] == [], routes  # no route at all: not even a default gateway
    interfaces = sb.exec(["cat", "/proc/net/dev"]).stdout.decode().splitlines()[2:]
    assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]


# -- the attack: reach the host through the bridge or any host address -----------------------


def _bridge_control(listeners: Listeners, gateway: str) -> None:
    """A plain container on the default bridge network reaches the listener at the gateway:
    a container that is not on ``none`` would leak here. Otherwise this engine cannot show
    the leak (skip, or fail where CI requires ``docker-bridge``)."""
    image = DockerConfig().image
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "bridge", "--entrypoint", "python3", image,
         "-c", _PROBE, str(listeners.port), gateway],
        capture_output=True, text=True, timeout=scaled(120), check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    reached = listeners.accepted()
    if done.returncode != 0 or ["tcp", gateway, "reached"] not in lines or not reached:
        require("docker-bridge", missing=(
            f"a container on the default bridge network cannot reach the host at {gateway} "
            f"(exit {done.returncode}: {lines or done.stderr.strip()[-300:]}), so no leak "
            "can be shown on this engine"))
    listeners.received()  # the control's datagram, if it arrived already


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "backend", backends(only=("host", "bubblewrap", "docker"), host_xfail=NO_OS_ISOLATION),
    indirect=True)
def test_child_cannot_reach_the_host(open_sb: OpenSandbox, backend: str, mode: SandboxMode,
                                     listeners: Listeners) -> None:
    """Listeners on every host address; the child tries TCP and UDP to each (on docker, the
    bridge's gateway first). Without a network namespace (bubblewrap's ``--unshare-all``)
    or ``network_mode: none`` (docker, on an engine with a bridge) the connections land.
    Pinned: every attempt fails with ``ENETUNREACH`` (no route: only loopback exists), and
    nothing arrives at any listener."""
    addresses = outside_addresses()
    if backend == "docker":
        require("docker-bridge")
        found = bridge_gateway()
        assert not isinstance(found, str)
        interface, gateway = found
        addresses = {interface: gateway, **addresses}
        _bridge_control(listeners, gateway)
    if not addresses:
        pytest.skip("the host has no address outside loopback to leak to")
    for address in addresses.values():  # the parent reaches each: the listeners are there
        socket.create_connection((address, listeners.port), timeout=scaled(5)).close()
    assert len(listeners.accepted()) == len(addresses)
    sb = open_sb(mode)
    targets = list(dict.fromkeys(addresses.values()))
    attempts = probe_from(sb, listeners.port, targets)
    expected = [[kind, address, errno.ENETUNREACH] for address in targets
                for kind in ("tcp", "udp")]
    assert attempts == expected, f"the child reached the host: {attempts}"
    assert listeners.accepted() == []
    assert listeners.received() == []
