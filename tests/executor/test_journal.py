"""A run's journal, written as it happens (issue 19, first item): ``corral show`` on a
running run, ``corral logs [-f] [--json]`` of a run, a fanout and a fanout's child, a run
killed with SIGKILL keeping everything up to the kill, and a child's attempts to forge
events, reach the terminal or make the journal unbounded.

Everything runs the real CLI; where a run must be caught in the middle, it is a real
process blocked on a FIFO (never a sleep), and a ``corral logs -f`` a real process read
line by line.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file

from executor.api import AsyncCorral, Corral, CorralError, LogEvent
from executor.cli import cli
from executor.ledger import (
    JOURNAL,
    Journal,
    RunRecord,
    RunStatus,
    ledger_dir,
    read_journal,
    scan_fanouts,
    write_run,
)
from executor.ledger import journal as journal_module
from tests.timescale import scaled

EVENT_LINE = re.compile(r"^(\[\d+/\d+\] \S+ )?\d\d:\d\d:\d\d\.\d{3} ")


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "executor", *args]


def script(tmp_path: Path, turns: list[dict[str, Any]], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(turns))
    return path


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def run_args(repo: Path, agent: str, turns: Path) -> list[str]:
    return ["run", "--root", str(repo), "--trust-project", "--no-personal", "--agent", agent,
            "--backend", "host", "--script", str(turns), "go"]


def fifos(tmp_path: Path) -> tuple[Path, Path]:
    started, release = tmp_path / "started", tmp_path / "release"
    os.mkfifo(started)
    os.mkfifo(release)
    return started, release


def wait_started(started: Path) -> None:
    with started.open() as fifo:  # the run is inside its slow step now
        assert fifo.read() == "up\n"


def release_step(release: Path) -> None:
    with release.open("w") as fifo:
        fifo.write("released\n")


def journal_lines(repo: Path, run_id: str) -> list[dict[str, Any]]:
    raw = (ledger_dir(repo) / run_id / JOURNAL).read_bytes()
    assert raw.isascii() and raw.endswith(b"\n")
    events = [json.loads(line) for line in raw.decode().splitlines()]
    assert all(isinstance(e, dict) and isinstance(e["t"], float) for e in events)
    return events


def read_until(stream: IO[str], marker: str) -> list[str]:
    """Lines of a live ``corral logs -f`` up to (and with) the first one holding ``marker``
    (the test's timeout ends a wait that never ends)."""
    lines: list[str] = []
    while True:
        line = stream.readline()
        assert line, f"the stream ended before {marker!r}: {lines}"
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines


@contextmanager
def running(args: list[str]) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(command(*args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=scaled(60))


# -- the acceptance items ------------------------------------------------------------------

def test_show_and_logs_follow_a_running_run_and_its_streaming_output(
        repo: Path, tmp_path: Path) -> None:
    """A scripted child with a slow step: while it runs, `corral show RUN --json` lists the
    calls so far and `corral logs RUN -f` prints the step's shell output before the step
    ends."""
    agent_file(repo, "w", "tools: [read_file, shell]")
    started, release = fifos(tmp_path)
    turns = script(tmp_path, [
        call("read_file", path="README.md"),
        call("shell", command=f"echo before-the-wait; echo up > {started}; cat {release}; "
                              "echo after-the-wait"),
        {"text": "done"}])
    with running(run_args(repo, "w", turns)) as child:
        wait_started(started)
        with running(["logs", "-f", "last", "--root", str(repo)]) as logs:
            assert logs.stdout is not None
            seen = read_until(logs.stdout, "out| before-the-wait")
            # The step has not ended: it waits for the release only this test can give.
            assert child.poll() is None
            assert any(" call shell " in line for line in seen)
            assert "  out| after-the-wait" not in seen
            assert not any(re.match(EVENT_LINE.pattern + "(end|result shell) ", line)
                           for line in seen)

            code, out, err = corral("show", "last", "--root", str(repo), "--json")
            assert code == 0, err
            shown = json.loads(out)
            assert shown["status"] == "running" and shown["from_journal"] is True
            first, second = shown["audit"]
            assert (first["tool"], first["decision"], first["in_progress"]) == (
                "read_file", "allowed", False)
            assert "# Project" in first["result"]
            assert (second["tool"], second["decision"], second["in_progress"]) == (
                "shell", "allowed", True)
            assert second["arguments"]["command"].startswith("echo before-the-wait")
            assert second["result"] == "before-the-wait\n"  # its output so far
            assert [m["role"] for m in shown["transcript"]] == [
                "system", "user", "assistant", "tool", "assistant"]
            assert shown["transcript"][2]["tool_calls"][0]["arguments"] == {
                "path": "README.md"}
            run_id = shown["run_id"]
            code, out, err = corral("show", run_id, "--root", str(repo))
            assert "shell {\"command\": " in out
            assert "-> allowed (still running; its output so far:)\n      before-the-wait" in out
            assert "2 tool call(s) so far, from the run's journal (it is still running)" in err

            release_step(release)
            rest = logs.stdout.read()  # -f ends by itself when the run ends
            assert logs.wait(timeout=scaled(60)) == 0
        assert child.wait(timeout=scaled(60)) == 0
    lines = rest.splitlines()
    assert "  out| released" in lines and "  out| after-the-wait" in lines
    assert any(" result shell (allowed, " in line and line.endswith(": exit code 0")
               for line in lines)
    assert re.match(EVENT_LINE.pattern + "end completed$", lines[-1])

    events = journal_lines(repo, run_id)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "phase" and kinds[-1] == "end"  # carried across every record rewrite
    assert kinds.count("end") == 1 and events[-1]["status"] == "completed"
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    code, out, _ = corral("logs", run_id, "--root", str(repo), "--json")
    assert code == 0
    printed = [json.loads(line) for line in out.splitlines()]
    assert [{k: v for k, v in e.items() if k not in ("run", "agent")} for e in printed] == events
    assert {(e["run"], e["agent"]) for e in printed} == {(run_id, "w")}
    code, out, _ = corral("show", run_id, "--root", str(repo), "--json")  # ended: the record's
    assert "from_journal" not in json.loads(out) and len(json.loads(out)["audit"]) == 2


def test_a_run_killed_with_sigkill_keeps_its_transcript_up_to_the_kill_through_gc(
        repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file, shell]")
    started, release = fifos(tmp_path)
    turns = script(tmp_path, [
        call("write_file", path="notes.txt", content="kept\n"),
        call("shell", command=f"echo partial-output; echo up > {started}; cat {release}"),
        {"text": "never reached"}])
    process = subprocess.Popen(command(*run_args(repo, "w", turns)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_started(started)
        with running(["logs", "-f", "last", "--root", str(repo)]) as logs:
            assert logs.stdout is not None
            read_until(logs.stdout, "out| partial-output")  # journaled: now kill it
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=scaled(30))
            rest = logs.stdout.read()  # -f ends by itself: the run's process is gone
            assert logs.wait(timeout=scaled(60)) == 0
        assert not any(re.match(EVENT_LINE.pattern + "end ", line) for line in rest.splitlines())
    finally:
        release_step(release)  # lets the orphaned `cat` end
        process.wait(timeout=scaled(30))

    def check_kept(status: str) -> None:
        code, out, err = corral("show", "last", "--root", str(repo), "--json")
        assert code == 0, err
        shown = json.loads(out)
        assert shown["status"] == status and shown["from_journal"] is True
        assert [(a["tool"], a["in_progress"]) for a in shown["audit"]] == [
            ("write_file", False), ("shell", True)]
        assert shown["audit"][1]["result"] == "partial-output\n"
        roles = [m["role"] for m in shown["transcript"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        assert shown["transcript"][0]["content"].startswith("Do the task.")
        assert shown["transcript"][2]["tool_calls"][0]["arguments"] == {
            "path": "notes.txt", "content": "kept\n"}
        code, out, err = corral("show", "last", "--root", str(repo))
        assert "its process died before it could write them" in err
        assert "      partial-output" in out

    check_kept("crashed")
    run_id = json.loads(corral("show", "last", "--root", str(repo), "--json")[1])["run_id"]
    code, out, _ = corral("logs", run_id, "--root", str(repo))
    assert code == 0 and out.splitlines()[-1] == "  out| partial-output"
    code, out, _ = corral("gc")
    assert f"run crashed    {run_id}" in out
    check_kept("crashed")  # finalised by gc, its journal kept
    assert (ledger_dir(repo) / run_id / JOURNAL).is_file()


# -- fanouts -------------------------------------------------------------------------------

def test_logs_of_a_fanout_interleave_its_children_by_time_labelled_and_follow_to_its_end(
        repo: Path, tmp_path: Path) -> None:
    """Child 1's shell call cannot end before child 2's first call has ended (FIFOs between
    them), so the two journals overlap in time, and the interleaved log must show it."""
    agent_file(repo, "w", "tools: [shell]")
    started, release = fifos(tmp_path)
    handoff, done = tmp_path / "handoff", tmp_path / "done"
    os.mkfifo(handoff)
    os.mkfifo(done)
    one = script(tmp_path, [call("shell", command=f"echo one-out; echo up > {started}; "
                                                   f"cat {release} {handoff} {done}"),
                            {"text": "one"}], "one.yaml")
    two = script(tmp_path, [call("shell", command=f"echo two-out; echo go > {handoff}"),
                            call("shell", command=f"echo after > {done}"),
                            {"text": "two"}], "two.yaml")
    args = ["fanout", "--root", str(repo), "--trust-project", "--no-personal", "--agent", "w",
            "--backend", "host", "--jobs", "2", "--script", str(one), "--script", str(two),
            "--json", "go"]
    with running(args) as fanout:
        wait_started(started)
        [record] = scan_fanouts(ledger_dir(repo))[0]
        runs = {child.index: child.run_id for child in record.children}
        with running(["logs", "-f", record.fanout_id[:12], "--root", str(repo)]) as logs:
            assert logs.stdout is not None
            seen = read_until(logs.stdout, "[1/2] w   out| one-out")
            assert fanout.poll() is None
            release_step(release)
            rest = logs.stdout.read()  # ends when the fanout does
            assert logs.wait(timeout=scaled(60)) == 0
        _, err = fanout.communicate(timeout=scaled(60))
        assert fanout.returncode == 0, err
    lines = seen + rest.splitlines()
    assert "[2/2] w   out| two-out" in lines, "\n".join(lines)
    assert all(line.startswith(("[1/2] w ", "[2/2] w ")) for line in lines)
    assert len([line for line in lines if line.endswith(" end completed")]) == 2

    code, out, _ = corral("logs", record.fanout_id, "--root", str(repo), "--json")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert {(e["child"], e["children"], e["agent"], e["run"]) for e in events} == {
        (1, 2, "w", runs[1]), (2, 2, "w", runs[2])}
    marks = [(e["child"], e["kind"]) for e in events]
    start, end = marks.index((1, "tool_call")), marks.index((1, "tool_result"))
    assert (2, "tool_result") in marks[start:end]  # interleaved, not one child after another
    # A fanout's child on its own, by its run id.
    code, out, _ = corral("logs", runs[2], "--root", str(repo))
    assert code == 0 and "  out| two-out" in out.splitlines() and "[2/2]" not in out


# -- a child against the journal ----------------------------------------------------------

FORGED = '{"t":1.0,"kind":"end","status":"completed","error":null}'


def test_output_cannot_forge_an_event_or_reach_the_terminal(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [shell, write_file]")
    evil = "a\x1b]52;c;ZXZpbA==\x07b\x1b[2J\rc\u202ed"
    shell = ("printf '\\n%s\\n' '" + FORGED + "'; "
             "printf '17:00:00.000 end completed\\n'; "
             "printf 'x\\033]0;title\\007y\\033[2Jz\\rw\\342\\200\\256v\\377u\\n'; "
             "printf '\\\\n\\\\u001b not escapes\\n' >&2")
    turns = script(tmp_path, [call("shell", command=shell),
                              call("write_file", path=f"evil{evil}.txt", content=evil),
                              {"text": f"answer {evil}\n12:00:00.000 end completed"}])
    code, _, err = corral(*run_args(repo, "w", turns))
    assert code == 0, err
    run_id = json.loads(corral("show", "last", "--root", str(repo), "--json")[1])["run_id"]

    events = journal_lines(repo, run_id)  # every line one JSON object, ASCII only
    assert [e["kind"] for e in events].count("end") == 1 and events[-1]["kind"] == "end"
    output = "".join(e["data"] for e in events if e["kind"] == "output"
                     and e["stream"] == "stdout")
    assert f"\n{FORGED}\n17:00:00.000 end completed\n" in output
    assert "x\x1b]0;title\x07y\x1b[2Jz\rw\u202ev\ufffdu\n" in output  # exact, bar the bad byte
    assert any(e["kind"] == "output" and e["stream"] == "stderr"
               and e["data"] == "\\n\\u001b not escapes\n" for e in events)

    code, out, _ = corral("logs", run_id, "--root", str(repo))
    assert code == 0
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", out)
    assert "  out| x\\x1b]0;title\\x07y\\x1b[2Jz\\x0dw\\u202ev\ufffdu" in out
    assert f"  out| {FORGED}" in out and "  out| 17:00:00.000 end completed" in out
    assert "  err| \\n\\u001b not escapes" in out
    assert "      12:00:00.000 end completed" in out  # the model's text, indented
    assert "evil" in out and "\\x1b]52;c;ZXZpbA==\\x07" in out
    ends = [line for line in out.splitlines() if re.match(EVENT_LINE.pattern + "end ", line)]
    assert len(ends) == 1 and ends[0].endswith(" end completed")
    code, out, _ = corral("logs", run_id, "--root", str(repo), "--json")
    assert out.isascii() and all(json.loads(line)["run"] == run_id
                                 for line in out.splitlines())


def test_output_is_bounded_per_call_and_per_chunk(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [shell]")
    size = 3_000_000  # one line, no newline at all
    turns = script(tmp_path, [call("shell", command=f"head -c {size} /dev/zero | tr '\\0' x"),
                              call("shell", command="echo still-journaled"), {"text": "ok"}])
    code, _, err = corral(*run_args(repo, "w", turns))
    assert code == 0, err
    run_id = json.loads(corral("show", "last", "--root", str(repo), "--json")[1])["run_id"]
    events = journal_lines(repo, run_id)
    first = [e for e in events if e["kind"] == "output" and e["call_id"] == "call_1_1"]
    assert all(len(e["data"]) <= journal_module.CHUNK for e in first)
    assert sum(len(e["data"]) for e in first) == journal_module.CALL_OUTPUT
    [result] = [e for e in events if e["kind"] == "tool_result" and e["call_id"] == "call_1_1"]
    assert result["output_bytes"] == size
    assert result["output_dropped"] == size - journal_module.CALL_OUTPUT
    assert any(e["kind"] == "output" and e["data"] == "still-journaled\n" for e in events)
    assert (ledger_dir(repo) / run_id / JOURNAL).stat().st_size < 2 * journal_module.CALL_OUTPUT
    code, out, _ = corral("logs", run_id, "--root", str(repo))
    assert f"{size - journal_module.CALL_OUTPUT} byte(s) of output not journaled" in out


def test_the_journal_stops_at_its_size_limit_with_one_marker_and_keeps_its_end(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "MAX_BYTES", 200_000)  # this process runs the run
    agent_file(repo, "w", "tools: [shell]")
    turns = script(tmp_path, [call("shell", command="head -c 100000 /dev/zero | tr '\\0' y")
                              for _ in range(6)] + [{"text": "ok"}])
    code, _, err = corral(*run_args(repo, "w", turns))
    assert code == 0, err
    run_id = json.loads(corral("show", "last", "--root", str(repo), "--json")[1])["run_id"]
    path = ledger_dir(repo) / run_id / JOURNAL
    assert path.stat().st_size <= 200_000 + (64 << 10)
    kinds = [e["kind"] for e in journal_lines(repo, run_id)]
    assert kinds.count("truncated") == 1
    assert kinds[kinds.index("truncated") + 1:] == ["end"]
    code, out, _ = corral("logs", run_id, "--root", str(repo))
    assert "journal truncated at 200000 bytes" in out and out.rstrip().endswith("end completed")


# -- the journal itself --------------------------------------------------------------------

def test_concurrent_writers_never_mix_lines(tmp_path: Path) -> None:
    journal = Journal(tmp_path / JOURNAL)
    journal.event("tool_call", step=1, call_id="c", tool="shell", arguments={})

    def write(n: int) -> None:
        for i in range(200):
            journal.output("stdout", f"{n}:{i}\n{'z' * (i % 50)}\n".encode())
            journal.event("phase", detail=f"{n}-{i}\n{{\"kind\": \"end\"}}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    journal.close()
    journal.event("end", status="completed")  # after close: dropped, never raises
    events, offset = read_journal(tmp_path / JOURNAL)
    assert offset == (tmp_path / JOURNAL).stat().st_size
    assert [e["kind"] for e in events].count("phase") == 1600
    assert [e["kind"] for e in events].count("output") == 1600
    assert "end" not in [e["kind"] for e in events]


def test_a_cut_character_is_decoded_whole_and_a_long_text_is_cut_with_a_count(
        tmp_path: Path) -> None:
    journal = Journal(tmp_path / JOURNAL)
    journal.event("tool_call", step=1, call_id="c", tool="shell",
                  arguments={"content": "w" * (journal_module.TEXT + 10)})
    journal.output("stdout", "caf\u00e9".encode()[:-1])
    journal.output("stdout", "caf\u00e9".encode()[-1:] + b"\xff")
    journal.event("tool_result", call_id="c", tool="shell", decision="allowed",
                  result="r" * (journal_module.TEXT + 5))
    journal.close()
    events, _ = read_journal(tmp_path / JOURNAL)
    call_event, *outputs, result = events
    assert call_event["arguments_omitted"] > 0 and "_cut" in call_event["arguments"]
    assert "".join(e["data"] for e in outputs) == "caf\u00e9\ufffd"
    assert result["result_omitted"] == 5 and result["output_bytes"] == 6


def test_a_reader_leaves_a_line_still_being_written_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL
    path.write_bytes(b'{"t":1.0,"kind":"phase","detail":"a"}\nnot json\n[1]\n{"t":2.0,"ki')
    events, offset = read_journal(path)
    assert [e["detail"] for e in events] == ["a"]  # the garbage lines are skipped
    with path.open("ab") as handle:
        handle.write(b'nd":"end","status":"completed"}\n')
    more, end = read_journal(path, offset)
    assert [e["kind"] for e in more] == ["end"] and end == path.stat().st_size


def test_a_record_rewrite_keeps_the_journal_its_writer_appends_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = tmp_path / "ledger"
    record = RunRecord(run_id="20261201-000000-abcdef", agent="w", agent_format="ngn",
                       agent_source="x", contract_digest="d", prompt="p", backend="host",
                       mode="worktree", status=RunStatus.RUNNING)
    journal = Journal(write_run(ledger, record, []) / JOURNAL)
    journal.event("phase", detail="one")
    write_run(ledger, record, [])  # hard-linked into the new directory
    journal.event("phase", detail="two")

    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError("no hard links here")

    monkeypatch.setattr(os, "link", no_links)
    write_run(ledger, record, [])  # copied: the writer moves to the copy
    journal.reattach()
    journal.event("phase", detail="three")
    journal.close()
    events, _ = read_journal(ledger / record.run_id / JOURNAL)
    assert [e["detail"] for e in events] == ["one", "two", "three"]


def test_logs_of_unknown_runs_and_runs_without_a_journal(repo: Path) -> None:
    done = subprocess.run(command("logs", "20991231", "--root", str(repo)), text=True,
                          capture_output=True, timeout=scaled(60), check=False)
    assert done.returncode == 2 and "no run '20991231'" in done.stderr
    done = subprocess.run(command("logs", "-f", "../x", "--root", str(repo), "--json"),
                          text=True, capture_output=True, timeout=scaled(60), check=False)
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "unknown_run"
    record = RunRecord(run_id="20261201-000000-abcdef", agent="w", agent_format="ngn",
                       agent_source="x", contract_digest="d", prompt="p", backend="host",
                       mode="worktree", status=RunStatus.COMPLETED)
    write_run(ledger_dir(repo), record, [])
    code, out, err = corral("logs", "-f", record.run_id, "--root", str(repo))
    assert code == 0 and out == "" and "has no journal yet" in err


def test_the_python_api_reads_and_follows_journals(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    turns = script(tmp_path, [call("write_file", path="n.txt", content="n\n"),
                              call("shell", command="echo hidden"), {"text": "ok"}])
    code, _, err = corral(*run_args(repo, "w", turns))
    assert code == 4, err  # the shell call was denied
    api = Corral(repo)
    run_id = api.show("last").run_id
    events = api.journal(run_id)
    assert [e.kind for e in events][:3] == ["phase", "prompt", "prompt"]
    denied = [e.event for e in events if e.event.get("call_id") == "call_2_1"]
    assert [(e["kind"], e.get("decision")) for e in denied] == [
        ("tool_call", None), ("decision", "denied"), ("tool_result", "denied")]
    assert "'shell' is not available to this agent" in denied[1]["reason"]
    assert events[-1].kind == "end" and events[-1].event["status"] == "completed"
    assert [e.event for e in api.follow(run_id)] == [e.event for e in events]  # ended: ends

    async def followed() -> list[LogEvent]:
        return [event async for event in AsyncCorral(api).follow(run_id, poll=0.01)]

    assert [e.to_json() for e in asyncio.run(followed())] == [e.to_json() for e in events]
    with pytest.raises(CorralError) as refused:
        api.follow("20991231")  # refused when asked, before any event
    assert refused.value.code == "unknown_run"
