"""``corral replay from-diff PATCH`` (issue 32): a fix made by hand becomes a candidate.

A real ``git diff`` of a fix is turned into a replay, run as a child on bubblewrap, and
its recorded diff makes the same bytes as the fix; in a fanout beside a wrong candidate
its check passes and it is the one recommended. A patch apply_patch would refuse is
refused before anything runs, naming the file and the reason; a patch aimed at ``.git``
gets through the replay (it is only text) and is refused by the tool in the sandbox,
the checkout untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file, cli_main, git, tree_digest

from executor.api import CorralError, replay_from_diff
from executor.cli import cli

BUG = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CHECK = "python3 -c 'from calc import add; assert add(2, 3) == 5'"


def corral(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / "calc.py").write_text(BUG)
    agent_file(repo, "patcher", "tools: [apply_patch, read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return repo


def _diff_of(repo: Path, tmp_path: Path, name: str, content: str) -> Path:
    """The patch real git writes for calc.py -> ``content``, in a file."""
    clone = tmp_path / f"clone-{name}"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    (clone / "calc.py").write_text(content)
    patch = tmp_path / f"{name}.diff"
    patch.write_text(git(clone, "diff"))
    return patch


@pytest.mark.bubblewrap
def test_a_fix_made_by_hand_runs_as_a_child_and_applies(project: Path, tmp_path: Path) -> None:
    patch = _diff_of(project, tmp_path, "fix", FIXED)
    replay = tmp_path / "fix.yaml"
    code, _, err = corral("replay", "from-diff", str(patch), "-o", str(replay))
    assert code == 0, err
    assert replay.read_text().startswith("# A replay that applies 1 file(s): calc.py")
    flags = ("--root", str(project), "--trust-project", "--no-personal")
    code, out, err = corral("run", *flags, "--agent", "patcher", "--backend", "bubblewrap",
                            "--script", str(replay), "--json", "Fix add")
    assert code == 0, err
    run = json.loads(out)
    assert run["status"] == "completed" and [c["path"] for c in run["changed_files"]] == [
        "calc.py"]
    assert corral("apply", run["run_id"], "--root", str(project))[0] == 0
    assert (project / "calc.py").read_text() == FIXED


@pytest.mark.bubblewrap
def test_in_a_fanout_the_fix_is_the_candidate_whose_check_passes(
        project: Path, tmp_path: Path) -> None:
    replays = []
    for name, content in (("wrong", "def add(a, b):\n    return a * b\n"), ("fix", FIXED)):
        replays.append(tmp_path / f"{name}.yaml")
        stdin = _diff_of(project, tmp_path, name, content).read_text()
        code, out, err = corral("replay", "from-diff", "-", "--json", stdin=stdin)
        assert code == 0, err
        replays[-1].write_text(json.loads(out)["replay"])
    code, out, err = corral("fanout", "--root", str(project), "--trust-project",
                            "--no-personal", "--backend", "bubblewrap", "--agent", "patcher",
                            "--check-cmd", CHECK, "-n", "2", "--script", str(replays[0]),
                            "--script", str(replays[1]), "--json", "Fix add")
    assert code in (0, 1), err
    rows = json.loads(out)["runs"]
    assert [row["check"]["exit_code"] == 0 for row in rows] == [False, True]


@pytest.mark.parametrize("text", [
    "  \n", "not a diff at all\n", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n",
    "GIT binary patch\nliteral 3\n", "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n",
])
def test_a_patch_the_tool_would_refuse_is_refused_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    patch = tmp_path / "bad.diff"
    patch.write_text(text)
    out = tmp_path / "out.yaml"
    code, _, err = cli_main(capsys, "replay", "from-diff", str(patch), "-o", str(out))
    assert code == 2 and str(patch) in err and "patch" in err
    assert not out.exists() and not list(tmp_path.glob(".out.yaml*"))  # nothing half-written


def test_unreadable_inputs_and_outputs_say_what_and_where(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_main(capsys, "replay", "from-diff", str(tmp_path / "missing.diff"))
    assert code == 2 and "missing.diff" in err
    with pytest.raises(CorralError, match="not UTF-8"):
        replay_from_diff(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\xff\n+y\n")
    patch = tmp_path / "ok.diff"
    patch.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    code, _, err = cli_main(capsys, "replay", "from-diff", str(patch), "-o",
                            str(tmp_path / "no" / "such" / "dir.yaml"))
    assert code == 2 and "cannot write" in err


def test_the_patch_survives_yaml_byte_for_byte() -> None:
    """Trailing spaces, tabs, a CRLF line, a blank context line, non-ASCII text."""
    patch = ("--- a/notes.txt\n+++ b/notes.txt\n@@ -1,4 +1,4 @@\n keep  \n-\tté\r\n+\ttë\r\n"
             " \n \\ trailing\n")
    turns = yaml.safe_load(replay_from_diff(patch.replace(" \\ trailing\n", " x\n")))
    assert turns[0]["tool_calls"][0] == {"name": "apply_patch", "arguments": {
        "patch": patch.replace(" \\ trailing\n", " x\n")}}
    assert turns[1] == {"text": "Applied the patch."}


@pytest.mark.bubblewrap
def test_a_patch_aimed_at_git_is_text_to_the_replay_and_refused_in_the_sandbox(
        project: Path, tmp_path: Path) -> None:
    patch = tmp_path / "hook.diff"
    patch.write_text("--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1,2 @@\n"
                     "+#!/bin/sh\n+touch /tmp/owned\n")
    replay = tmp_path / "hook.yaml"
    assert corral("replay", "from-diff", str(patch), "-o", str(replay))[0] == 0
    before = tree_digest(project)
    code, out, err = corral("run", "--root", str(project), "--trust-project", "--no-personal",
                            "--agent", "patcher", "--backend", "bubblewrap", "--script",
                            str(replay), "--json", "Install a hook")
    run = json.loads(out)
    assert run["changed_files"] == [], run
    code, shown, err = corral("show", run["run_id"], "--root", str(project), "--json")
    assert code == 0, err
    assert any(".git is never writable" in str(a.get("result"))
               for a in json.loads(shown)["audit"]), shown
    assert tree_digest(project) == before
