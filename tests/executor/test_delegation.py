"""Delegation end to end: the parent/child precedence table, allowlists, depth, follow-ups.

Children run in their own sandboxes (bubblewrap here, the isolating backend
every CI machine has); their capability is derived from the parent's at
creation and can only narrow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_support import Runner

from executor.ledger import RunStatus, find_run, ledger_dir
from policies.config import UserConfig

pytestmark = [pytest.mark.parametrize("backend", [pytest.param("bubblewrap",
                                                               marks=pytest.mark.bubblewrap)],
                                      indirect=True)]


def zuno(repo: Path, agents: dict[str, object]) -> None:
    path = repo / ".zuno" / "zuno.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"agents": agents}))


def delegate(agent: str, prompt: str = "do it", child: str | None = None) -> dict[str, object]:
    args: dict[str, object] = {"agent": agent, "prompt": prompt}
    if child:
        args["child"] = child
    return {"tool_calls": [{"name": "delegate", "arguments": args}]}


def write(path: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x\n"}}]}


def shell(command: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def child_record(repo: Path, parent_id: str, index: int = 0) -> object:
    parent = find_run(ledger_dir(repo), parent_id)
    return find_run(ledger_dir(repo), parent.children[index])


def test_restrictive_child_under_permissive_parent_stays_restricted(run: Runner,
                                                                    repo: Path) -> None:
    zuno(repo, {"boss": {"permission": {"mode": "allow_all"}, "delegates": ["reader"]},
                "reader": {"tools": ["read_file"]}})
    record = run("boss", [delegate("reader"), write("a.txt"), {"text": "child done"},
                          {"text": "boss done"}])
    child = child_record(repo, record.run_id)
    assert child.denied_calls == [{"tool": "write_file",  # type: ignore[attr-defined]
                                   "reason": "tool 'write_file' is not available to this agent"}]
    assert child.diff == ""  # type: ignore[attr-defined]
    assert record.status is RunStatus.COMPLETED


def test_permissive_child_under_restrictive_parent_is_restricted(run: Runner,
                                                                 repo: Path) -> None:
    zuno(repo, {"boss": {"tools": ["read_file", "delegate"]},
                "writer": {"permission": {"mode": "allow_all"}}})
    record = run("boss", [delegate("writer"), write("a.txt"), {"text": "tried"},
                          {"text": "boss done"}])
    child = child_record(repo, record.run_id)
    assert [d["tool"] for d in child.denied_calls] == ["write_file"]  # type: ignore[attr-defined]


def test_allow_all_cannot_lift_a_deny(run: Runner, repo: Path) -> None:
    zuno(repo, {"boss": {"permission": {"rules": {"shell": {"*": "allow", "rm *": "deny"}}}},
                "child": {"permission": {"mode": "allow_all", "rules": {"shell": "allow"}}}})
    record = run("boss", [delegate("child"), shell("rm -rf src"), shell("ls src"),
                          {"text": "child done"}, {"text": "boss done"}])
    child = child_record(repo, record.run_id)
    decisions = [(a["tool"], a["decision"]) for a in child.audit]  # type: ignore[attr-defined]
    assert decisions == [("shell", "denied"), ("shell", "allowed")]
    assert "app.py" in child.audit[1]["result"]  # type: ignore[attr-defined]
    assert (repo / "src" / "app.py").exists()


def test_child_outside_the_allowlist_is_denied(run: Runner, repo: Path) -> None:
    zuno(repo, {"boss": {"delegates": ["a"]}, "a": {}, "b": {}})
    record = run("boss", [delegate("b"), {"text": "could not"}])
    assert record.children == []
    assert record.denied_calls[0]["tool"] == "delegate"
    assert "allowlist" in record.denied_calls[0]["reason"]


def test_delegation_past_the_depth_is_denied(run: Runner, repo: Path) -> None:
    """subagent_depth 1: the top agent may delegate, its child may not."""
    zuno(repo, {"boss": {}, "middle": {}, "leaf": {}})
    record = run("boss", [delegate("middle"), delegate("leaf"), {"text": "middle done"},
                          {"text": "boss done"}])
    middle = child_record(repo, record.run_id)
    assert middle.children == []  # type: ignore[attr-defined]
    assert "depth" in middle.denied_calls[0]["reason"]  # type: ignore[attr-defined]


def test_deeper_nesting_when_the_user_allows_it(run: Runner, repo: Path) -> None:
    zuno(repo, {"boss": {}, "middle": {}, "leaf": {}})
    record = run("boss", [delegate("middle"), delegate("leaf"), {"text": "leaf done"},
                          {"text": "middle done"}, {"text": "boss done"}],
                 config=UserConfig(subagent_depth=2))
    middle = child_record(repo, record.run_id)
    assert len(middle.children) == 1  # type: ignore[attr-defined]


def test_child_result_reaches_the_parent_with_its_diff(run: Runner, repo: Path) -> None:
    zuno(repo, {"boss": {}, "writer": {}})
    record = run("boss", [delegate("writer"), write("notes.txt"), {"text": "wrote notes"},
                          {"text": "done"}])
    result = record.audit[0]["result"]
    assert "wrote notes" in result and "notes.txt" in result and "+x" in result
    assert f"child={record.children[0]}" in result
    assert not (repo / "notes.txt").exists()  # the child's worktree, not the checkout


def test_retained_child_accepts_a_follow_up(run: Runner, repo: Path) -> None:
    zuno(repo, {"boss": {}, "writer": {}})
    record = run("boss", [
        delegate("writer"), write("one.txt"), {"text": "first"},
        delegate("writer", "and another", child="writer"), write("two.txt"), {"text": "second"},
        delegate("writer", "again", child="nobody"),
        {"text": "done"},
    ])
    assert len(record.children) == 1  # the follow-up went to the same child
    child = child_record(repo, record.run_id)
    assert [c["path"] for c in child.changed_files] == ["one.txt", "two.txt"]  # type: ignore
    assert child.final_text == "second"  # type: ignore[attr-defined]
    assert "second" in record.audit[1]["result"]
    assert record.audit[2]["decision"] == "denied"
    assert "not one of your retained children" in record.audit[2]["reason"]


def test_long_child_text_is_cut_with_a_marker_and_kept_whole_in_its_record(
    run: Runner, repo: Path,
) -> None:
    zuno(repo, {"boss": {}, "talker": {}})
    long_text = "word " * 5000
    record = run("boss", [delegate("talker"), {"text": long_text}, {"text": "ok"}])
    result = record.audit[0]["result"]
    assert "[truncated: showing 8000 of 25000 characters of the child's final text" in result
    assert child_record(repo, record.run_id).final_text == long_text  # type: ignore[attr-defined]
