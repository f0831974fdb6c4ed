"""Audits that can run the tests: a read-only reviewer's commands in a throwaway layer (issue 29).

A real Python package with a venv built in the test (pytest installed from the registry),
run through the CLI on bubblewrap and docker, by a Claude ``permissionMode: plan`` agent
with ``Bash`` and a pi ``sandbox: read-only`` agent listing ``bash``. Without the user's
grant their shell is removed (the seeds' read-only tool lists) and the record says how to
grant it; with ``--review-commands`` (or ``[review] commands = true``) ``pytest -q`` and
``git status`` run and pass, what the commands wrote (a ``.pytest_cache``, ``build/x``) is
seen by the next command and by the file tools, and afterwards the checkout (every file,
``.git`` included), every ref, the stash, HEAD and the index are byte-identical, the diff
is empty and the record counts what was dropped. Attacks: writing the real checkout
through the layer (a symlink to its path, ``/proc/self/root``, ``/proc/1/root``), git
writes to ``.git`` (refs, objects, config, the index), filling the layer (bounded: ENOSPC
inside, nothing outside), and ``write_file`` through the grant: each fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exec_support import call, git, script, tree_digest

from executor.cli import cli
from policies.capability import GRANT_NOTE
from tests.timescale import scaled

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]
PYTEST = ".venv/bin/python -m pytest -q"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="throwaway layers need root here")


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def built_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with pytest from the registry, made once (``python -m pytest`` works from
    a copy: the interpreter finds its site-packages next to itself)."""
    venv = tmp_path_factory.mktemp("venv") / ".venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                    "--disable-pip-version-check", "pytest"], check=True, timeout=scaled(300))
    return venv


