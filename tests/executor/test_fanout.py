"""``corral fanout`` end to end: rows, checks, conflicts, applying, the option rule.

The real CLI runs on a real repository; children run on every backend where
the backend matters. Scripted replays need no model key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exec_support import BACKENDS, agent_file, call, git, script

from executor.cli import cli
from executor.ledger import find_run, ledger_dir
from tests.timescale import scaled

BIG = "".join(f"line {n}\n" for n in range(1, 21))


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def entry(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """The ``corral`` command itself, in its own process (errors rendered by main)."""
    done = subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True,
                          text=True, timeout=scaled(300), check=False, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / "big.py").write_text(BIG)
    agent_file(repo, "w", "tools: [write_file, edit, shell, read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "big")
    return repo


def fanout(repo: Path, backend: str, *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = corral("fanout", "--root", str(repo), "--trust-project", "--no-personal",
                            "--backend", backend, "--json", *args)
    return code, json.loads(out), err


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_children_are_compared_row_by_row_with_their_checks_and_conflicts(
        project: Path, tmp_path: Path, backend: str) -> None:
    a = script(tmp_path, "a", call("write_file", path="notes.txt", content="a\n"),
               {"text": "a", "usage": {"input_tokens": 10, "output_tokens": 2}})
    b = script(tmp_path, "b", call("edit", path="big.py", old_string="line 2\n",
                                   new_string="LINE 2\nline 2b\n"), {"text": "b"})
    c = script(tmp_path, "c", call("write_file", path="notes.txt", content="c\n"),
               {"text": "c"})
    code, result, err = fanout(project, backend, "--agent", "w", "--script", a, "--script", b,
                               "--script", c, "--check-cmd", "test -f notes.txt && echo ok",
                               "Write notes")
    assert code == 1, err  # a check failed: something to look at, every diff recorded
    runs = result["runs"]
    assert [r["index"] for r in runs] == [1, 2, 3]
    assert [r["status"] for r in runs] == ["completed"] * 3
    assert [(r["lines_added"], r["lines_removed"]) for r in runs] == [(1, 0), (2, 1), (1, 0)]
    assert [r["check"]["exit_code"] for r in runs] == [0, 1, 0]
    assert runs[0]["check"]["output_tail"] == "ok\n" and runs[0]["check"]["timed_out"] is False
    assert runs[0]["usage"] == {"input_tokens": 10, "output_tokens": 2, "cached_tokens": 0,
                                "requests": 2}
    assert runs[0]["steps"] == 2 and "+a" in runs[0]["diff"]
    assert result["conflicts"] == [[runs[0]["run_id"], runs[2]["run_id"], ["notes.txt"]]]
    assert result["same_files"] == []
    assert len(result["bases"]) == 1  # every child started from the same snapshot
    assert set(next(iter(result["bases"].values()))) == {r["run_id"] for r in runs}
    for run in runs:  # each child is a run of its own, with the fanout's id
        record = find_run(ledger_dir(project), run["run_id"])
        assert record.fanout == result["fanout_id"] and record.check == run["check"]
    code, shown, err = corral("show", runs[0]["run_id"], "--root", str(project))
    assert f"fanout: {result['fanout_id']}" in err
    assert "check:     `test -f notes.txt && echo ok` exit 0 in " in shown
    assert "\n      ok\n" in shown
    assert not (project / "notes.txt").exists()  # nothing is applied by a fanout
    code, out, _ = corral("fanout", "--root", str(project), "--trust-project", "--no-personal",
                          "--backend", backend, "--agent", "w", "--script", a, "-n", "2", "go")
    assert code == 0
    assert "#1 and #2" not in out  # the same change twice is not a conflict
    assert out.startswith("fanout f-") and "  1  " in out and "passed" not in out


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_one_value_for_every_child_or_one_per_child_and_nothing_else(
        project: Path, tmp_path: Path, backend: str) -> None:
    a = script(tmp_path, "a", {"text": "a"})
    b = script(tmp_path, "b", {"text": "b"})
    base = ("fanout", "--root", str(project), "--trust-project", "--no-personal",
            "--backend", "host")
    cases = {
        ("--agent", "w", "--script", a, "--script", b, "-n", "3"):
            "--script was given 2 times for 3 children",
        ("--agent", "w", "--agent", "w", "--script", a, "--script", b, "--script", a):
            "the options disagree on the number of children: --agent 2 times, --script 3",
        ("--agent", "w", "--script", a): "how many children? -n is missing",
        ("--agent", "w", "--script", a, "--model", "x/y", "-n", "2"):
            "--script and --model are exclusive",
        ("--agent", "w", "--script", a, "-n", "33"): "-n must be between 1 and 32, not 33",
        ("--agent", "nobody", "--script", a, "-n", "2"): "no agent named 'nobody'",
        ("--agent", "w", "--script", str(tmp_path / "none.yaml"), "-n", "2"):
            "cannot read script",
        ("--agent", "w", "--script", a, "-n", "2", "--approve", "sometimes"):
            "--approve must be never or always-for=TOOLS",
        ("--agent", "w", "--script", a, "-n", "2", "--check-cmd", " "):
            "the check command is empty",
    }
    for args, message in cases.items():
        code, _, err = entry(*base, *args, "go")
        assert code == 2, (args, err)
        assert message in err, (args, err)
    assert not (ledger_dir(project) / "fanouts").exists()  # refused before anything
    code, result, _ = fanout(project, "host", "--agent", "w", "--script", a, "--script", b,
                             "go")
    assert code == 0 and [r["agent"] for r in result["runs"]] == ["w", "w"]
    texts = [find_run(ledger_dir(project), r["run_id"]).final_text for r in result["runs"]]
    assert texts == ["a", "b"]  # -n taken from the per-child values, in order


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_diffs_that_do_not_conflict_apply_one_after_another(
        project: Path, tmp_path: Path, backend: str) -> None:
    def edit(name: str, line: int, new: str) -> str:
        return script(tmp_path, name, call("edit", path="big.py", old_string=f"line {line}\n",
                                           new_string=f"{new}\n"), {"text": name})

    new = script(tmp_path, "new", call("write_file", path="new.txt", content="n\n"),
                 {"text": "new"})
    scripts = [new, edit("top", 2, "LINE 2"), edit("end", 19, "LINE 19"),
               edit("mid", 5, "LINE 5"), edit("near", 3, "THREE")]
    code, result, _ = fanout(project, "host", "--agent", "w",
                             *[arg for path in scripts for arg in ("--script", path)], "go")
    assert code == 0
    new_id, top, end, mid, near = (r["run_id"] for r in result["runs"])
    assert result["conflicts"] == [[top, near, ["big.py"]]]  # lines 2 and 3 touch
    assert [pair[:2] for pair in result["same_files"]] == [
        [top, end], [top, mid], [end, mid], [end, near], [mid, near]]
    root = ("--root", str(project))
    assert corral("apply", new_id, *root)[0] == 0  # shares no file with anything
    assert corral("apply", top, *root)[0] == 0
    assert corral("apply", end, *root)[0] == 0  # far from line 2: applies as it is
    code, _, err = entry("apply", mid, *root)  # its context (lines 2-8) changed since
    assert code == 4 and "big.py" in err
    code, _, err = corral("apply", mid, "--3way", *root)  # merged: they do not conflict
    assert code == 0, err
    text = (project / "big.py").read_text()
    assert "LINE 2\n" in text and "LINE 5\n" in text and "LINE 19\n" in text
    assert "<<<<<<<" not in text and (project / "new.txt").read_text() == "n\n"
    code, _, err = entry("apply", near, "--3way", *root)  # the conflicting one: marked
    assert code == 1 and "big.py" in err
    assert "<<<<<<<" in (project / "big.py").read_text()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_check_command_cannot_change_the_diff(project: Path, tmp_path: Path,
                                                  backend: str) -> None:
    """Attack: the child's code runs inside the check (a planted script, a test suite it
    edited) and rewrites the tree while the check runs. The recorded diff, the one
    `corral apply` merges, is the child's as it ended: nothing the check did."""
    plant = ("echo tampered >> ok.txt; echo planted > planted.txt; rm -f big.py; "
             "echo exit-0")
    child = script(tmp_path, "child", call("write_file", path="ok.txt", content="child\n"),
                   call("write_file", path="check.sh", content=plant), {"text": "done"})
    code, result, _ = fanout(project, backend, "--agent", "w", "--script", child, "-n", "1",
                             "--check-cmd", "sh check.sh", "go")
    [run] = result["runs"]
    assert run["check"]["exit_code"] == 0 and "exit-0" in run["check"]["output_tail"]
    assert sorted(c["path"] for c in run["changed_files"]) == ["check.sh", "ok.txt"]
    assert "+tampered" not in run["diff"] and "b/planted.txt" not in run["diff"]
    assert "a/big.py" not in run["diff"]
    code, _, err = corral("apply", run["run_id"], "--root", str(project), "--yes")
    assert code == 0, err
    assert (project / "ok.txt").read_text() == "child\n"
    assert not (project / "planted.txt").exists() and (project / "big.py").read_text() == BIG


