"""The MCP Inspector's command-line mode lists corral's tools and calls ``list_agents``.

An independent client (the TypeScript SDK, through ``@modelcontextprotocol/inspector
--cli``) against the real ``corral mcp``. ``scripts/ci_setup.sh`` installs the
Inspector and the Node it runs on into ``build/mcp-inspector`` (or
``$CORRAL_MCP_INSPECTOR_PREFIX``); without them the test skips, and CI, which
requires ``mcp-inspector`` (``CORRAL_REQUIRE``), fails instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from exec_support import agent_file
from mcp_support import REPO, WAIT, corral_mcp_argv

from tests.backends import require

PREFIX = Path(os.environ.get("CORRAL_MCP_INSPECTOR_PREFIX", REPO / "build" / "mcp-inspector"))
BIN = PREFIX / "node_modules" / ".bin"


def inspector(root: Path, *method: str, exit_code: int = 0) -> dict[str, Any]:
    """``mcp-inspector --cli <corral mcp> <method...>``: its JSON output (it exits 5 when a
    tool returned isError)."""
    missing = [str(BIN / name) for name in ("mcp-inspector", "node")
               if not (BIN / name).exists()]
    if missing:  # skips, or fails when CI requires it
        require("mcp-inspector", f"the MCP Inspector is not installed: {', '.join(missing)} "
                "missing (scripts/ci_setup.sh installs it)")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run([str(BIN / "mcp-inspector"), "--cli", *corral_mcp_argv(root),
                           *method], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=WAIT, check=False)
    assert done.returncode == exit_code, done.stderr
    result = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


def test_the_inspector_lists_the_tools_and_calls_list_agents(repo: Path) -> None:
    agent_file(repo, "w", "tools: [read_file]")
    listed = inspector(repo, "--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} == {
        "list_agents", "run_agent", "fanout", "list_runs", "show_run", "diff_run",
        "apply_run", "discard_run"}
    run_agent = next(t for t in listed["tools"] if t["name"] == "run_agent")
    assert run_agent["inputSchema"]["required"] == ["prompt"]
    called = inspector(repo, "--method", "tools/call", "--tool-name", "list_agents")
    assert called["isError"] is False
    agents = called["structuredContent"]["agents"]
    # The Inspector starts the server with its own small environment, as a user's client
    # does: corral's bundled agents are listed beside the project's.
    assert {"name": "w", "description": "test agent w", "runnable": True} in agents
    assert {a["name"] for a in agents} == {"w", "reviewer", "scout", "worker", "fixer",
                                           "researcher"}
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]


def test_the_inspector_sees_a_refusal_as_a_tool_error(repo: Path) -> None:
    called = inspector(repo, "--method", "tools/call", "--tool-name", "run_agent",
                       "--tool-arg", "prompt=go", "--tool-arg", "script=../../etc/passwd",
                       exit_code=5)
    assert called["isError"] is True
    assert called["structuredContent"]["error"]["code"] == "path_outside_root"
