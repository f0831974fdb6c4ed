"""Which of a fanout's candidates to apply: each one's standing, and the best one.

One reading for every front door: ``corral apply FANOUT --pick best``, the last
line of ``corral fanout`` (the exact command to run next), and the web page's
"Apply #N" buttons (only on a candidate that :attr:`Candidate.recommended`; the
others behind an "apply anyway" disclosure).

A candidate is **recommended** when its run completed, left a diff that is still
``pending``, its check passed (or the fanout ran no check: then nothing was judged,
and :func:`best` refuses), and its diff conflicts with no sibling already applied.
:func:`best` is the first recommended candidate in the fanout's order, of a fanout
that ran a check; with none, it raises naming each candidate's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from executor.errors import ExecutorError
from executor.fanout.check import check_verdict
from executor.ledger import FanoutChild, FanoutRecord, RunRecord, RunStatus, run_status
from executor.ledger.siblings import conflicting_siblings

__all__ = ["Candidate", "NoBestCandidate", "best", "candidates", "next_command"]


class NoBestCandidate(ExecutorError):
    """``--pick best`` found no candidate to apply (each one's reason is in the message):
    a refusal, nothing was written."""

    code = "no_best_candidate"
    exit_code = 4


@dataclass(frozen=True)
class Candidate:
    """One child of a fanout as a candidate to apply: its place, run id, whether applying
    it is recommended, and why not (``None`` when it is)."""

    index: int
    run_id: str
    recommended: bool
    why_not: str | None = None
    #: Whether it has a diff that can still be applied at all (by ``--pick N``).
    appliable: bool = False


def _standing(child: FanoutChild, run: RunRecord | None, fanout: FanoutRecord,
              applied: dict[str, int]) -> Candidate:
    def no(why: str, *, appliable: bool = False) -> Candidate:
        return Candidate(child.index, child.run_id, False, why, appliable)

    if run is None:
        return no("it never started")
    status = run_status(run)
    if status is RunStatus.RUNNING:
        return no("it is still running")
    if not run.diff and not run.changed_files:
        return no("it changed nothing")
    if run.state == "applied":
        return no("it is applied")
    if run.state == "superseded":
        by = applied.get(run.superseded_by or "")
        return no(f"it is superseded by #{by} (applied), whose diff conflicts with it"
                  if by is not None else "it is superseded", appliable=True)
    if run.state == "discarded":
        return no("it was discarded", appliable=True)
    if run.continued_by is not None:
        return no(f"it was continued by run {run.continued_by}", appliable=True)
    if status is not RunStatus.COMPLETED:
        return no(f"it ended {status.value}", appliable=True)
    clashes = {other: paths for other, paths in
               conflicting_siblings(fanout.conflicts, run.run_id).items() if other in applied}
    if clashes:
        other, paths = next(iter(clashes.items()))
        return no(f"it conflicts with #{applied[other]} (applied) in {', '.join(paths)}",
                  appliable=True)
    if fanout.check_command:
        verdict = check_verdict(run.check)
        if verdict is None:
            return no("its check did not run", appliable=True)
        if verdict == "failed":
            code = (run.check or {}).get("exit_code")
            return no(f"its check failed (exit {code})", appliable=True)
        if verdict != "passed":
            return no(f"its check {verdict}" if verdict == "timed out"
                      else f"its check was {verdict}" if verdict == "skipped"
                      else "its check could not run", appliable=True)
    return Candidate(child.index, child.run_id, True, None, True)


def candidates(fanout: FanoutRecord,
               children: Sequence[tuple[FanoutChild, RunRecord | None]]) -> list[Candidate]:
    """Every child of ``fanout`` (as planned, and its record or ``None``) as a candidate,
    in its order."""
    applied = {child.run_id: child.index for child, run in children
               if run is not None and run.state == "applied"}
    return [_standing(child, run, fanout, applied) for child, run in children]


def best(fanout: FanoutRecord,
         children: Sequence[tuple[FanoutChild, RunRecord | None]]) -> Candidate:
    """The first candidate whose check passed and whose diff conflicts with nothing
    already applied; :class:`NoBestCandidate` (each candidate's reason) when there is
    none, or when the fanout ran no check (nothing says which is best)."""
    found = candidates(fanout, children)
    hint = (f"`corral show {fanout.fanout_id}` compares them; `corral apply "
            f"{fanout.fanout_id} --pick N` applies child N as you choose")
    if not fanout.check_command:
        raise NoBestCandidate(
            f"fanout {fanout.fanout_id} ran no check command, so none of its candidates "
            "passed one: --pick best has nothing to go by", operation="pick",
            context={"fanout": fanout.fanout_id}, hint=hint)
    for candidate in found:
        if candidate.recommended:
            return candidate
    reasons = "; ".join(f"#{c.index} {c.why_not}" for c in found)
    raise NoBestCandidate(
        f"no candidate of fanout {fanout.fanout_id} passed its check and conflicts with "
        f"nothing applied: {reasons or 'it has no children'}", operation="pick",
        context={"fanout": fanout.fanout_id}, hint=hint)


def next_command(fanout: FanoutRecord,
                 children: Sequence[tuple[FanoutChild, RunRecord | None]]) -> str | None:
    """The ``corral apply`` command that applies what the fanout recommends: ``--pick
    best`` when a check picks one, ``--pick N`` when one candidate alone can be applied,
    ``--pick N`` as it is (choose N) when several can; ``None`` when nothing is left to
    apply (every diff applied, superseded, discarded or never made)."""
    found = candidates(fanout, children)
    if fanout.check_command and any(c.recommended for c in found):
        return f"corral apply {fanout.fanout_id} --pick best"
    states = {child.index: run.state for child, run in children if run is not None}
    open_ = [c for c in found if c.appliable and states.get(c.index) == "pending"]
    if len(open_) == 1:
        return f"corral apply {fanout.fanout_id} --pick {open_[0].index}"
    if open_:
        return f"corral apply {fanout.fanout_id} --pick N"
    return None
