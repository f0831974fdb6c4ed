"""Helpers for the ``corral mcp`` tests: the real server, driven by the SDK's own client."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]
#: How long a wait on the server's state may take before the test fails.
WAIT = scaled(60.0)


def corral_mcp_argv(root: Path, *options: str, trust: bool = True) -> list[str]:
    """``corral mcp`` for ``root`` as this test's Python runs it."""
    return [sys.executable, "-m", "executor", "mcp", "--root", str(root),
            *(["--trust-project"] if trust else []), "--no-personal", *options]


def stdio_params(root: Path, *options: str, trust: bool = True) -> StdioServerParameters:
    argv = corral_mcp_argv(root, *options, trust=trust)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ),
                                 cwd=str(REPO))


@asynccontextmanager
async def stdio_client(root: Path, *options: str, trust: bool = True,
                       ) -> AsyncIterator[Client]:
    """A connected client of ``corral mcp`` over stdio (a real subprocess)."""
    async with Client(stdio_params(root, *options, trust=trust)) as client:
        yield client


def data(result: CallToolResult) -> dict[str, Any]:
    """A successful result's JSON object (and its text says the same)."""
    assert not result.is_error, result.content
    body = result.structured_content
    assert isinstance(body, dict)
    text = result.content[0]
    assert getattr(text, "type", None) == "text" and json.loads(text.text) == body  # type: ignore[union-attr]
    return body


def error(result: CallToolResult) -> dict[str, Any]:
    """A tool error's corral error object."""
    assert result.is_error, result.content
    body = result.structured_content
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert json.loads(result.content[0].text) == body  # type: ignore[union-attr]
    err = body["error"]
    assert isinstance(err, dict)
    return err


def replay(*turns: dict[str, Any]) -> str:
    return yaml.safe_dump(list(turns))


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def wait_until(check: Callable[[], Awaitable[bool]], what: str,
                     timeout: float = WAIT) -> None:
    """Poll ``check`` (a question to the server or the ledger) until it says yes."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.05)


def run(main: Callable[[], Awaitable[None]]) -> None:
    """Run an async test body."""
    anyio.run(main)
