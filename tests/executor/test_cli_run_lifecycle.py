"""A run's life as ``corral runs / show / diff / discard / gc`` tell it (issue 11, item 5):
every result shown in full or with a marker saying how to get the rest, human units, a run
killed with SIGKILL shown as crashed and its diff handed to its record by ``gc``, children
listed with their own diffs, applied and discarded runs, corrupted records named.

Everything runs the real CLI (in a subprocess where a process must die).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file

from executor.cli import cli
from executor.cli.run_views import ITEM_LIMIT
from executor.ledger import ledger_dir


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def entry(*args: str) -> tuple[int, str, str]:
    """The ``corral`` command itself (errors rendered by its entry point)."""
    done = subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True,
                          text=True, timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


def script(tmp_path: Path, turns: list[dict[str, Any]], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(turns))
    return path


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def run(repo: Path, tmp_path: Path, agent: str, turns: list[dict[str, Any]],
        *extra: str) -> dict[str, Any]:
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", agent, "--backend", "host", "--json", *extra,
                            "--script", str(script(tmp_path, turns)), "go")
    assert code in (0, 4), err
    return json.loads(out)  # type: ignore[no-any-return]


def test_show_prints_each_result_whole_or_marks_the_cut_and_uses_human_units(
        repo: Path, tmp_path: Path) -> None:
    big = "".join(f"line {i:05d} caf\u00e9\n" for i in range(600))  # ~9 kB, not ASCII
    (repo / "big.txt").write_text(big)
    agent_file(repo, "r", "tools: [read_file, shell]")
    done = run(repo, tmp_path, "r", [call("read_file", path="big.txt", limit=1000),
                                     call("shell", command="echo ran"), {"text": "read"}])
    code, out, _ = corral("show", done["run_id"], "--root", str(repo), "--json")
    result = json.loads(out)["audit"][0]["result"]
    assert "line 00599" in result and len(result) > ITEM_LIMIT
    code, out, _ = corral("show", done["run_id"], "--root", str(repo))
    assert code == 0
    left = len(result.strip("\n")[ITEM_LIMIT:].encode())
    assert (f"      [truncated {left} bytes: `corral show {done['run_id']} --full` prints "
            f"everything, `corral show {done['run_id']} --json` has it as data]") in out
    last_shown = result[:ITEM_LIMIT].splitlines()[-1]
    assert f"      {last_shown}\n      [truncated" in out
    assert "line 00599" not in out
    code, full, _ = corral("show", done["run_id"], "--root", str(repo), "--full")
    assert "line 00599 caf\u00e9" in full and "truncated" not in full
    # Human units, never Python dicts.
    assert "{'" not in out and "peak_rss_bytes" not in out
    assert "resources: 1 command(s), peak RSS " in out and " MiB" in out
    assert "usage:     " in out and "time:      " in out and " s (model " in out


def test_a_run_killed_with_sigkill_is_crashed_and_gc_hands_its_diff_to_apply(
        repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file, shell]")
    started, release = tmp_path / "started", tmp_path / "release"
    os.mkfifo(started)
    os.mkfifo(release)
    turns = script(tmp_path, [
        call("write_file", path="notes.txt", content="kept\n"),
        call("shell", command=f"echo up > {started}; cat {release} > /dev/null"),
        {"text": "never reached"}])
    process = subprocess.Popen(
        [sys.executable, "-m", "executor", "run", "--root", str(repo), "--trust-project",
         "--no-personal", "--agent", "w", "--backend", "host", "--script", str(turns), "go"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with started.open() as fifo:  # the run is inside its shell call now
            assert fifo.read() == "up\n"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        with release.open("w"):  # lets the orphaned `cat` end
            pass
        process.wait(timeout=30)
    code, out, _ = corral("runs", "--root", str(repo))
    assert code == 0
    [line] = out.splitlines()
    assert " crashed " in line and " w " in line
    run_id = line.split()[0]
    code, out, _ = corral("runs", "--root", str(repo), "--json")
    assert json.loads(out)[0]["status"] == "crashed"

    code, out, _ = corral("gc")
    assert code == 0
    assert "diff saved to " in out and "results/corral-" in out
    assert f"run crashed    {run_id}  agent w, 1 file(s) in its record" in out
    code, out, _ = corral("runs", "--root", str(repo))
    assert " crashed   pending " in out and "  1 file(s)" in out
    code, patch, _ = corral("diff", run_id, "--root", str(repo))
    assert "+kept" in patch
    code, out, err = corral("show", run_id, "--root", str(repo))
    assert "gc` captured its diff from the abandoned sandbox" in err
    code, _, err = corral("apply", run_id, "--root", str(repo), "--check")
    assert code == 0, err
    code, out, _ = corral("gc")  # finalised once
    assert "run crashed" not in out


def test_a_delegating_run_lists_its_children_and_their_own_diffs(
        repo: Path, tmp_path: Path) -> None:
    zuno = repo / ".zuno/zuno.json"
    zuno.parent.mkdir(parents=True)
    zuno.write_text(json.dumps({"agents": {"lead": {"prompt": "lead", "mode": "primary",
                                                    "delegates": ["patcher"]}}}))
    agent_file(repo, "patcher", "tools: [write_file]")
    turns = script(tmp_path, [call("delegate", agent="patcher", prompt="add notes"),
                              call("write_file", path="notes.txt", content="n\n"),
                              {"text": "added"}, {"text": "the patcher added notes"}])
    code, _, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "lead", "--backend", "host", "--script", str(turns),
                            "go")
    assert code == 0, err
    records = {json.loads((d / "record.json").read_text())["agent"]: json.loads(
        (d / "record.json").read_text()) for d in ledger_dir(repo).iterdir()}
    child = records["patcher"]["run_id"]
    assert "child runs (each has its own record and diff" in err
    assert f"  {child}  completed patcher  1 file(s)  corral apply {child}" in err
    # The parent model was told the child's changes are not in its workspace.
    transcript = (ledger_dir(repo) / records["lead"]["run_id"] / "transcript.jsonl").read_text()
    assert "not in yours; only the user merges them" in transcript


def test_runs_shows_discarded_and_applied_runs(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    first = run(repo, tmp_path, "w", [call("write_file", path="a.txt", content="a\n"),
                                      {"text": "a"}])["run_id"]
    second = run(repo, tmp_path, "w", [call("write_file", path="b.txt", content="b\n"),
                                       {"text": "b"}])["run_id"]
    keep = ledger_dir(repo) / first / "apply-backup" / "manifest.json"  # another module's
    keep.parent.mkdir()
    keep.write_text("{}")
    code, _, err = corral("discard", first, "--root", str(repo))
    assert code == 0 and f"discarded run {first} (1 file(s))" in err
    assert keep.read_text() == "{}"  # a state change rewrites record.json, nothing else
    code, _, err = corral("discard", first, "--root", str(repo))
    assert code == 0 and "already discarded" in err
    code, _, err = corral("apply", second, "--root", str(repo))  # records the run applied
    assert code == 0, err
    assert (repo / "b.txt").read_text() == "b\n"
    code, _, err = corral("apply", first, "--check", "--root", str(repo))
    assert code == 0 and f"note: run {first} was discarded; applying it as you asked" in err
    code, out, _ = corral("runs", "--root", str(repo))
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert " discarded " in lines[first] and " applied " in lines[second]
    code, _, err = entry("discard", second, "--root", str(repo))
    assert code == 2 and "discarding it now would not undo that" in err
    code, out, _ = corral("runs", "--root", str(repo), "--json")
    assert {r["run_id"]: r["state"] for r in json.loads(out)} == {
        first: "discarded", second: "applied"}
    assert not (repo / "a.txt").exists()  # discarding never touches the checkout
    # Only record.json is rewritten: whatever else lies in the run's directory stays.
    assert (ledger_dir(repo) / first / "diff.patch").read_bytes().startswith(b"diff --git")


def test_a_corrupted_record_is_named_and_never_hides_the_others(repo: Path,
                                                                tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    good = run(repo, tmp_path, "w", [{"text": "fine"}])["run_id"]
    bad = run(repo, tmp_path, "w", [{"text": "soon broken"}])["run_id"]
    record = ledger_dir(repo) / bad / "record.json"
    record.write_text(record.read_text()[:40])
    code, out, err = corral("runs", "--root", str(repo))
    assert code == 0 and good in out
    assert f"corrupted: the run record {bad} is corrupted" in err
    assert f"  record: {record}" in err
    code, _, err = entry("show", bad, "--root", str(repo))
    assert code == 3
    assert f"error: the run record {bad} is corrupted" in err and "hint: " in err
    assert "Traceback" not in err


@pytest.mark.parametrize("mode", ["worktree", "workspace-write"])
def test_the_run_output_says_what_to_do_with_the_diff(repo: Path, tmp_path: Path,
                                                      mode: str) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    turns = script(tmp_path, [call("write_file", path="a.txt", content="a\n"), {"text": "a"}])
    code, _, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                          "--agent", "w", "--backend", "host", "--mode", mode, "--script",
                          str(turns), "go")
    assert code == 0
    if mode == "worktree":
        assert "merges it into your checkout" in err and not (repo / "a.txt").exists()
    else:
        assert "already in your checkout" in err and "corral apply" not in err
        assert (repo / "a.txt").exists()


def test_a_running_run_is_not_applied(repo: Path, tmp_path: Path) -> None:
    """A run still recorded as running has no final diff: apply says so (exit 2)."""
    agent_file(repo, "w", "tools: [write_file]")
    run_id = run(repo, tmp_path, "w", [call("write_file", path="a.txt", content="a\n"),
                                        {"text": "a"}])["run_id"]
    record_file = ledger_dir(repo) / run_id / "record.json"
    data = json.loads(record_file.read_text())
    record_file.write_text(json.dumps(data | {"status": "running"}))
    code, _, err = entry("apply", run_id, "--root", str(repo))
    assert code == 2, err
    assert f"run {run_id} is still running: its diff is not final yet" in err
    assert not (repo / "a.txt").exists()


@pytest.mark.parametrize("given", ["*", "**", "?", "2*", "[0-9]*", "../x", "..", "a/b", "."])
def test_a_run_id_is_an_id_never_a_pattern(repo: Path, tmp_path: Path, given: str) -> None:
    """Issue 16: run ids were glob patterns (``**`` was an internal error): ``show``, ``diff``,
    ``apply`` and ``discard`` take an id or an unambiguous start of one, nothing else."""
    agent_file(repo, "w", "tools: [write_file]")
    run_id = run(repo, tmp_path, "w", [call("write_file", path="a.txt", content="a\n"),
                                        {"text": "a"}])["run_id"]
    for command in ("show", "diff", "apply", "discard"):
        code, _, err = entry(command, given, "--root", str(repo))
        assert code == 2, (command, given, err)
        assert "invalid run id" in err and "Traceback" not in err
    code, out, _ = entry("diff", run_id[:15], "--root", str(repo))
    assert code == 0 and "+a" in out
