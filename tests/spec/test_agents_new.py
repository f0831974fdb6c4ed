"""``corral agents new``: zuno's ``agent create``, for every format corral loads.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped). The definitions are written through the CLI (which calls
:meth:`executor.api.Corral.new_agent`) and read back by ``agents check`` and
``agents show``, as a user would.
"""

from __future__ import annotations

import json

import pytest
from click.testing import Result

from executor import Corral, CorralError
from executor.agents.scaffold import SCAFFOLD_PATHS
from policies.contract import AgentFormat

ARGS = ("--trust-project", "--no-personal")
#: The formats whose definitions say who may use an agent (the rest: everyone).
REACHABILITY = {AgentFormat.NGN, AgentFormat.COPILOT, AgentFormat.OPENCODE,
                AgentFormat.ANTIGRAVITY, AgentFormat.ZUNO}
CASES = [(fmt, mode) for fmt in AgentFormat
         for mode in (("all", "primary", "subagent") if fmt in REACHABILITY else ("all",))]


def _user_error(result: Result, code: str) -> CorralError:
    """The user error (exit 2) a ``corral`` command ended with."""
    error = result.exception
    assert isinstance(error, CorralError), result.output
    assert (error.exit_code, error.code) == (2, code), error
    return error


@pytest.mark.parametrize(("fmt", "mode"), CASES, ids=[f"{f.value}-{m}" for f, m in CASES])
def test_agents_new_writes_a_definition_check_accepts(fs, cli, fmt: AgentFormat,
                                                      mode: str) -> None:
    """Spec (zuno-custom-agents.md): Creating and inspecting

        zuno agent create --path .zuno/agent/reviewer.md --mode subagent

    Spec (ngn-agent-definitions.md): Create .ngn/agents/research.md: ...

    ``corral agents new NAME --format F --mode M`` writes a valid, minimal definition
    where F's project agents are discovered; ``agents check`` accepts it without a
    diagnostic, and ``agents show`` reports the reachability M asked for.
    """
    name = f"new-{fmt.value}"
    made = cli("agents", "new", name, "--format", fmt.value, "--mode", mode,
               "--root", str(fs.repo))
    assert made.exit_code == 0, made.output
    written = fs.repo / SCAFFOLD_PATHS[fmt].format(name=name)
    assert written.is_file() and str(written.relative_to(fs.repo)) in made.output
    checked = cli("agents", "check", "--json", "--root", str(fs.repo), *ARGS)
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.output)["diagnostics"] == []
    shown = json.loads(cli("agents", "show", name, "--json", "--root", str(fs.repo),
                           *ARGS).output)
    assert (shown["format"], shown["source"]) == (fmt.value, SCAFFOLD_PATHS[fmt].format(
        name=name))
    assert (shown["user_invocable"], shown["subagent_available"]) == {
        "all": (True, True), "primary": (True, False), "subagent": (False, True)}[mode]
    assert shown["runnable"]["user"] is (mode != "subagent")
    assert shown["instructions"].strip() and shown["description"]


def test_agents_new_at_a_path_and_through_the_api(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): zuno agent create --path .zuno/agent/reviewer.md
    --mode subagent

    ``--path`` places the file (relative to ``--root``); the API returns what was
    written and whether discovery finds it there.
    """
    made = cli("agents", "new", "reviewer", "--format", "zuno", "--mode", "subagent",
               "--path", ".zuno/agent/reviewer.md", "--root", str(fs.repo), "--json")
    assert made.exit_code == 0, made.output
    assert json.loads(made.output) == {
        "path": str(fs.repo / ".zuno/agent/reviewer.md"), "format": "zuno", "name": "reviewer",
        "mode": "subagent", "discovered": True, "shadowed_by": None}
    away = Corral(fs.repo, personal=False).new_agent(
        "scout", format="claude", path="notes/scout.md", description="Scout the repo.")
    assert away.discovered is False and away.path == fs.repo / "notes/scout.md"
    assert 'description: "Scout the repo."' in away.path.read_text(encoding="utf-8")


def test_agents_new_never_overwrites_and_never_leaves_a_broken_file(fs, cli) -> None:
    """Spec (zuno-custom-agents.md): zuno agent create --path .zuno/agent/reviewer.md
    --mode subagent

    (The spec does not say what ``create`` does to an existing file; corral's rule:)
    ``agents new`` never overwrites a file, refuses a reachability the format cannot
    say, and a name the format's loader rejects writes nothing.
    """
    existing = fs.md(".claude/agents/mine.md", "name: mine\ndescription: Mine.")
    before = existing.read_bytes()
    again = _user_error(cli("agents", "new", "mine", "--format", "claude", "--root",
                            str(fs.repo)), "file_exists")
    assert "already exists" in again.message and existing.read_bytes() == before
    only = _user_error(cli("agents", "new", "helper", "--format", "claude", "--mode",
                           "subagent", "--root", str(fs.repo)), "unsupported_mode")
    assert "cannot make an agent subagent-only" in only.message
    assert not (fs.repo / ".claude/agents/helper.md").exists()
    upper = _user_error(cli("agents", "new", "Big", "--format", "gemini", "--root",
                            str(fs.repo)), "rejected_definition")
    assert "lowercase" in upper.message and not (fs.repo / ".gemini").exists()
    with pytest.raises(CorralError) as renamed:
        Corral(fs.repo).new_agent("a", format="opencode", path=".opencode/agents/b.md")
    assert renamed.value.code == "bad_path"
    assert not (fs.repo / ".opencode").exists()
