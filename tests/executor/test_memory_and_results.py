"""Memory strategies build the request view; run records are written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.errors import ExecutorError
from executor.ledger import (
    RunRecord,
    RunStatus,
    find_run,
    ledger_dir,
    list_runs,
    load_transcript,
    new_run_id,
    write_run,
)
from executor.ledger.index import index_dir
from executor.models.base import Message, ToolCall
from executor.run.memory import estimate_tokens, request_view
from policies.contract import MemoryConfig, MemoryKind, ToolResultEviction

SYSTEM = Message(role="system", content="You are a test agent.")
TASK = Message(role="user", content="Do the thing.")


def transcript(steps: int, result_size: int = 40) -> list[Message]:
    messages = [SYSTEM, TASK]
    for n in range(steps):
        call = ToolCall(id=f"c{n}", name="read_file", arguments={"path": f"f{n}.txt"})
        messages.append(Message(role="assistant", content=f"step {n}", tool_calls=(call,)))
        messages.append(Message(role="tool", content="x" * result_size, tool_call_id=f"c{n}",
                                name="read_file"))
    return messages


def test_full_keeps_everything() -> None:
    messages = transcript(5)
    assert request_view(messages, MemoryConfig(kind=MemoryKind.FULL)) == messages


def test_windowed_cuts_whole_steps() -> None:
    view = request_view(transcript(12), MemoryConfig(kind=MemoryKind.WINDOWED, window_turns=3))
    assert view[:2] == [SYSTEM, TASK]
    assert [m.role for m in view[2:]] == ["assistant", "tool"] * 3
    assert view[2].content == "step 9"
    assert all(m.tool_call_id == view[i - 1].tool_calls[0].id
               for i, m in enumerate(view) if m.role == "tool")


def test_summarizing_window_is_the_default_and_summarizes_into_the_system_prompt() -> None:
    assert MemoryConfig().kind is MemoryKind.SUMMARIZING_WINDOW
    view = request_view(transcript(12), MemoryConfig())
    assert len(view) == 2 + 2 * 8
    assert "Summary of 4 earlier step(s)" in view[0].content
    assert "read_file(path='f0.txt') -> ok" in view[0].content


def test_none_keeps_only_the_latest_step() -> None:
    view = request_view(transcript(4), MemoryConfig(kind=MemoryKind.NONE))
    assert [m.content for m in view[2:3]] == ["step 3"] and len(view) == 4


def test_auto_compact_waits_for_the_ratio() -> None:
    memory = MemoryConfig(kind=MemoryKind.AUTO_COMPACT, compact_at_ratio=0.5, window_turns=2)
    small = transcript(10, 10)
    assert request_view(small, memory, budget_tokens=10_000) == small
    big = transcript(10, 2000)
    assert estimate_tokens(big) > 0.5 * 3000
    view = request_view(big, memory, budget_tokens=3000)
    assert len(view) == 2 + 4 and "Summary of 8" in view[1].content  # USER_MESSAGE default


def test_tool_result_eviction_by_age_and_size() -> None:
    memory = MemoryConfig(kind=MemoryKind.FULL, tool_result_eviction=ToolResultEviction(
        after_turns=2, above_tokens=100))
    messages = transcript(3, 800) + transcript(1, 10)[2:]
    view = request_view(messages, memory)
    tools = [m for m in view if m.role == "tool"]
    assert tools[0].content.startswith("[tool result evicted") and "800 characters" in \
        tools[0].content
    assert tools[1].content.startswith("[tool result evicted")
    assert tools[2].content == "x" * 800  # recent: kept
    assert tools[3].content == "x" * 10


def record(run_id: str, **fields: object) -> RunRecord:
    base: dict[str, object] = {
        "run_id": run_id, "agent": "a", "agent_format": "ngn", "agent_source": "a.md",
        "contract_digest": "d", "prompt": "p", "backend": "host", "mode": "worktree",
        "status": RunStatus.COMPLETED}
    return RunRecord.model_validate(base | fields)


def test_ledger_is_per_repository_outside_the_repository(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    main = ledger_dir(tmp_path / "repo" / "sub", env=env)
    assert main.is_relative_to(tmp_path / "state" / "corral" / "runs")
    assert main.name.startswith("repo-")
    # A linked worktree of the same repository shares its ledger.
    admin = tmp_path / "repo" / ".git" / "worktrees" / "wt"
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {admin}\n")
    assert ledger_dir(worktree, env=env) == main
    other = ledger_dir(tmp_path / "plain", env=env)
    assert other != main and other.parent == main.parent
    assert ledger_dir(tmp_path / "repo", env={"CORRAL_STATE_DIR": str(tmp_path / "x")}) \
        .is_relative_to(tmp_path / "x")


def test_write_find_list_and_transcript(tmp_path: Path) -> None:
    ledger = tmp_path / "runs"
    first, second = new_run_id(), new_run_id()
    assert first != second
    write_run(ledger, record(first, diff="diff --git a/x b/x\n"), transcript(1))
    write_run(ledger, record(second, status=RunStatus.FAILED), [SYSTEM])
    assert [r.run_id for r in list_runs(ledger)] == sorted([first, second], reverse=True)
    assert find_run(ledger, first).diff.startswith("diff --git")
    assert (ledger / first / "diff.patch").read_text() == "diff --git a/x b/x\n"
    lines = load_transcript(ledger, first)
    assert lines[2]["tool_calls"][0]["name"] == "read_file"
    # Nothing left behind: no temporary directory, no write the index did not take.
    assert not [p for p in ledger.iterdir() if p.name.startswith(".")]
    assert not list((index_dir(ledger) / "staging").iterdir())
    assert not list((index_dir(ledger) / "pending").iterdir())
    with pytest.raises(ExecutorError, match="no run"):
        find_run(ledger, "nope")
    with pytest.raises(ExecutorError, match="invalid"):
        find_run(ledger, "../x")


def test_rewrite_replaces_the_record_whole(tmp_path: Path) -> None:
    ledger = tmp_path / "runs"
    run_id = new_run_id()
    write_run(ledger, record(run_id, final_text="one"), [SYSTEM])
    write_run(ledger, record(run_id, final_text="two"), [SYSTEM, TASK])
    assert find_run(ledger, run_id).final_text == "two"
    assert len(load_transcript(ledger, run_id)) == 2
    assert json.loads((ledger / run_id / "record.json").read_text())["final_text"] == "two"
