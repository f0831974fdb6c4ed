"""The four shapes of real agent collections load as their own harness loads them, through
the real CLI, with one readable diagnostic for each file the harness would not load.

The fixtures are small, hand-written files of the same shapes as public collections: a flat
Claude collection whose names have spaces (``name: Frontend Developer``), a collection that
keeps its agents under ``categories/**``, an OpenCode project, and a Codex project whose
``config.toml`` declares roles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from executor.cli import cli


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def corral(*args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(cli, [*args, "--no-personal", "--json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def claude(name: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: The {name} agent.\n{extra}---\nYou are {name}.\n"


def by_file(data: dict[str, Any], severity: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in data["diagnostics"]:
        if d["severity"] == severity:
            out.setdefault(d["file"], []).append(f"{d['field']}: {d['reason']}")
    return out


def test_a_flat_claude_collection_with_spaced_names(tmp_path: Path) -> None:
    """Installed the way the collection says (copied into .claude/agents/): Claude Code loads
    every file with a header, whatever its name; a file without a header it skips."""
    agents = tmp_path / ".claude/agents"
    write(agents / "engineering-frontend-developer.md", claude(
        "Frontend Developer", 'color: "#00FFFF"\nemoji: "\U0001f5a5"\nvibe: Ships pixels.\n'))
    write(agents / "engineering-code-reviewer.md", claude("Code Reviewer", "tools: Read, Grep\n"))
    write(agents / "design-ui-designer.md", claude("UI Designer", "tools: Read, Write\n"))
    write(agents / "product-sprint-prioritizer.md", claude("sprint-prioritizer"))
    write(agents / "engineering-vue-expert.md", claude("Vue.js Expert"))
    write(agents / "strategy-notes.md", "# Notes\n\nNot an agent.\n")
    write(agents / "README.md", "# The Agency\n")
    code, data = corral("agents", "list", "--root", str(tmp_path), "--trust-project")
    assert code == 0
    assert {(a["name"], a["display_name"]) for a in data["agents"]} == {
        ("frontend-developer", "Frontend Developer"), ("code-reviewer", "Code Reviewer"),
        ("ui-designer", "UI Designer"), ("sprint-prioritizer", "sprint-prioritizer"),
        ("vue-js-expert", "Vue.js Expert")}
    errors = by_file(data, "error")
    assert errors == {".claude/agents/strategy-notes.md": ["frontmatter: no YAML header"]}
    warnings = by_file(data, "warning")
    assert any("'frontend-developer'" in w for w in warnings[
        ".claude/agents/engineering-frontend-developer.md"])


def test_a_categorised_collection_is_one_glob_import(tmp_path: Path) -> None:
    for category, names in {"01-core-development": ["api-designer", "backend-developer"],
                            "02-language-specialists": ["python-pro"],
                            "10-research-analysis": ["research-analyst"]}.items():
        write(tmp_path / "categories" / category / "README.md", f"# {category}\n")
        for name in names:
            write(tmp_path / "categories" / category / f"{name}.md",
                  claude(name, "tools: Read, Write, Edit, Bash, Glob, Grep\n"))
    write(tmp_path / "categories/02-language-specialists/.claude-plugin/plugin.json", "{}")
    config = write(tmp_path / "corral.json", json.dumps({"agent_imports": [
        {"glob": "categories/**/*.md", "format": "claude"}]}))
    code, data = corral("agents", "list", "--root", str(tmp_path), "--config", str(config))
    assert code == 0
    assert sorted(a["name"] for a in data["agents"]) == [
        "api-designer", "backend-developer", "python-pro", "research-analyst"]
    assert {a["source"] for a in data["agents"]} >= {
        "categories/01-core-development/api-designer.md"}
    assert by_file(data, "error") == {}
    # The READMEs are documentation: skipped, and said so.
    skipped = [d for d in data["diagnostics"] if d["code"] == "not_an_agent"]
    assert len(skipped) == 3
    # The flat alternative: one directory entry.
    config.write_text(json.dumps({"agent_imports": [
        {"directory": "categories/01-core-development", "format": "claude"}]}))
    code, data = corral("agents", "list", "--root", str(tmp_path), "--config", str(config))
    assert sorted(a["name"] for a in data["agents"]) == ["api-designer", "backend-developer"]


def test_an_import_path_stays_one_file_and_names_the_extension(tmp_path: Path) -> None:
    """The ngn spec: each entry selects one file. A directory or a pattern given as path is
    an error that says how to import it."""
    write(tmp_path / "agents/a.md", claude("a"))
    config = write(tmp_path / "corral.json", json.dumps({"agent_imports": [
        {"path": "agents", "format": "claude"}, {"path": "agents/*.md", "format": "claude"}]}))
    code, data = corral("agents", "list", "--root", str(tmp_path), "--config", str(config))
    assert code == 0 and data["agents"] == []
    hints = [d["hint"] for d in data["diagnostics"] if d["severity"] == "error"]
    assert hints == ['to import every definition it holds, write {"directory": "agents", '
                     '"format": "claude"} (corral\'s extension)',
                     'to import every definition it holds, write {"glob": "agents/*.md", '
                     '"format": "claude"} (corral\'s extension)']


def test_a_glob_never_follows_a_symlinked_directory(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside/secret.md", claude("secret"))
    (tmp_path / "repo/categories").mkdir(parents=True)
    (tmp_path / "repo/categories/linked").symlink_to(outside.parent)
    write(tmp_path / "repo/categories/core/ok.md", claude("ok"))
    config = write(tmp_path / "repo/corral.json", json.dumps({"agent_imports": [
        {"glob": "categories/*/*.md", "format": "claude"}]}))
    code, data = corral("agents", "list", "--root", str(tmp_path / "repo"), "--config",
                        str(config))
    assert code == 0 and [a["name"] for a in data["agents"]] == ["ok"]
    assert any("symlinked directory" in d["reason"] and d["file"].endswith("secret.md")
               for d in data["diagnostics"])


def test_an_opencode_project(tmp_path: Path) -> None:
    write(tmp_path / ".opencode/agents/review.md",
          "---\ndescription: Reviews changes\nmode: subagent\npermission:\n  edit: deny\n"
          "  bash:\n    'git diff *': allow\n    '*': ask\n---\nReview.\n")
    write(tmp_path / ".opencode/agents/team/Docs Writer.md",
          "---\ndescription: Writes docs\ntools:\n  bash: false\n---\nWrite.\n")
    write(tmp_path / "opencode.json", json.dumps({"$schema": "https://opencode.ai/config.json",
                                                  "agent": {
        "build-fast": {"description": "Builds", "prompt": "Build.", "steps": 20},
        "cleanup": {"description": "Cleans", "prompt": "Clean.",
                    "permission": {"rm -rf *": "deny"}}}}))
    code, data = corral("agents", "list", "--root", str(tmp_path), "--trust-project")
    assert code == 0
    assert {(a["name"], a["display_name"]) for a in data["agents"]} == {
        ("review", "review"), ("team/docs-writer", "team/Docs Writer"),
        ("build-fast", "build-fast")}
    [error] = [d for d in data["diagnostics"] if d["severity"] == "error"]
    assert error["file"] == "opencode.json" and error["field"] == "agent.cleanup.permission"
    assert "'rm -rf *' is a command pattern" in error["reason"]
    assert error["hint"] == "write permission: {bash: {'rm -rf *': deny}}"


def test_a_codex_project_reports_every_declared_role(tmp_path: Path) -> None:
    write(tmp_path / ".codex/config.toml",
          'model = "gpt-5"\n\n[agents]\nmax_threads = 4\n\n'
          '[agents.reviewer]\ndescription = "Reviews changes"\nconfig_file = '
          '"agents/reviewer.toml"\n\n[agents.planner]\ndescription = "Plans"\n'
          'config_file = "roles/planner.toml"\n\n[agents.ghost]\ndescription = "Haunts"\n'
          'config_file = "agents/ghost.toml"\n')
    write(tmp_path / ".codex/agents/reviewer.toml",
          'developer_instructions = "Review."\nsandbox_mode = "read-only"\n')
    write(tmp_path / ".codex/roles/planner.toml", 'developer_instructions = "Plan."\n')
    write(tmp_path / ".codex/agents/explorer.toml",
          'name = "explorer"\ndescription = "Explores"\ndeveloper_instructions = "Look."\n')
    code, data = corral("agents", "list", "--root", str(tmp_path), "--trust-project")
    assert code == 0
    agents = {a["name"]: a for a in data["agents"]}
    assert sorted(agents) == ["explorer", "planner", "reviewer"]
    assert agents["reviewer"]["mode"] == "reviewer"
    assert agents["planner"]["description"] == "Plans"  # from the declaration
    [error] = [d for d in data["diagnostics"] if d["severity"] == "error"]
    assert (error["file"], error["line"], error["field"]) == (
        ".codex/config.toml", 14, "agents.ghost.config_file")
    assert "role 'ghost'" in error["reason"] and "does not exist" in error["reason"]
    code, _ = corral("agents", "check", "--root", str(tmp_path), "--trust-project")
    assert code == 1  # a declared role is missing: the check fails


def test_a_codex_declaration_never_reads_a_role_file_outside_its_layer(tmp_path: Path) -> None:
    write(tmp_path / "outside.toml", 'name = "leak"\ndescription = "d"\n'
          'developer_instructions = "x"\n')
    write(tmp_path / "repo/.codex/config.toml",
          '[agents.leak]\nconfig_file = "../../outside.toml"\n')
    code, data = corral("agents", "list", "--root", str(tmp_path / "repo"), "--trust-project")
    assert code == 0 and data["agents"] == []
    [error] = [d for d in data["diagnostics"] if d["severity"] == "error"]
    assert error["field"] == "agents.leak.config_file" and "lies outside .codex/" in \
        error["reason"]


def test_check_names_each_file_the_harness_would_not_load(tmp_path: Path) -> None:
    agents = tmp_path / ".claude/agents"
    write(agents / "engineering-code-reviewer.md", claude("Code Reviewer"))
    write(agents / "strategy-notes.md", "# Notes\n")
    result = CliRunner().invoke(cli, ["agents", "check", "--root", str(tmp_path),
                                      "--trust-project", "--no-personal"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert "error: .claude/agents/strategy-notes.md:1: frontmatter: no YAML header" in lines
    assert "1 agent(s) loaded, 1 definition(s) rejected, 1 loaded with warnings" in lines
    assert "  rejected  .claude/agents/strategy-notes.md (1 error)" in lines
    listed = CliRunner().invoke(cli, ["agents", "list", "-l", "--root", str(tmp_path),
                                      "--trust-project", "--no-personal"])
    assert listed.stdout.splitlines()[2] == (
        "    .claude/agents/engineering-code-reviewer.md  (Code Reviewer)")


def test_check_at_scale_leads_with_what_was_rejected_and_groups_warnings(
        tmp_path: Path) -> None:
    """Issue 19: "`agents check` prints its summary and rejected files (with their fixes)
    first, warnings grouped by kind with counts (`-v` for each one)" (a real collection
    printed 372-836 lines with its rejected files scrolled away under 367 warnings)."""
    agents = tmp_path / ".claude/agents"
    for n in range(40):
        write(agents / f"a{n:02}.md", f"---\nname: a{n:02}\ndescription: d\nvibe: chill\n"
              "emoji: 🚀\n---\nb\n")
    write(agents / "broken.md", "---\nname: broken\ndescription: d\ntools: Nope\n---\nb\n")
    args = ["agents", "check", "--root", str(tmp_path), "--trust-project", "--no-personal"]
    short = CliRunner().invoke(cli, args)
    assert short.exit_code == 1
    lines = short.stdout.splitlines()
    assert lines[0] == "40 agent(s) loaded, 1 definition(s) rejected, 40 loaded with warnings"
    assert lines[1] == "  rejected  .claude/agents/broken.md (1 error)"
    assert lines[3].startswith("error: .claude/agents/broken.md:4: tools: ")
    kinds = [line for line in lines if line.startswith("warning: ")]
    assert len(kinds) == 2 and all(" (40x): " in line for line in kinds)
    assert "80 warning(s) of 2 kind(s) in 40 file(s) (`-v` lists each one):" in lines
    assert len(lines) < 15
    full = CliRunner().invoke(cli, [*args, "-v"]).stdout.splitlines()
    assert sum(line.startswith("warning: .claude/agents/a") for line in full) == 80
    assert sum(line.startswith("  warnings  ") for line in full) == 40


def test_list_filters_by_name_format_source_and_runnable(tmp_path: Path) -> None:
    """Issue 19: `agents list` "filters (`--runnable`, `--format`, `--source`, a name
    pattern)" and a legend for its flags."""
    for name in ("code-reviewer", "code-writer", "planner"):
        write(tmp_path / f".claude/agents/{name}.md", claude(name))
    write(tmp_path / ".ngn/agents/code-auditor.md",
          "---\nname: code-auditor\ndescription: audits\ntools: [read_file]\n---\nb\n")
    base = ["agents", "list", "--root", str(tmp_path), "--trust-project", "--no-personal"]

    def names(*args: str) -> list[str]:
        done = CliRunner().invoke(cli, [*base, "--json", *args])
        assert done.exit_code == 0, done.output
        return [a["name"] for a in json.loads(done.stdout)["agents"]]

    assert names("code-*") == ["code-auditor", "code-reviewer", "code-writer"]
    assert names("CODE-R*") == ["code-reviewer"]
    assert names("--format", "ngn") == ["code-auditor"]
    assert names("--source", ".claude/") == ["code-reviewer", "code-writer", "planner"]
    assert names("--runnable", "*er") == ["code-reviewer", "code-writer", "planner"]
    shown = CliRunner().invoke(cli, [*base, "planner"])
    assert shown.stdout.splitlines()[1].startswith("planner ")
    assert "flags: R read-only" in shown.stderr
    none = CliRunner().invoke(cli, [*base, "nobody*"])
    assert none.stdout == "" and "no agents match" in none.stderr


def test_list_is_a_table_cut_to_the_terminal_width(tmp_path: Path) -> None:
    """Issue 19: `agents list` "with a header, a description column cut to the terminal
    width, a legend"; on a terminal the width is the terminal's."""
    write(tmp_path / ".claude/agents/planner.md",
          "---\nname: planner\ndescription: " + "plans work carefully " * 20 + "\n---\nb\n")
    from tests.executor.tty_support import on_terminal

    shown = on_terminal("agents", "list", "--root", str(tmp_path), "--trust-project",
                        "--no-personal", env={"COLUMNS": "60"})
    rows = [line for line in shown.text.splitlines() if line.startswith(("NAME", "planner"))]
    assert rows[0].split() == ["NAME", "FLAGS", "FORMAT", "DESCRIPTION"]
    assert rows[1].startswith("planner") and rows[1].endswith("...")
    assert len(rows[1]) <= 60
    assert "flags: R read-only" in shown.text
