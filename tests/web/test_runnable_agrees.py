"""Issue 29: '"Can I run this agent?" has three answers (the CLI's `u` flag beside
`[not runnable: no model for 'sonnet']`, the web page's "you: yes", MCP's
`runnable: true`)'. Now one function computes it (``executor.api.runnable``), and the
CLI, the web page and the MCP server (each the real one) show the same answer for an agent
that can run and one that cannot (a Claude agent whose `model: sonnet` nothing maps).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from web_support import Served, make_project, serve

from executor.api import Corral, runnable
from executor.cli import cli
from tests.executor.mcp_support import data, run, stdio_client
from tests.timescale import scaled


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    repo = make_project(tmp_path / "repo")  # patcher: an ngn agent with no model: inherits
    claude = repo / ".claude" / "agents" / "sonnety.md"
    claude.parent.mkdir(parents=True)
    claude.write_text("---\nname: sonnety\ndescription: d\nmodel: sonnet\n---\nDo it.\n")
    corral = Corral(repo, trust_project=True, personal=False, backend="host",
                    state_dir=tmp_path / "state")
    yield from serve(corral)


def _cli(root: Path) -> dict[str, dict[str, Any]]:
    done = CliRunner().invoke(cli, ["agents", "list", "--root", str(root), "--trust-project",
                                    "--no-personal"])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    found: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(lines[1:], 1):
        if line.startswith(" "):
            continue
        name, flags = line.split()[:2]
        below = lines[i + 1] if i + 1 < len(lines) else ""
        why = re.fullmatch(r"    \[not runnable: (.*)\]", below)
        found[name] = {"user": flags[1] == "u", "subagent": flags[2] == "s",
                       "why_not": why.group(1) if why else None}
    return found


def _web(served: Served) -> dict[str, dict[str, Any]]:
    html = httpx.get(served.url + "/agents", timeout=scaled(60)).text
    found: dict[str, dict[str, Any]] = {}
    for row in html.split('<tr class="agent">')[1:]:
        name = re.search(r'<td class="name">([^<]*)<', row)
        cell = re.search(r'<td class="runnable">(.*?)</td>', row, re.S)
        assert name is not None and cell is not None
        why = re.search(r'<div class="why">([^<]*)</div>', cell.group(1))
        found[unescape(name.group(1))] = {
            "user": "you: yes" in cell.group(1), "subagent": "subagent: yes" in cell.group(1),
            "why_not": unescape(why.group(1)) if why else None}
    return found


def _mcp(root: Path) -> dict[str, dict[str, Any]]:
    listed: dict[str, Any] = {}

    async def main() -> None:
        async with stdio_client(root) as client:
            listed.update(data(await client.call_tool("list_agents", {})))

    run(main)
    return {a["name"]: {"user": a["runnable"], "why_not": a.get("why_not")}
            for a in listed["agents"]}


def test_cli_web_and_mcp_give_the_one_answer(served: Served) -> None:
    corral = served.corral
    found = corral.agents()
    answer = {name: runnable(found.agents[name]) for name in found.names}
    assert answer == {name: found.runnable(name) for name in found.names}
    assert answer["patcher"] == {"user": True, "subagent": True, "why_not": None}
    sonnety = answer["sonnety"]
    assert sonnety["user"] is False and sonnety["subagent"] is False
    assert sonnety["why_not"].startswith("no model for 'sonnet': ")
    assert "--model" in sonnety["why_not"]  # what makes it run

    assert _cli(corral.root) == answer
    assert _web(served) == answer
    assert _mcp(corral.root) == {name: {"user": a["user"], "why_not": a["why_not"]}
                                 for name, a in answer.items()}
    shown = CliRunner().invoke(cli, ["agents", "show", "sonnety", "--root", str(corral.root),
                                     "--trust-project", "--no-personal"])
    assert "runnable     you: no, subagent: no (no model for 'sonnet': " in shown.stdout
