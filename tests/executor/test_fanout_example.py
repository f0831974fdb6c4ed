"""The README's fanout example does what the README says, as written, without a model key.

It runs on a copy of this repository's README and examples (the fanout's
children write ``examples/CHANGELOG.md``; the apply must not touch the real
checkout): the README's own command lines, then the ``corral apply FANOUT --pick best``
the fanout's output ends with, which applies the first row whose check passed. The
fanout page of the docs (docs/fanout.md) shows the same two lines.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import git
from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]


def _block(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.+?)\n```", text[text.index(heading):], re.DOTALL)
    assert block is not None, f"{path.name}: no sh block after {heading!r}"
    return block.group(1)


def test_the_docs_fanout_page_shows_the_readme_commands() -> None:
    assert _block(REPO / "docs" / "fanout.md", "# Parallel patch generation") == _block(
        REPO / "README.md", "### Parallel patch generation")


@pytest.mark.requires("bubblewrap")  # the README's fanout names no backend: auto picks it
def test_the_readme_fanout_example_runs_checks_and_applies_one(tmp_path: Path) -> None:
    block = _block(REPO / "README.md", "### Parallel patch generation")
    fanout, apply = (shlex.split(line, comments=True) for line in block.splitlines())
    assert fanout[:2] == [".venv/bin/corral", "fanout"] and apply == [
        ".venv/bin/corral", "apply", "FANOUT", "--pick", "best"]
    copy = tmp_path / "corral"
    copy.mkdir()
    shutil.copy(REPO / "README.md", copy / "README.md")
    shutil.copytree(REPO / "examples", copy / "examples")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "copy")
    done = subprocess.run([sys.executable, "-m", "executor", *fanout[1:], "--no-personal"],
                          cwd=copy, capture_output=True, text=True, timeout=scaled(300),
                          check=False)
    assert done.returncode == 1, done.stderr  # one child's check failed, as the README shows
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"\s+\d ", line)]
    assert [(row[0], row[3], row[7]) for row in rows] == [
        ("1", "completed", "passed"), ("2", "completed", "passed"), ("3", "completed", "failed")]
    assert "conflict: #1 and #2: examples/CHANGELOG.md (added by both" in done.stdout
    assert not (copy / "examples" / "CHANGELOG.md").exists()  # nothing applied yet
    fanout_id = done.stdout.split()[1].rstrip(":")
    last = done.stdout.rstrip("\n").splitlines()[-1]
    assert last.endswith(f": corral apply {fanout_id} --pick best"), done.stdout
    assert last.startswith("apply the best, #1 ")
    command = shlex.split(last.rsplit(": ", 1)[1])
    assert command == ["corral", "apply", fanout_id, *apply[3:]]
    applied = subprocess.run([sys.executable, "-m", "executor", *command[1:]],
                             cwd=copy, capture_output=True, text=True, timeout=scaled(120),
                             check=False)
    assert applied.returncode == 0, applied.stderr
    assert f"#1 (run {rows[0][1]})" in applied.stderr
    assert f"superseded: run {rows[1][1]}" in applied.stderr  # #2 conflicts with it
    assert (copy / "examples" / "CHANGELOG.md").read_text().startswith("# Changelog\n")
