"""What a cluster node returns for a fanout child is landed in the parent's ledger only if
it is a record the parent planned (``executor.ledger.imports``); no cluster needed here.

``test_fanout_ray.py`` sends the same hostile packs through a real Ray cluster.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from executor.ledger import find_run
from executor.ledger.imports import RemoteRecordRefused, land_run, pack_run

RUN = "20260101-000000-abcdef"
FANOUT = "f-1"
PATCH = b"--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+x\n"


def packed(patch: bytes = PATCH, **record: Any) -> dict[str, Any]:
    """A run as a node packs it (``below`` empty), its record's fields overridden."""
    base = {"run_id": RUN, "agent": "w", "agent_format": "ngn", "agent_source": "x",
            "contract_digest": "d", "prompt": "p", "backend": "bubblewrap",
            "mode": "worktree", "status": "completed", "fanout": FANOUT,
            "diff": patch.decode(), "diff_sha256": hashlib.sha256(patch).hexdigest()}
    return {"record": json.dumps(base | record).encode(), "transcript": b"",
            "journal": b'{"t": 1, "kind": "phase"}\n', "patch": patch, "preimages": {},
            "below": []}


def below(**record: Any) -> dict[str, Any]:
    one = packed(**({"parent_run": RUN} | record))
    del one["below"]
    return one


#: A node's return that must be refused whole: name -> the pack.
CASES: dict[str, dict[str, Any]] = {
    "escape": packed(run_id="../../../escape"),
    "other run": packed(run_id="20260101-000000-000000"),
    "other fanout": packed(fanout="f-2"),
    "patch swapped": packed() | {"patch": b"--- a/y\n+++ b/../../etc/passwd\n"},
    "preimage path": packed() | {"preimages": {"../../x": b"x"}},
    "preimage not its blob": packed() | {"preimages": {"0" * 40: b"x"}},
    "unknown field": packed(owner_path="/etc"),
    "not json": packed() | {"journal": b"\x1b]2;title\x07\n"},
    "still running": packed(status="running"),
    "a parent here": packed(parent_run="20260101-000000-000001"),
    "a run below it that it never named": packed() | {"below": [
        below(run_id="20260101-000000-ffffff")]},
    "a named run below it, escaping": packed(children=["../../up"]) | {"below": [
        below(run_id="../../up")]},
    "a named run below it, of another parent": packed(
        children=["20260101-000000-ffffff"]) | {"below": [
            below(run_id="20260101-000000-ffffff", parent_run="20260101-000000-000001")]},
    "not a pack": {"record": "{}"},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_pack_is_refused_and_nothing_is_written(case: str, tmp_path: Path) -> None:
    ledger = tmp_path / "state" / "ledger"
    with pytest.raises(RemoteRecordRefused, match="was refused"):
        land_run(ledger, CASES[case], run_id=RUN, fanout=FANOUT)
    assert not ledger.exists() or list(ledger.iterdir()) == []
    assert [p for p in tmp_path.rglob("*") if p.name in ("escape", "up")] == []


def test_an_honest_pack_lands_with_the_runs_below_it_and_shows_its_exact_diff(
        tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    child = "20260101-000000-ffffff"
    blob = b"old\n"
    blob_id = hashlib.sha1(b"blob 4\0" + blob, usedforsecurity=False).hexdigest()
    pack = packed(children=[child], diff="a harmless-looking diff") | {
        "below": [below(run_id=child)], "preimages": {blob_id: blob}}
    record = land_run(ledger, pack, run_id=RUN, fanout=FANOUT, notes=["ran on Ray node n"])
    assert record.diff == PATCH.decode()  # what `corral diff` shows is what apply merges
    assert find_run(ledger, RUN).notes == ["ran on Ray node n"]
    assert find_run(ledger, child).parent_run == RUN
    assert (ledger / RUN / "preimages" / blob_id).read_bytes() == blob
    assert (ledger / RUN / "diff.patch").read_bytes() == PATCH
    again = pack_run(ledger, RUN)  # what a node packs is what lands
    assert again["patch"] == PATCH and len(again["below"]) == 1
    with pytest.raises(RemoteRecordRefused, match="holds run"):
        land_run(ledger, pack, run_id=RUN, fanout=FANOUT)  # never replaced


def test_a_running_remote_child_is_followed_here_then_replaced_by_its_record(
        tmp_path: Path) -> None:
    from executor.ledger.imports import PROVISIONAL, follow_run

    ledger = tmp_path / "ledger"
    running = json.loads(packed(status="running")["record"])
    record = json.dumps(running).encode()
    one, two = b'{"t": 1, "kind": "prompt"}\n', b'{"t": 2, "kind": "turn"}\n'
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=record, source="a", offset=0,
               lines=one)
    shown = find_run(ledger, RUN)
    assert shown.status.value == "running" and shown.diff == ""
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=record, source="a", offset=0,
               lines=one)  # a repeat is not appended twice
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=record, source="a",
               offset=len(one), lines=two)
    assert (ledger / RUN / "journal.jsonl").read_bytes() == one + two
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=record, source="b", offset=0,
               lines=one)  # retried on another node: its journal follows the first's
    assert (ledger / RUN / "journal.jsonl").read_bytes() == one + two + one
    with pytest.raises(RemoteRecordRefused, match="JSON lines"):
        follow_run(ledger, run_id=RUN, fanout=FANOUT, record=record, source="b",
                   offset=len(one), lines=b"\x1b[2J\n")
    other = tmp_path / "other"
    for wrong in (json.dumps(running | {"run_id": "20260101-000000-000000"}),
                  json.dumps(running | {"fanout": "f-2"}), "{}"):
        with pytest.raises(RemoteRecordRefused):
            follow_run(other, run_id=RUN, fanout=FANOUT, record=wrong.encode(), source="a",
                       offset=0, lines=b"")
    assert not other.exists() or list(other.iterdir()) == []
    landed = land_run(ledger, packed(), run_id=RUN, fanout=FANOUT)  # replaces it whole
    assert landed.status.value == "completed" and not (ledger / RUN / PROVISIONAL).exists()
    assert (ledger / RUN / "journal.jsonl").read_bytes() == b'{"t": 1, "kind": "phase"}\n'
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=record, source="a", offset=0,
               lines=one)  # late: a landed run is never followed again
    assert find_run(ledger, RUN).status.value == "completed"


