"""zuno-custom-agents.md at run time: what the loader reads must also happen.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped); the tests run real agents (host backend, scripted model) and look
at what the model was sent and what the run recorded.
"""

from __future__ import annotations

from typing import Any

from runtime_support import run_in

from executor.results import RunStatus
from executor.session import FINALIZE_PROMPT

READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}


def _zuno(fs, agents: dict[str, Any], rel: str = ".zuno/zuno.json", **top: Any) -> None:
    fs.json(rel, {**top, "agents": agents})


# --- steps ---------------------------------------------------------------------------------


def test_step_limit_sends_one_request_with_no_tools(fs) -> None:
    """Spec (zuno-custom-agents.md): When the limit is exhausted and the model still requests
    continuation, Zuno sends one additional text-only request with no tools, asking for a
    concise account of completed work, remaining work, evidence, and blockers.

    The last request defines no tools at all (not tools with a "none" choice), and its
    messages carry no tool-call blocks, which a provider would refuse without tools.
    """
    _zuno(fs, {"a": {"steps": 2}})
    ran = run_in(fs, "a", [READ, READ, {"text": "Done: read it twice. Left: nothing."}])
    *working, last = ran.requests
    assert [len(r.tools) > 0 for r in working] == [True, True]
    assert last.tools == ()
    assert all(not m.tool_calls and m.role != "tool" for m in last.messages)
    assert last.messages[-1].role == "user" and last.messages[-1].content.endswith(
        FINALIZE_PROMPT)
    assert "[tool call read_file" in last.messages[2].content
    assert "# Project" in last.messages[3].content  # the tool result, as text
    assert ran.record.final_text.startswith("Done")


def test_step_limit_is_not_reported_as_completed(fs) -> None:
    """Spec (zuno-custom-agents.md): It does not silently raise or reset the limit.

    A run stopped by its limit says so: its status is ``step_limit``, not ``completed``
    (the summary is not the answer to the task).
    """
    _zuno(fs, {"a": {"steps": 1}})
    ran = run_in(fs, "a", [READ, {"text": "Done: one read. Left: the rest."}])
    assert ran.record.status is RunStatus.STEP_LIMIT
    assert ran.record.steps == 1 and len(ran.record.audit) == 1
    answered = run_in(fs, "a", [{"text": "no tools needed"}])
    assert answered.record.status is RunStatus.COMPLETED
