"""A run recorded on another machine, carried into this ledger: packed there, landed here.

A fanout child that ran on a cluster node (:mod:`executor.scheduling.cluster`)
was recorded in that node's own ledger. :func:`pack_run` reads its directory
there as plain data (the record, transcript, journal, exact diff and preimages);
:func:`land_run` writes it into the parent's ledger, so ``corral runs``, ``show``,
``logs``, ``diff`` and ``apply`` find it as they find a local child.

What comes back is bytes from a machine that ran an untrusted child, so
:func:`land_run` trusts none of it:

- the record must parse as a :class:`RunRecord` (unknown fields refused), be the
  run the parent planned (its id, its fanout, no parent) and be finished; a run
  below it (a delegated child, a reviewer: ``below``) must be one a run already
  accepted names as its own, with that run as its parent;
- a run's directory is named by an id the parent planned or an accepted run
  named, and an id is letters, digits, ``-`` and ``_``: nothing returned names
  a path here, and a run this ledger holds already is never replaced (only the
  planned run's own running record, :func:`follow_run`'s);
- a run below it must be fresh: no id the fanout planned (a sibling's, whose
  running record it would replace or whose place it would take), none this
  ledger holds in any form, none twice;
- what only this machine decides is never taken from a node: what the user did
  with a run (``state``), which run continues which (``continues``,
  ``continued_by``), what was changed by hand (``hand_changes``) and the process
  and sandbox that own it are reset as the record lands;
- the diff's sha256 must be the one the record states, and the record's display
  text of the diff is made here from the exact bytes (what ``corral diff`` shows
  is what ``corral apply`` merges, and ``apply`` checks the patch as it checks
  any: :mod:`executor.apply`);
- each transcript and journal line must be one JSON object; a preimage must be
  named by its git blob id and hash to it; anything else is refused whole.

The directory is written as :func:`executor.ledger.store.write_run` writes one:
in a staging directory next to its place, then renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from executor.errors import ExecutorError
from executor.ledger.fanout_record import FANOUTS
from executor.ledger.fanouts import find_fanout
from executor.ledger.journal import JOURNAL
from executor.ledger.rebuild import indexed
from executor.ledger.records import (
    ID_PREFIX,
    RunRecord,
    RunStatus,
    check_id_prefix,
    running_owner,
)
from executor.ledger.store import staging_dir, swap_in

__all__ = ["PROVISIONAL", "RemoteRecordRefused", "follow_run", "land_run", "pack_run"]

#: In a run's directory while the run still runs on another machine (:func:`follow_run`).
PROVISIONAL = "remote-running"
_BLOB = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_FILES = ("record", "transcript", "journal", "patch")


class RemoteRecordRefused(ExecutorError):
    """What a remote machine returned for a run is not a record this ledger accepts."""

    code = "remote_record_refused"
    exit_code = 3


def _refuse(run_id: str, why: str) -> RemoteRecordRefused:
    return RemoteRecordRefused(
        f"the record returned for run {run_id} was refused: {why}", operation="land_run",
        context={"run_id": run_id},
        hint="the node that ran it returned something corral never writes; suspect the node")


#: Runs below one remote child (its delegated children, reviewers) carried back at most.
MAX_BELOW = 256


def _linked(record: RunRecord) -> list[str]:
    """The runs ``record`` names as its own: delegated children, then reviewers."""
    reviewers = [str(r.get("run_id")) for r in record.reviews if r.get("run_id")]
    return list(dict.fromkeys([*record.children, *reviewers]))


def _pack_one(directory: Path) -> dict[str, Any]:
    def read(name: str) -> bytes:
        path = directory / name
        return path.read_bytes() if path.is_file() and not path.is_symlink() else b""

    preimages = {}
    if (directory / "preimages").is_dir():
        preimages = {item.name: item.read_bytes()
                     for item in sorted((directory / "preimages").iterdir())
                     if item.is_file() and not item.is_symlink()}
    return {"record": read("record.json"), "transcript": read("transcript.jsonl"),
            "journal": read(JOURNAL), "patch": read("diff.patch"), "preimages": preimages}


def pack_run(ledger: Path, run_id: str) -> dict[str, Any]:
    """Run ``run_id`` of ``ledger`` and every run below it (``below``) as plain data
    (:func:`land_run` takes it)."""
    check_id_prefix(run_id)
    packed = _pack_one(ledger / run_id)
    below: list[dict[str, Any]] = []
    queue = [run_id]
    seen = {run_id}
    while queue and len(below) < MAX_BELOW:
        try:
            record = RunRecord.model_validate_json((ledger / queue.pop(0) / "record.json")
                                                   .read_bytes())
        except (OSError, ValidationError):
            continue
        for child in _linked(record):
            if child not in seen and ID_PREFIX.fullmatch(child) and (ledger / child).is_dir():
                seen.add(child)
                queue.append(child)
                below.append(_pack_one(ledger / child))
    return packed | {"below": below[:MAX_BELOW]}


def _objects(run_id: str, name: str, data: bytes) -> bytes:
    """``data`` if every line is one JSON object (ASCII, as corral writes them)."""
    try:
        lines = data.decode("ascii").splitlines()
        if not all(isinstance(json.loads(line), dict) for line in lines):
            raise ValueError("a line is not a JSON object")
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _refuse(run_id, f"its {name} is not JSON lines: {exc}"[:300]) from None
    return "".join(f"{line}\n" for line in lines).encode("ascii")


def _blob_id(content: bytes, length: int) -> str:
    header = f"blob {len(content)}\0".encode()
    digest = hashlib.sha1 if length == 40 else hashlib.sha256
    return digest(header + content, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class _Checked:
    record: RunRecord
    transcript: bytes
    journal: bytes
    patch: bytes
    preimages: dict[str, bytes]


def _check(packed: object, run_id: str, fanout: str | None, *, parent: str | None,
           allowed: set[str], root: bool) -> _Checked:
    """One packed run, checked: it must be one of ``allowed`` (for the root, the planned
    id), below ``parent``, of ``fanout``, finished, its parts what corral writes."""
    keys = {*_FILES, "preimages", *(("below",) if root else ())}
    if not isinstance(packed, Mapping) or set(packed) != keys:
        raise _refuse(run_id, "it is not a packed run")
    if not all(isinstance(packed[name], bytes) for name in _FILES):
        raise _refuse(run_id, "its parts are not bytes")
    preimages = packed["preimages"]
    if not isinstance(preimages, Mapping):
        raise _refuse(run_id, "its preimages are not a mapping")
    for name, content in preimages.items():
        if not (isinstance(name, str) and _BLOB.fullmatch(name) and isinstance(content, bytes)
                and _blob_id(content, len(name)) == name):
            raise _refuse(run_id, f"preimage {str(name)[:80]!r} is not a blob named by its id")
    try:
        record = RunRecord.model_validate_json(packed["record"])
    except ValidationError as exc:
        raise _refuse(run_id, f"it is not a run record: {exc.error_count()} error(s): "
                      f"{exc.errors()[0]['msg']}") from None
    if record.run_id not in allowed or not ID_PREFIX.fullmatch(record.run_id):
        raise _refuse(run_id, f"it names another run, {record.run_id[:80]!r}")
    if record.fanout != fanout:
        raise _refuse(run_id, f"it names another fanout, {str(record.fanout)[:80]!r}")
    if record.parent_run != parent:
        raise _refuse(run_id, f"{record.run_id} names another parent run")
    if record.status is RunStatus.RUNNING:
        raise _refuse(run_id, f"{record.run_id} is not finished")
    if record.diff_sha256 != hashlib.sha256(packed["patch"]).hexdigest():
        raise _refuse(run_id, f"the diff of {record.run_id} is not the one its record states")
    return _Checked(record, _objects(run_id, "transcript", packed["transcript"]),
                    _objects(run_id, "journal", packed["journal"]), packed["patch"],
                    dict(preimages))


def _checked_tree(packed: object, run_id: str, fanout: str | None) -> list[_Checked]:
    """The planned run and every run below it, each checked, before anything is written."""
    root = _check(packed, run_id, fanout, parent=None, allowed={run_id}, root=True)
    below = cast(Mapping[str, Any], packed)["below"]
    if not isinstance(below, list) or len(below) > MAX_BELOW:
        raise _refuse(run_id, "the runs below it are not a list of packed runs")
    tree = [root]
    linked = dict.fromkeys(_linked(root.record), run_id)
    for item in below:
        record = item.get("record") if isinstance(item, Mapping) else None
        try:
            claimed = json.loads(record)["run_id"] if isinstance(record, bytes) else None
        except (ValueError, KeyError, TypeError):
            claimed = None
        if not isinstance(claimed, str) or claimed not in linked:
            raise _refuse(run_id, "a run below it is none its runs named")
        checked = _check(item, run_id, fanout, parent=linked.pop(claimed),
                         allowed={claimed}, root=False)
        linked |= {child: claimed for child in _linked(checked.record)
                   if child not in {c.record.run_id for c in tree}}
        tree.append(checked)
    return tree


def _local_only() -> dict[str, Any]:
    """The fields of a run record only this machine sets (what the user did with the run,
    which run continues which, changes by hand), as a run that just ended has them: a
    node's values are replaced by these."""
    return {"state": "pending", "state_changed_at": "", "continues": None,
            "continued_by": None, "hand_changes": []}


