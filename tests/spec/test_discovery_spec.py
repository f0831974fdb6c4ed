"""ngn-agent-definitions.md, "Discovery and precedence": trust, locations, format orders,
collisions, invalid definitions, bounds and rejected files.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped). Everything is built in ``tmp_path``; the personal directories come
from an :class:`Environment` pointing into it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from policies.contract import AgentFormat, Scope
from policies.loader import Environment, Options, Severity, Status
from policies.loader.files import MAX_FILE_BYTES, MAX_FILES_PER_SCOPE, MAX_HEADER_BYTES

A = AgentFormat


def _codes(result, code: str) -> list:
    return [d for d in result.diagnostics if d.code == code]


# --- What is discovered, and when --------------------------------------------------------


def test_discovers_markdown_and_codex_toml(fs) -> None:
    """Spec (ngn-agent-definitions.md): ngn can discover named agents from Markdown and Codex
    TOML files."""
    fs.minimal(A.NGN, ".ngn/agents", "research")
    fs.minimal(A.CODEX, ".codex/agents", "worker")
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"research", "worker"}
    assert result.agents["worker"].origin.format is A.CODEX
    assert result.agents["worker"].instructions == "Do it."


def test_project_discovery_requires_trust_project(fs) -> None:
    """Spec (ngn-agent-definitions.md): Start ngn with --trust-project to discover workspace
    definitions."""
    fs.minimal(A.NGN, ".ngn/agents", "research")
    fs.minimal(A.CLAUDE, ".claude/agents", "helper")
    fs.json(".ngn/config.json", {"profiles": {"profiled": {"instructions": "x"}}})
    untrusted = fs.discover(personal=False)
    assert untrusted.agents == {}
    assert untrusted.outcomes == []
    note = _codes(untrusted, "untrusted_project")
    assert note
    assert note[0].severity is Severity.INFO
    trusted = fs.discover(personal=False, trust_project=True)
    assert set(trusted.agents) == {"research", "helper", "profiled"}
    assert {c.origin.scope for c in trusted.agents.values()} == {Scope.PROJECT}


def test_cli_project_discovery_requires_trust_project(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Start ngn with --trust-project to discover workspace
    definitions."""
    fs.minimal(A.NGN, ".ngn/agents", "research")
    untrusted = cli("agents", "list", "--root", str(fs.repo), "--json")
    assert untrusted.exit_code == 0, untrusted.output
    assert json.loads(untrusted.output)["agents"] == []
    trusted = cli("agents", "list", "--root", str(fs.repo), "--trust-project", "--json")
    assert [a["name"] for a in json.loads(trusted.output)["agents"]] == ["research"]


def test_personal_definitions_are_trusted(fs) -> None:
    """Spec (ngn-agent-definitions.md): Personal definitions are trusted."""
    fs.minimal(A.NGN, fs.env.xdg_config / "ngn/agents", "mine")
    fs.minimal(A.CLAUDE, fs.home / ".claude/agents", "helper")
    fs.json(fs.env.xdg_config / "ngn/config.json", {"profiles": {"prof": {"instructions": "x"}}})
    result = fs.discover(trust_project=False)
    assert set(result.agents) == {"mine", "helper", "prof"}
    assert {c.origin.scope for c in result.agents.values()} == {Scope.PERSONAL}


def test_explicit_json_trusts_its_imports_without_enabling_discovery(fs) -> None:
    """Spec (ngn-agent-definitions.md): Project discovery requires --trust-project; explicitly
    selecting a project JSON file trusts its explicit imports, without implicitly enabling
    discovery of every other project agent."""
    fs.minimal(A.CLAUDE, ".claude/agents", "chosen")
    fs.minimal(A.CLAUDE, ".claude/agents", "other")
    fs.minimal(A.NGN, ".ngn/agents", "native")
    fs.json(".ngn/config.json", {"profiles": {"project_profile": {"instructions": "x"}}})
    config = fs.json(".ngn/team.json", {"agent_imports": [
        {"path": "../.claude/agents/chosen.md", "format": "claude"}]})
    result = fs.discover(personal=False, config_file=config)
    assert set(result.agents) == {"chosen"}
    assert result.agents["chosen"].origin.scope is Scope.IMPORT


