"""One glob dialect for permission patterns and the file tools (issue 28, ``policies.globs``).

The permission glob took ``[`` literally while the file tools read classes, so
``Read(secrets/[a-z]*.env)`` as a deny matched nothing: the security check failed open.
Both now read one dialect; a pattern it cannot read is refused where the rule is made.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.contract import AgentFormat, Scope
from policies.globs import GlobError, glob_problem
from policies.loader import Severity, load_file
from policies.permissions import (
    Action,
    PermissionMode,
    PermissionPolicy,
    PermissionRule,
    _may_match,
    decide_layers,
    glob_matches,
)
from sandbox.errors import PathDenied
from sandbox.files.globbing import glob_regex

DENY_ENV = PermissionPolicy(rules=(
    PermissionRule(tool="read_file", pattern="secrets/[a-z]*.env", action=Action.DENY),))


def test_a_class_in_a_deny_pattern_denies_the_read() -> None:
    assert DENY_ENV.decide("read_file", "secrets/prod.env") is Action.DENY
    assert DENY_ENV.decide("read_file", "secrets/Prod.env") is Action.ALLOW  # not in [a-z]
    assert DENY_ENV.decide("read_file", "secrets/x/prod.env") is Action.ALLOW  # * stops at /


def test_a_negated_class() -> None:
    for negated in ("[!a]", "[^a]"):
        policy = PermissionPolicy(mode=PermissionMode.STANDARD, rules=(
            PermissionRule(tool="read_file", pattern=f"secrets/{negated}*.env",
                           action=Action.DENY),))
        assert decide_layers([policy], "read_file", "secrets/prod.env") is Action.DENY
        assert decide_layers([policy], "read_file", "secrets/app.env") is Action.ALLOW
    # In a path a class never matches '/'; in a command it is any character but the class's.
    assert not glob_matches("a[!x]b", "a/b", path=True)
    assert glob_matches("a[!x]b", "a/b")


def test_shell_patterns_keep_star_across_slashes_and_the_bare_form() -> None:
    assert glob_matches("cat *", "cat /etc/passwd")
    assert glob_matches("git status *", "git status")
    assert glob_matches("[g]it status *", "git status")  # the bare form is read as a glob
    assert glob_matches("rm -[rf]* *", "rm -rf /")
    policy = PermissionPolicy(rules=(
        PermissionRule(tool="shell", pattern="rm -[rR]f *", action=Action.DENY),))
    assert policy.decide("shell", "rm -Rf src") is Action.DENY
    assert policy.decide("shell", "rm -i src") is Action.ALLOW


def test_an_uncertain_word_meets_a_class_as_one_character() -> None:
    wild = "\x00"
    assert _may_match("rm [a-z]*", f"rm {wild}", wild)
    assert _may_match("git [p]ush *", f"git pu{wild}sh origin", wild)
    assert not _may_match("ls [a]", f"ls b{wild}", wild)  # b is not in the class
    assert _may_match("ls [!a]x", f"ls {wild}", wild)
    assert not _may_match("ls [!b]", "ls b", wild)
    policy = PermissionPolicy(rules=(
        PermissionRule(tool="shell", pattern="git [p]ush *", action=Action.DENY),))
    assert policy.decide("shell", "git pu$(printf '')sh origin") is Action.DENY
    assert policy.decide("shell", 'x=push; git "$x" origin') is Action.DENY


UNREADABLE = {
    "secrets/[a-z*.env": "that no ']' closes",
    "[": "that no ']' closes",
    "a[]": "an empty class '[]'",
    "a[!]": "an empty class '[!]'",
    "[z-a]": "a range out of order",
    "[[:alpha:]]": "POSIX class",
}


@pytest.mark.parametrize("pattern", sorted(UNREADABLE))
def test_an_unreadable_pattern_is_refused_everywhere(pattern: str) -> None:
    assert UNREADABLE[pattern] in (glob_problem(pattern) or "")
    with pytest.raises(GlobError, match=r"position|empty|order|POSIX"):
        PermissionRule(tool="read_file", pattern=pattern, action=Action.DENY)
    with pytest.raises(PathDenied) as caught:
        glob_regex(pattern)  # the file tools' find and search
    assert caught.value.code == "path_invalid"


def test_members_that_look_like_syntax_are_members() -> None:
    assert glob_matches("[]a]", "]") and glob_matches("[]a]", "a")
    assert glob_matches("[!]]", "x") and not glob_matches("[!]]", "]")
    assert glob_matches("[[]x", "[x") and glob_matches("a[-z]", "a-")
    assert glob_matches("a[a-]", "a-") and glob_matches(r"a\[x]", "a\\x")


def _load(tmp_path: Path, fmt: AgentFormat, name: str, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return load_file(path, fmt, scope=Scope.PROJECT, display=name)


@pytest.mark.parametrize(("fmt", "name", "text", "field"), [
    (AgentFormat.CLAUDE, ".claude/agents/c.md",
     "---\nname: c\ndescription: d\ntools: Read\n"
     "disallowedTools: Read(secrets/[a-z*.env)\n---\nx\n", "disallowedTools"),
    (AgentFormat.CLAUDE, ".claude/agents/c.md",
     "---\nname: c\ndescription: d\ntools: Read(src/[]), Bash\n---\nx\n", "tools"),
    (AgentFormat.OPENCODE, ".opencode/agent/o.md",
     "---\ndescription: d\npermission:\n  read:\n    'secrets/[a-z*.env': deny\n---\nx\n",
     "permission"),
    (AgentFormat.OPENCODE, ".opencode/agent/o.md",
     "---\ndescription: d\npermissions:\n  - {action: bash, resource: 'rm [', effect: deny}\n"
     "---\nx\n", "permissions"),
], ids=["claude-deny", "claude-allow", "opencode-v1", "opencode-v2"])
def test_a_rule_with_a_bad_class_is_refused_at_load_with_a_diagnostic(
        tmp_path: Path, fmt: AgentFormat, name: str, text: str, field: str) -> None:
    outcome = _load(tmp_path, fmt, name, text)
    assert outcome.status == "rejected", outcome.diagnostics
    errors = [d for d in outcome.diagnostics if d.severity is Severity.ERROR]
    [error] = [d for d in errors if "cannot be read" in d.reason]
    assert error.file == name and error.field == field
    assert "no ']' closes" in error.reason or "empty class" in error.reason
    assert error.hint and "[[]" in error.hint


def test_a_readable_class_loads_and_denies(tmp_path: Path) -> None:
    outcome = _load(tmp_path, AgentFormat.CLAUDE, ".claude/agents/c.md",
                    "---\nname: c\ndescription: d\ntools: Read\n"
                    "disallowedTools: Read(secrets/[a-z]*.env)\n---\nx\n")
    assert outcome.status == "loaded", outcome.diagnostics
    [agent] = outcome.agents
    assert agent.permission.decide("read_file", "secrets/prod.env") is Action.DENY


# -- the file tools' glob and the permission glob agree --------------------------------------

PATTERNS = ["*.py", "src/*.py", "src/**", "**/*.env", "**/[a-z]*.env", "secrets/[!a]*",
            "a?c", "a[/]c", "a[!x]c", "src/**/test_*.py", "**", "*", "[]x]*", "[a-c][0-9]",
            "x/**/y", "**.py", "[.]*"]
PATHS = ["a.py", "src/a.py", "src/x/a.py", ".env", "a/b/prod.env", "a/b/Prod.env",
         "secrets/app", "secrets/prod", "abc", "a/c", "axc", "src/test_x.py",
         "src/t/u/test_y.py", "]x", "b7", "x/y", "x/p/q/y", "deep/a.py", ".hidden"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_file_glob_and_the_permission_glob_agree_on_a_table(pattern: str) -> None:
    files = {path for path in PATHS if glob_regex(pattern).match(path)}
    rules = {path for path in PATHS if glob_matches(pattern, path, path=True)}
    assert files == rules


_PIECES = st.sampled_from(["a", "b", "/", ".", "*", "**", "**/", "?", "[ab]", "[!a]", "[a-c]",
                           "[/]", "[]]", "-", "x"])
_CHARS = st.text(alphabet="ab/.x-]c", max_size=8)


@settings(max_examples=300, deadline=None)
@given(pattern=st.lists(_PIECES, max_size=6).map("".join), path=_CHARS)
def test_the_two_globs_agree_on_generated_patterns_and_paths(pattern: str, path: str) -> None:
    if glob_problem(pattern) is not None:
        with pytest.raises(PathDenied):
            glob_regex(pattern)
        return
    assert bool(glob_regex(pattern).match(path)) == glob_matches(pattern, path, path=True)
