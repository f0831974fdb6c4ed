"""Cross-format sets in the corpus resolve to equivalent contracts.

agentsbridge renders the same eight agents for Claude, Copilot, OpenCode,
Codex, Cursor and Gemini; syllago's kitchen sink renders one agent for six
formats. Every rendering that loads must give the same contract core (name,
description, instructions, model selection, and the tools wherever the
format can express tools); every rendering that does not load is pinned here
with the field that rejects it, so a rejection is a decision, not an accident.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from policies.contract import AgentContract
from policies.loader import Severity, Status
from policies.loader.corpus import load_corpus

CORPUS = Path(__file__).parent / "corpus"
SETS = {"sampleXbro/agentsbridge", "OpenScribbler/syllago-kitchen-sink"}
#: Formats that have no tool allowlist: their contracts inherit tools.
NO_TOOL_FIELD = {"cursor", "codex"}

#: (repo, agent) -> {format: the field whose error rejects that rendering}
EXPECTED_REJECTIONS = {
    ("sampleXbro/agentsbridge", "code-reviewer"): {
        "claude": "permissionMode",  # permissionMode: ask is no Claude mode
        "copilot": "tools",  # Bash(git diff) is Claude syntax, unknown to Copilot
        "opencode": "tools",  # OpenCode tools is a boolean map, not a list
        "cursor": "tools",  # Cursor has no tools field
        "gemini": "tools",  # Claude tool names in a Gemini file
    },
    ("sampleXbro/agentsbridge", "test-runner"): {
        "copilot": "tools", "opencode": "tools", "cursor": "tools", "gemini": "tools",
    },
    ("OpenScribbler/syllago-kitchen-sink", "code-reviewer"): {
        "copilot": "tools",  # 'view' is no documented Copilot tool
        "opencode": "tools",
        "codex": "name",  # an [agent] table: no top-level name, description, instructions
    },
}


def _body(contract: AgentContract) -> str:
    """Instructions without Markdown headings (agentsbridge's Claude files add '## Role')."""
    lines = [line for line in contract.instructions.splitlines()
             if not re.match(r"^#{1,6} ", line)]
    return " ".join(" ".join(lines).split())


@pytest.fixture(scope="module")
def renderings() -> dict[tuple[str, str], dict[str, AgentContract | str]]:
    """(repo, agent) -> {format: contract, or the field of its first error}."""
    groups: dict[tuple[str, str], dict[str, AgentContract | str]] = defaultdict(dict)
    for row, outcome in load_corpus(CORPUS):
        if row.repo not in SETS or row.path.startswith("tests/e2e"):
            continue
        key_name = Path(row.path).name.removesuffix(".md").removesuffix(".agent").removesuffix(
            ".toml")
        if outcome.status is Status.REJECTED:
            first = next(d for d in outcome.diagnostics if d.severity is Severity.ERROR)
            groups[(row.repo, key_name)].setdefault(row.format.value, first.field)
        for agent in outcome.agents:
            groups[(row.repo, agent.name)][row.format.value] = agent
    return groups


def test_every_set_was_found(renderings: dict[tuple[str, str], dict[str, object]]) -> None:
    agents = {name for repo, name in renderings if repo == "sampleXbro/agentsbridge"}
    assert len(agents) == 8
    assert ("OpenScribbler/syllago-kitchen-sink", "code-reviewer") in renderings


def test_rejected_renderings_are_the_pinned_ones(
    renderings: dict[tuple[str, str], dict[str, AgentContract | str]],
) -> None:
    rejected = {key: {fmt: value for fmt, value in formats.items() if isinstance(value, str)}
                for key, formats in renderings.items()}
    rejected = {key: value for key, value in rejected.items() if value}
    assert rejected == EXPECTED_REJECTIONS


def test_loaded_renderings_resolve_to_equivalent_contracts(
    renderings: dict[tuple[str, str], dict[str, AgentContract | str]],
) -> None:
    compared = 0
    for key, formats in renderings.items():
        loaded = {fmt: c for fmt, c in formats.items() if isinstance(c, AgentContract)}
        assert len(loaded) >= 1, key
        reference_fmt, reference = next(iter(loaded.items()))
        for fmt, contract in loaded.items():
            where = f"{key} {fmt} vs {reference_fmt}"
            assert contract.name == reference.name, where
            assert contract.description == reference.description, where
            assert _body(contract) == _body(reference), where
            assert contract.model.foreign == reference.model.foreign, where
            assert contract.model.needs_override, where  # foreign names are never guessed
            assert contract.mode == reference.mode, where
            compared += 1
        with_tools = {fmt: c.tools for fmt, c in loaded.items() if fmt not in NO_TOOL_FIELD}
        distinct = {None if t is None else frozenset(t) for t in with_tools.values()}
        assert len(distinct) <= 1, (key, with_tools)
    assert compared >= 40


def test_kitchen_sink_tools_map_to_the_same_native_tools(
    renderings: dict[tuple[str, str], dict[str, AgentContract | str]],
) -> None:
    """Claude Read/Grep/Glob/Bash and Gemini read_file/grep_search/glob/run_shell_command
    are the same four native tools."""
    formats = renderings[("OpenScribbler/syllago-kitchen-sink", "code-reviewer")]
    claude, gemini = formats["claude"], formats["gemini"]
    assert isinstance(claude, AgentContract) and isinstance(gemini, AgentContract)
    assert claude.tools == gemini.tools == frozenset({"read_file", "search", "find", "shell"})


def test_claude_shell_patterns_restrict_shell_to_the_listed_commands(
    renderings: dict[tuple[str, str], dict[str, AgentContract | str]],
) -> None:
    """test-runner lists Bash(npx vitest): shell is granted for that command only."""
    claude = renderings[("sampleXbro/agentsbridge", "test-runner")]["claude"]
    assert isinstance(claude, AgentContract)
    assert claude.tools == frozenset({"read_file", "search", "find", "shell"})
    assert claude.denied_tools == frozenset({"edit", "write_file"})
    policy = claude.permission
    assert policy.decide("shell", "npx vitest").value == "allow"
    assert policy.decide("shell", "npx vitest; rm -rf /").value == "deny"
    assert policy.decide("shell", "rm -rf /").value == "deny"
    assert claude.steps == 5