def test_cli_explicit_config_trusts_its_imports_only(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Project discovery requires --trust-project; explicitly
    selecting a project JSON file trusts its explicit imports, without implicitly enabling
    discovery of every other project agent."""
    fs.minimal(A.CLAUDE, ".claude/agents", "chosen")
    fs.minimal(A.CLAUDE, ".claude/agents", "other")
    config = fs.json(".ngn/team.json", {"agent_imports": [
        {"path": "../.claude/agents/chosen.md", "format": "claude"}]})
    out = cli("agents", "list", "--root", str(fs.repo), "--config", str(config), "--json",
              "--no-personal")
    assert out.exit_code == 0, out.output
    assert [a["name"] for a in json.loads(out.output)["agents"]] == ["chosen"]


# --- Locations -----------------------------------------------------------------------------


WORKSPACE_LOCATIONS = [
    (A.NGN, ".ngn/agents/research.md", "description: d"),
    (A.NGN, ".ngn/agents/research/agent.md", "description: d"),
    (A.CLAUDE, ".claude/agents/research.md", "name: research\ndescription: d"),
    (A.COPILOT, ".github/agents/research.agent.md", "description: d"),
    (A.COPILOT, ".github/agents/research.md", "description: d"),
    (A.OPENCODE, ".opencode/agents/research.md", "description: d"),
    (A.CODEX, ".codex/agents/research.toml", None),
    (A.CURSOR, ".cursor/agents/research.md", "name: research\ndescription: d"),
    (A.GEMINI, ".gemini/agents/research.md", "name: research\ndescription: d"),
    (A.ANTIGRAVITY, ".agents/agents/research.md", "name: research\ndescription: d"),
    (A.ANTIGRAVITY, ".agents/agents/research/agent.md", "name: research\ndescription: d"),
]
_CODEX = 'name = "research"\ndescription = "d"\ndeveloper_instructions = "x"\n'


@pytest.mark.parametrize(("fmt", "rel", "header"), WORKSPACE_LOCATIONS,
                         ids=[row[1] for row in WORKSPACE_LOCATIONS])
def test_workspace_locations(fs, fmt: AgentFormat, rel: str, header: str | None) -> None:
    """Spec (ngn-agent-definitions.md): Format Workspace location Personal location

    One row of the table: the workspace location of each format is discovered (with
    trust) and read by that format's adapter.
    """
    if header is None:
        fs.write(rel, _CODEX)
    else:
        fs.md(rel, header)
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"research"}, [d.render() for d in result.diagnostics]
    assert result.agents["research"].origin.format is fmt
    assert result.agents["research"].origin.source == rel


PERSONAL_LOCATIONS = [
    (A.NGN, "{xdg}/ngn/agents/research.md", "description: d"),
    (A.NGN, "{xdg}/ngn/agents/research/agent.md", "description: d"),
    (A.CLAUDE, "{home}/.claude/agents/research.md", "name: research\ndescription: d"),
    (A.COPILOT, "{home}/.copilot/agents/research.md", "description: d"),
    (A.OPENCODE, "{xdg}/opencode/agents/research.md", "description: d"),
    (A.CODEX, "{home}/.codex/agents/research.toml", None),
    (A.CURSOR, "{home}/.cursor/agents/research.md", "name: research\ndescription: d"),
    (A.GEMINI, "{home}/.gemini/agents/research.md", "name: research\ndescription: d"),
    (A.ANTIGRAVITY, "{home}/.gemini/config/agents/research.md", "name: research\ndescription: d"),
    (A.ANTIGRAVITY, "{home}/.gemini/config/agents/research/agent.md",
     "name: research\ndescription: d"),
]


@pytest.mark.parametrize(("fmt", "template", "header"), PERSONAL_LOCATIONS,
                         ids=[row[1] for row in PERSONAL_LOCATIONS])
def test_personal_locations(fs, fmt: AgentFormat, template: str, header: str | None) -> None:
    """Spec (ngn-agent-definitions.md): Format Workspace location Personal location

    One row of the table: the personal location of each format is discovered without
    --trust-project, read by that format's adapter. ``$XDG_CONFIG_HOME`` is set to a
    directory outside HOME so the two are told apart.
    """
    xdg = fs.tmp / "xdg"
    env = Environment(home=fs.home, xdg_config=xdg, pi_dir=fs.home / ".pi/agent")
    path = Path(template.format(home=fs.home, xdg=xdg))
    if header is None:
        fs.write(path, _CODEX)
    else:
        fs.md(path, header)
    result = fs.discover(env=env)
    assert set(result.agents) == {"research"}, [d.render() for d in result.diagnostics]
    assert result.agents["research"].origin.format is fmt
    assert result.agents["research"].origin.scope is Scope.PERSONAL


@pytest.mark.parametrize("sub", ["ngn/agents", "opencode/agents"])
def test_personal_xdg_defaults_to_dot_config(fs, sub: str) -> None:
    """Spec (ngn-agent-definitions.md): $XDG_CONFIG_HOME/ngn/agents/ (default
    ~/.config/ngn/agents/)

    Without ``XDG_CONFIG_HOME`` the XDG locations fall back to ``~/.config``; with it, they
    move there.
    """
    fmt = A.NGN if sub.startswith("ngn") else A.OPENCODE
    fs.minimal(fmt, fs.home / ".config" / sub, "research")
    default = Environment.from_env({"HOME": str(fs.home)})
    assert fs.discover(env=default).agents["research"].origin.source == (
        f"~/.config/{sub}/research.md")
    moved = Environment.from_env({"HOME": str(fs.home), "XDG_CONFIG_HOME": str(fs.tmp / "x")})
    assert fs.discover(env=moved).agents == {}


@pytest.mark.parametrize("rel", [
    ".ngn/agents/team/reviewer.md", ".ngn/agents/a/b/agent.md", ".claude/agents/sub/x.md",
    ".agents/agents/team/sub/agent.md", ".codex/agents/sub/x.toml",
])
def test_locations_are_not_recursive(fs, rel: str) -> None:
    """Spec (ngn-agent-definitions.md): ngn native .ngn/agents/*.md, .ngn/agents/<name>/agent.md
    $XDG_CONFIG_HOME/ngn/agents/ (default ~/.config/ngn/agents/)

    Only the table's layouts are read: a deeper file is not a definition (corral notes
    the directory instead).
    """
    fs.write(rel, _CODEX if rel.endswith(".toml") else "---\nname: x\ndescription: d\n---\nx\n")
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents == {}
    assert result.outcomes == []


def test_plural_agents_dir_uses_antigravity_adapter(fs) -> None:
    """Spec (ngn-agent-definitions.md): The plural .agents/agents path uses the Antigravity
    adapter.

    Antigravity semantics apply (omitted tools mean none), and a native-only field is
    not a field of that adapter.
    """
    fs.md(".agents/agents/shared.md", "name: shared\ndescription: d")
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents["shared"].origin.format is A.ANTIGRAVITY
    assert result.agents["shared"].tools == frozenset()
    fs.md(".agents/agents/other.md", "name: other\ndescription: d\nallowed_agents: [x]")
    again = fs.discover(trust_project=True, personal=False)
    assert again.agents["other"].delegates is None
    diag = fs.problems(again.diagnostics, "allowed_agents")
    assert diag
    assert diag[0].file == ".agents/agents/other.md"


def test_no_singular_agent_alias_scanned(fs) -> None:
    """Spec (ngn-agent-definitions.md): No singular .agent/ alias is scanned."""
    for rel in (".agent/agents/a.md", ".agent/a.md", ".agent/agents/b/agent.md"):
        fs.md(rel, "name: a\ndescription: d")
    fs.md(fs.home / ".agent/agents/p.md", "name: p\ndescription: d")
    result = fs.discover(trust_project=True)
    assert result.agents == {}
    assert result.outcomes == []
    assert not any(".agent/" in d.file for d in result.diagnostics)


def test_skills_and_agents_md_do_not_register_agents(fs) -> None:
    """Spec (ngn-agent-definitions.md): Skill discovery and AGENTS.md project instructions do not
    register named agents."""
    header = "name: sneaky\ndescription: Looks like an agent."
    for rel in ("AGENTS.md", ".agents/AGENTS.md", ".ngn/AGENTS.md", ".agents/skills/s/SKILL.md",
                ".claude/skills/s/SKILL.md", ".gemini/skills/s/SKILL.md",
                ".agent/skills/s/SKILL.md", ".opencode/skill/s/SKILL.md"):
        fs.md(rel, header)
    for rel in (".claude/skills/s/SKILL.md", ".gemini/skills/s/SKILL.md", "AGENTS.md",
                ".codex/AGENTS.md"):
        fs.md(fs.home / rel, header)
    result = fs.discover(trust_project=True)
    assert result.agents == {}
    assert result.outcomes == []


# --- Precedence ----------------------------------------------------------------------------


LEVELS = ["personal file", "personal JSON import", "personal JSON profile", "project file",
          "project JSON import", "project JSON profile", "explicit JSON import",
          "explicit JSON profile"]


@pytest.mark.parametrize("top", range(len(LEVELS)), ids=LEVELS)
def test_later_sources_win_in_order(fs, top: int) -> None:
    """Spec (ngn-agent-definitions.md): Later sources win in this order: personal files, personal
    JSON imports/profiles, trusted project files, trusted project JSON imports/profiles, explicit
    JSON imports/profiles.

    Every level up to ``top`` defines agent ``dup``; the highest present level wins.
    """
    docs: dict[str, dict[str, object]] = {"personal": {}, "project": {}, "explicit": {}}
    for level in LEVELS[: top + 1]:
        where = level.split()[0]
        if level == "personal file":
            fs.md(fs.env.xdg_config / "ngn/agents/dup.md", f"description: {level}")
        elif level == "project file":
            fs.md(".ngn/agents/dup.md", f"description: {level}")
        elif level.endswith("import"):
            path = fs.md(fs.tmp / where / "dup.md", f"description: {level}")
            docs[where]["agent_imports"] = [{"path": str(path), "format": "native"}]
        else:
            docs[where]["profiles"] = {"dup": {"description": level, "instructions": "x"}}
    if docs["personal"]:
        fs.json(fs.env.xdg_config / "ngn/config.json", docs["personal"])
    if docs["project"]:
        fs.json(".ngn/config.json", docs["project"])
    explicit = fs.json(fs.tmp / "explicit.json", docs["explicit"]) if docs["explicit"] else None
    result = fs.discover(trust_project=True, config_file=explicit)
    assert result.agents["dup"].description == LEVELS[top]
    assert len(_codes(result, "collision")) == top


def test_profiles_override_imports_regardless_of_key_order(fs) -> None:
    """Spec (ngn-agent-definitions.md): Within a JSON document, profiles override imports
    regardless of key order."""
    imported = fs.md("shared/dup.md", "description: import")
    for name, order in (("first.json", ("profiles", "agent_imports")),
                        ("last.json", ("agent_imports", "profiles"))):
        data = {
            "profiles": {"dup": {"description": "profile", "instructions": "x"}},
            "agent_imports": [{"path": str(imported), "format": "native"}],
        }
        config = fs.write(name, json.dumps({key: data[key] for key in order}))
        assert config.read_text().index(order[0]) < config.read_text().index(order[1])
        result = fs.discover(personal=False, config_file=config)
        assert result.agents["dup"].description == "profile", name


WORKSPACE_ORDER = [
    (A.ANTIGRAVITY, ".agents/agents"), (A.CLAUDE, ".claude/agents"),
    (A.COPILOT, ".github/agents"), (A.OPENCODE, ".opencode/agents"), (A.CODEX, ".codex/agents"),
    (A.CURSOR, ".cursor/agents"), (A.GEMINI, ".gemini/agents"), (A.NGN, ".ngn/agents"),
]


def test_workspace_format_order(fs) -> None:
    """Spec (ngn-agent-definitions.md): Workspace formats use a stable discovery order
    (Antigravity, Claude, Copilot, OpenCode, Codex, Cursor, Gemini, then native)."""
    for fmt, directory in reversed(WORKSPACE_ORDER):
        fs.minimal(fmt, directory, "dup")
    result = fs.discover(trust_project=True, personal=False)
    loaded = [o.format for o in result.outcomes if o.status is Status.LOADED]
    assert loaded == [fmt for fmt, _ in WORKSPACE_ORDER]
    assert result.agents["dup"].origin.format is A.NGN
    for dropped in range(len(WORKSPACE_ORDER) - 1, 0, -1):
        fmt, directory = WORKSPACE_ORDER[dropped]
        for path in (fs.repo / directory).iterdir():
            path.unlink()
        winner = fs.discover(trust_project=True, personal=False).agents["dup"]
        assert winner.origin.format is WORKSPACE_ORDER[dropped - 1][0]


PERSONAL_ORDER = [
    (A.CLAUDE, "{home}/.claude/agents"), (A.COPILOT, "{home}/.copilot/agents"),
    (A.CODEX, "{home}/.codex/agents"), (A.CURSOR, "{home}/.cursor/agents"),
    (A.GEMINI, "{home}/.gemini/agents"), (A.OPENCODE, "{xdg}/opencode/agents"),
    (A.ANTIGRAVITY, "{home}/.gemini/config/agents"), (A.NGN, "{xdg}/ngn/agents"),
]


def test_personal_format_order(fs) -> None:
    """Spec (ngn-agent-definitions.md): Personal formats use Claude, Copilot, Codex, Cursor,
    Gemini, OpenCode, Antigravity, then native."""
    for fmt, template in reversed(PERSONAL_ORDER):
        directory = Path(template.format(home=fs.home, xdg=fs.env.xdg_config))
        file_name = "dup.md" if fmt is A.COPILOT else None
        if file_name:
            fs.write(directory / file_name, "---\ndescription: d\n---\nDo it.\n")
        else:
            fs.minimal(fmt, directory, "dup")
    result = fs.discover()
    loaded = [o.format for o in result.outcomes if o.status is Status.LOADED]
    assert loaded == [fmt for fmt, _ in PERSONAL_ORDER]
    assert result.agents["dup"].origin.format is A.NGN


def test_pi_zuno_catalog_placed_before_native(fs) -> None:
    """Spec (ngn-agent-definitions.md): Workspace formats use a stable discovery order
    (Antigravity, Claude, Copilot, OpenCode, Codex, Cursor, Gemini, then native).

    pi, zuno and the catalog are not in the ngn tables; the documented choice
    (``policies/loader/discovery.py``) places them after Gemini, just before native.
    """
    fs.minimal(A.GEMINI, ".gemini/agents", "dup")
    fs.minimal(A.PI, ".pi/agents", "dup")
    fs.minimal(A.ZUNO, ".zuno/agents", "dup")
    fs.json("initial-data/agent-definitions/dup.json", {
        "id": "00000002-0000-0000-0000-000000000025", "name": "dup", "description": "d",
        "systemPrompt": "x", "llmConfigName": "agent-default"})
    result = fs.discover(trust_project=True, personal=False)
    loaded = [o.format for o in result.outcomes if o.status is Status.LOADED]
    assert loaded == [A.GEMINI, A.PI, A.ZUNO, A.CATALOG]
    fs.minimal(A.NGN, ".ngn/agents", "dup")
    assert fs.discover(trust_project=True, personal=False).agents["dup"].origin.format is A.NGN


def test_files_are_sorted_by_path(fs) -> None:
    """Spec (ngn-agent-definitions.md): Files are sorted by path.

    Later files win, so among same-named definitions of one location the last path wins,
    whatever order the files were created in.
    """
    for stem in ("zeta", "beta", "alpha"):
        fs.md(f".claude/agents/{stem}.md", f"name: dup\ndescription: {stem}")
    fs.md(".ngn/agents/x/agent.md", "name: other\ndescription: nested")
    fs.md(".ngn/agents/x.md", "name: other\ndescription: flat")
    result = fs.discover(trust_project=True, personal=False)
    order = [o.display for o in result.outcomes]
    assert order == [".claude/agents/alpha.md", ".claude/agents/beta.md",
                     ".claude/agents/zeta.md", ".ngn/agents/x.md", ".ngn/agents/x/agent.md"]
    assert result.agents["dup"].description == "zeta"
    assert result.agents["other"].description == "nested"


def test_collision_diagnostic_names_winner_and_replaced(fs) -> None:
    """Spec (ngn-agent-definitions.md): A collision diagnostic names the winner and replaced
    source."""
    fs.minimal(A.CLAUDE, fs.home / ".claude/agents", "dup")
    fs.minimal(A.NGN, ".ngn/agents", "dup")
    result = fs.discover(trust_project=True)
    collisions = _codes(result, "collision")
    assert len(collisions) == 1
    diag = collisions[0]
    assert diag.file == ".ngn/agents/dup.md"
    assert diag.field == "name"
    assert ".ngn/agents/dup.md" in diag.reason
    assert "~/.claude/agents/dup.md" in diag.reason
    assert diag.reason.index(".ngn/agents/dup.md") < diag.reason.index("~/.claude/agents/dup.md")


def test_cli_terminal_diagnostics_include_parse_failures_and_collisions(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Terminal diagnostics also include parsing failures and
    collisions."""
    fs.minimal(A.CLAUDE, ".claude/agents", "dup")
    fs.minimal(A.NGN, ".ngn/agents", "dup")
    fs.write(".ngn/agents/broken.md", "---\ndescription: [unclosed\n---\nDo it.\n")
    out = cli("agents", "check", "--root", str(fs.repo), "--trust-project", "--no-personal")
    assert out.exit_code == 1, out.output
    assert ".ngn/agents/broken.md:" in out.output
    assert "invalid YAML" in out.output
    collision = [line for line in out.output.splitlines() if "replaces" in line]
    assert collision
    assert ".ngn/agents/dup.md" in collision[0]
    assert ".claude/agents/dup.md" in collision[0]


def test_cli_descriptions_appear_in_the_listing(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Descriptions appear in the picker and the model's
    delegation tool schema.

    The listing (corral's picker) carries each agent's description.
    """
    fs.md(".ngn/agents/research.md", "description: Find evidence and report it.")
    out = cli("agents", "list", "--root", str(fs.repo), "--trust-project", "--json",
              "--no-personal")
    agents = json.loads(out.output)["agents"]
    assert agents[0]["description"] == "Find evidence and report it."


def test_cli_show_names_the_selected_source_file(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Web settings show the selected source file and
    expandable loading diagnostics.

    corral's equivalent: ``agents show`` names the winning source file, its format and
    scope.
    """
    fs.minimal(A.CLAUDE, fs.home / ".claude/agents", "research")
    fs.minimal(A.NGN, ".ngn/agents", "research")
    out = cli("agents", "show", "research", "--root", str(fs.repo), "--trust-project")
    assert out.exit_code == 0, out.output
    source = [line for line in out.output.splitlines() if line.startswith("source")]
    assert len(source) == 1
    assert ".ngn/agents/research.md" in source[0]
    assert "~/.claude" not in source[0]
    assert "ngn" in source[0]
    assert "project" in source[0]


# --- Invalid definitions -------------------------------------------------------------------


@pytest.mark.parametrize("broken", [
    "description: d\ncolor: red",  # unsupported field
    "description: [unclosed",  # YAML syntax
    "description: d\ntools: [shel]",  # unknown tool
    "tools: [read_file]",  # no description
], ids=["unsupported-field", "yaml-syntax", "unknown-tool", "no-description"])
def test_invalid_definition_never_replaces_lower_priority(fs, broken: str) -> None:
    """Spec (ngn-agent-definitions.md): An invalid discovered definition is skipped with a
    diagnostic; it does not replace a valid definition from a lower-priority source."""
    fs.md(fs.env.xdg_config / "ngn/agents/dup.md", "description: personal, valid")
    fs.md(".claude/agents/dup.md", "name: dup\ndescription: project claude, valid")
    fs.md(".ngn/agents/dup.md", broken)
    result = fs.discover(trust_project=True)
    assert result.agents["dup"].description == "project claude, valid"
    rejected = [o for o in result.outcomes if o.display == ".ngn/agents/dup.md"]
    assert rejected[0].status is Status.REJECTED
    assert fs.errors(result.diagnostics)[0].file == ".ngn/agents/dup.md"


def test_invalid_explicit_profile_never_replaces_project_agent(fs) -> None:
    """Spec (ngn-agent-definitions.md): An invalid discovered definition is skipped with a
    diagnostic; it does not replace a valid definition from a lower-priority source."""
    fs.md(".ngn/agents/dup.md", "description: project, valid")
    config = fs.json(fs.tmp / "explicit.json", {"profiles": {"dup": {
        "instructions": "x", "tools": ["shel"]}}})
    result = fs.discover(trust_project=True, personal=False, config_file=config)
    assert result.agents["dup"].description == "project, valid"
    assert fs.errors(result.diagnostics, "profiles.dup.tools")


def test_strict_rejection_never_replaces_lower_priority(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): An invalid discovered definition is skipped with a
    diagnostic; it does not replace a valid definition from a lower-priority source.

    With ``--strict`` a warning is a rejection, with the same guarantee.
    """
    fs.md(fs.home / ".claude/agents/dup.md", "name: dup\ndescription: personal")
    fs.md(".claude/agents/dup.md", "name: dup\ndescription: foreign model\nmodel: sonnet")
    lenient = fs.discover(trust_project=True)
    assert lenient.agents["dup"].description == "foreign model"
    strict = fs.discover(trust_project=True, options=Options(strict=True))
    assert strict.agents["dup"].description == "personal"
    shown = cli("agents", "show", "dup", "--root", str(fs.repo), "--trust-project", "--strict",
                "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["description"] == "personal"


# --- Bounds --------------------------------------------------------------------------------


def test_bounded_to_256_files_per_scope(fs) -> None:
    """Spec (ngn-agent-definitions.md): Discovery is bounded to 256 files per scope and 256 KiB
    per file, with a 32 KiB YAML header limit."""
    assert MAX_FILES_PER_SCOPE == 256
    text = "---\ndescription: d\n---\nDo it.\n"
    for index in range(256):
        fs.write(fs.env.xdg_config / f"ngn/agents/p{index:03}.md", text)
        fs.write(f".ngn/agents/a{index:03}.md", text)
    full = fs.discover(trust_project=True)
    assert len(full.agents) == 512
    assert not _codes(full, "too_many_files")
    fs.write(".ngn/agents/a256.md", text)
    over = fs.discover(trust_project=True)
    assert len(over.agents) == 512
    assert "a256" not in over.agents
    note = _codes(over, "too_many_files")
    assert len(note) == 1
    assert note[0].severity is Severity.ERROR
    assert ".ngn/agents/a256.md" in note[0].reason


def test_bound_counts_project_json_imports(fs) -> None:
    """Spec (ngn-agent-definitions.md): Discovery is bounded to 256 files per scope and 256 KiB
    per file, with a 32 KiB YAML header limit.

    The project's own ``.ngn/config.json`` is project discovery too: its imports count
    against the project scope.
    """
    imports = []
    for index in range(300):
        fs.write(f"lib/a{index:03}.md", "---\ndescription: d\n---\nDo it.\n")
        imports.append({"path": f"../lib/a{index:03}.md", "format": "native"})
    fs.json(".ngn/config.json", {"agent_imports": imports})
    result = fs.discover(trust_project=True, personal=False)
    assert len(result.agents) <= MAX_FILES_PER_SCOPE
    assert _codes(result, "too_many_files")


def test_bounded_to_256_kib_per_file(fs) -> None:
    """Spec (ngn-agent-definitions.md): Discovery is bounded to 256 files per scope and 256 KiB
    per file, with a 32 KiB YAML header limit.

    Exactly 256 KiB loads; one byte more is rejected.
    """
    assert MAX_FILE_BYTES == 256 * 1024
    head = "---\ndescription: d\n---\n"
    fits = head + "x" * (MAX_FILE_BYTES - len(head) - 1) + "\n"
    assert len(fits.encode()) == MAX_FILE_BYTES
    fs.write(".ngn/agents/fits.md", fits)
    fs.write(".ngn/agents/over.md", fits + "y")
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"fits"}
    diag = fs.errors(result.diagnostics, "file")
    assert [(d.file, d.code) for d in diag] == [(".ngn/agents/over.md", "too_large")]


def test_bounded_32_kib_yaml_header(fs) -> None:
    """Spec (ngn-agent-definitions.md): Discovery is bounded to 256 files per scope and 256 KiB
    per file, with a 32 KiB YAML header limit."""
    assert MAX_HEADER_BYTES == 32 * 1024
    start = "description: d\n# "
    header = start + "p" * (MAX_HEADER_BYTES - len(start))
    assert len(header.encode()) == MAX_HEADER_BYTES
    fs.write(".ngn/agents/fits.md", f"---\n{header}\n---\nDo it.\n")
    fs.write(".ngn/agents/over.md", f"---\n{header}p\n---\nDo it.\n")
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"fits"}
    diag = fs.errors(result.diagnostics, "frontmatter")
    assert [(d.file, d.code) for d in diag] == [(".ngn/agents/over.md", "header_too_large")]


# --- Rejected files ------------------------------------------------------------------------

_VALID = "---\ndescription: d\n---\nDo it.\n"


def test_symlinked_definition_file_rejected(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    target = fs.write(fs.tmp / "outside/evil.md", _VALID)
    (fs.repo / ".ngn/agents").mkdir(parents=True)
    (fs.repo / ".ngn/agents/evil.md").symlink_to(target)
    (fs.repo / ".claude/agents").mkdir(parents=True)
    (fs.repo / ".claude/agents/evil2.md").symlink_to(target)
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents == {}
    files = {(d.file, d.code) for d in fs.errors(result.diagnostics)}
    assert files == {(".ngn/agents/evil.md", "symlink"), (".claude/agents/evil2.md", "symlink")}


@pytest.mark.parametrize("link", [".ngn/agents", ".ngn", ".claude/agents", ".ngn/agents/evil"])
def test_symlinked_directories_not_followed(fs, link: str) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    outside = fs.tmp / "outside"
    for rel in ("evil.md", "agents/evil.md", "evil/agent.md", "agent.md"):
        fs.write(outside / rel, "---\nname: evil\ndescription: d\n---\nDo it.\n")
    target = {".ngn": outside, ".ngn/agents": outside, ".claude/agents": outside,
              ".ngn/agents/evil": outside}[link]
    (fs.repo / link).parent.mkdir(parents=True, exist_ok=True)
    (fs.repo / link).symlink_to(target, target_is_directory=True)
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents == {}
    notes = _codes(result, "symlink")
    assert notes
    assert notes[0].file == link


def test_symlinked_personal_directory_not_followed(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    fs.minimal(A.CLAUDE, fs.tmp / "outside", "evil")
    (fs.home / ".claude").mkdir()
    (fs.home / ".claude/agents").symlink_to(fs.tmp / "outside", target_is_directory=True)
    result = fs.discover()
    assert result.agents == {}
    assert _codes(result, "symlink")[0].file == "~/.claude/agents"


def test_symlinked_agent_md_and_config_rejected(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    good = fs.write(fs.tmp / "outside/agent.md", _VALID)
    conf = fs.json(fs.tmp / "outside/config.json", {"profiles": {"p": {"instructions": "x"}}})
    (fs.repo / ".ngn/agents/evil").mkdir(parents=True)
    (fs.repo / ".ngn/agents/evil/agent.md").symlink_to(good)
    (fs.repo / ".ngn/config.json").symlink_to(conf)
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents == {}
    assert {d.file for d in fs.errors(result.diagnostics)} == {
        ".ngn/agents/evil/agent.md", ".ngn/config.json"}


def test_symlinked_import_target_rejected(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    good = fs.write(fs.tmp / "outside/dup.md", _VALID)
    (fs.repo / "shared").mkdir()
    (fs.repo / "shared/dup.md").symlink_to(good)
    config = fs.json("ngn.json", {"agent_imports": [{"path": "shared/dup.md",
                                                     "format": "native"}]})
    result = fs.discover(personal=False, config_file=config)
    assert result.agents == {}
    assert fs.errors(result.diagnostics)[0].code == "symlink"


def test_symlinked_directory_in_project_import_path_rejected(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected.

    A discovered project ``.ngn/config.json`` importing ``../linkdir/evil.md``, where
    ``linkdir`` is a symlink out of the repository, must not read through it.
    """
    fs.write(fs.tmp / "outside/evil.md", _VALID)
    (fs.repo / "linkdir").symlink_to(fs.tmp / "outside", target_is_directory=True)
    fs.json(".ngn/config.json", {"agent_imports": [{"path": "../linkdir/evil.md",
                                                    "format": "native"}]})
    result = fs.discover(trust_project=True, personal=False)
    assert result.agents == {}
    assert fs.errors(result.diagnostics)


@pytest.mark.timeout(10)
def test_special_files_rejected_without_hanging(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected.

    FIFOs in an agent directory, as ``agent.md``, as the project JSON and as an import
    target are rejected without ever blocking on an open.
    """
    (fs.repo / ".ngn/agents/piped").mkdir(parents=True)
    os.mkfifo(fs.repo / ".ngn/agents/pipe.md")
    os.mkfifo(fs.repo / ".ngn/agents/piped/agent.md")
    os.mkfifo(fs.repo / ".ngn/config.json")
    os.mkfifo(fs.repo / "import.md")
    config = fs.json(fs.tmp / "explicit.json", {"agent_imports": [
        {"path": str(fs.repo / "import.md"), "format": "native"}]})
    fs.minimal(A.NGN, ".ngn/agents", "fine")
    result = fs.discover(trust_project=True, personal=False, config_file=config)
    assert set(result.agents) == {"fine"}
    rejected = {d.file for d in fs.errors(result.diagnostics)}
    assert {".ngn/agents/pipe.md", ".ngn/agents/piped/agent.md", ".ngn/config.json"} <= rejected
    assert len(rejected) == 4
    codes = {d.code for d in fs.errors(result.diagnostics)} - {"json_config"}
    assert codes == {"special_file"}


@pytest.mark.parametrize("header", [
    "description: d\ntools: [read_file]\ntools: [shell]",
    "description: d\nmode: reviewer\nmode: build",
], ids=["tools-twice", "mode-twice"])
def test_duplicate_yaml_keys_rejected(fs, header: str) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    outcome = fs.load(fs.md(".ngn/agents/dup.md", header), A.NGN)
    diag = fs.rejected_with(outcome, "frontmatter")
    assert "duplicate key" in diag.reason
    assert diag.line == 4


def test_duplicate_yaml_keys_rejected_even_by_lenient_reader(fs) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected.

    A Claude header that is not valid YAML falls back to the lenient reader, which must
    still refuse a duplicated ``tools``.
    """
    path = fs.md(".claude/agents/r.md", """
        name: r
        description: Use this agent when: user says "hi": and more
        tools: Read
        tools: Read, Bash
    """)
    outcome = fs.load(path, A.CLAUDE)
    assert outcome.status is Status.REJECTED
    assert any("duplicate" in d.reason for d in fs.errors(outcome.diagnostics))


@pytest.mark.parametrize("header", [
    "description: &d hello\nmodel: *d",
    "tools: &t [read_file]\ndenied_tools: *t\ndescription: d",
    "description: d\ntools: [&x read_file]",
], ids=["alias", "list-alias", "anchor-only"])
def test_yaml_aliases_rejected(fs, header: str) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    diag = fs.rejected_with(fs.load(fs.md(".ngn/agents/a.md", header), A.NGN), "frontmatter")
    assert "anchor" in diag.reason or "alias" in diag.reason


@pytest.mark.parametrize("header", [
    "description: !!str hello",
    "description: d\ntools: !!python/object/apply:os.system ['touch pwned']",
    "description: !custom hello",
    "description: d\nuser_invocable: !!bool 'true'",
    "description: !<tag:yaml.org,2002:str> hello",
    pytest.param("description: d\nuser_invocable: ! true"),
], ids=["str", "python", "local", "bool", "verbatim", "non-specific"])
def test_explicit_yaml_tags_rejected(fs, header: str) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected."""
    diag = fs.rejected_with(fs.load(fs.md(".ngn/agents/a.md", header), A.NGN), "frontmatter")
    assert "tag" in diag.reason
    assert not (fs.repo / "pwned").exists()


def test_no_foreign_scripts_hooks_plugins_or_mcp_run(fs, monkeypatch) -> None:
    """Spec (ngn-agent-definitions.md): No foreign scripts, hooks, plugins, or MCP processes run
    during discovery."""
    marker = fs.tmp / "ran"
    command = f"touch {marker}"
    monkeypatch.chdir(fs.repo)
    fs.md(".claude/agents/h.md", f"""
        name: h
        description: d
        hooks:
          PreToolUse:
            - matcher: Bash
              hooks: [{{type: command, command: "{command}"}}]
        mcpServers:
          - srv: {{command: sh, args: [-c, "{command}"]}}
    """)
    fs.md(".github/agents/m.agent.md", f"""
        description: d
        mcp-servers:
          srv: {{type: local, command: sh, args: [-c, "{command}"]}}
    """)
    fs.md(".gemini/agents/g.md", f"""
        name: g
        description: d
        mcp_servers:
          srv: {{command: sh, args: [-c, "{command}"]}}
    """)
    fs.md(".agents/agents/p.md", f"name: p\ndescription: d\nplugins: ['{command}']")
    fs.write(".codex/agents/c.toml", 'name = "c"\ndescription = "d"\ndeveloper_instructions = '
             f'"x"\n[mcp_servers.srv]\ncommand = "sh"\nargs = ["-c", "{command}"]\n')
    script = fs.write(".claude/agents/setup.sh", f"#!/bin/sh\n{command}\n")
    script.chmod(0o755)
    fs.write(".opencode/opencode.json", json.dumps({"plugin": [command], "mcp": {
        "srv": {"type": "local", "command": ["sh", "-c", command]}}}))
    result = fs.discover(trust_project=True, personal=False)
    assert not marker.exists()
    assert result.agents == {}
    assert {d.file for d in fs.errors(result.diagnostics)} == {
        ".claude/agents/h.md", ".github/agents/m.agent.md", ".gemini/agents/g.md",
        ".agents/agents/p.md", ".codex/agents/c.toml"}