def _write(ledger: Path, run: _Checked, notes: Sequence[str]) -> RunRecord:
    run_id = run.record.run_id
    record = run.record.model_copy(update={
        "diff": run.patch.decode("utf-8", "replace"), "owner": None, "sandbox_id": None,
        "notes": [*run.record.notes, *notes], **_local_only()})
    final = ledger / run_id
    with indexed(ledger, run=run_id):
        _write_dir(ledger, run, record, final)
    return record


def _write_dir(ledger: Path, run: _Checked, record: RunRecord, final: Path) -> None:
    staging = staging_dir(ledger, run.record.run_id)
    try:
        (staging / "transcript.jsonl").write_bytes(run.transcript)
        (staging / JOURNAL).write_bytes(run.journal)
        (staging / "diff.patch").write_bytes(run.patch)
        if run.preimages:
            (staging / "preimages").mkdir()
            for blob_id, content in run.preimages.items():
                (staging / "preimages" / blob_id).write_bytes(content)
        (staging / "record.json").write_text(
            json.dumps(record.model_dump(mode="json"), ensure_ascii=True, indent=2),
            encoding="utf-8")
        # The running record follow_run made is replaced whole.
        swap_in(staging, final, replace=(final / PROVISIONAL).is_file())
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def follow_run(ledger: Path, *, run_id: str, fanout: str | None, record: bytes,
               source: str, offset: int, lines: bytes) -> None:
    """While planned run ``run_id`` runs on another machine (``source``: which attempt):
    its running record (made here once, owned by this process) and its journal's
    ``lines`` from byte ``offset`` of that machine's journal, appended in order, so
    ``corral runs``, ``show`` and ``logs -f`` see it running. The record's fields are
    checked as :func:`land_run` checks them; a line that is not one JSON object is
    refused. :func:`land_run` replaces it all with what the run recorded."""
    check_id_prefix(run_id)
    directory = ledger / run_id
    marker = directory / PROVISIONAL
    if not directory.exists():
        try:
            running = RunRecord.model_validate_json(record)
        except ValidationError:
            raise _refuse(run_id, "its running record is not a run record") from None
        if (running.run_id, running.fanout, running.parent_run) != (run_id, fanout, None):
            raise _refuse(run_id, "its running record is another run's")
        running = running.model_copy(update={
            "status": RunStatus.RUNNING, "owner": running_owner(), "sandbox_id": None,
            "diff": "", "diff_sha256": None, "changed_files": [], **_local_only()})
        ledger.mkdir(parents=True, exist_ok=True, mode=0o700)
        with indexed(ledger, run=run_id):
            staging = staging_dir(ledger, run_id)
            (staging / PROVISIONAL).write_text(json.dumps({"source": source, "base": 0}))
            (staging / JOURNAL).write_bytes(b"")
            (staging / "record.json").write_text(
                json.dumps(running.model_dump(mode="json"), ensure_ascii=True, indent=2),
                encoding="utf-8")
            staging.rename(directory)
    if not marker.is_file():
        return  # landed already: nothing more to follow
    state = json.loads(marker.read_text())
    journal = directory / JOURNAL
    if state.get("source") != source:  # retried elsewhere: its journal follows the first's
        state = {"source": source, "base": journal.stat().st_size}
        marker.write_text(json.dumps(state))
    if int(state["base"]) + offset != journal.stat().st_size:
        return  # a gap or a repeat: the landed record will hold the whole journal
    with journal.open("ab") as handle:
        handle.write(_objects(run_id, "journal", lines))


