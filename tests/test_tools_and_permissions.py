"""Exact tool names and the permission algebra."""

from __future__ import annotations

import pytest
from hypothesis import example, given
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
from policies.tools import CUSTOM_TOOL_RE, NATIVE_TOOLS, ToolGroup, check_tool_name, group_of

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


#: Well-formed custom tool names (the catalog's grammar), generated directly.
custom_names = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:/-]{0,30}\Z").filter(
    lambda name: name.casefold() not in {native.casefold() for native in NATIVE_TOOLS})
#: Characters that look like, fold to or hide inside an ASCII tool name.
LOOKALIKES = ["\u0430", "\u0435", "\u043e", "\u0455", "\u0131", "\u017f", "\u212a",
              "\u200b", "\u200d", "\u202e", "\ufeff", "\u00a0", " ", "\t", "\n", "\x00",
              "ｓ", "ｈ", "ｅ", "ｌ"]


@st.composite
def disguised_natives(draw: st.DrawFn) -> tuple[str, str]:
    """(native name, a spelling of it that must be refused): another case, or a lookalike /
    invisible / whitespace character replacing or joining its letters."""
    native = draw(st.sampled_from(sorted(NATIVE_TOOLS)))
    if draw(st.booleans()):
        flips = draw(st.lists(st.booleans(), min_size=len(native), max_size=len(native)))
        spelled = "".join(c.upper() if flip else c for c, flip in zip(native, flips, strict=True))
        if spelled != native:
            return native, spelled
    at = draw(st.integers(0, len(native)))
    replace = draw(st.booleans()) and at < len(native)
    return native, native[:at] + draw(st.sampled_from(LOOKALIKES)) + native[at + replace:]


@given(st.one_of(st.sampled_from(sorted(NATIVE_TOOLS)), custom_names))
def test_well_formed_names_are_accepted_exactly(name: str) -> None:
    assert check_tool_name(name) == name
    assert name.isascii() and not any(c.isspace() for c in name)


@given(disguised_natives())
@example(("read_file", "\uff52ead_file"))  # pinned for the audit: a fullwidth letter,
@example(("read_file", "Read_File"))  # and another case
def test_disguised_native_names_are_refused(case: tuple[str, str]) -> None:
    """Generated directly, so every example is a near miss of a real tool (the old property
    drew random text and reached its assertion in 9 of 100 examples)."""
    native, spelled = case
    with pytest.raises(ToolNameError) as raised:
        check_tool_name(spelled)
    if spelled.isascii() and spelled.casefold() == native:
        assert f"differs only by case from {native!r}" in str(raised.value)


@given(st.text(max_size=20))
def test_any_accepted_text_is_plain_ascii(name: str) -> None:
    """Whatever the text: accepted means ASCII, NFKC-stable, no whitespace, native or in the
    custom grammar; refused means a ToolNameError (never another exception)."""
    try:
        accepted = check_tool_name(name)
    except ToolNameError as exc:
        assert str(exc)
        return
    assert accepted == name and name.isascii() and not any(c.isspace() for c in name)
    assert name in NATIVE_TOOLS or CUSTOM_TOOL_RE.fullmatch(name)


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
