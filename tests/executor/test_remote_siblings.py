"""A Ray node's pack may not reach its siblings or set what only the parent decides (issue 28).

A hostile node named a sibling's planned id as its own delegated child: the sibling's
running record (``follow_run``'s) was replaced by the node's, and the sibling's own result
was then refused as "already held". It also set ``state``, ``continued_by`` and
``hand_changes``, which only this machine's user and corral decide. Each pack here is
hand-crafted as such a node would return it; no cluster is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_remote_records import FANOUT, RUN, below, packed

from executor.ledger import FanoutChild, FanoutRecord, find_run, write_fanout
from executor.ledger.imports import PROVISIONAL, RemoteRecordRefused, follow_run, land_run

SIBLING = "20260101-000000-5151b1"
CHILD = "20260101-000000-c41d00"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """A ledger whose fanout planned two children, RUN and SIBLING."""
    place = tmp_path / "ledger"
    write_fanout(place, FanoutRecord(
        fanout_id=FANOUT, prompt="p", created_at="2026-01-01T00:00:00",
        children=[FanoutChild(index=1, run_id=RUN, agent="w"),
                  FanoutChild(index=2, run_id=SIBLING, agent="w")]))
    return place


def _follow(ledger: Path, run_id: str) -> bytes:
    """``run_id``'s running record, as the parent makes it from its node's first tail."""
    record = json.loads(packed(status="running")["record"]) | {"run_id": run_id}
    follow_run(ledger, run_id=run_id, fanout=FANOUT, record=json.dumps(record).encode(),
               source="a", offset=0, lines=b'{"t": 1, "kind": "prompt"}\n')
    return (ledger / run_id / "record.json").read_bytes()


def _entries(ledger: Path) -> list[str]:
    return sorted(p.name for p in ledger.iterdir())


def test_a_sibling_s_running_record_is_never_replaced(ledger: Path) -> None:
    before = _follow(ledger, SIBLING)
    hostile = packed(children=[SIBLING]) | {"below": [below(
        run_id=SIBLING, final_text="the sibling's answer, written by another node")]}
    with pytest.raises(RemoteRecordRefused, match=f"run {SIBLING} below it is a run the "
                       "fanout planned"):
        land_run(ledger, hostile, run_id=RUN, fanout=FANOUT)
    assert (ledger / SIBLING / "record.json").read_bytes() == before
    assert (ledger / SIBLING / PROVISIONAL).is_file()
    assert _entries(ledger) == sorted([SIBLING, "fanouts"])
    # The sibling's own result still lands in its place.
    land_run(ledger, packed(run_id=SIBLING), run_id=SIBLING, fanout=FANOUT)
    assert find_run(ledger, SIBLING).status.value == "completed"


def test_a_sibling_s_id_is_refused_before_the_sibling_reports(ledger: Path) -> None:
    hostile = packed(children=[SIBLING]) | {"below": [below(run_id=SIBLING)]}
    with pytest.raises(RemoteRecordRefused, match="a run the fanout planned"):
        land_run(ledger, hostile, run_id=RUN, fanout=FANOUT)
    assert _entries(ledger) == ["fanouts"]


def test_a_run_below_that_this_ledger_holds_in_any_form_is_refused(ledger: Path) -> None:
    """Another fanout's remote child, still running here: its running record is not this
    run's to replace."""
    other = "20260101-000000-07e000"
    before = _follow(ledger, other)
    hostile = packed(children=[other]) | {"below": [below(run_id=other)]}
    with pytest.raises(RemoteRecordRefused, match=f"holds run {other} already"):
        land_run(ledger, hostile, run_id=RUN, fanout=FANOUT)
    assert (ledger / other / "record.json").read_bytes() == before


@pytest.mark.parametrize("case", ["itself", "one child twice"])
def test_a_pack_that_holds_one_run_twice_is_refused(ledger: Path, case: str) -> None:
    if case == "itself":  # the planned run as a run below itself
        hostile = packed(children=[RUN]) | {"below": [below(run_id=RUN)]}
    else:
        hostile = packed(children=[CHILD]) | {"below": [
            below(run_id=CHILD, children=[CHILD]), below(run_id=CHILD, parent_run=CHILD)]}
    with pytest.raises(RemoteRecordRefused, match="twice"):
        land_run(ledger, hostile, run_id=RUN, fanout=FANOUT)
    assert _entries(ledger) == ["fanouts"]


LOCAL = {"state": "applied", "state_changed_at": "2026-01-01T00:00:00",
         "continued_by": SIBLING, "continues": "20260101-000000-0000aa",
         "hand_changes": ["README.md"]}


def test_what_only_this_machine_decides_is_reset_as_a_run_lands(ledger: Path) -> None:
    running = json.loads(packed(status="running")["record"]) | LOCAL
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=json.dumps(running).encode(),
               source="a", offset=0, lines=b"")
    shown = find_run(ledger, RUN)
    assert (shown.state, shown.continued_by, shown.continues, shown.hand_changes) == (
        "pending", None, None, [])
    pack = packed(children=[CHILD], **LOCAL) | {"below": [below(run_id=CHILD, **LOCAL)]}
    landed = land_run(ledger, pack, run_id=RUN, fanout=FANOUT)
    for record in (landed, find_run(ledger, RUN), find_run(ledger, CHILD)):
        assert record.state == "pending" and record.state_changed_at == ""
        assert record.continued_by is None and record.continues is None
        assert record.hand_changes == []
