"""A test MCP server written with the official SDK (``mcp.server.mcpserver.MCPServer``).

``sdk_server.py MARKER``: on start it appends one line (its pid) to MARKER, so a
test can tell whether it ever ran, and how often.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def token() -> str:
    """The value of MCP_TEST_TOKEN in the server's environment (or 'unset')."""
    return os.environ.get("MCP_TEST_TOKEN", "unset")


@server.tool()
def big(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


if __name__ == "__main__":
    with Path(sys.argv[1]).open("a", encoding="utf-8") as marker:
        marker.write(f"{os.getpid()}\n")
    server.run("stdio")