@pytest.mark.parametrize("backend", [p for p in BACKENDS if p.id != "host"], indirect=True)
def test_the_check_command_runs_inside_the_childs_sandbox(
        project: Path, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: the child plants what the user's check command runs; it tries to write
    outside its workspace and to read the user's secrets. The check runs with the child's
    isolation: neither works."""
    canary = tmp_path / "canary"
    monkeypatch.setenv("CORRAL_TEST_SECRET", "s3cret-value")
    plant = (f"echo pwned > {canary}; echo pwned > $HOME/../pwned; "
             "echo secret=$CORRAL_TEST_SECRET")
    child = script(tmp_path, "child", call("write_file", path="check.sh", content=plant),
                   {"text": "planted"})
    _, result, _ = fanout(project, backend, "--agent", "w", "--script", child, "-n", "1",
                          "--check-cmd", "sh check.sh", "go")
    [run] = result["runs"]
    assert run["check"] is not None and run["check"]["skipped"] is None
    assert not canary.exists()
    assert "secret=\n" in run["check"]["output_tail"]
    assert "s3cret-value" not in json.dumps(result)


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_one_childs_failure_or_timeout_never_loses_anothers_diff(
        project: Path, tmp_path: Path, backend: str) -> None:
    import os

    never = tmp_path / "never"
    os.mkfifo(never)
    fails = script(tmp_path, "fails", call("write_file", path="a.txt", content="a\n"))
    hangs = script(tmp_path, "hangs", call("write_file", path="b.txt", content="b\n"),
                   call("shell", command=f"cat {never}"), {"text": "never"})
    works = script(tmp_path, "works", call("write_file", path="c.txt", content="c\n"),
                   {"text": "fine"})
    code, result, _ = fanout(project, "host", "--agent", "w", "--script", fails, "--script",
                             hangs, "--script", works, "--jobs", "3", "--timeout", "4",
                             "--check-cmd", "true", "go")
    assert code == 3  # a child failed: the others' diffs are recorded all the same
    failed, timed_out, completed = result["runs"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "script_exhausted"
    assert timed_out["status"] == "timeout"
    assert completed["status"] == "completed" and completed["check"]["exit_code"] == 0
    assert [[c["path"] for c in r["changed_files"]] for r in result["runs"]] == [
        ["a.txt"], ["b.txt"], ["c.txt"]]
    assert timed_out["check"]["skipped"] == "no time left: the fanout's deadline passed"


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_child_the_deadline_kept_from_starting_is_recorded_as_such(
        project: Path, tmp_path: Path, backend: str) -> None:
    import os

    never = tmp_path / "never"
    os.mkfifo(never)
    hangs = script(tmp_path, "hangs", call("shell", command=f"cat {never}"), {"text": "no"})
    waits = script(tmp_path, "waits", {"text": "never asked"})
    code, result, _ = fanout(project, "host", "--agent", "w", "--script", hangs, "--script",
                             waits, "--jobs", "1", "--timeout", "3", "go")
    assert code == 3
    first, second = result["runs"]
    assert first["status"] == "timeout"
    assert second["status"] == "timeout" and second["error"]["code"] == "not_started_expired"
    assert "never started: the fanout's deadline passed" in second["error"]["message"]
    assert second["steps"] == 0 and second["diff"] == ""


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_runs_groups_a_fanout_with_its_children(project: Path, tmp_path: Path,
                                                backend: str) -> None:
    alone = script(tmp_path, "alone", {"text": "alone"})
    assert corral("run", "--root", str(project), "--trust-project", "--no-personal",
                  "--agent", "w", "--backend", "host", "--script", alone, "solo")[0] == 0
    a = script(tmp_path, "a", call("write_file", path="a.txt", content="a\n"), {"text": "a"})
    code, result, _ = fanout(project, "host", "--agent", "w", "--script", a, "-n", "2",
                             "--check-cmd", "true", "Add a")
    assert code == 0
    code, out, _ = corral("runs", "--root", str(project))
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split() == ["RUN", "STATUS", "DIFF", "AGE", "AGENT", "MODE", "FILES",
                              "PROMPT"]
    assert lines[0].startswith(f"fanout {result['fanout_id']}  completed 2 child(ren)  "
                               "check `true`  ")
    assert lines[0].endswith('"Add a"')
    assert lines[1].startswith(f"  #1  {result['runs'][0]['run_id']}  completed pending")
    assert lines[2].startswith(f"  #2  {result['runs'][1]['run_id']}  completed pending")
    assert " w " in lines[3] and "fanout" not in lines[3]  # the plain run, on its own
    _, out, _ = corral("runs", "--root", str(project), "--json")
    listed = json.loads(out)
    assert listed[0] == {"fanout_id": result["fanout_id"], "status": "completed",
                         "prompt": "Add a", "created_at": listed[0]["created_at"],
                         "check_command": "true",
                         "children": [r["run_id"] for r in result["runs"]]}
    assert [r.get("fanout") for r in listed[1:]] == [result["fanout_id"]] * 2 + [None]


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_every_child_starts_from_the_one_snapshot_taken_before_the_first(
        project: Path, tmp_path: Path, backend: str) -> None:
    """The fanout snapshots the checkout once, before any child starts: the user's checkout
    changes while the first child works (the host backend lets its command write there, as
    the user's editor would), and the second child, started later (one job at a time),
    still starts from the state the fanout snapshotted, so both diffs share one base."""
    edits = script(tmp_path, "edits", call("shell", command=f"echo edited >> "
                                                            f"{project / 'README.md'}"),
                   {"text": "the user edited meanwhile"})
    later = script(tmp_path, "later", call("shell", command="cat README.md"),
                   {"text": "started later"})
    code, result, _ = fanout(project, "host", "--agent", "w", "--script", edits, "--script",
                             later, "--jobs", "1", "go")
    assert code == 0
    first, second = (r["run_id"] for r in result["runs"])
    assert [sorted(runs) for runs in result["bases"].values()] == [sorted([first, second])]
    assert not any("different states" in note for note in result["notes"])
    assert (project / "README.md").read_text().endswith("edited\n")  # the user's edit
    seen = find_run(ledger_dir(project), second).audit[0]["result"]
    assert "edited" not in seen  # the second child read the snapshot, not the edit


@pytest.mark.parametrize("backend", ["bubblewrap"], indirect=True)
def test_a_fanout_child_can_delegate(project: Path, tmp_path: Path, backend: str) -> None:
    """A child that delegates works on its own workspace: its own child must snapshot that
    workspace, not the fanout's snapshot of your checkout (which failed: snapshot_mismatch)."""
    agent_file(project, "lead", "tools: [delegate, read_file, write_file]")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "lead")
    turns = script(tmp_path, "lead", call("delegate", agent="w", prompt="write b"),
                   call("write_file", path="b.txt", content="b\n"), {"text": "child done"},
                   {"text": "lead done"})
    _, result, err = fanout(project, backend, "--agent", "lead", "--script", turns, "-n",
                               "1", "go")
    [row] = result["runs"]
    assert row["status"] == "completed", err
    [child_id] = find_run(ledger_dir(project), row["run_id"]).children
    child = find_run(ledger_dir(project), child_id)
    assert child.status.value == "completed", child.error
    assert "+b" in child.diff
