"""A confined MCP server (``confine = true``) runs inside the child's sandbox: attacks.

The server is ``tests/mcp_servers/stdlib_server.py`` run by the sandbox's own
``python3`` (the SDK is not installed there: bubblewrap binds the host's
``/usr``, the image has python3 alone). Each attack starts with a positive
control: the same server unconfined (``confine = false``, on the host) does
reach the listener or read the secret, so a test can only pass because the
sandbox stopped the confined one.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends

from executor.mcpclient import McpError, McpServers
from policies.contract import SandboxMode
from policies.mcp import McpServerConfig
from sandbox.base import BaseSandbox
from tests.backends import bridge_gateway, require
from tests.mcp_servers import SDK_SERVER, probe_server

CONFINED = backends(only=("bubblewrap", "docker"), fake=False)


def _call(servers: McpServers, tool: str, **arguments: object) -> str:
    result = servers.call(f"mcp__probe__{tool}", arguments)
    return "\n".join(str(getattr(block, "text", "")) for block in result.content)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on every host address, where a leak would land."""
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))  # noqa: S104 - the point: listen where a leak would land
    sock.listen(16)
    sock.setblocking(False)
    yield sock
    sock.close()


def _accepted(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def _servers(sb: BaseSandbox, *, confine: bool) -> McpServers:
    servers = McpServers({"probe": probe_server(confine=confine)}, sandbox=sb)
    servers.start(["probe"])
    assert servers.failures == {}
    return servers


@pytest.mark.parametrize("backend", CONFINED, indirect=True)
def test_confined_server_cannot_reach_the_host(open_sb: OpenSandbox, backend: str,
                                               listener: socket.socket) -> None:
    """Attack: the server connects to a listener on the host's loopback and, under docker,
    on the bridge gateway (the host as a container sees it)."""
    port = listener.getsockname()[1]
    targets = ["127.0.0.1"]
    if backend == "docker":
        gateway = bridge_gateway()
        if isinstance(gateway, str):
            require("docker-bridge", gateway)
        else:
            targets.append(gateway[1])
    sb = open_sb(SandboxMode.WORKTREE)
    control = _servers(sb, confine=False)
    try:
        for address in targets:
            assert _call(control, "connect", host=address, port=port) == "connected"
        assert _accepted(listener) == len(targets)
    finally:
        control.close()
    confined = _servers(sb, confine=True)
    try:
        for address in targets:
            assert _call(confined, "connect", host=address, port=port).startswith("failed")
    finally:
        confined.close()
    assert _accepted(listener) == 0


@pytest.mark.parametrize("backend", CONFINED, indirect=True)
def test_confined_server_cannot_read_the_users_home(open_sb: OpenSandbox, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: the server reads a secret planted in the user's home on the host."""
    home = Path.home()
    secret = home / ".ssh" / "id_test"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("PRIVATE KEY\n")
    sb = open_sb(SandboxMode.WORKTREE)
    control = _servers(sb, confine=False)
    try:
        assert _call(control, "read", path=str(secret)) == "read: PRIVATE KEY\n"
    finally:
        control.close()
    confined = _servers(sb, confine=True)
    try:
        assert _call(confined, "read", path=str(secret)).startswith("failed")
        seen = json.loads(_call(confined, "whoami"))
        assert seen["home"] != str(home)  # the sandbox's own HOME, not the user's
    finally:
        confined.close()


@pytest.mark.parametrize("backend", CONFINED, indirect=True)
def test_confined_server_sees_the_sandbox_not_the_parent(
        open_sb: OpenSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """It runs in the child's workspace with the environment allowlist plus the variables
    its config names, nothing else of corral's environment; in read-only mode it cannot
    write the workspace."""
    monkeypatch.setenv("PASSED_ON", "yes")
    monkeypatch.setenv("KEPT_BACK", "secret")
    sb = open_sb(SandboxMode.READ_ONLY)
    servers = McpServers({"probe": probe_server(env=["PASSED_ON"])}, sandbox=sb)
    servers.start(["probe"])
    try:
        seen = json.loads(_call(servers, "whoami"))
        assert Path(seen["cwd"]) == sb.root
        assert "PASSED_ON" in seen["env"] and "KEPT_BACK" not in seen["env"]
        assert _call(servers, "write", path=str(sb.root / "x.txt"), text="x").startswith("failed")
        assert not (sb.root / "x.txt").exists()
    finally:
        servers.close()


@pytest.mark.parametrize("backend", CONFINED, indirect=True)
def test_server_stops_with_the_sandbox_and_restarts_when_reaped(
        open_sb: OpenSandbox, backend: str) -> None:
    """The server is one of the child's processes: a diff collection (a freeze) stops it,
    the next call starts it again, and teardown stops it for good."""
    sb = open_sb(SandboxMode.WORKTREE)
    servers = _servers(sb, confine=True)
    first = json.loads(_call(servers, "whoami"))["pid"]
    sb.collect_diff()
    assert servers.running() == {"probe": False}
    assert json.loads(_call(servers, "whoami"))["pid"] >= 1
    assert servers.starts() == {"probe": 2}
    assert first >= 1
    sb.teardown()
    assert servers.running() == {"probe": False}
    servers.close()


@pytest.mark.parametrize("backend", CONFINED, indirect=True)
def test_a_hung_server_is_killed_at_the_call_timeout(open_sb: OpenSandbox) -> None:
    """A call that never answers ends at its timeout, the server is killed (never reused),
    and the next call gets a fresh one."""
    sb = open_sb(SandboxMode.WORKTREE)
    servers = _servers(sb, confine=True)
    try:
        with pytest.raises(McpError) as caught:
            servers.call("mcp__probe__hang", {}, timeout=1.0)
        assert caught.value.code == "mcp_timeout"
        assert servers.running() == {"probe": False}
        assert json.loads(_call(servers, "whoami"))["pid"] >= 1
        assert servers.starts() == {"probe": 2}
    finally:
        servers.close()


@pytest.mark.parametrize("backend", backends(only=("bubblewrap",), fake=False), indirect=True)
def test_sdk_server_runs_confined_under_bubblewrap(open_sb: OpenSandbox) -> None:
    """The SDK server itself, confined: the backend binds the interpreter, corral's venv and
    the server's directory read-only (``extra_ro_paths``); it answers, and the marker it
    writes lands in the sandbox's own /tmp, not the host's."""
    venv = Path(sys.prefix)
    interpreter = Path(sys.base_prefix)
    sb = open_sb(SandboxMode.WORKTREE,
                 extra_ro_paths=(interpreter, venv, SDK_SERVER.parent))
    marker = "/tmp/sdk-starts"
    config = McpServerConfig(command=str(venv / "bin" / "python"),
                             args=(str(SDK_SERVER), marker))
    servers = McpServers({"calc": config}, sandbox=sb)
    servers.start(["calc"])
    try:
        assert servers.failures == {}
        result = servers.call("mcp__calc__add", {"a": 2, "b": 3})
        assert [getattr(block, "text", None) for block in result.content] == ["5"]
        assert not Path(marker).exists()  # written inside, on the sandbox's tmpfs
    finally:
        servers.close()
