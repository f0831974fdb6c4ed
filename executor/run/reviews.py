"""Response reviewers: agents that check an answer (catalog ``responseReviewers``).

agent-definition-json.md: "responseReviewers array Optional reviewer agents
that check answers (e.g. answer-relevance-checker). Empty for none." corral
runs them after an agent's final answer, in order:

- each reviewer is an agent of the reviewed agent's namespace, resolved
  before the run starts (a missing or unusable reviewer fails the start: an
  answer that was to be checked must not go out unchecked);
- it runs read-only, on the reviewed agent's workspace (so it can check what
  the answer claims), with the reviewed agent's capability as its ceiling,
  no delegation, and its own reviewers not run (no loops);
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
from collections.abc import Callable, Sequence
from typing import Any, Literal

from executor.errors import ExecutorError
from executor.ledger import RunRecord, RunStatus
from policies.contract import AgentContract

__all__ = ["REVIEW_PROMPT", "Verdict", "review_prompt", "run_reviews", "verdict_of"]

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


__all__ += ["review_entry"]
