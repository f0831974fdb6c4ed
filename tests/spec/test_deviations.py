"""The deviations page (docs/deviations.md, the README's "Where corral deliberately differs
from a spec" until issue 32): every row pinned by a test.

Each row of the table quotes a spec and says what corral does instead; :data:`PINNED`
names, per row, the tests that check what the row claims corral does. A row no test
pins, a pin whose row is gone, or a pinned test that no longer exists fails here, so
the table cannot keep a difference the code no longer has (a row claiming pi's
settings roles are not read, after they are) without its test failing first. The rows
added by issue 20 have their tests below.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from runtime_support import run_in

from policies.contract import AgentFormat
from policies.loader import Options, Severity

REPO = Path(__file__).resolve().parents[2]
HERE = "tests/spec/test_deviations.py"
#: A phrase of each row's first cell (what the spec says) -> the tests that pin the row.
PINNED: dict[str, tuple[str, ...]] = {
    "Falls back to in-process execution": (
        "tests/executor/test_hardening.py::test_a_root_that_is_no_repository_fails_before_anything",),
    "`.pi-worktrees/<id>` under the repo root": (
        "tests/sandbox/test_escape_leftovers.py::test_state_and_worktree_are_private_to_the_user",),
    "pi `workspace-write` is the default sandbox": (
        "tests/spec/test_pi_spec.py::test_sandbox_never_widens_the_parent",),
    "plus read-only extension tools when inherited": (
        "tests/spec/test_pi_spec.py::test_read_only_restricts_to_read_only_allowlist",),
    "ngn `reviewer`: no shell": (
        "tests/test_review_commands_policy.py::test_the_shell_stays_only_with_the_users_grant",
        "tests/executor/test_review_commands.py::"
        "test_with_the_grant_the_reviewer_runs_the_tests_and_changes_nothing"),
    "Pi selects the first authenticated/configured model": (
        "tests/spec/test_pi_runtime.py::test_parent_model_is_the_last_fallback",
        "tests/spec/test_pi_runtime.py::test_roles_defined_in_pi_settings_are_read"),
    "ngn's OpenCode adapter: \"simple permission allow/deny entries": (
        "tests/spec/test_ngn_spec.py::test_opencode_ask_and_patterns_are_enforced",
        f"{HERE}::test_opencode_ask_and_patterns_load_and_a_run_enforces_them"),
    "ngn's OpenCode adapter and locations": (
        "tests/test_collections.py::test_an_opencode_project",
        f"{HERE}::test_opencode_agents_load_as_opencode_reads_them"),
    "An invalid discovered definition is skipped": (
        f"{HERE}::test_a_claude_header_that_is_not_yaml_is_read_with_a_warning",),
    "ngn: \"Foreign model names belong to their original harness": (
        "tests/test_model_aliases.py::test_aliases_map_only_where_a_provider_is_configured",
        "tests/test_model_aliases.py::test_two_anthropic_typed_providers_are_ambiguous"),
    "zuno `subagent_depth`": (
        "tests/spec/test_zuno_runtime.py::test_subagent_depth_in_zuno_json_lowers_the_limit",
        "tests/spec/test_zuno_runtime.py::test_subagent_depth_that_is_not_a_number_fails_closed"),
    "every project .zuno directory": (
        "tests/spec/test_zuno_runtime.py::test_markdown_layers_and_nested_project_directories",),
    "zuno `variant`": (
        "tests/models/test_agent_runtime.py::test_variant_applies_with_the_configured_model",
        "tests/models/test_agent_runtime.py::test_an_undefined_variant_fails_before_the_run"),
    "zuno `options`": (
        "tests/spec/test_zuno_runtime.py::test_options_cannot_set_what_corral_alone_sends",),
    "zuno `steps`": (
        "tests/models/test_agent_runtime.py::test_finalization_request_defines_no_tools",),
    "catalog `systemPrompt`": (
        "tests/spec/test_catalog_runtime.py::test_unknown_template_variable_is_refused",),
    "catalog `overrides`": (
        "tests/spec/test_catalog_runtime.py::test_base_dir_re_roots_the_tools_paths_and_confines_them",
        "tests/spec/test_catalog_runtime.py::test_overrides_a_tool_cannot_apply_are_refused"),
    "catalog `toolSearch` groups": (
        "tests/spec/test_catalog_runtime.py::"
        "test_tool_search_activates_deferred_tools_of_the_listed_groups",),
    "catalog `responseReviewers`": (
        "tests/spec/test_catalog_runtime.py::"
        "test_reviewers_read_the_recorded_diff_not_the_agents_workspace",),
    "catalog `namespace`": (
        "tests/spec/test_catalog_runtime.py::test_namespace_scopes_listing_and_delegation",),
}


def _rows() -> list[str]:
    """The first cell of every row of the table."""
    text = (REPO / "docs" / "deviations.md").read_text(encoding="utf-8")
    section = text.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| spec says | corral does | why |")
    return [re.split(r" \| ", row[2:], maxsplit=1)[0] for row in rows[1:]]


def _tests(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_row_of_the_deviation_table_is_pinned_by_tests() -> None:
    """Issue 20: "The deviations table lists every remaining difference, and no
    other": each row is one difference, checked by the tests :data:`PINNED` names."""
    rows = _rows()
    for row in rows:
        keys = [key for key in PINNED if key in row]
        assert len(keys) == 1, (row, keys)
    for key, tests in PINNED.items():
        assert sum(key in row for row in rows) == 1, f"no row (or several) for {key!r}"
        for test in tests:
            path, name = test.split("::")
            assert name in _tests(path), f"{test} does not exist"


