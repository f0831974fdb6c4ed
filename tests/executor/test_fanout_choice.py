"""Issue 29: "the fanout's loop closed": `corral apply FANOUT --pick best` (the first
candidate whose check passed and that conflicts with nothing already applied; refuses with
the reason otherwise), the fanout's output ending with that exact command, conflicting
siblings marked `superseded` after an apply. Through the real CLI, with scripted children.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from exec_support import BACKENDS, agent_file, call, git, script

from executor.api import Corral
from tests.timescale import scaled


def entry(*args: str) -> tuple[int, str, str]:
    """The ``corral`` command in its own process (errors rendered by its entry point)."""
    done = subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True,
                          text=True, timeout=scaled(300), check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def project(repo: Path) -> Path:
    agent_file(repo, "w", "tools: [write_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    return repo


def _writer(tmp_path: Path, name: str, path: str, content: str) -> str:
    return script(tmp_path, name, call("write_file", path=path, content=content),
                  {"text": name})


def _fanout(repo: Path, tmp_path: Path, writes: list[tuple[str, str]], *args: str,
            as_json: bool = False, backend: str = "host") -> tuple[int, str, str]:
    scripts = [a for i, (path, content) in enumerate(writes, 1)
               for a in ("--script", _writer(tmp_path, f"c{i}", path, content))]
    return entry("fanout", "--root", str(repo), "--trust-project", "--no-personal",
                 "--backend", backend, "--agent", "w", *scripts, *args,
                 *(["--json"] if as_json else []), "write the notes")


def _states(repo: Path, fanout_id: str) -> list[str | None]:
    return [c.state for c in Corral(repo).show_fanout(fanout_id).children]


CHECK = "! grep -qs bad NOTES.md"
#: #1 fails its check; #2 and #3 pass and conflict (both create NOTES.md); #4 passes and
#: conflicts with nobody.
WRITES = [("NOTES.md", "bad\n"), ("NOTES.md", "good: two\n"), ("NOTES.md", "good: three\n"),
          ("other.txt", "other\n")]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_pick_best_applies_the_first_that_passed_and_supersedes_its_conflicts(
        project: Path, tmp_path: Path, backend: str) -> None:
    code, out, err = _fanout(project, tmp_path, WRITES, "--check-cmd", CHECK,
                             backend=backend)
    assert code == 1, err  # child 1's check failed, as planned
    fanout_id = Corral(project).runs().fanouts[0].fanout_id
    last = out.rstrip("\n").splitlines()[-1]
    assert last.endswith(f": corral apply {fanout_id} --pick best"), out
    assert "#2" in last  # the best one, named
    assert "corral apply RUN" not in out

    code, _, err = entry("apply", fanout_id, "--pick", "best", "--root", str(project))
    assert code == 0, err
    runs = [c.run_id for c in Corral(project).show_fanout(fanout_id).children]
    assert f"best of fanout {fanout_id}: #2 (run {runs[1]})" in err
    assert (project / "NOTES.md").read_text() == "good: two\n"
    assert not (project / "other.txt").exists()
    # #1 and #3 change NOTES.md as #2 does: they cannot be applied after it.
    assert _states(project, fanout_id) == ["superseded", "applied", "superseded", "pending"]
    assert f"superseded: run {runs[0]}" in err and f"superseded: run {runs[2]}" in err
    record = Corral(project).show(runs[2]).record
    assert record.superseded_by == runs[1]

    # What is shown of them says so: the fanout's table, the run, the listing.
    code, out, _ = entry("show", fanout_id, "--root", str(project))
    assert code == 0
    assert "superseded by #2 (applied)" in out
    assert out.rstrip("\n").splitlines()[-1].endswith(f"corral apply {fanout_id} --pick best")
    code, out, _ = entry("show", runs[2], "--root", str(project))
    assert code == 0 and f"superseded by run {runs[1]} (applied)" in out
    code, out, _ = entry("runs", "--root", str(project), "--json")
    states = {r["run_id"]: r["state"] for r in json.loads(out) if "run_id" in r}
    assert states[runs[0]] == states[runs[2]] == "superseded"
    code, out, _ = entry("runs", "--root", str(project))
    assert "superseded" in out

    # The next best is the one that conflicts with nothing applied: #4.
    code, _, err = entry("apply", fanout_id, "--pick", "best", "--root", str(project))
    assert code == 0, err
    assert f"#4 (run {runs[3]})" in err and (project / "other.txt").read_text() == "other\n"
    assert _states(project, fanout_id) == ["superseded", "applied", "superseded", "applied"]

    # Nothing is left: refused, each candidate's reason named, nothing written.
    before = git(project, "status", "--porcelain")
    code, _, err = entry("apply", fanout_id, "--pick", "best", "--root", str(project))
    assert code == 4, err
    assert "no_best_candidate" in err or "no candidate" in err
    assert "#1 it is superseded by #2 (applied)" in err
    assert "#2 it is applied" in err and "#4 it is applied" in err
    assert git(project, "status", "--porcelain") == before
    # A superseded run still applies when asked, with a note (here its own checks refuse:
    # NOTES.md already exists).
    code, _, err = entry("apply", runs[2], "--root", str(project))
    assert f"note: run {runs[2]} was superseded by run {runs[1]}" in err
    assert code == 4 and (project / "NOTES.md").read_text() == "good: two\n"
    # The fanout's loop is closed: its last line says what was applied.
    code, out, _ = entry("show", fanout_id, "--root", str(project))
    assert out.rstrip("\n").splitlines()[-1] == (
        f"applied: #2 (run {runs[1]}), #4 (run {runs[3]}); nothing else is left to apply")


def test_best_refuses_when_nothing_passed(project: Path, tmp_path: Path) -> None:
    code, out, err = _fanout(project, tmp_path, [("NOTES.md", "bad\n"), ("a.txt", "a\n")],
                             "--check-cmd", "test -f b.txt")
    assert code == 1, err
    fanout_id = Corral(project).runs().fanouts[0].fanout_id
    last = out.rstrip("\n").splitlines()[-1]
    assert "no candidate passed its check" in last
    assert last.endswith(f"to apply one anyway: corral apply {fanout_id} --pick N")
    code, _, err = entry("apply", fanout_id, "--pick", "best", "--root", str(project))
    assert code == 4
    assert "#1 its check failed (exit 1)" in err and "#2 its check failed (exit 1)" in err
    assert f"corral apply {fanout_id} --pick N" in err  # the hint: choose one yourself
    assert git(project, "status", "--porcelain") == ""
    code, _, err = entry("apply", fanout_id, "--pick", "first", "--root", str(project))
    assert code == 2 and "neither a child's number" in err


def test_without_a_check_the_output_names_the_pick_and_best_is_refused(
        project: Path, tmp_path: Path) -> None:
    code, out, err = _fanout(project, tmp_path, [("a.txt", "a\n"), ("b.txt", "b\n")])
    assert code == 0, err
    fanout_id = Corral(project).runs().fanouts[0].fanout_id
    assert out.rstrip("\n").splitlines()[-1].endswith(
        f"(diffs: corral diff {fanout_id}): corral apply {fanout_id} --pick N")
    code, _, err = entry("apply", fanout_id, "--pick", "best", "--root", str(project))
    assert code == 4 and "ran no check command" in err
    code, _, err = entry("apply", fanout_id, "--pick", "1", "--root", str(project))
    assert code == 0, err
    # b.txt conflicts with nothing: still pending, and now the only one to apply.
    assert _states(project, fanout_id) == ["applied", "pending"]
    code, out, _ = entry("show", fanout_id, "--root", str(project))
    assert out.rstrip("\n").splitlines()[-1] == f"apply it: corral apply {fanout_id} --pick 2"


def test_the_json_and_the_api_say_the_same(project: Path, tmp_path: Path) -> None:
    code, out, err = _fanout(project, tmp_path, WRITES, "--check-cmd", CHECK, as_json=True)
    assert code == 1, err
    data: dict[str, Any] = json.loads(out)
    assert data["next_command"] == f"corral apply {data['fanout_id']} --pick best"
    corral = Corral(project)
    result = corral.show_fanout(data["fanout_id"])
    assert [(c.index, c.recommended) for c in result.candidates()] == [
        (1, False), (2, True), (3, True), (4, True)]
    assert result.candidates()[0].why_not == "its check failed (exit 1)"
    assert corral.pick(data["fanout_id"], "best") == data["runs"][1]["run_id"]
    report = corral.apply(corral.pick(data["fanout_id"], "best"))
    assert [r.run_id for r in report.superseded] == [data["runs"][0]["run_id"],
                                                       data["runs"][2]["run_id"]]
    assert report.to_json()["superseded"] == [r.run_id for r in report.superseded]
    assert corral.show_fanout(data["fanout_id"]).best().index == 4
