"""Issue 29: "The Python API's `ChildResult` lacks `changed_files` and `diff` that the JSON
has (a user's script crashed after a 1-minute fanout)." Every API result carries what its
JSON carries: each key of ``to_json()`` is an attribute of the result, holding the same
value (as JSON), except where the attribute is the typed form of the JSON's value (a
``RunResult`` where the JSON has its id, a ``PatchFile`` where it has a dict).

Results are made for real (a fanout of scripted children on the host backend, an apply, a
branch, a shell, gc, a new agent); ``LogEvent`` is left out: its JSON is the journaled
event as it is, with where it happened.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

import pytest
from exec_support import agent_file, call, git, script

from executor.api import (
    AgentView,
    ApplyReport,
    BranchReport,
    ChildResult,
    Corral,
    FanoutResult,
    GcReport,
    NewAgent,
    RunResult,
    ShellResult,
)
from executor.api.agents import Agents

#: Keys whose attribute is the typed form of the JSON's value: named, not compared.
TYPED = {
    "FanoutResult": {"runs"},  # ChildResult each
    "ApplyReport": {"files", "flagged", "superseded"},  # PatchFile, RunResult
    "BranchReport": {"files"},
    "Agents": {"agents", "diagnostics"},  # contracts and Diagnostic objects
    "GcReport": {"entries", "runs", "fanouts", "pruned", "environments"},
    "ShellResult": set(),
    # An agent's JSON is its contract's, each value as JSON (enums, routes, rules).
    "AgentView": {"mode", "sandbox", "tools", "denied_tools", "delegates", "model",
                  "model_route", "permission", "memory", "tool_bindings", "status",
                  "digest", "diagnostics", "effective", "skills", "options", "extras",
                  "required_skills", "response_reviewers"},
}


def _plain(value: Any) -> Any:
    """An attribute's value as JSON would hold it."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _carries(result: Any, source: Any = None) -> None:
    """Every key of ``result.to_json()`` is an attribute of ``result`` (or, for an agent, of
    its contract) with the same value, unless the class's key is :data:`TYPED`."""
    name = type(result).__name__
    shown = result.to_json()
    assert isinstance(shown, dict)
    missing = [key for key in shown if not hasattr(result, key)]
    assert missing == [], f"{name} lacks {missing}, which its JSON has"
    typed = TYPED.get(name, set())
    for key, value in shown.items():
        if key in typed:
            continue
        attribute = getattr(result, key)
        if callable(attribute):  # a method (a contract's digest()): named, not compared
            continue
        assert json.loads(json.dumps(_plain(attribute))) == value, (name, key)


@pytest.fixture
def fanout(repo: Path, tmp_path: Path) -> tuple[Corral, FanoutResult]:
    agent_file(repo, "w", "tools: [write_file, shell]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    corral = Corral(repo, trust_project=True, personal=False, backend="host")
    scripts = [script(tmp_path, f"c{i}", call("write_file", path="NOTES.md", content=text),
                      {"text": f"c{i}", "usage": {"input_tokens": 3, "output_tokens": 1}})
               for i, text in enumerate(["one\n", "two\n"], 1)]
    result = corral.fanout("notes", agents=["w"], scripts=scripts, check="grep -q one NOTES.md")
    return corral, result


def test_every_result_carries_what_its_json_carries(fanout: tuple[Corral, FanoutResult],
                                                     tmp_path: Path) -> None:
    corral, result = fanout
    first, second = result.children
    # The crash the issue measured: a script reading a child's diff and files.
    assert "+one" in first.diff and first.changed_files[0]["path"] == "NOTES.md"
    assert first.usage["input_tokens"] == 3 and first.steps == 2 and first.state == "pending"
    _carries(result)
    for child in result.children:
        _carries(child)
        assert child.run is not None
        _carries(child.run)
    never = ChildResult(first.planned, None)  # a child that left no record
    _carries(never)
    assert never.diff == "" and never.changed_files == [] and never.state is None

    shell = corral.shell(first.run_id, ["true"])
    assert isinstance(shell, ShellResult)
    _carries(shell)

    report = corral.apply(corral.pick(result.fanout_id, "best"))
    assert isinstance(report, ApplyReport) and report.applied
    _carries(report)
    assert [r.run_id for r in report.superseded] == [second.run_id]
    assert report.to_json()["superseded"] == [second.run_id]
    made = corral.branch(second.run_id, "corral/second")
    assert isinstance(made, BranchReport)
    _carries(made)
    gc = corral.gc()
    assert isinstance(gc, GcReport)
    _carries(gc)

    agents = corral.agents()
    assert isinstance(agents, Agents)
    _carries(agents)
    view = corral.agent("w")
    assert isinstance(view, AgentView)
    assert_agent_view(view)
    new = corral.new_agent("fresh", format="claude")
    assert isinstance(new, NewAgent)
    _carries(new)
    assert isinstance(corral.show(first.run_id), RunResult)


def assert_agent_view(view: AgentView) -> None:
    """An agent's JSON is its contract's: each key on the view (format, source, scope,
    runnable, model_route, ...) or on ``view.contract``, the same where both are plain."""
    shown = view.to_json()
    missing = [k for k in shown if not hasattr(view, k) and not hasattr(view.contract, k)]
    assert missing == []
    for key, value in shown.items():
        if key in TYPED["AgentView"]:
            continue
        attribute = getattr(view, key) if hasattr(view, key) else getattr(view.contract, key)
        if dataclasses.is_dataclass(attribute) or callable(attribute):
            continue
        assert json.loads(json.dumps(_plain(attribute))) == value, key
