#!/usr/bin/env python3
"""Check that the docker engine's default bridge can carry a leak to the host.

Used by ``scripts/ci_setup.sh``: the network escape tests are only meaningful
on an engine where a container that is *not* on ``network_mode: none`` could
reach the host. This finds the ``bridge`` network's gateway (its IPAM gateway,
else the IPv4 address of its host interface), listens there, and runs a plain
container on that network that connects to the listener.

    python3 scripts/bridge_probe.py IMAGE

Prints ``reached <gateway> (<interface>) from a bridged container`` and exits
0, or prints why not and exits 1. Talks to the engine ``docker`` talks to
(``DOCKER_HOST``). Standard library only (runs before the venv exists).
"""

from __future__ import annotations

import fcntl
import json
import socket
import struct
import subprocess
import sys

_SIOCGIFADDR = 0x8915


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of host interface ``name``, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def gateway() -> tuple[str, str]:
    """(bridge interface, gateway address), or SystemExit with the reason."""
    done = subprocess.run(["docker", "network", "inspect", "bridge"], capture_output=True,
                          text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"no default bridge network: {done.stderr.strip()[:200]}")
    [network] = json.loads(done.stdout)
    interface = (network.get("Options") or {}).get("com.docker.network.bridge.name", "docker0")
    address = next((c["Gateway"] for c in (network.get("IPAM", {}).get("Config") or [])
                    if c.get("Gateway")), None) or interface_ipv4(interface)
    if address is None:
        raise SystemExit(f"the bridge interface {interface} has no IPv4 address on this host")
    return interface, address


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: bridge_probe.py IMAGE", file=sys.stderr)
        return 2
    image = argv[1]
    try:
        interface, address = gateway()
    except SystemExit as exc:
        print(exc)
        return 1
    with socket.socket() as server:
        server.bind((address, 0))
        server.listen()
        server.settimeout(60)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(({address!r}, {port}), timeout=10)"
        run = subprocess.Popen(  # a fixed argv; the image is the caller's
            ["docker", "run", "--rm", "--network", "bridge", "--entrypoint", "python3", image,
             "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            server.accept()[0].close()
            reached = True
        except OSError:
            reached = False
        _, stderr = run.communicate(timeout=120)
    if reached:
        print(f"reached {address} ({interface}) from a bridged container")
        return 0
    print(f"a container on the bridge network did not reach {address} ({interface}): "
          f"exit {run.returncode}: {stderr.strip()[-300:]}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
