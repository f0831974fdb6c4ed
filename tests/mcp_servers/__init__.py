"""Test MCP servers: one on the official SDK, one on the standard library."""

from __future__ import annotations

import sys
from pathlib import Path

from policies.mcp import McpServerConfig

HERE = Path(__file__).resolve().parent
SDK_SERVER = HERE / "sdk_server.py"
STDLIB_SOURCE = (HERE / "stdlib_server.py").read_text(encoding="utf-8")


def sdk_server(marker: Path, **options: object) -> McpServerConfig:
    """The SDK server on the host (``confine = false``): corral's venv has the SDK."""
    return McpServerConfig.model_validate(
        {"command": sys.executable, "args": [str(SDK_SERVER), str(marker)], "confine": False,
         **options})


def probe_server(*, confine: bool = True, **options: object) -> McpServerConfig:
    """The standard-library server, run by the sandbox's own python3."""
    return McpServerConfig.model_validate(
        {"command": "python3" if confine else sys.executable, "args": ["-c", STDLIB_SOURCE],
         "confine": confine, **options})
