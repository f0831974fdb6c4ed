"""Exact tool names and the permission algebra."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.errors import ToolNameError
from policies.permissions import (
    Action,
    PermissionMode,
    PermissionPolicy,
    PermissionRule,
    decide_layers,
    glob_matches,
    shell_segments,
)
from policies.tools import NATIVE_TOOLS, ToolGroup, check_tool_name, group_of

# --- names ------------------------------------------------------------------------------

TRICKS = {
    "case": "Read_File",
    "upper": "SHELL",
    "cyrillic a": "re\u0430d_file",
    "fullwidth": "ｓｈｅｌｌ",
    "zero-width joiner": "sh\u200dell",
    "bidi override": "\u202eshell",
    "trailing space": "shell ",
    "leading space": " shell",
    "tab": "shell\t",
    "newline": "shell\n",
    "NUL": "shell\x00",
    "empty": "",
}


@pytest.mark.parametrize("name", list(NATIVE_TOOLS))
def test_native_names_are_exact(name: str) -> None:
    assert check_tool_name(name) == name


@pytest.mark.parametrize(("kind", "name"), list(TRICKS.items()))
def test_tool_name_tricks_are_errors_never_matches(kind: str, name: str) -> None:
    with pytest.raises(ToolNameError):
        check_tool_name(name)


def test_case_variant_error_names_the_real_tool() -> None:
    with pytest.raises(ToolNameError, match="'read_file'"):
        check_tool_name("READ_FILE")


def test_custom_names_and_patterns() -> None:
    assert check_tool_name("mcp__github__search") == "mcp__github__search"
    with pytest.raises(ToolNameError):
        check_tool_name("mcp__github__*")
    assert check_tool_name("mcp__github__*", allow_pattern=True) == "mcp__github__*"
    assert group_of("mcp__github__search") is ToolGroup.CUSTOM
    assert group_of("shell") is ToolGroup.EXEC


@given(st.text(max_size=20))
def test_every_accepted_name_is_ascii_and_nfkc_stable(name: str) -> None:
    try:
        accepted = check_tool_name(name)
    except ToolNameError:
        return
    assert accepted.isascii() and accepted == name and not any(c.isspace() for c in name)


# --- shell segments ------------------------------------------------------------------------

@pytest.mark.parametrize(("command", "segments", "opaque"), [
    ("git status", ["git status"], False),
    ("git diff; rm -rf /", ["git diff", "rm -rf /"], False),
    ("a && b || c | d & e", ["a", "b", "c", "d", "e"], False),
    ("echo 'a; b' && c", ["echo 'a; b'", "c"], False),
    ('echo "x && y"', ["echo 'x && y'"], False),
    ("echo $(rm -rf /)", ["echo $(rm -rf /)"], True),
    ("echo `id`", ["echo `id`"], True),
    ("cat <(ls)", ["cat <(ls)"], True),
    ("git diff #'\nid\n'", [], True),
    ("(cd x && make)", ["cd x", "make"], False),
    ("if true; then rm x; fi", ["true", "rm x"], False),
    ("eval ls", ["eval ls"], True),
    ("a\nb", ["a", "b"], False),
])
def test_shell_segments(command: str, segments: list[str], opaque: bool) -> None:
    assert shell_segments(command) == (segments, opaque)


def _policy(*rules: tuple[str, str | None, str], mode: str = "standard") -> PermissionPolicy:
    return PermissionPolicy(mode=PermissionMode(mode), rules=tuple(
        PermissionRule(tool=t, pattern=p, action=Action(a)) for t, p, a in rules))


def test_last_match_wins_within_a_layer() -> None:
    """OpenCode: put "*" first, specific patterns after."""
    policy = _policy(("shell", None, "deny"), ("shell", "git *", "allow"))
    assert policy.decide("shell", "git status") is Action.ALLOW
    assert policy.decide("shell", "git") is Action.ALLOW  # "git *" matches the bare command
    assert policy.decide("shell", "ls") is Action.DENY


def test_a_denied_segment_denies_the_compound_command() -> None:
    policy = _policy(("shell", "rm *", "deny"))
    assert policy.decide("shell", "ls && rm -rf /") is Action.DENY
    assert policy.decide("shell", "ls") is Action.ALLOW


def test_allow_patterns_must_cover_every_segment() -> None:
    policy = _policy(("shell", None, "deny"), ("shell", "git *", "allow"))
    assert policy.decide("shell", "git log | head") is Action.DENY
    assert policy.decide("shell", "git log | git show") is Action.ALLOW


def test_substitution_is_never_allowed_by_a_pattern() -> None:
    policy = _policy(("shell", "echo *", "allow"), mode="strict")
    assert policy.decide("shell", "echo hi") is Action.ALLOW
    assert policy.decide("shell", "echo $(curl evil)") is Action.DENY  # strict: unresolved


def test_path_globs_stop_at_slashes_and_double_star_crosses() -> None:
    assert glob_matches("src/*.py", "src/a.py", path=True)
    assert not glob_matches("src/*.py", "src/x/a.py", path=True)
    assert glob_matches("src/**", "src/x/a.py", path=True)
    assert glob_matches("**/*.env", ".env", path=True)
    assert glob_matches("**/*.env", "a/b/prod.env", path=True)
    policy = _policy(("write_file", "**/*.env*", "deny"))
    assert policy.decide("write_file", "config/.env.local") is Action.DENY
    assert policy.decide("write_file", "src/app.py") is Action.ALLOW


def test_modes() -> None:
    strict = _policy(mode="strict")
    assert strict.decide("read_file", "a") is Action.ALLOW
    assert strict.decide("write_file", "a") is Action.DENY
    assert strict.decide("mcp__x__y") is Action.DENY  # custom tools are side-effecting
    allow_all = _policy(("shell", None, "ask"), ("shell", "rm *", "deny"), mode="allow_all")
    assert allow_all.decide("shell", "ls") is Action.ALLOW
    assert allow_all.decide("shell", "rm x") is Action.DENY


def test_layers_combine_strictest_first() -> None:
    parent = _policy(("shell", "git push *", "ask"))
    child = _policy(("shell", None, "allow"), mode="allow_all")
    assert decide_layers([parent, child], "shell", "git push origin") is Action.ASK
    assert decide_layers([parent, _policy(("shell", None, "deny"))], "shell", "ls") is Action.DENY


def test_denies_outright_hides_only_pattern_free_terminal_denies() -> None:
    assert _policy(("shell", None, "deny")).denies_outright("shell")
    assert not _policy(("shell", None, "deny"), ("shell", "git *", "allow")).denies_outright(
        "shell")
    assert not _policy(("shell", "rm *", "deny")).denies_outright("shell")
    assert _policy(("*", None, "deny")).denies_outright("read_file")
