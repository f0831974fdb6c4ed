"""Response reviewers: agents that check an answer (catalog ``responseReviewers``).

agent-definition-json.md: "responseReviewers array Optional reviewer agents
that check answers (e.g. answer-relevance-checker). Empty for none." corral
runs them after an agent's final answer, in order:

- each reviewer is an agent of the reviewed agent's namespace, resolved
  before the run starts (a missing or unusable reviewer fails the start: an
  answer that was to be checked must not go out unchecked);
- it runs read-only, on a fresh sandbox of the reviewed agent's recorded diff
  over the state it started from (so it can check what the answer claims, and
  nothing of the agent's session can sway it: :func:`review_workspace`), with
  the reviewed agent's capability as its ceiling, no delegation, and its own
  reviewers not run (no loops: :func:`review_with`);
- it is sent the task and the answer, and asked to begin its reply with
  ``VERDICT: PASS`` or ``VERDICT: FAIL``; a reply with neither, or a review
  run that fails, counts as a failed check;
- every verdict is recorded with the reviewer's run id and text, and one
  failed check makes the run's status ``review_failed`` (a delegating parent
  and the CLI see it), with the answer kept as it was.

A run stopped by its step limit is not reviewed: its text is a progress
summary, not the answer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from executor.errors import ExecutorError, ModelError, RunError
from executor.ledger import RunRecord, RunStatus
from executor.run.prepare import model_for, usable_reviewers
from executor.run.settings import deadline_after
from policies.capability import derive_child
from policies.contract import AgentContract, SandboxMode
from sandbox.replay import open_replay

if TYPE_CHECKING:
    from executor.run.agent import AgentRun

__all__ = ["REVIEW_PROMPT", "Verdict", "review_answer", "review_entry", "review_prompt",
           "review_with", "review_workspace", "run_reviews", "verdict_of"]

Verdict = Literal["pass", "fail", "unclear", "error"]

REVIEW_PROMPT = """\
You are checking the answer another agent ({agent}) gave to a task. The workspace you can \
read is the one it worked in.

The task it was given:
<task>
{task}
</task>

Its answer:
<answer>
{answer}
</answer>

Check the answer: does it address the task, and is what it claims true? Begin your reply \
with a line that is exactly VERDICT: PASS or VERDICT: FAIL, then give your reasons."""

_VERDICT = re.compile(r"^[\W_]*verdict[\W_]*[:=][\W_]*(pass|fail)\b", re.IGNORECASE)


def review_prompt(agent: str, task: str, answer: str) -> str:
    """The reviewer's task: the reviewed agent's task and answer."""
    return REVIEW_PROMPT.format(agent=agent, task=task, answer=answer)


def verdict_of(text: str) -> Verdict:
    """The verdict a reviewer's reply states (its first ``VERDICT:`` line), else unclear."""
    for line in text.splitlines():
        match = _VERDICT.match(line.strip())
        if match:
            return "pass" if match.group(1).lower() == "pass" else "fail"
    return "unclear"


def review_entry(reviewer: str, run_id: str | None, verdict: Verdict,
                 text: str) -> dict[str, Any]:
    """One review as the run record keeps it."""
    return {"reviewer": reviewer, "run_id": run_id, "verdict": verdict, "text": text[:4000]}



def run_reviews(reviewers: Sequence[AgentContract], agent: str, task: str, answer: str,
                review_with: Callable[[AgentContract, str], RunRecord],
                ) -> list[dict[str, Any]]:
    """Run every reviewer on ``answer`` in order (``review_with`` starts one, read-only, and
    returns its record); one entry each, a failed review run counting as a failed check."""
    prompt = review_prompt(agent, task, answer)
    entries: list[dict[str, Any]] = []
    for reviewer in reviewers:
        try:
            record = review_with(reviewer, prompt)
        except ExecutorError as exc:
            entries.append(review_entry(reviewer.name, None, "error",
                                        f"the review could not start: {exc.message}"))
            continue
        if record.status is not RunStatus.COMPLETED:
            why = record.error.get("message", record.status.value) if record.error else (
                record.status.value)
            entries.append(review_entry(reviewer.name, record.run_id, "error",
                                        f"the review run ended {record.status.value}: {why}"))
            continue
        entries.append(review_entry(reviewer.name, record.run_id,
                                    verdict_of(record.final_text), record.final_text))
    return entries


def review_answer(run: AgentRun, task: str, answer: str) -> list[dict[str, Any]]:
    """Every response reviewer of ``run``'s agent on its ``answer`` to ``task``, each
    reading :func:`review_workspace`; their entries, in order."""
    with review_workspace(run) as root:
        return run_reviews(usable_reviewers(run.contract, run.settings.registry),
                           run.contract.name, task, answer,
                           lambda reviewer, prompt: review_with(run, reviewer, prompt, root))


@contextmanager
def review_workspace(run: AgentRun) -> Iterator[Path]:
    """Where ``run``'s reviewers read: its recorded diff over the state it started from, in
    a fresh sandbox (:func:`sandbox.replay.open_replay`), never its own workspace, so
    nothing of its session (a process it left, a file its diff does not carry) can sway a
    verdict. A read-only agent changed nothing: they read what it read."""
    if run.sandbox is None:
        raise RunError("the reviewed agent has no workspace", code="review")
    if run.capability.sandbox is SandboxMode.READ_ONLY:
        run.sandbox.stop_processes()
        yield run.sandbox.root
        return
    diff = run.sandbox.collect_diff()  # frozen: nothing of this agent runs any more
    replay = open_replay(run.settings.backend, repo=run.repo,
                         snapshot=run.settings.snapshot or run.base, patch=diff.patch,
                         state_root=run.settings.state_root,
                         environment=run.settings.environment)
    try:
        yield replay.root
    finally:
        replay.teardown(discard=True)


def review_with(run: AgentRun, reviewer: AgentContract, prompt: str, root: Path) -> RunRecord:
    """One response reviewer, read-only on ``root`` (:func:`review_workspace`), under
    ``run``'s capability, no delegation; closed as soon as it answered."""
    ceiling = run.capability.model_copy(update={
        "sandbox": SandboxMode.READ_ONLY, "read_only": True, "depth": 1,
        "delegates": frozenset()})
    try:
        model = model_for(run.settings, reviewer, run.model)
    except ModelError as exc:
        raise RunError(f"no model for reviewer {reviewer.name!r}: {exc.message}",
                       code="review") from exc
    remaining = run.deadline - time.monotonic() if run.deadline is not None else None
    review = run.new_child(run.settings, reviewer, derive_child(ceiling, reviewer), model,
                           repo=root,
                           deadline=deadline_after(remaining, reviewer.timeout_seconds),
                           reviewing=True)
    try:
        return review.turn(prompt)
    finally:
        review.close()
