"""The command-pattern attacks end to end: a real child in a real sandbox.

A Claude agent granted ``Bash(git diff:*)`` sends ``git diff #'<nl>id; echo x >
pwned<nl>'``: bash and sh read ``#'`` as a comment and would run ``echo x >
pwned``. An agent with ``disallowedTools: Bash(rm:*)`` hides ``rm -rf src`` the
same way. Both calls are denied and nothing changes; the allowed twin runs.
The same agent tries ``rm`` behind expansions (``r$()m``, ``$x``, ``"$@"``,
``~``, ``env $x``, ``sh -c "$x"``, ...): each is denied, every file stays.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from exec_support import BACKENDS, Runner, git

from executor.ledger import RunStatus


def _claude(repo: Path, name: str, fields: str) -> None:
    path = repo / ".claude" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: test agent {name}\n{fields}\n---\nGo.\n")


def _shell(*commands: str) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": "shell", "arguments": {"command": c}} for c in commands]},
            {"text": "done"}]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_allow_pattern_does_not_run_a_hidden_command(run: Runner, repo: Path,
                                                     backend: str) -> None:
    _claude(repo, "differ", "tools: Read, Bash(git diff:*)")
    record = run("differ", _shell("git diff #'\necho x > pwned\n'", "git diff --stat"))
    assert record.status is RunStatus.COMPLETED
    assert [d["tool"] for d in record.denied_calls] == ["shell"]
    assert record.changed_files == [] and record.diff == ""
    decisions = [a["decision"] for a in record.audit]
    assert decisions[0] == "denied" and decisions[1] != "denied"  # the plain twin ran


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_deny_pattern_sees_a_hidden_command(run: Runner, repo: Path, backend: str) -> None:
    _claude(repo, "cleaner", "tools: Read, Bash\ndisallowedTools: Bash(rm:*)")
    record = run("cleaner", _shell("git diff #'\nrm -rf src\n'", "touch ok"))
    assert [d["tool"] for d in record.denied_calls] == ["shell"]
    assert [c["path"] for c in record.changed_files] == ["ok"]  # the twin ran, src stayed


#: Each spelling runs ``rm -f victims/N`` under ``sh -c`` (dash) in every backend, or under
#: the ``bash -c`` it calls: an expansion, a glob or ``eval`` decides what runs.
EXPANSION_ATTACKS = [
    "r$()m -f victims/0",
    "rm${u} -f victims/1",
    "x=rm; $x -f victims/2",
    "rm$IFS-f victims/3",
    'set -- rm -f victims/4; "$@"',
    "bash -c \"\\$'\\\\x72m' -f victims/5\"",
    "${x:-rm} -f victims/6",
    "r`true`m -f victims/7",
    "HOME=rm; ~ -f victims/8",
    'x=rm; eval "$x -f victims/9"',
    "x=rm; exec $x -f victims/10",
    "x=rm; env $x -f victims/11",
    "x=rm; nice $x -f victims/12",
    "x=rm; echo victims/13 | xargs $x -f",
    "x=rm; find victims -name 14 -exec $x -f {} +",
    "x='rm -f victims/15'; sh -c \"$x\"",
    "x='rm -f victims/16'; echo \"$x\" | sh",
    'f(){ "$@"; }; f rm -f victims/17',
    "x=rm; command $x -f victims/18",
    "bash -c '{r..r}m -f victims/19'",
    "x=r; ${x}m -f victims/20",
    "x=rm; timeout 5 $x -f victims/21",
    "x=rm; sh <<E\n$x -f victims/22\nE",
    "x=-c; sh $x 'rm -f victims/23'",
    'x=rm; trap "$x -f victims/24" EXIT',
    "for c in rm; do $c -f victims/25; done",
    "x=rm; true | $x -f victims/26",
    "echo rm -f victims/27 | xargs env",
    "cp /bin/rm rm && ./r? -f victims/28",
]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_deny_pattern_sees_an_expanded_command(run: Runner, repo: Path, backend: str) -> None:
    """``Bash(rm:*)`` denied: every spelling whose command name (or a word that decides
    what runs) expands is denied, and every victim file is still there; the twin runs."""
    victims = repo / "victims"
    victims.mkdir()
    for index in range(len(EXPANSION_ATTACKS)):
        (victims / str(index)).write_text(f"victim {index}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "victims")
    _claude(repo, "cleaner", "tools: Read, Bash\ndisallowedTools: Bash(rm:*)")
    record = run("cleaner", _shell(*EXPANSION_ATTACKS, "touch ok"))
    assert record.status is RunStatus.COMPLETED
    denied = [a["decision"] == "denied" for a in record.audit]
    assert denied == [True] * len(EXPANSION_ATTACKS) + [False], [
        (c, a["decision"]) for c, a in zip(EXPANSION_ATTACKS, record.audit, strict=False)]
    assert [c["path"] for c in record.changed_files] == ["ok"]  # no victim is gone
