"""The agent loop: steps and the one text-only finalization, memory, skills, statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_support import Runner, agent_file

from executor.errors import RunError
from executor.ledger import RunStatus, ledger_dir, load_transcript
from executor.models import ScriptedModel
from executor.run.session import FINALIZE_PROMPT

pytestmark = pytest.mark.parametrize("backend", ["host"], indirect=True)

READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}


def zuno(repo: Path, agents: dict[str, object]) -> None:
    path = repo / ".zuno" / "zuno.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"agents": agents}))


def test_steps_limit_then_exactly_one_text_only_request(run: Runner, repo: Path) -> None:
    """zuno: when the limit is exhausted and the model still requests continuation, one
    additional text-only request with no tools; the limit is not raised."""
    zuno(repo, {"a": {"steps": 2}})
    record = run("a", [READ, READ, {"text": "Completed: read README twice. Remaining: none."}])
    assert record.status is RunStatus.STEP_LIMIT and record.steps == 2
    assert record.final_text.startswith("Completed")
    transcript = load_transcript(ledger_dir(repo), record.run_id)
    assert transcript[-2] == {"role": "user", "content": FINALIZE_PROMPT, "tool_calls": [],
                              "tool_call_id": None, "name": None, "is_error": False}
    assert record.usage["requests"] == 3


def test_finalization_that_still_calls_tools_runs_none(run: Runner, repo: Path) -> None:
    zuno(repo, {"a": {"steps": 1}})
    record = run("a", [READ, READ])  # the model asks for tools although none were offered
    assert len(record.audit) == 1  # the second READ was not run
    assert any("none was run" in note for note in record.notes)


def test_no_steps_limit_runs_until_the_answer(run: Runner, repo: Path) -> None:
    zuno(repo, {"a": {}})
    record = run("a", [READ] * 5 + [{"text": "done"}])
    assert record.steps == 6 and len(record.audit) == 5


def test_script_exhaustion_is_a_failed_run_with_its_error(run: Runner, repo: Path) -> None:
    zuno(repo, {"a": {}})
    record = run("a", [READ])
    assert record.status is RunStatus.FAILED
    assert record.error is not None and record.error["code"] == "script_exhausted"
    assert len(record.audit) == 1  # what happened before is kept


def test_timeout_status(run: Runner, repo: Path) -> None:
    zuno(repo, {"a": {}})
    slow = {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 2"}}]}
    record = run("a", [slow, slow, {"text": "never"}], timeout_seconds=1.0)
    assert record.status is RunStatus.TIMEOUT
    assert record.error is not None and record.error["code"] == "run_timeout"


def test_required_skills_resolve_into_the_system_prompt(run: Runner, repo: Path,
                                                        tmp_path: Path) -> None:
    skill = repo / ".claude/skills/codegraph/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: codegraph\n---\nAlways map the call graph first.\n")
    zuno(repo, {"a": {"requiredSkills": ["codegraph"]}})
    record = run("a", [{"text": "ok"}])
    system = load_transcript(ledger_dir(repo), record.run_id)[0]["content"]
    assert "Always map the call graph first." in system
    assert "name: codegraph" not in system  # the skill's header is not instructions


@pytest.mark.parametrize(("layout", "message"), [
    ([], "was not found"),
    ([".claude/skills/dup/SKILL.md", ".agents/skills/dup/SKILL.md"], "is ambiguous"),
])
def test_missing_or_ambiguous_skill_fails_the_start(run: Runner, repo: Path,
                                                    layout: list[str], message: str) -> None:
    for rel in layout:
        (repo / rel).parent.mkdir(parents=True)
        (repo / rel).write_text("x\n")
    zuno(repo, {"a": {"requiredSkills": ["dup"]}})
    with pytest.raises(RunError, match=message):
        run("a", [{"text": "ok"}])
    assert not ledger_dir(repo).exists()  # nothing started, nothing recorded


def test_memory_strategy_shapes_the_requests_not_the_transcript(run: Runner,
                                                                repo: Path) -> None:
    """A catalog agent with a one-step window: each request carries the system prompt, the
    task and the latest step; the transcript keeps everything."""
    catalog = repo / "initial-data/agent-definitions/a.json"
    catalog.parent.mkdir(parents=True)
    catalog.write_text(json.dumps({
        "id": "00000000-0000-0000-0000-000000000001", "name": "a", "description": "d",
        "systemPrompt": "s", "llmConfigName": "x", "status": "ACTIVE",
        "memoryConfig": {"kind": "windowed", "windowTurns": 1},
        "tools": [{"name": "file_read", "enabled": True}]}))
    script = ScriptedModel([READ, READ, READ, {"text": "done"}], source="t")
    record = run("a", [], script=script)
    assert [len(r.messages) for r in script.requests] == [2, 4, 4, 4]
    assert len(load_transcript(ledger_dir(repo), record.run_id)) == 9


def test_agent_not_user_invocable_is_refused_before_anything(run: Runner, repo: Path) -> None:
    zuno(repo, {"helper": {"mode": "subagent"}})
    with pytest.raises(RunError, match="not user-invocable"):
        run("helper", [{"text": "x"}])
    agent_file(repo, "plain", "user_invocable: false")
    with pytest.raises(RunError, match="not user-invocable"):
        run("plain", [{"text": "x"}])


def test_progress_reports_steps_tools_and_files_changed(run: Runner, repo: Path) -> None:
    from executor.cli.progress import Progress
    from executor.run.session import ProgressEvent

    events: list[ProgressEvent] = []
    zuno(repo, {"a": {}})
    patch = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n"
    run("a", [{"tool_calls": [
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}},
        {"name": "apply_patch", "arguments": {"patch": patch}},
        {"name": "read_file", "arguments": {"path": "missing.txt"}}]},
        {"text": "done"}], progress=events.append)
    kinds = [e.kind for e in events if e.kind != "phase"]  # phases: the run's own stages
    assert kinds[:2] == ["step", "tool"] and kinds[-1] == "final"
    done = [e for e in events if e.kind == "tool_done"]
    assert [e.paths for e in done] == [("a.txt",), ("new.txt",), ()]
    display = Progress(enabled=False)
    for event in events:
        display(event)  # disabled: renders nothing, never fails
