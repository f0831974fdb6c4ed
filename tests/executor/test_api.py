"""corral's Python API as its users meet it: the docs' example run verbatim, and a
typed client, checked with ``mypy --strict``, driving the API from a fresh interpreter.

Both run in a subprocess on a copy of this repository's README and examples, so the
import is a user's (``from executor import ...``), nothing of the test process leaks
into it, and an apply never touches the real checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import git
from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).with_name("api_client") / "client.py"

pytestmark = pytest.mark.requires("bubblewrap")


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy(REPO / "README.md", copy / "README.md")
    shutil.copytree(REPO / "examples", copy / "examples")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "copy")
    return copy


def _docs_example() -> str:
    """The first Python block of the Python API page (docs/python-api.md)."""
    page = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.+?)\n```", page, re.DOTALL)
    assert block is not None, "the Python API page's example"
    return block.group(1)


def test_the_docs_python_example_runs_verbatim(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    done = subprocess.run([sys.executable, "-c", _docs_example()], cwd=copy,
                          capture_output=True, text=True, timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = [line.split() for line in lines[:3]]
    assert [(row[0], row[2], row[3]) for row in rows] == [
        ("1", "completed", "passed"), ("2", "completed", "passed"),
        ("3", "completed", "failed")]
    assert lines[3:] == ["applied ['examples/CHANGELOG.md']"]
    # The first passing child's content, merged into the copy, and only that file.
    assert (copy / "examples" / "CHANGELOG.md").read_text().startswith("# Changelog\n")
    status = git(copy, "status", "--porcelain").stdout
    assert status.splitlines() == ["?? examples/CHANGELOG.md"]
    shown = subprocess.run([sys.executable, "-m", "executor", "show", rows[0][1], "--json"],
                           cwd=copy, capture_output=True, text=True, timeout=scaled(60),
                           check=False)
    assert json.loads(shown.stdout)["state"] == "applied"


def test_a_typed_client_is_mypy_strict_clean(tmp_path: Path) -> None:
    """The public surface is typed: a client using runs, results, errors, progress and the
    async face passes ``mypy --strict`` with corral's own annotations (``py.typed``)."""
    env = os.environ | {"MYPYPATH": str(REPO)}
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy"), "--no-error-summary", str(CLIENT)],
        capture_output=True, text=True, timeout=scaled(300), check=False, env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # And a misuse is caught: the check is not vacuous.
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from executor import Corral\n\n"
                     "status: int = Corral('.').run('x').status\n", encoding="utf-8")
    caught = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy"), str(wrong)],
        capture_output=True, text=True, timeout=scaled(300), check=False, env=env, cwd=tmp_path)
    assert caught.returncode == 1 and "RunStatus" in caught.stdout, caught.stdout


def test_a_typed_client_drives_the_api_from_a_fresh_interpreter(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    done = subprocess.run([sys.executable, str(CLIENT), str(copy)], cwd=copy,
                          capture_output=True, text=True, timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["names"] == ["auditor", "lead", "patcher"]
    assert seen["contract_name"] == "patcher"
    assert seen["unknown"]["code"] == "unknown_agent" and seen["unknown"]["exit_code"] == 2
    assert "did you mean 'patcher'?" in seen["unknown"]["hint"]
    assert (seen["status"], seen["exit_code"]) == ("completed", 0)
    assert seen["files"] == ["examples/CHANGELOG.md"] and seen["events"] > 0
    assert seen["listed"] and seen["same_diff"]
    assert seen["async_status"] == "completed" and seen["async_diff"]
    assert git(copy, "status", "--porcelain").stdout == ""  # a worktree child: checkout untouched