def _planned(ledger: Path, fanout: str | None) -> frozenset[str]:
    """The run ids fanout ``fanout`` planned for its children, as its record here says
    (none when it has no record here)."""
    if fanout is None:
        return frozenset()
    check_id_prefix(fanout, "fanout id")
    if not (ledger / FANOUTS / f"{fanout}.json").is_file():
        return frozenset()
    return frozenset(child.run_id for child in find_fanout(ledger, fanout).children)


def land_run(ledger: Path, packed: object, *, run_id: str, fanout: str | None,
             notes: Sequence[str] = ()) -> RunRecord:
    """Write what :func:`pack_run` returned on another machine as run ``run_id`` (the
    planned id) of ``ledger``, with the runs below it, after checking all of it (see the
    module docstring); ``notes`` are added to its record. Its record as written (in place
    of the running one :func:`follow_run` made, if any)."""
    check_id_prefix(run_id)
    tree = _checked_tree(packed, run_id, fanout)
    ids = [run.record.run_id for run in tree]
    if len(set(ids)) != len(ids):
        raise _refuse(run_id, "it holds one run twice")
    planned = _planned(ledger, fanout)
    for below in ids[1:]:
        if below in planned:
            raise _refuse(run_id, f"run {below} below it is a run the fanout planned: a "
                          "node names its own children, never another child of the fanout")
        if os.path.lexists(ledger / below):
            raise _refuse(run_id, f"this ledger holds run {below} already")
    if (ledger / run_id).exists() and not (ledger / run_id / PROVISIONAL).is_file():
        raise _refuse(run_id, f"this ledger holds run {run_id} already")
    ledger.mkdir(parents=True, exist_ok=True, mode=0o700)
    for run in tree[1:]:
        _write(ledger, run, ())
    return _write(ledger, tree[0], notes)
