"""The delegate tool's parallel mode (pi's ``tasks``): concurrency, budgets, replays, failures.

Concurrency is proven, not assumed: two children meet through FIFOs (the host
backend, whose commands see the host's files), which only works when both run
at once; run one after the other, the first would wait for the second until
its command's own time limit. Isolation of each task's sandbox is shown under
bubblewrap.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from exec_support import BACKENDS, Runner

from executor.errors import ModelError
from executor.ledger import RunStatus, find_run, ledger_dir
from executor.run.session import SharedLimits
from executor.scheduling import Cancellation
from tests.timescale import scaled


def zuno(repo: Path, agents: dict[str, object]) -> None:
    path = repo / ".zuno" / "zuno.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"agents": agents}))


def tasks(*items: dict[str, str]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "delegate", "arguments": {"tasks": list(items)}}]}


def task(agent: str, prompt: str = "do it", **extra: str) -> dict[str, str]:
    return {"agent": agent, "prompt": prompt, **extra}


def shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def write(path: str, content: str = "x\n") -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path,
                                                                "content": content}}]}


def children(repo: Path, parent: str) -> list[Any]:
    record = find_run(ledger_dir(repo), parent)
    return [find_run(ledger_dir(repo), child) for child in record.children]


def fifos(tmp_path: Path, *names: str) -> list[Path]:
    paths = [tmp_path / name for name in names]
    for path in paths:
        os.mkfifo(path)
    return paths


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_tasks_run_at_the_same_time_and_come_back_in_task_order(
        run: Runner, repo: Path, tmp_path: Path) -> None:
    ping, pong = fifos(tmp_path, "ping", "pong")
    zuno(repo, {"lead": {}, "worker": {"tools": ["shell"]}})
    # A writes ping then reads pong; B reads ping then writes pong. One after the other,
    # A would block on ping (nobody reading) until `timeout` kills it.
    first = f"timeout 20 sh -c 'echo from-a > {ping}; cat {pong}'"
    second = f"timeout 20 sh -c 'cat {ping}; echo from-b > {pong}'"
    record = run("lead", [tasks(task("worker", "A"), task("worker", "B")),
                          {"parallel": [[shell(first), {"text": "A done"}],
                                        [shell(second), {"text": "B done"}]]},
                          {"text": "both done"}])
    assert record.status is RunStatus.COMPLETED and record.final_text == "both done"
    a, b = children(repo, record.run_id)
    assert (a.prompt, b.prompt) == ("A", "B")  # the record lists them in task order
    assert "from-b" in a.audit[0]["result"] and "from-a" in b.audit[0]["result"]
    result = record.audit[0]["result"]
    assert result.index("=== task 1 of 2: agent worker ===") < result.index("A done") \
        < result.index("=== task 2 of 2: agent worker ===") < result.index("B done")
    assert f"child={a.run_id}" in result and f"child={b.run_id}" in result


@pytest.mark.parametrize("backend", [p for p in BACKENDS if p.id != "host"], indirect=True)
def test_each_task_has_its_own_sandbox_and_its_own_diff(run: Runner, repo: Path) -> None:
    zuno(repo, {"lead": {}, "writer": {}})
    record = run("lead", [tasks(task("writer", "one"), task("writer", "two")),
                          {"parallel": [[write("one.txt", "1\n"), shell("ls"), {"text": "1"}],
                                        [write("two.txt", "2\n"), shell("ls"), {"text": "2"}]]},
                          {"text": "done"}])
    one, two = children(repo, record.run_id)
    assert [c["path"] for c in one.changed_files] == ["one.txt"]
    assert [c["path"] for c in two.changed_files] == ["two.txt"]
    assert "two.txt" not in one.audit[1]["result"] and "one.txt" not in two.audit[1]["result"]
    assert one.backend == two.backend != "host"
    assert not (repo / "one.txt").exists() and not (repo / "two.txt").exists()


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_one_bad_task_refuses_the_call_before_anything_starts(run: Runner,
                                                              repo: Path) -> None:
    zuno(repo, {"lead": {"delegates": ["worker"]}, "worker": {}, "other": {}})
    limits = SharedLimits()
    record = run("lead", [tasks(task("worker"), task("other")), {"text": "refused"}],
                 limits=limits)
    assert record.children == [] and limits.children_used == 0
    [denied] = record.denied_calls
    assert denied["tool"] == "delegate"
    assert "task 2 of 2 (other)" in denied["reason"] and "no task was started" in denied[
        "reason"]


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_the_children_budget_is_spent_for_all_tasks_or_none(run: Runner, repo: Path) -> None:
    zuno(repo, {"lead": {}, "worker": {}})
    limits = SharedLimits(children=1)
    record = run("lead", [tasks(task("worker"), task("worker")), {"text": "over budget"}],
                 limits=limits)
    assert record.children == [] and limits.children_used == 0
    assert ("this run may start 1 more child(ren) and the call asked for 2"
            in record.denied_calls[0]["reason"])


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_the_tree_step_budget_is_shared_by_concurrent_children(run: Runner,
                                                               repo: Path) -> None:
    zuno(repo, {"lead": {}, "worker": {"tools": ["shell"]}})
    busy = [shell("true")] * 6
    limits = SharedLimits(total_steps=5)
    record = run("lead", [tasks(task("worker"), task("worker")),
                          {"parallel": [[*busy, {"text": "summary a"}],
                                        [*busy, {"text": "summary b"}]]},
                          {"text": "summary of the lead"}], limits=limits)
    kids = children(repo, record.run_id)
    assert limits.steps_used == 5  # never more, whichever thread asked first
    assert record.steps + sum(child.steps for child in kids) == 5
    assert all(child.status is RunStatus.STEP_LIMIT for child in kids)
    assert all("stopped at the run's shared step budget" in child.notes for child in kids)


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_failing_task_costs_the_other_nothing(run: Runner, repo: Path) -> None:
    zuno(repo, {"lead": {}, "writer": {}})
    record = run("lead", [tasks(task("writer", "fails"), task("writer", "works")),
                          {"parallel": [[write("half.txt")],  # its replay ends mid-task
                                        [write("whole.txt"), {"text": "done"}]]},
                          {"text": "one failed"}])
    failed, done = children(repo, record.run_id)
    assert failed.status is RunStatus.FAILED and failed.error["code"] == "script_exhausted"
    assert [c["path"] for c in failed.changed_files] == ["half.txt"]  # its diff is kept
    assert done.status is RunStatus.COMPLETED
    assert [c["path"] for c in done.changed_files] == ["whole.txt"]
    result = record.audit[0]["result"]
    assert "failed" in result and "half.txt" in result and "whole.txt" in result


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_replay_without_one_script_per_task_fails_saying_how_to_fix_it(
        run: Runner, repo: Path) -> None:
    zuno(repo, {"lead": {}, "worker": {}})
    record = run("lead", [tasks(task("worker"), task("worker")), {"text": "not a split"}])
    assert record.status is RunStatus.FAILED
    assert "a delegate call started 2 task(s) at once, so turn 2 must hold their 2 " \
           "replay(s)" in record.error["message"]
    assert record.children == []  # nothing started before the replay said who plays what
    with pytest.raises(ModelError, match="parallel replay 1 must be a non-empty list"):
        run("lead", [{"parallel": [[]]}])


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_parallel_follow_ups_reach_their_retained_children(run: Runner, repo: Path) -> None:
    zuno(repo, {"lead": {}, "writer": {}, "helper": {}})
    record = run("lead", [
        tasks(task("writer", "start"), task("helper", "start")),
        {"parallel": [[write("w1.txt"), {"text": "w first"}],
                      [write("h1.txt"), {"text": "h first"}]]},
        tasks(task("writer", "more", child="writer"), task("helper", "more", child="helper")),
        {"parallel": [[write("w2.txt"), {"text": "w second"}],
                      [write("h2.txt"), {"text": "h second"}]]},
        {"text": "done"}])
    writer, helper = children(repo, record.run_id)
    assert [c["path"] for c in writer.changed_files] == ["w1.txt", "w2.txt"]
    assert [c["path"] for c in helper.changed_files] == ["h1.txt", "h2.txt"]
    assert (writer.final_text, helper.final_text) == ("w second", "h second")


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_cancelled_tree_stops_every_task_and_keeps_their_diffs(
        run: Runner, repo: Path, tmp_path: Path) -> None:
    up_a, up_b, never = fifos(tmp_path, "up-a", "up-b", "never")
    zuno(repo, {"lead": {}, "writer": {}})
    cancellation = Cancellation()

    def cancel_once_both_are_up() -> None:
        for fifo in (up_a, up_b):
            with fifo.open() as handle:
                assert handle.read() == "up\n"
        cancellation.cancel("the user gave up")

    watcher = threading.Thread(target=cancel_once_both_are_up)
    watcher.start()
    try:
        record = run("lead", [
            tasks(task("writer", "a"), task("writer", "b")),
            {"parallel": [[write("a.txt"), shell(f"echo up > {up_a}; cat {never}"),
                           {"text": "never"}],
                          [write("b.txt"), shell(f"echo up > {up_b}; cat {never}"),
                           {"text": "never"}]]},
            {"text": "never"}], cancellation=cancellation)
    finally:
        watcher.join(scaled(60))
    assert record.status is RunStatus.CANCELLED
    a, b = children(repo, record.run_id)
    assert a.status is b.status is RunStatus.CANCELLED
    assert [c["path"] for c in a.changed_files] == ["a.txt"]
    assert [c["path"] for c in b.changed_files] == ["b.txt"]


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_approval_questions_of_concurrent_children_come_one_at_a_time(
        run: Runner, repo: Path) -> None:
    zuno(repo, {"lead": {}, "asker": {"permission": {"rules": {"shell": "ask"}}}})
    inside = 0
    most = 0
    lock = threading.Lock()
    other_asked = threading.Event()

    def approve(request: object) -> bool:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
            if inside > 1:
                other_asked.set()
        other_asked.wait(1.0)  # give the other child the chance to ask meanwhile
        with lock:
            inside -= 1
        return True

    record = run("lead", [tasks(task("asker"), task("asker")),
                          {"parallel": [[shell("true"), {"text": "a"}],
                                        [shell("true"), {"text": "b"}]]},
                          {"text": "done"}], approval=approve)
    assert record.status is RunStatus.COMPLETED
    assert most == 1
    assert all(c.audit[0]["decision"] == "approved" for c in children(repo, record.run_id))
