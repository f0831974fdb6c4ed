"""A fanout's children after one of them was applied: the ones it supersedes.

Two children whose diffs conflict (the fanout's conflict matrix,
``FanoutRecord.conflicts``) cannot both be applied. Once one is applied
(``corral apply``, ``--pick``, the web page, MCP ``apply_run``), every sibling
still ``pending`` whose diff conflicts with it is marked ``superseded``, with
``superseded_by`` naming the applied one, so that neither a listing nor
``--pick best`` offers it as if nothing had happened. Its diff stays readable, and
``corral apply`` still applies it when asked (its own checks then say where it
conflicts with the checkout). Siblings that only change the same files in different
places stay ``pending``: they apply one after the other.
"""

from __future__ import annotations

from pathlib import Path

from executor.errors import ExecutorError
from executor.ledger.fanouts import find_fanout
from executor.ledger.records import RunRecord, now_iso
from executor.ledger.store import find_run, rewrite_record

__all__ = ["conflicting_siblings", "supersede_conflicting"]


def conflicting_siblings(conflicts: list[list[object]], run_id: str) -> dict[str, list[str]]:
    """The siblings whose diffs conflict with run ``run_id``'s, each with the paths where
    (from a fanout's ``conflicts``: ``[run_a, run_b, [paths]]``)."""
    found: dict[str, list[str]] = {}
    for entry in conflicts:
        if len(entry) != 3:
            continue
        a, b, paths = entry
        other = b if a == run_id else a if b == run_id else None
        if isinstance(other, str):
            found[other] = [str(p) for p in paths] if isinstance(paths, list) else []
    return found


def supersede_conflicting(ledger: Path, record: RunRecord) -> list[RunRecord]:
    """Mark ``superseded`` every ``pending`` sibling of the applied run ``record`` (a
    fanout's child) whose diff conflicts with its diff; the records so marked, in the
    fanout's order. A run outside a fanout, or a fanout whose record is gone, has none."""
    if record.fanout is None or record.state != "applied":
        return []
    try:
        fanout = find_fanout(ledger, record.fanout)
    except ExecutorError:
        return []
    conflicting = conflicting_siblings(fanout.conflicts, record.run_id)
    marked: list[RunRecord] = []
    for child in fanout.children:
        if child.run_id not in conflicting:
            continue
        try:
            sibling = find_run(ledger, child.run_id)
        except ExecutorError:
            continue
        if sibling.state != "pending" or sibling.continued_by is not None:
            continue
        marked.append(rewrite_record(ledger, sibling.model_copy(update={
            "state": "superseded", "state_changed_at": now_iso(),
            "superseded_by": record.run_id})))
    return marked
