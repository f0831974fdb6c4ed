"""The command-pattern attacks end to end: a real child in a real sandbox.

A Claude agent granted ``Bash(git diff:*)`` sends ``git diff #'<nl>id; echo x >
pwned<nl>'``: bash and sh read ``#'`` as a comment and would run ``echo x >
pwned``. An agent with ``disallowedTools: Bash(rm:*)`` hides ``rm -rf src`` the
same way. Both calls are denied and nothing changes; the allowed twin runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from exec_support import BACKENDS, Runner

from executor.results import RunStatus


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
