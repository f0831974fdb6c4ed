"""A run recorded on another machine, carried into this ledger: packed there, landed here.

A fanout child that ran on a cluster node (:mod:`executor.scheduling.cluster`)
was recorded in that node's own ledger. :func:`pack_run` reads its directory
there as plain data (the record, transcript, journal, exact diff and preimages);
:func:`land_run` writes it into the parent's ledger, so ``corral runs``, ``show``,
``logs``, ``diff`` and ``apply`` find it as they find a local child.

What comes back is bytes from a machine that ran an untrusted child, so
:func:`land_run` trusts none of it:

- the record must parse as a :class:`RunRecord` (unknown fields refused), be the
  run the parent planned (its id, its fanout) and be finished;
- the run's directory is named by the *planned* id only (an id is letters,
  digits, ``-`` and ``_``): nothing returned names a path here;
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
import re
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from executor.errors import ExecutorError
from executor.ledger.journal import JOURNAL
from executor.ledger.records import RunRecord, RunStatus, check_id_prefix

__all__ = ["RemoteRecordRefused", "land_run", "pack_run"]

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


def pack_run(ledger: Path, run_id: str) -> dict[str, Any]:
    """Run ``run_id`` of ``ledger`` as plain data (:func:`land_run` takes it)."""
    check_id_prefix(run_id)
    directory = ledger / run_id

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


def _check(packed: object, run_id: str, fanout: str | None) -> tuple[RunRecord, dict[str, Any]]:
    if not isinstance(packed, Mapping) or set(packed) != {*_FILES, "preimages"}:
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
    if record.run_id != run_id:
        raise _refuse(run_id, f"it names another run, {record.run_id[:80]!r}")
    if record.fanout != fanout:
        raise _refuse(run_id, f"it names another fanout, {str(record.fanout)[:80]!r}")
    if record.status is RunStatus.RUNNING or record.parent_run is not None:
        raise _refuse(run_id, "it is not a finished top-level run")
    patch = packed["patch"]
    if record.diff_sha256 != hashlib.sha256(patch).hexdigest():
        raise _refuse(run_id, "its diff is not the one its record states")
    return record, dict(packed)


def land_run(ledger: Path, packed: object, *, run_id: str, fanout: str | None,
             notes: Sequence[str] = ()) -> RunRecord:
    """Write what :func:`pack_run` returned on another machine as run ``run_id`` (the
    planned id) of ``ledger``, after checking all of it (see the module docstring);
    ``notes`` are added to its record. Its record as written."""
    check_id_prefix(run_id)
    record, parts = _check(packed, run_id, fanout)
    transcript = _objects(run_id, "transcript", parts["transcript"])
    journal = _objects(run_id, "journal", parts["journal"])
    patch: bytes = parts["patch"]
    record = record.model_copy(update={
        "diff": patch.decode("utf-8", "replace"), "owner": None, "sandbox_id": None,
        "notes": [*record.notes, *notes]})
    ledger.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = ledger / run_id
    staging = ledger / f".tmp-{run_id}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        (staging / "transcript.jsonl").write_bytes(transcript)
        (staging / JOURNAL).write_bytes(journal)
        (staging / "diff.patch").write_bytes(patch)
        if parts["preimages"]:
            (staging / "preimages").mkdir()
            for blob_id, content in parts["preimages"].items():
                (staging / "preimages" / blob_id).write_bytes(content)
        (staging / "record.json").write_text(
            json.dumps(record.model_dump(mode="json"), ensure_ascii=True, indent=2),
            encoding="utf-8")
        if final.exists():
            raise _refuse(run_id, "this ledger holds a run of that id already")
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return record
