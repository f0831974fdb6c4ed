"""``corral mcp --http PORT``: streamable HTTP on 127.0.0.1 only, behind a bearer token.

The server is a real subprocess; the client is the SDK's own streamable HTTP
client. Attacks: a request without (or with a wrong) token is refused, a request
naming another Host is refused (DNS rebinding), and the port cannot be reached on
any of the machine's other addresses.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import pytest
from exec_support import agent_file, tree_digest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_support import REPO, WAIT, call, corral_mcp_argv, data, replay, run

from tests.backends import host_ipv4_addresses

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream",
           "Content-Type": "application/json"}


@contextmanager
def http_server(root: Path, *options: str, token: str | None = None,
                ) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """``corral mcp --http 0``: (its URL, the bearer token, the process)."""
    env = dict(os.environ)
    env.pop("CORRAL_MCP_TOKEN", None)
    if token is not None:
        env["CORRAL_MCP_TOKEN"] = token
    process = subprocess.Popen(corral_mcp_argv(root, "--http", "0", *options), cwd=REPO,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stderr is not None
        url = shown = None
        for line in process.stderr:  # waits on the server's own announcement
            found = re.search(r"at (http://127\.0\.0\.1:\d+/mcp) ", line)
            url = found.group(1) if found else url
            bearer = re.search(r"'Authorization: Bearer ([^']+)'", line)
            shown = bearer.group(1) if bearer else shown
            if url and (shown or "CORRAL_MCP_TOKEN" in line):
                break
        assert url is not None, "the server never said where it listens"
        yield url, token or str(shown), process
    finally:
        process.terminate()
        process.wait(WAIT)
        if process.stderr is not None:
            process.stderr.close()


@asynccontextmanager
async def http_client(url: str, token: str) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


@pytest.fixture
def project(repo: Path) -> Path:
    agent_file(repo, "w", "tools: [read_file, write_file]")
    return repo


def test_a_scripted_child_runs_over_http(project: Path) -> None:
    before = tree_digest(project)
    write = replay(call("write_file", path="n.txt", content="n\n"), {"text": "done"})
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(str(message))

    with http_server(project, "--backend", "host") as (url, token, _):
        async def main() -> None:
            async with http_client(url, token) as client:
                assert [a["name"] for a in data(await client.call_tool(
                    "list_agents", {}))["agents"]] == ["w"]
                result = data(await client.call_tool(
                    "run_agent", {"agent": "w", "prompt": "go", "script_text": write},
                    progress_callback=on_progress))
                assert result["status"] == "completed"
                assert [f["path"] for f in result["changed_files"]] == ["n.txt"]
                shown = data(await client.call_tool("show_run", {"run_id": result["run_id"]}))
                assert shown["diff"] == result["diff"]

        run(main)
    assert "w: step 1: write_file: allowed" in progress
    assert tree_digest(project) == before


def test_requests_without_the_token_are_refused(project: Path) -> None:
    token = "a-token-chosen-by-the-user-0123456789"
    with http_server(project, token=token) as (url, _, process):
        for given in (None, "Bearer wrong-token-0123456789", f"Basic {token}", "Bearer",
                      f"Bearer{token}", f"Bearer {token.upper()}", token,
                      # A prefix of the token, and the token with one byte more: a check of
                      # a prefix only (either way round) would let them in.
                      f"Bearer {token[:-1]}", f"Bearer {token[:16]}", f"Bearer {token}x",
                      f"Bearer {token}0", f"Bearer {token} {token}"):
            headers = HEADERS | ({"Authorization": given} if given is not None else {})
            refused = httpx.post(url, json=INITIALIZE, headers=headers, timeout=WAIT)
            assert refused.status_code == 401, given
            assert refused.json()["error"]["code"] == "unauthorized"
            assert refused.headers["www-authenticate"].startswith("Bearer")
        # The scheme is case-insensitive (RFC 9110 11.1, RFC 6750 2.1); the token is not.
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            accepted = httpx.post(url, json=INITIALIZE, timeout=WAIT,
                                  headers=HEADERS | {"Authorization": f"{scheme} {token}"})
            assert accepted.status_code == 200, (scheme, accepted.text)
            assert "corral" in accepted.text
        assert process.poll() is None


def test_a_foreign_origin_is_refused(project: Path) -> None:
    """A web page (any other origin, another local port's included) cannot drive the server
    through the user's browser, even with the token."""
    with http_server(project) as (url, token, _):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        auth = {"Authorization": f"Bearer {token}"}
        for origin in ("http://attacker.example", "https://127.0.0.1.evil.example",
                       f"http://localhost:{port + 1}", f"http://127.0.0.1:{port + 1}", "null",
                       f"https://127.0.0.1:{port}"):
            refused = httpx.post(url, json=INITIALIZE, timeout=WAIT,
                                 headers=HEADERS | auth | {"Origin": origin})
            assert refused.status_code == 403, (origin, refused.text)
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            accepted = httpx.post(url, json=INITIALIZE, timeout=WAIT,
                                  headers=HEADERS | auth | {"Origin": origin})
            assert accepted.status_code == 200, (origin, accepted.text)


def test_a_generated_token_is_printed_and_a_weak_one_refused(project: Path) -> None:
    with http_server(project) as (url, token, _):
        assert len(token) >= 32
        ok = httpx.post(url, json=INITIALIZE, timeout=WAIT,
                        headers=HEADERS | {"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
    weak = subprocess.run(corral_mcp_argv(project, "--http", "0"), cwd=REPO, timeout=WAIT,
                          env=dict(os.environ, CORRAL_MCP_TOKEN="short"), capture_output=True,
                          text=True, check=False)
    assert weak.returncode == 2
    assert "CORRAL_MCP_TOKEN must be at least 16 characters" in weak.stderr


def test_another_host_name_is_refused(project: Path) -> None:
    """DNS rebinding: a web page's request that reaches the port under another name."""
    with http_server(project) as (url, token, _):
        rebound = httpx.post(url, json=INITIALIZE, timeout=WAIT, headers=HEADERS | {
            "Authorization": f"Bearer {token}", "Host": "attacker.example:80"})
        assert rebound.status_code in (403, 421), rebound.text


def test_the_port_is_not_reachable_on_other_addresses(project: Path) -> None:
    others = {name: address for name, address in host_ipv4_addresses().items()
              if not address.startswith("127.")}
    if not others:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    with http_server(project) as (url, _, _process):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT):
            pass  # it listens on loopback
        for name, address in others.items():
            with pytest.raises(ConnectionRefusedError), socket.create_connection(
                    (address, port), timeout=WAIT):
                pytest.fail(f"corral mcp is reachable on {name} {address}:{port}")