def test_a_remote_child_that_failed_is_recorded_over_its_running_record(
        tmp_path: Path) -> None:
    from executor.fanout.run import _recorded
    from executor.ledger import RunRecord, RunStatus, write_run
    from executor.ledger.imports import PROVISIONAL, follow_run

    ledger = tmp_path / "ledger"
    running = packed(status="running")["record"]
    line = b'{"t": 1, "kind": "prompt"}\n'
    follow_run(ledger, run_id=RUN, fanout=FANOUT, record=running, source="a", offset=0,
               lines=line)
    assert not _recorded(ledger, RUN)  # so the fanout records it (failed, never started...)
    failed = RunRecord.model_validate_json(running).model_copy(
        update={"status": RunStatus.FAILED, "error": {"code": "node_lost"}})
    write_run(ledger, failed, [])
    assert _recorded(ledger, RUN) and not (ledger / RUN / PROVISIONAL).exists()
    assert find_run(ledger, RUN).status.value == "failed"
    assert (ledger / RUN / "journal.jsonl").read_bytes() == line  # what it journaled stays


def test_more_runs_below_than_the_bound_are_refused_whole(tmp_path: Path) -> None:
    """A node returns MAX_BELOW + 1 runs below its child, each one the child names: the
    pack is refused before anything is written (a node cannot fill this ledger)."""
    from executor.ledger.imports import MAX_BELOW

    ids = [f"20260101-000001-{n:06x}" for n in range(MAX_BELOW + 1)]
    pack = packed(children=ids) | {"below": [below(run_id=i) for i in ids]}
    ledger = tmp_path / "ledger"
    with pytest.raises(RemoteRecordRefused, match="runs below it are not a list"):
        land_run(ledger, pack, run_id=RUN, fanout=FANOUT)
    assert not ledger.exists() or list(ledger.iterdir()) == []
    honest = packed(children=ids[:2]) | {"below": [below(run_id=i) for i in ids[:2]]}
    land_run(ledger, honest, run_id=RUN, fanout=FANOUT)  # the same shape, in bounds: lands
    assert find_run(ledger, ids[1]).parent_run == RUN


def test_a_symlinked_file_in_a_nodes_run_dir_is_never_packed(tmp_path: Path) -> None:
    """On the node, a run's ``diff.patch`` and a preimage replaced by symlinks to a file
    outside the ledger (the child's own doing, or another user's): packing reads neither
    link, so the file never travels, and the pack no longer matches its record."""
    ledger = tmp_path / "ledger"
    blob = b"old\n"
    blob_id = hashlib.sha1(b"blob 4\0" + blob, usedforsecurity=False).hexdigest()
    land_run(ledger, packed() | {"preimages": {blob_id: blob}}, run_id=RUN, fanout=FANOUT)
    secret = tmp_path / "secret"
    secret.write_bytes(b"the node's secret\n")
    for link in (ledger / RUN / "diff.patch", ledger / RUN / "preimages" / blob_id):
        link.unlink()
        link.symlink_to(secret)
    pack = pack_run(ledger, RUN)
    assert pack["patch"] == b"" and pack["preimages"] == {}
    assert b"secret" not in json.dumps(pack, default=lambda b: b.decode()).encode()
    with pytest.raises(RemoteRecordRefused, match="is not the one its record states"):
        land_run(tmp_path / "parent", pack, run_id=RUN, fanout=FANOUT)
