"""Names a harness tolerates but corral's identifier rules refuse get a stable, documented
identity with a warning; names no harness-faithful rule can map are still rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.contract import AgentFormat, Scope
from policies.loader import Severity, load_file
from policies.loader.base import normalize_name


@pytest.mark.parametrize(("name", "identity"), [
    ("Frontend Developer", "frontend-developer"),
    ("Node.js Pro", "node-js-pro"),
    ("Python DevOps/CI-CD Expert", "python-devops-ci-cd-expert"),
    ("  UI / UX  Designer ", "ui-ux-designer"),
    ("C++ Expert", "c-expert"),
    ("v1.2", "v1-2"),
])
def test_the_documented_normalisation(name: str, identity: str) -> None:
    assert normalize_name(name) == identity


@pytest.mark.parametrize("name", [
    "Développeur",  # another script: no ASCII guess
    "B\u0430sh Expert",  # a homoglyph (Cyrillic a) must never meet the ASCII name
    "a\x1bb",  # a control character
    "...",  # nothing left
    "Assistant",  # reserved, whatever the spelling
    "x" * 129,
])
def test_names_without_a_normalisation(name: str) -> None:
    assert normalize_name(name) is None


def load(tmp_path: Path, fmt: AgentFormat, file_name: str, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return load_file(path, fmt, scope=Scope.PROJECT, display=file_name)


def test_a_claude_name_with_spaces_loads_under_its_normalised_identity(tmp_path: Path) -> None:
    outcome = load(tmp_path, AgentFormat.CLAUDE, "engineering-code-reviewer.md",
                   "---\nname: Code Reviewer\ndescription: Reviews code.\n"
                   "tools: Read, Agent(Frontend Developer)\n---\nReview.\n")
    assert outcome.status == "loaded"
    agent = outcome.agents[0]
    assert (agent.name, agent.display_name) == ("code-reviewer", "Code Reviewer")
    assert agent.delegates == frozenset({"frontend-developer"})  # the same rule for targets
    [warning] = outcome.diagnostics
    assert warning.severity is Severity.WARNING and warning.code == "name_normalized"
    assert "'Code Reviewer'" in warning.reason and "'code-reviewer'" in warning.reason


def test_a_name_without_normalisation_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    outcome = load(tmp_path, AgentFormat.CLAUDE, "dev-fr.md",
                   "---\nname: Développeur\ndescription: d\n---\nb\n")
    assert [(a.name, a.display_name) for a in outcome.agents] == [("dev-fr", "Développeur")]
    assert "from its file name" in outcome.diagnostics[0].reason


def test_no_identity_at_all_is_still_a_rejection(tmp_path: Path) -> None:
    outcome = load(tmp_path, AgentFormat.CLAUDE, "Développeur.md",
                   "---\nname: Développeur\ndescription: d\n---\nb\n")
    assert outcome.status == "rejected"
    assert "invalid agent name" in outcome.diagnostics[0].reason


def test_strict_formats_keep_their_rules(tmp_path: Path) -> None:
    """ngn's spec and Gemini CLI refuse such names themselves: so does corral."""
    ngn = load(tmp_path, AgentFormat.NGN, "a.md", "---\nname: Code Reviewer\ndescription: d\n"
               "---\nb\n")
    gemini = load(tmp_path, AgentFormat.GEMINI, "g.md", "---\nname: Code Reviewer\n"
                  "description: d\n---\nb\n")
    assert ngn.status == gemini.status == "rejected"


def test_file_named_identities_of_opencode_and_copilot(tmp_path: Path) -> None:
    opencode = load(tmp_path, AgentFormat.OPENCODE, "Frontend Developer.md",
                    "---\ndescription: d\n---\nb\n")
    assert [(a.name, a.display_name) for a in opencode.agents] == [
        ("frontend-developer", "Frontend Developer")]
    copilot = load(tmp_path, AgentFormat.COPILOT, "Api.Designer.agent.md",
                   "---\nname: API designer\ndescription: d\nagents: [Code Reviewer]\n---\nb\n")
    assert [(a.name, a.display_name, a.delegates) for a in copilot.agents] == [
        ("api-designer", "API designer", frozenset({"code-reviewer"}))]


def test_strict_mode_rejects_a_normalised_name(tmp_path: Path) -> None:
    from dataclasses import replace

    from policies.loader import Options
    path = tmp_path / "x.md"
    path.write_text("---\nname: Code Reviewer\ndescription: d\n---\nb\n")
    outcome = load_file(path, AgentFormat.CLAUDE, scope=Scope.PROJECT, display="x.md",
                        options=replace(Options(), strict=True))
    assert outcome.status == "rejected" and "(--strict)" in outcome.diagnostics[0].reason


def test_an_opencode_command_pattern_at_the_wrong_level_names_the_fix(tmp_path: Path) -> None:
    outcome = load(tmp_path, AgentFormat.OPENCODE, "a.md",
                   "---\ndescription: d\npermission:\n  'rm -rf *': deny\n  github_*: deny\n"
                   "---\nb\n")
    assert outcome.status == "rejected"
    diagnostic, tool_glob = outcome.diagnostics
    assert "'rm -rf *' is a command pattern, not a tool" in diagnostic.reason
    assert diagnostic.hint == "write permission: {bash: {'rm -rf *': deny}}"
    assert "tool_map" not in (diagnostic.hint or "") and "unknown" not in diagnostic.reason
    # A glob over tool names is a tool name, judged as one (no installed github tools here).
    assert "unknown opencode tool 'github_*'" in tool_glob.reason


def test_two_spellings_that_meet_are_a_warning_naming_both(tmp_path: Path) -> None:
    from policies.loader import discover
    from policies.loader.discovery import Environment

    agents = tmp_path / ".claude/agents"
    agents.mkdir(parents=True)
    (agents / "a.md").write_text("---\nname: Code Reviewer\ndescription: first\n---\nb\n")
    (agents / "b.md").write_text("---\nname: code.reviewer\ndescription: second\n---\nb\n")
    result = discover(tmp_path, trust_project=True, personal=False,
                      env=Environment(home=tmp_path / "h", xdg_config=tmp_path / "h/.config",
                                      pi_dir=tmp_path / "h/.pi"))
    assert result.agents["code-reviewer"].description == "second"  # later path wins, as always
    [collision] = [d for d in result.diagnostics if d.code == "collision"]
    assert collision.severity is Severity.WARNING
    assert "'code.reviewer' and 'Code Reviewer' both normalise to 'code-reviewer'" in \
        collision.reason