@pytest.fixture
def project(repo: Path, built_venv: Path, tmp_path: Path) -> Path:
    """A Python package with its tests, a venv in the checkout (ignored), a Claude plan-mode
    agent with Bash and a pi read-only agent with bash (personal definitions)."""
    (repo / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.1"\n')
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n.pytest_cache/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    git(repo, "stash", "list")
    (repo / "README.md").write_text("# Project\n\nstashed\n")
    git(repo, "stash", "-q")  # a stash too: it must survive as it is
    shutil.copytree(built_venv, repo / ".venv", symlinks=True)
    home = Path(os.environ["HOME"])
    claude = home / ".claude" / "agents" / "planner.md"
    claude.parent.mkdir(parents=True)
    claude.write_text("---\nname: planner\ndescription: reviews\ntools: Bash, Read\n"
                      "permissionMode: plan\n---\nReview the change.\n")
    pi = home / ".pi" / "agent" / "agents" / "pireview.md"
    pi.parent.mkdir(parents=True)
    pi.write_text("---\nname: pireview\ndescription: reviews\ntools: read, bash\n"
                  "sandbox: read-only\n---\nReview the change.\n")
    return repo


def state_of(repo: Path) -> dict[str, Any]:
    """Everything of the checkout a reviewer must leave as it was, read without writing."""
    return {
        "tree": tree_digest(repo),
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "stash": git(repo, "stash", "list", "--format=%H %gs"),
        "head": (repo / ".git" / "HEAD").read_bytes(),
        "index": (repo / ".git" / "index").read_bytes(),
    }


def review(repo: Path, backend: str, agent: str, path: str, *extra: str
           ) -> tuple[int, dict[str, Any], str, str]:
    """``corral run --json`` of ``agent``; (exit code, the shown record, stderr of the run,
    the human-readable ``corral show``)."""
    code, out, err = corral("run", "--root", str(repo), "--backend", backend, "--agent", agent,
                            "--script", path, "--json", *extra, "review it")
    assert out, err
    run_id = json.loads(out)["run_id"]
    shown_code, shown, shown_err = corral("show", run_id, "--root", str(repo), "--json")
    assert shown_code == 0, shown_err
    _, text, text_err = corral("show", run_id, "--root", str(repo))
    return code, json.loads(shown), err, text + text_err


def outputs(record: dict[str, Any]) -> list[str]:
    """Each tool call's result, in order."""
    return [str(entry.get("result", "")) for entry in record["audit"]]


AUDIT = [
    call("shell", command=f"{PYTEST} && git status --porcelain=v1 --branch && echo GIT-OK"),
    call("shell", command="mkdir -p build && touch build/x && echo made > build/y"),
    call("shell", command="ls -a .pytest_cache && test -e build/x && cat build/y && echo SEEN"),
    call("read_file", path="build/y"),
    {"text": "reviewed"},
]


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.parametrize("agent", ["planner", "pireview"])
@pytest.mark.timeout(600)
def test_without_the_grant_the_shell_is_removed_and_the_record_says_how(
        project: Path, tmp_path: Path, backend: str, agent: str) -> None:
    before = state_of(project)
    path = script(tmp_path, "audit", *AUDIT)
    code, record, _err, text = review(project, backend, agent, path)
    assert code == 4  # a denied call
    assert [d["tool"] for d in record["denied_calls"]][:1] == ["shell"]
    assert GRANT_NOTE in record["notes"]
    assert "--review-commands" in text and "[review] commands = true" in text
    assert record["discarded_writes"] is None
    assert state_of(project) == before


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.parametrize("agent", ["planner", "pireview"])
@pytest.mark.timeout(600)
def test_with_the_grant_the_reviewer_runs_the_tests_and_changes_nothing(
        project: Path, tmp_path: Path, backend: str, agent: str) -> None:
    before = state_of(project)
    path = script(tmp_path, "audit", *AUDIT)
    code, record, err, text = review(project, backend, agent, path, "--review-commands")
    assert code == 0, err
    assert record["status"] == "completed" and record["mode"] == "read-only"
    assert record["denied_calls"] == []
    first, _made, seen, read = outputs(record)
    assert "1 passed" in first and "GIT-OK" in first and "exit code 0" in first, first
    assert "## " in first  # git status's branch line: git works on the real, read-only .git
    assert "SEEN" in seen and "made" in seen and "CACHEDIR.TAG" in seen, seen
    assert "made" in read  # the file tools read the layer too
    assert record["diff"] == "" and record["changed_files"] == []
    assert record["discarded_writes"]["files"] >= 3
    assert record["discarded_writes"]["bytes"] >= len("made\n")
    assert GRANT_NOTE not in record["notes"]
    assert "discarded: " in text and "your checkout was not changed" in text
    assert not (project / ".pytest_cache").exists() and not (project / "build").exists()
    assert state_of(project) == before


def test_the_config_grants_it_too(project: Path, tmp_path: Path) -> None:
    from tests.backends import require_backend

    require_backend("bubblewrap")
    config = Path(os.environ["CORRAL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[review]\ncommands = true\n")
    path = script(tmp_path, "one", call("shell", command=f"{PYTEST}"), {"text": "ok"})
    code, record, err, _ = review(project, "bubblewrap", "planner", path)
    assert code == 0, err
    assert "1 passed" in outputs(record)[0]


def test_where_no_layer_can_be_had_the_shell_is_removed_and_the_record_says_why(
        project: Path, tmp_path: Path) -> None:
    """The host backend runs commands on the checkout itself: the grant cannot hold there,
    so the shell goes (never runs on the checkout) and the record names the reason."""
    before = state_of(project)
    path = script(tmp_path, "one", call("shell", command="touch pwned"), {"text": "ok"})
    code, record, _err, _ = review(project, "host", "planner", path, "--review-commands")
    assert code == 4 and [d["tool"] for d in record["denied_calls"]] == ["shell"]
    assert any("no throwaway layer here: the host backend" in n for n in record["notes"])
    assert not (project / "pwned").exists() and state_of(project) == before


ATTACKS = (
    # through a symlink to the checkout's real path, and the namespace's root views
    "ln -s $(pwd) /tmp/real && echo pwned > /tmp/real/pwned1; "
    "echo pwned > /proc/self/root$(pwd)/pwned2; echo pwned > /proc/1/root$(pwd)/pwned3; "
    "echo x >> calc.py; rm -f test_calc.py; "
    # git writes to .git: refs, objects, config, the index, HEAD, the stash
    "git update-ref refs/heads/evil HEAD; git -C . config core.hooksPath /tmp; "
    "echo y > new.txt && git add new.txt; git commit -qm evil; "
    "git hash-object -w calc.py; git stash; git checkout -q -b other; "
    "echo ref > .git/refs/heads/direct; echo cfg >> .git/config; "
    "echo done-attacks"
)


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(600)
def test_commands_cannot_write_the_checkout_through_the_layer(
        project: Path, tmp_path: Path, backend: str) -> None:
    before = state_of(project)
    path = script(tmp_path, "attack", call("shell", command=ATTACKS),
                  call("shell", command="cat calc.py; test -e test_calc.py || echo GONE; "
                       "git rev-parse --verify -q evil || echo NOREF; cat pwned1 pwned2"),
                  call("write_file", path="pwned.txt", content="x"),
                  call("edit", path="calc.py", old="a + b", new="a - b"),
                  {"text": "done"})
    code, record, err, _ = review(project, backend, "planner", path, "--review-commands")
    assert code == 4, err  # the file tools stay refused: a denial
    attack, after = outputs(record)[:2]
    assert "done-attacks" in attack
    # .git is the real one, read-only: no ref, object, config or index write lands anywhere
    assert attack.count("Read-only file system") >= 6, attack
    assert "cannot create .git/refs/heads/direct" in attack, attack
    # what it wrote elsewhere landed in its own layer only, seen by its next command
    assert "a + b\nx\n" in after and "GONE" in after and "NOREF" in after, after
    assert "pwned\npwned" in after, after
    assert {d["tool"] for d in record["denied_calls"]} == {"write_file", "edit"}
    assert record["diff"] == ""
    assert state_of(project) == before
    for name in ("pwned1", "pwned2", "pwned3", "new.txt", "pwned.txt"):
        assert not (project / name).exists()


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(600)
def test_filling_the_layer_stops_at_its_size(project: Path, tmp_path: Path,
                                             backend: str) -> None:
    """A command that writes past the layer's size gets ENOSPC inside the sandbox; the
    next command still runs, the host's disk never saw the bytes."""
    config = Path(os.environ["CORRAL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[review]\ncommands = true\nscratch_size = "32M"\n')
    before = state_of(project)
    path = script(tmp_path, "fill",
                  call("shell", command="dd if=/dev/zero of=big bs=1M count=100 2>&1; "
                       "ls -l big; echo after-dd"),
                  call("shell", command="rm -f big && echo small > s && cat s"),
                  {"text": "done"})
    code, record, err, _ = review(project, backend, "planner", path)
    assert code == 0, err
    fill, again = outputs(record)[:2]
    assert "No space left on device" in fill and "after-dd" in fill, fill
    assert "small" in again
    assert record["discarded_writes"]["bytes"] < 1 << 20
    assert state_of(project) == before
