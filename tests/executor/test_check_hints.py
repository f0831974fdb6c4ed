"""A check whose command the sandbox does not have says so (issue 31, D8).

``python -m pytest -q`` as a fanout's check failed every candidate with exit 127 and
nothing said why: the sandbox has ``python3`` only (Debian's), on bubblewrap and docker
alike. The check's record now carries a hint, and the fanout's table prints it once.
The name in it comes from the check's output (the child's code): it is escaped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from exec_support import agent_file, git, script

from executor.cli import cli
from executor.fanout.check import not_found_hint

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]


def _fanout(repo: Path, tmp_path: Path, backend: str, check: str,
            *extra: str) -> tuple[int, str]:
    agent_file(repo, "w", "tools: [read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    done = script(tmp_path, "done", {"text": "done"})
    result = CliRunner().invoke(cli, [
        "fanout", "--root", str(repo), "--trust-project", "--no-personal", "--backend",
        backend, "--agent", "w", "--check-cmd", check, "--check-timeout", "60", "-n", "2",
        "--script", done, "--script", done, *extra, "Look"], catch_exceptions=False)
    return result.exit_code, result.stdout


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_check_with_python_says_the_sandbox_has_python3(
        repo: Path, tmp_path: Path, backend: str) -> None:
    code, out = _fanout(repo, tmp_path, backend, "python -m pytest -q", "--json")
    assert code == 1, out
    rows = json.loads(out)["runs"]
    assert [row["check"]["exit_code"] for row in rows] == [127, 127]
    assert all("only `python3`" in row["check"]["hint"] for row in rows)


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_the_table_prints_the_hint_once_and_escapes_the_name(
        repo: Path, tmp_path: Path, backend: str) -> None:
    hostile = "printf 'sh: 1: \\033]0;owned\\007x: not found\\n'; exit 127"
    code, out = _fanout(repo, tmp_path, backend, hostile)
    assert code == 1, out
    hints = [line for line in out.splitlines() if line.startswith("check hint:")]
    assert len(hints) == 1, out
    assert "\x1b" not in out and "\x07" not in out
    assert "is not in the sandbox" in hints[0]


def test_the_hint_reads_the_shells_own_words() -> None:
    assert "python3" in not_found_hint("sh: 1: python: not found\n")["hint"]
    assert "`pytest`" in not_found_hint("bash: line 1: pytest: command not found\n")["hint"]
    assert not_found_hint("1 failed, 3 passed\n") == {}
