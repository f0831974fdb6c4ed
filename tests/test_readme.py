"""The README is short and every command in it does what it says (issue 32).

- at most 200 lines, and every relative link in it names a file of the repository;
- its test command is the one ``.ci/run`` runs, exactly, after installing the extra the
  README installs;
- each job's commands run as written (``.venv/bin/corral`` is ``python -m executor``), on
  a copy of this repository's README and examples, with the exit codes the README states;
  the fanout's are run by ``tests/executor/test_fanout_example.py``, and no corral command
  of the README is left unrun.
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

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
#: The jobs' sections, and the exit code of each corral command in them, in order.
JOBS = {
    "### An untrusted project agent": [0, 0],
    "### A read-only reviewer audit": [4],  # its write is denied, on purpose
}
#: Run by another test.
ELSEWHERE = {"### Parallel patch generation": "tests/executor/test_fanout_example.py"}


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _section(heading: str) -> str:
    text = _text()
    rest = text[text.index(heading) + len(heading):]
    end = min((i for i in (rest.find("\n## "), rest.find("\n### ")) if i >= 0), default=len(rest))
    return rest[:end]


def _commands(heading: str, language: str = "sh") -> list[list[str]]:
    lines = []
    for block in re.findall(rf"```{language}\n(.+?)\n```", _section(heading), re.DOTALL):
        lines += [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    return lines


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "corral"
    copy.mkdir()
    shutil.copy(README, copy / "README.md")
    shutil.copytree(REPO / "examples", copy / "examples")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "copy")
    return copy


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = _text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links, "the README links to the docs"
    missing = [link for link in links if "://" not in link and not (REPO / link).exists()]
    assert missing == []


def test_the_readme_test_command_is_what_ci_runs() -> None:
    install, test = _commands("## Run the tests")
    assert test == [".venv/bin/python", "-m", "pytest"]
    assert install[-4:] == [".venv/bin/pip", "install", "-e", ".[dev]"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert shlex.join(test) in ci
    assert ".venv/bin/pip install --quiet -e '.[dev]'" in ci  # the README's extra, quietly


def test_every_corral_command_of_the_readme_is_run_by_a_test() -> None:
    text = _text()
    ran = {" ".join(words) for heading in JOBS for words in _commands(heading)}
    ran |= {" ".join(words) for heading in ELSEWHERE for words in _commands(heading)}
    for block in re.findall(r"```sh\n(.+?)\n```", text, re.DOTALL):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] == ".venv/bin/corral":
                    assert " ".join(words) in ran, part
    for heading, test in ELSEWHERE.items():
        assert heading in (REPO / test).read_text(encoding="utf-8")


@pytest.mark.requires("bubblewrap")  # the README's jobs name no backend: auto picks it
@pytest.mark.parametrize("heading", list(JOBS))
def test_a_readme_job_runs_as_written(heading: str, tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    commands = _commands(heading)
    assert [words[0] for words in commands] == [".venv/bin/corral"] * len(JOBS[heading])
    for words, code in zip(commands, JOBS[heading], strict=True):
        done = subprocess.run([sys.executable, "-m", "executor", *words[1:]], cwd=copy,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == code, (words, done.stdout, done.stderr)
    status = git(copy, "status", "--porcelain").stdout.splitlines()
    if heading.startswith("### An untrusted"):  # applied: the child's changelog, only
        assert status == ["?? examples/CHANGELOG.md"]
        assert "patcher agent" in (copy / "examples" / "CHANGELOG.md").read_text()
    else:  # the reviewer changed nothing
        assert status == []


@pytest.mark.requires("bubblewrap")
def test_the_readme_python_example_runs_as_written(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (block,) = re.findall(r"```python\n(.+?)\n```", _section("### Parallel patch generation"),
                          re.DOTALL)
    done = subprocess.run([sys.executable, "-c", block], cwd=copy, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(1, 'completed', True), (2, 'completed', True)]"
    assert git(copy, "status", "--porcelain").stdout == ""  # nothing applied
