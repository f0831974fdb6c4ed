"""The docs' format examples are real: the replay-format block (docs/models.md) is a valid
script that plays a whole run tree (parallel delegation included), and the ``tool_map``
block (docs/formats/index.md) maps a foreign tool name onto an installed custom tool
(issue 19: "README: the replay-script format and `tool_map` documented"; the README's
content moved to the docs site in issue 32)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from exec_support import agent_file

from executor.cli import cli
from executor.ledger import find_run, ledger_dir
from executor.models import ScriptedModel

REPO = Path(__file__).resolve().parents[2]


def _block(page: str, heading: str, language: str) -> str:
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    section = text[text.index(heading):]
    found = re.search(rf"```{language}\n(.+?)\n```", section, re.DOTALL)
    assert found is not None, heading
    return found.group(1)


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_the_readme_replay_plays_a_tree_with_parallel_children(repo: Path,
                                                                backend: str) -> None:
    text = _block("models.md", "## The replay format", "yaml")
    script = repo.parent / "replay.yaml"
    script.write_text(text)
    ScriptedModel.from_file(script)  # valid as written
    (repo / "b.txt").write_text("b\n")
    agent_file(repo, "auditor", "tools: [read_file, list_files]")
    zuno = repo / ".zuno" / "zuno.json"
    zuno.parent.mkdir(parents=True)
    zuno.write_text(json.dumps({"agents": {"lead": {
        "prompt": "lead", "mode": "primary", "delegates": ["auditor"],
        "tools": ["read_file", "list_files", "delegate"]}}}))
    done = CliRunner().invoke(cli, ["run", "--root", str(repo), "--trust-project",
                                    "--no-personal", "--agent", "lead", "--backend", "host",
                                    "--json", "--script", str(script), "check it"],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["final_text"] == "Both parts are fine."
    children = [find_run(ledger_dir(repo), c) for c in result["children"]]
    assert sorted(c.final_text for c in children) == ["a is fine", "b is fine"]


def test_the_readme_tool_map_maps_onto_an_installed_tool(tmp_path: Path) -> None:
    config = json.loads(_block("formats/index.md", "## Mapping a harness's tool names", "json"))
    research = tmp_path / ".claude" / "agents" / "research.md"
    research.parent.mkdir(parents=True)
    research.write_text("---\nname: research\ndescription: d\ntools: Read, repo_lookup\n---\n"
                        "Research.\n")
    (tmp_path / "ngn.json").write_text(json.dumps(config))
    user = Path.home() / ".config" / "corral" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('custom_tools = ["github_search"]\n')
    shown = CliRunner().invoke(cli, ["agents", "show", "research", "--root", str(tmp_path),
                                     "--config", str(tmp_path / "ngn.json"),
                                     "--no-personal", "--json"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["tools"] == ["github_search", "read_file"]