def test_opencode_ask_and_patterns_load_and_a_run_enforces_them(fs) -> None:
    """Spec (ngn-agent-definitions.md): OpenCode Filename identity, description, mode:
    primary/subagent/all, boolean tool map, simple permission allow/deny entries. ask, patterns,
    and policy groups that ngn cannot enforce are rejected.

    corral can enforce both (the deviations table says so): in a run with no approver,
    ``git status`` runs (the later ``allow`` pattern), ``make`` waits for a human and is
    denied as needing approval, ``rm`` is denied by its pattern.
    """
    fs.md(".opencode/agents/careful.md", """
        description: Careful with the shell.
        permission:
          bash:
            "*": ask
            "git *": allow
            "rm *": deny
    """)
    shell = [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}
             for command in ("git status", "make", "rm -rf build")]
    ran = run_in(fs, "careful", [*shell, {"text": "done"}])
    decisions = [(a["decision"], a["reason"]) for a in ran.record.audit]
    assert decisions[0] == ("allowed", "")
    assert decisions[1][0] == "denied" and "needs approval" in decisions[1][1]
    assert decisions[2][0] == "denied" and "needs approval" not in decisions[2][1]


def test_opencode_agents_load_as_opencode_reads_them(fs) -> None:
    """Spec (ngn-agent-definitions.md): OpenCode .opencode/agents/*.md
    $XDG_CONFIG_HOME/opencode/agents/*.md

    corral also reads OpenCode's own places (the deviations table says so): a nested file
    under ``.opencode/agent/`` (its id is its path) and ``opencode.json``'s ``agent`` map,
    with OpenCode fields beyond ngn's subset loaded without a diagnostic.
    """
    fs.md(".opencode/agent/team/b.md", "description: b\nsteps: 3\ntemperature: 0.2\nhidden: true")
    fs.json("opencode.json", {"agent": {"c": {"description": "c", "prompt": "Do c.",
                                              "mode": "primary"}}})
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"team/b", "c"}
    assert [d for d in result.diagnostics if d.severity is not Severity.INFO] == []
    assert (result.agents["team/b"].steps, result.agents["team/b"].temperature) == (3, 0.2)
    assert result.agents["c"].instructions == "Do c."


@pytest.mark.parametrize("fmt", [AgentFormat.CLAUDE, AgentFormat.CURSOR, AgentFormat.NGN])
def test_a_claude_header_that_is_not_yaml_is_read_with_a_warning(fs, fmt: AgentFormat) -> None:
    """Spec (ngn-agent-definitions.md): An invalid discovered definition is skipped with a
    diagnostic; it does not replace a valid definition from a lower-priority source.

    A Claude or Cursor header that is not valid YAML (an unquoted description holding
    ``user: "..."``) loads with a warning, as those harnesses read it (the deviations table
    says so), and ``--strict`` rejects it; any other format rejects it.
    """
    header = ("name: helper\ndescription: Use it when asked.\n"
              "  user: \"please help\" assistant: \"sure\"")
    path = fs.md("helper.md", header)
    outcome = fs.load(path, fmt)
    if fmt is AgentFormat.NGN:
        assert outcome.status.value == "rejected"
        return
    assert outcome.status.value == "loaded"
    assert [d.code for d in outcome.diagnostics if d.severity is Severity.WARNING] == [
        "lenient_yaml"]
    assert fs.load(path, fmt, options=Options(strict=True)).status.value == "rejected"
