"""A run's life as ``corral runs / show / diff / discard / gc`` tell it (issue 11, item 5):
every result shown in full or with a marker saying how to get the rest, human units, a run
killed with SIGKILL shown as crashed and its diff handed to its record by ``gc``, children
listed with their own diffs, applied and discarded runs, corrupted records named.

Everything runs the real CLI (in a subprocess where a process must die).
"""

from __future__ import annotations

import json
import os
import re
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
from tests.procs import still_running
from tests.timescale import scaled


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def entry(*args: str) -> tuple[int, str, str]:
    """The ``corral`` command itself (errors rendered by its entry point)."""
    done = subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True,
                          text=True, timeout=scaled(60), check=False)
    return done.returncode, done.stdout, done.stderr


def script(tmp_path: Path, turns: list[dict[str, Any]], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(turns))
    return path


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def ended(process: subprocess.Popen[str], timeout: float = 90) -> tuple[str, str]:
    """What ``process`` printed once it exited; if it hangs, its threads' stacks (it runs
    with ``-X faulthandler``: SIGABRT dumps them) in the failure, and it is gone."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            _, err = process.communicate(timeout=scaled(30))
        finally:
            process.kill()
        pytest.fail(f"still running {timeout:.0f} s after it was stopped:\n{err}")


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
        process.wait(timeout=scaled(30))
    finally:
        with release.open("w"):  # lets the orphaned `cat` end
            pass
        process.wait(timeout=scaled(30))
    code, out, _ = corral("runs", "--root", str(repo))
    assert code == 0
    _, line = out.splitlines()  # the header, then the run
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


def test_last_and_last_n_name_the_newest_runs_you_started(repo: Path, tmp_path: Path) -> None:
    """Issue 19: "Run ids: unique prefixes, `last`, and `last~N`." ``last`` is the newest run
    a user started (a delegated child never is), ``last~1`` the one before; past the oldest
    it is ``unknown_run`` with how many there are; ``last*`` or ``last~-1`` stay refused."""
    zuno = repo / ".zuno/zuno.json"
    zuno.parent.mkdir(parents=True)
    zuno.write_text(json.dumps({"agents": {"lead": {"prompt": "lead", "mode": "primary",
                                                    "delegates": ["w"]}}}))
    agent_file(repo, "w", "tools: [write_file]")
    first = run(repo, tmp_path, "w", [call("write_file", path="a.txt", content="a\n"),
                                       {"text": "a"}])["run_id"]
    second = run(repo, tmp_path, "lead", [call("delegate", agent="w", prompt="b"),
                                           call("write_file", path="b.txt", content="b\n"),
                                           {"text": "b"}, {"text": "done"}])["run_id"]
    delegated = [d.name for d in ledger_dir(repo).iterdir() if d.name not in (first, second)]
    assert len(delegated) == 1  # the newest record of all, and never `last`
    for given, expected in (("last", second), ("last~0", second), ("last~1", first)):
        code, out, err = entry("show", given, "--root", str(repo), "--json")
        assert code == 0, err
        assert json.loads(out)["run_id"] == expected, given
    code, out, _ = entry("diff", "last~1", "--root", str(repo))
    assert code == 0 and "+a" in out
    code, _, err = entry("show", "last~2", "--root", str(repo))
    assert code == 2 and "no run 'last~2'" in err and "2 run(s) recorded" in err
    for bad in ("last*", "last~-1", "last~", "LAST"):
        code, _, err = entry("show", bad, "--root", str(repo))
        assert code == 2 and "Traceback" not in err, (bad, err)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["ctrl-c", "sigterm", "sighup"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_stopped_run_is_cancelled_named_and_keeps_its_diff(
        repo: Path, tmp_path: Path, stop: signal.Signals, as_json: bool) -> None:
    """Issue 19: "SIGTERM and SIGHUP end runs as Ctrl-C does (`cancelled`, diff kept), and
    the message names the run and where its diff is" (before: SIGTERM left it `crashed`,
    and Ctrl-C printed `error: aborted` without the run id)."""
    agent_file(repo, "w", "tools: [write_file, shell]")
    up, never = tmp_path / "up", tmp_path / "never"
    os.mkfifo(up)
    os.mkfifo(never)
    turns = script(tmp_path, [call("write_file", path="kept.txt", content="kept\n"),
                              call("shell", command=f"echo up > {up}; cat {never}"),
                              {"text": "never"}])
    with subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-m", "executor", "run", "--root", str(repo),
             "--trust-project", "--no-personal", "--backend", "host", "--agent", "w",
             "--script", str(turns), *(["--json"] if as_json else []), "go"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        with up.open() as handle:  # the run is inside its blocking command
            assert handle.read() == "up\n"
        process.send_signal(stop)
        out, err = ended(process)
    assert process.returncode == 130, err
    assert not still_running(f"cat {never}")  # the interrupted command died with its run
    [record_dir] = ledger_dir(repo).iterdir()
    run_id = record_dir.name
    record = json.loads((record_dir / "record.json").read_text())
    assert record["status"] == "cancelled"
    assert [c["path"] for c in record["changed_files"]] == ["kept.txt"]
    if as_json:
        error = json.loads(out)["error"]
        assert (error["code"], error["context"]["run"]) == ("interrupted", run_id)
    else:
        assert f"error: interrupted: run {run_id} was cancelled; its record and diff are " \
               "kept" in err
        assert f"hint: `corral show {run_id}` shows what it did, `corral diff {run_id}`" in err
    code, patch, _ = corral("diff", run_id, "--root", str(repo))
    assert code == 0 and "+kept" in patch


def test_a_childs_denials_reach_the_parent_named_and_in_its_exit_code(
        repo: Path, tmp_path: Path) -> None:
    """Issue 19: "A child's denials (delegated children, reviewers) appear in the parent's
    record with the child named, and count in the parent's exit code" (before: a run whose
    child was denied exited 0). Two levels deep: lead -> mid -> leaf."""
    zuno = repo / ".zuno/zuno.json"
    zuno.parent.mkdir(parents=True)
    config = Path(os.environ["CORRAL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("subagent_depth = 2\n")
    zuno.write_text(json.dumps({"agents": {
        "lead": {"prompt": "lead", "mode": "primary", "delegates": ["mid", "leaf"]},
        "mid": {"prompt": "mid", "mode": "subagent", "delegates": ["leaf"]}}}))
    agent_file(repo, "leaf", "tools: [read_file]")
    turns = script(tmp_path, [call("delegate", agent="mid", prompt="go on"),
                              call("delegate", agent="leaf", prompt="write"),
                              call("write_file", path="x.txt", content="x\n"),
                              {"text": "could not"}, {"text": "mid done"}, {"text": "done"}])
    code, _, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                          "--agent", "lead", "--backend", "host", "--script", str(turns), "go")
    assert code == 4, err
    records = {r["agent"]: r for r in (json.loads((d / "record.json").read_text())
                                       for d in ledger_dir(repo).iterdir())}
    leaf, mid, lead = records["leaf"], records["mid"], records["lead"]
    assert [d["tool"] for d in leaf["denied_calls"]] == ["write_file"]
    assert "agent" not in leaf["denied_calls"][0]  # its own denial
    for record in (mid, lead):  # named by the run that made it, at every level
        [denied] = record["denied_calls"]
        assert (denied["tool"], denied["agent"], denied["run"]) == (
            "write_file", "leaf", leaf["run_id"])
    assert f"denied (in leaf, run {leaf['run_id']}): write_file: " in err
    assert not (repo / "x.txt").exists()


def test_runs_has_a_header_ages_prompts_and_filters(repo: Path, tmp_path: Path) -> None:
    """Issue 19: "`corral runs` with a header, age, a prompt excerpt and filters". A prompt
    is one escaped line, cut: a newline or an escape in it cannot fake a row."""
    agent_file(repo, "w", "tools: [write_file]")
    agent_file(repo, "r", "tools: [read_file]")
    wrote = run(repo, tmp_path, "w", [call("write_file", path="a.txt", content="a\n"),
                                       {"text": "a"}])["run_id"]
    code, _, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                          "--agent", "r", "--backend", "host", "--script",
                          str(script(tmp_path, [{"text": "read"}], "r.yaml")),
                          "look\n20990101-000000-abcdef  completed pending \x1b[2J" + "x" * 80)
    assert code == 0, err
    code, out, _ = corral("runs", "--root", str(repo))
    header, newest, oldest = out.splitlines()
    assert header.split() == ["RUN", "STATUS", "DIFF", "AGE", "AGENT", "MODE", "FILES",
                              "PROMPT"]
    assert oldest.startswith(f"{wrote}  completed pending") and oldest.endswith('"go"')
    assert re.search(r"  \d+s  w ", oldest)  # its age, in seconds here
    # whitespace folded to one space, the escape shown as text, cut at 48 characters
    assert newest.endswith('"look 20990101-000000-abcdef completed pending \\x..."')
    assert newest.endswith('..."') and "\x1b" not in out
    for args, rows in ((["--status", "completed"], 2), (["--agent", "w"], 1),
                       (["--pending"], 1), (["-n", "1"], 1), (["--agent", "nobody"], 0)):
        code, out, _ = corral("runs", "--root", str(repo), *args)
        assert code == 0
        lines = out.splitlines()
        assert len(lines) == (rows + 1 if rows else 1), (args, out)
        if not rows:
            assert lines == ["no runs match"]
    code, out, _ = corral("runs", "--root", str(repo), "--agent", "w", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [wrote]
