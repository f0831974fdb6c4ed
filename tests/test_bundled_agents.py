"""The agents corral ships (pi's ``<package>/agents/*.md``, "bundled with pi-subagent"):
listed with scope ``bundled`` in an empty directory, replaced by any personal, project or
imported definition of the same name, each runnable end to end with a replay; and
``agents show`` printing each tool's arguments (what a replay's ``arguments`` must be)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from executor.agents.signatures import signature
from executor.cli import cli, main
from policies.agents import BUNDLED_DIR
from tests.backends import git

BUNDLED = ("fixer", "researcher", "reviewer", "scout", "worker")


@pytest.fixture(autouse=True)
def _bundled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRAL_BUNDLED_AGENTS", "1")  # the suite's default leaves them out


def corral(*args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    try:
        return result.exit_code, json.loads(result.stdout), result.stderr
    except json.JSONDecodeError:
        return result.exit_code, result.stdout, result.stderr


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# Project\n")
    (repo / "test.sh").write_text("grep -q fixed README.md\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


def test_an_empty_directory_lists_the_bundled_agents(tmp_path: Path) -> None:
    code, data, _ = corral("agents", "list", "--root", str(tmp_path), "--json")
    assert code == 0
    assert [(a["name"], a["scope"], a["format"]) for a in data["agents"]] == [
        (name, "bundled", "pi") for name in BUNDLED]
    assert {a["source"] for a in data["agents"]} == {f"corral:agents/{n}.md" for n in BUNDLED}
    assert not [d for d in data["diagnostics"] if d["severity"] == "error"]
    by_name = {a["name"]: a for a in data["agents"]}
    assert by_name["reviewer"]["sandbox"] == by_name["scout"]["sandbox"] == "read-only"
    assert "web_fetch" in by_name["researcher"]["tools"]
    assert "shell" in by_name["fixer"]["tools"] and "shell" not in by_name["researcher"]["tools"]
    code, text, _ = corral("agents", "list", "--root", str(tmp_path))
    assert code == 0 and "reviewer" in text


def test_the_switch_leaves_them_out_and_a_bad_value_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CORRAL_BUNDLED_AGENTS", "0")
    code, data, _ = corral("agents", "list", "--root", str(tmp_path), "--json")
    assert code == 0 and data["agents"] == []
    monkeypatch.setenv("CORRAL_BUNDLED_AGENTS", "yes")
    with pytest.raises(SystemExit) as exited:
        main(["agents", "list", "--root", str(tmp_path), "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert exited.value.code == 2
    assert error["code"] == "bad_environment_variable"
    assert error["context"] == {"CORRAL_BUNDLED_AGENTS": "yes"}


def test_personal_project_and_imported_definitions_replace_them(
        tmp_path: Path) -> None:
    """Spec (pi-subagent-format.md): the bundled location is the third after user-level and
    project-level, and "Project agents override user agents with the same name": corral
    reads bundled agents first, so a user's replaces one, a project's the user's, and an
    explicit import every one."""
    repo = _repo(tmp_path)
    home = Path.home()
    personal = home / ".pi/agent/agents/reviewer.md"
    personal.parent.mkdir(parents=True)
    personal.write_text("---\nname: reviewer\ndescription: mine\n---\nMine.\n")
    root = ("--root", str(repo))
    code, data, _ = corral("agents", "show", "reviewer", *root, "--json")
    assert code == 0
    assert (data["scope"], data["description"]) == ("personal", "mine")
    project = repo / ".pi/agents/reviewer.md"
    project.parent.mkdir(parents=True)
    project.write_text("---\nname: reviewer\ndescription: ours\n---\nOurs.\n")
    code, data, _ = corral("agents", "show", "reviewer", *root, "--trust-project", "--json")
    assert code == 0
    assert (data["scope"], data["description"]) == ("project", "ours")
    imported = tmp_path / "imports.json"
    (tmp_path / "worker.md").write_text("---\nname: worker\ndescription: imported\n---\nI.\n")
    imported.write_text(json.dumps({"agent_imports": [{"path": "worker.md", "format": "pi"}]}))
    code, data, _ = corral("agents", "list", *root, "--config", str(imported), "--json")
    assert code == 0
    by_name = {a["name"]: a for a in data["agents"]}
    assert by_name["worker"]["scope"] == "import"
    assert by_name["reviewer"]["scope"] == "personal" and by_name["scout"]["scope"] == "bundled"
    replaced = [d for d in data["diagnostics"] if d.get("code") == "collision"]
    assert any("corral:agents/worker.md" in d["reason"] for d in replaced), replaced


REPLAYS: dict[str, list[dict[str, Any]]] = {
    "reviewer": [{"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
                 {"tool_calls": [{"name": "write_file",
                                  "arguments": {"path": "x.txt", "content": "x"}}]},
                 {"text": "README.md:1: the title says nothing."}],
    "scout": [{"tool_calls": [{"name": "find", "arguments": {"pattern": "*.md"}},
                              {"name": "list_files", "arguments": {}}]},
              {"text": "README.md: the title."}],
    "worker": [{"tool_calls": [{"name": "write_file",
                                "arguments": {"path": "NOTES.md", "content": "notes\n"}}]},
               {"text": "Wrote NOTES.md."}],
    "fixer": [{"tool_calls": [{"name": "shell", "arguments": {"command": "sh test.sh"}}]},
              {"tool_calls": [{"name": "edit", "arguments": {
                  "path": "README.md", "old_string": "# Project", "new_string": "# fixed"}}]},
              {"tool_calls": [{"name": "shell", "arguments": {"command": "sh test.sh"}}]},
              {"text": "The title lacked 'fixed'; the test passes."}],
    "researcher": [{"tool_calls": [{"name": "search", "arguments": {"pattern": "Project"}},
                                   {"name": "web_fetch",
                                    "arguments": {"url": "http://127.0.0.1:9/"}}]},
                   {"text": "README.md holds the title; the page needs a grant."}],
}


@pytest.mark.parametrize("name", BUNDLED)
def test_each_bundled_agent_runs_a_replay_end_to_end(name: str, tmp_path: Path) -> None:
    """Host backend, real git: the read-only ones change nothing (a write is denied), the
    worker and the fixer return a diff, the researcher's web_fetch is never offered without
    a network grant (denied, naming the grant)."""
    repo = _repo(tmp_path)
    replay = tmp_path / f"{name}.yaml"
    replay.write_text(yaml.safe_dump(REPLAYS[name]))
    code, data, err = corral("run", "--root", str(repo), "--agent", name, "--backend",
                             "host", "--json", "--script", str(replay), "go")
    assert data["status"] == "completed", (data, err)
    changed = [f["path"] for f in data["changed_files"]]
    denied = [d["tool"] for d in data["denied_calls"]]
    expected = {"reviewer": ([], ["write_file"]), "scout": ([], []),
                "worker": (["NOTES.md"], []), "fixer": (["README.md"], []),
                "researcher": ([], ["web_fetch"])}[name]
    assert (changed, denied) == expected, data
    assert code == (4 if denied else 0)


def test_show_prints_each_tools_arguments(tmp_path: Path) -> None:
    code, data, _ = corral("agents", "show", "fixer", "--root", str(tmp_path), "--json")
    assert code == 0
    arguments = data["effective"]["arguments"]
    assert set(arguments) == set(data["effective"]["tools"])
    assert arguments["edit"] == ("edit(path: string, old_string: string, new_string: string, "
                                 "replace_all?: boolean = false)")
    assert arguments["read_file"] == ("read_file(path: string, offset?: integer = 1, "
                                      "limit?: integer)")
    assert data["effective"]["schemas"]["shell"]["required"] == ["command"]
    code, text, _ = corral("agents", "show", "fixer", "--root", str(tmp_path))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("arguments"))
    assert lines[start] == "arguments    " + arguments["edit"]
    assert "             shell(command: string, timeout?: number, cwd?: string = \".\")" in lines


def test_a_signature_expands_lists_objects_and_choices() -> None:
    schema = {"$defs": {"Item": {"properties": {
        "content": {"type": "string"},
        "status": {"enum": ["pending", "done"], "default": "pending"}},
        "required": ["content"]}},
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                       "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        "required": ["items"]}
    assert signature("todo", schema) == (
        'todo(items: {content: string, status?: pending|done = "pending"}[], limit?: integer)')


def test_the_bundled_files_are_the_packaged_ones() -> None:
    """The five definitions ship as package data (pyproject's policies.agents *.md)."""
    assert sorted(p.stem for p in BUNDLED_DIR.glob("*.md")) == list(BUNDLED)
    text = Path(__file__).resolve().parent.parent.joinpath("pyproject.toml").read_text()
    assert '"policies.agents" = ["*.md"]' in text
