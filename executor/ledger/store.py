"""The run ledger: where run records are kept, written and read.

The ledger lives in the user's state dir, one directory per repository
(:func:`ledger_dir`), never in the working tree or the repository's ``.git``.
A record (:mod:`executor.ledger.records`) is written atomically: into a
temporary directory next to its final place, fsynced, then renamed, so a
reader never sees half a record. What the user did with a run's diff is its
``state``: ``pending``, ``applied`` or ``discarded`` (:func:`set_run_state`);
``corral gc`` turns the record of a run whose process died into a ``crashed``
one with the diff it captured (:func:`finalize_crashed`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from executor.errors import ExecutorError
from executor.ledger.fanout_record import FANOUTS
from executor.ledger.index import index_dir
from executor.ledger.journal import JOURNAL
from executor.ledger.lookup import find_run
from executor.ledger.rebuild import indexed
from executor.ledger.records import (
    RecordError,
    RunRecord,
    RunState,
    RunStatus,
    check_id_prefix,
    now_iso,
    read_record,
    run_status,
)
from executor.models.base import Message
from sandbox.state import check_state_dir, default_state_root

__all__ = [
    "delete_run",
    "discard_run",
    "finalize_crashed",
    "find_run",
    "ledger_dir",
    "list_runs",
    "load_patch",
    "load_transcript",
    "rewrite_record",
    "scan_runs",
    "set_run_check",
    "set_run_state",
    "staging_dir",
    "swap_in",
    "write_run",
]


def _git_common_dir(root: Path) -> Path | None:
    """The common git dir of the repository containing ``root``, read from files only
    (no git process: nothing in the repository's config can run)."""
    for directory in (root, *root.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = Path(text.removeprefix("gitdir:").strip())
            gitdir = gitdir if gitdir.is_absolute() else directory / gitdir
            common = gitdir / "commondir"
            if common.is_file():
                rel = Path(common.read_text(encoding="utf-8").strip())
                return (rel if rel.is_absolute() else gitdir / rel).resolve()
            return gitdir
    return None


def ledger_dir(root: Path, *, env: Mapping[str, str] | None = None) -> Path:
    """Where the runs of the repository at ``root`` are recorded; refused when misplaced.

    ``<state dir>/runs/<key>/`` (the state dir of
    :func:`sandbox.state.default_state_root`), keyed by the repository's
    common git dir, so every worktree of one repository shares one ledger.
    Outside git, the key is the root itself. The ledger is deliberately outside
    the repository: corral never writes its ``.git``, and no child may reach
    other runs' records. So a state dir inside the repository at ``root``, inside
    any git working tree or git dir, raises
    :class:`sandbox.state.StateDirMisplaced` (a user error naming both places and
    the fix) before anything is read or written: every command that uses the
    ledger (``run``, ``runs``, ``show``, ``diff``, ``apply``) goes through here.
    """
    root = root.resolve()
    common = _git_common_dir(root)
    key_path = common.resolve() if common is not None else root
    digest = hashlib.sha256(str(key_path).encode()).hexdigest()[:16]
    name = (key_path.parent.name if key_path.name == ".git" else key_path.name) or "repo"
    ledger = default_state_root(env) / "runs" / f"{name}-{digest}"
    check_state_dir(ledger, repositories=[root, key_path])
    return ledger


def _message_json(message: Message) -> dict[str, Any]:
    return {
        "role": message.role, "content": message.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                        **({"raw_arguments": c.raw_arguments} if c.raw_arguments else {})}
                       for c in message.tool_calls],
        "tool_call_id": message.tool_call_id, "name": message.name,
        "is_error": message.is_error,
    }


def _write(path: Path, data: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _json(data: Any) -> str:
    """ASCII JSON: a lone surrogate (a file name that is not UTF-8) is escaped, never an
    encoding error that would lose the record."""
    return json.dumps(data, ensure_ascii=True, indent=2)


def write_run(ledger: Path, record: RunRecord, transcript: list[Message], *,
              patch: bytes | None = None, keep_transcript: bool = False,
              preimages: Mapping[str, bytes] | None = None) -> Path:
    """Write the record atomically; return its directory.

    ``patch`` is the exact diff (``diff.patch``, what ``corral apply`` merges);
    ``record.diff`` is its text for display, where bytes that are not UTF-8
    are replaced; the record stores the sha256 of the patch bytes
    (``diff_sha256``). ``keep_transcript`` rewrites the record and keeps the
    transcript already there. ``preimages`` ({blob id: bytes}, the versions
    the child started from, for ``corral apply --3way``) go to ``preimages/``.
    The run's journal (:mod:`executor.ledger.journal`) is carried over as it is:
    hard-linked, so its writer keeps appending to the file the new directory holds.
    """
    ledger.mkdir(parents=True, exist_ok=True, mode=0o700)
    with indexed(ledger, run=record.run_id):
        return _write_run(ledger, record, transcript, patch=patch,
                          keep_transcript=keep_transcript, preimages=preimages)


def staging_dir(ledger: Path, name: str) -> Path:
    """A new directory in the index's ``staging/`` (beside the ledger, on its file system)
    to write a run's directory in before it is renamed into place: the ledger holds run
    directories only, and its mtime changes only when one arrives."""
    parent = index_dir(ledger) / "staging"
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = parent / f"{name}-{secrets.token_hex(4)}"
    staging.mkdir()
    return staging


def _write_run(ledger: Path, record: RunRecord, transcript: list[Message], *,
               patch: bytes | None, keep_transcript: bool,
               preimages: Mapping[str, bytes] | None) -> Path:
    final = ledger / record.run_id
    staging = staging_dir(ledger, record.run_id)
    try:
        previous = final / "transcript.jsonl"
        if keep_transcript and previous.is_file():
            _write(staging / "transcript.jsonl", previous.read_text(encoding="utf-8"))
        else:
            _write(staging / "transcript.jsonl",
                   "".join(json.dumps(_message_json(m), ensure_ascii=True) + "\n"
                           for m in transcript))
        _carry_journal(final / JOURNAL, staging / JOURNAL)
        if (final / "apply-backup").is_dir():  # a rewrite keeps what earlier applies saved
            shutil.copytree(final / "apply-backup", staging / "apply-backup", symlinks=True)
        data = record.diff.encode("utf-8", "surrogateescape") if patch is None else patch
        (staging / "diff.patch").write_bytes(data)
        for blob_id, content in (preimages or {}).items():
            if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", blob_id):
                (staging / "preimages").mkdir(exist_ok=True)
                (staging / "preimages" / blob_id).write_bytes(content)
        stored = record.model_copy(update={"diff_sha256": hashlib.sha256(data).hexdigest()})
        _write(staging / "record.json", _json(stored.model_dump(mode="json")))
        # A re-write (a retained child's follow-up) replaces the whole directory.
        swap_in(staging, final, replace=final.exists())
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def swap_in(staging: Path, final: Path, *, replace: bool) -> None:
    """Put a run's directory written whole in ``staging`` at ``final``: renamed into place;
    ``replace``: the one there is renamed away first and removed after, so a reader sees
    the old directory or the new one, never a mix."""
    if not replace:
        staging.rename(final)
        return
    old = staging_dir(final.parent, f"old-{final.name}")
    final.replace(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def delete_run(ledger: Path, run_id: str) -> bool:
    """Remove run ``run_id``'s directory from ``ledger``, and its row from the index with
    it (the one way a run leaves a ledger: a cluster node's copy of a run it handed back,
    :mod:`executor.fanout.remote`); whether there was one. The directory is renamed out of
    the ledger first (a reader sees the run or no run, never half of one), its row dropped,
    then its files removed."""
    check_id_prefix(run_id)
    if run_id == FANOUTS:
        raise ExecutorError(f"{run_id!r} is the ledger's directory of fanout records, not a "
                            "run", code="unknown_run", hint="give a run's id")
    final = ledger / run_id
    if not os.path.lexists(final):
        return False
    with indexed(ledger, run=run_id):
        gone = staging_dir(ledger, f"gone-{run_id}")
        final.rename(gone / run_id)
    shutil.rmtree(gone, ignore_errors=True)
    return True


def _carry_journal(journal: Path, into: Path) -> None:
    """The same file under the new directory (a copy where hard links fail: the writer
    then moves to it, :meth:`executor.ledger.journal.Journal.reattach`)."""
    if not journal.is_file() or journal.is_symlink():
        return
    try:
        os.link(journal, into, follow_symlinks=False)
    except OSError:
        shutil.copyfile(journal, into, follow_symlinks=False)


def scan_runs(ledger: Path) -> tuple[list[RunRecord], list[RecordError]]:
    """Every record, newest first, and every record that cannot be read (one corrupted
    record never hides the others)."""
    if not ledger.is_dir():
        return [], []
    records: list[RunRecord] = []
    broken: list[RecordError] = []
    for entry in sorted(ledger.iterdir(), reverse=True):
        record_file = entry / "record.json"
        if entry.name.startswith(".") or not record_file.is_file():
            continue
        try:
            records.append(_read(record_file))
        except RecordError as exc:
            broken.append(exc)
    return records, broken


def list_runs(ledger: Path) -> list[RunRecord]:
    """Every readable record, newest first (every file read: listings use the index,
    :mod:`executor.ledger.listing`)."""
    return scan_runs(ledger)[0]


_read = read_record


def load_patch(ledger: Path, run_id: str) -> bytes:
    """The exact diff of a run, byte for byte."""
    path = ledger / run_id / "diff.patch"
    return path.read_bytes() if path.is_file() else b""


def load_transcript(ledger: Path, run_id: str) -> list[dict[str, Any]]:
    """The transcript of a run, one dict per message."""
    path = ledger / run_id / "transcript.jsonl"
    if not path.is_file():
        return []
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line]
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"the transcript of run {run_id} is corrupted: {exc}",
                          operation="read_record", context={"transcript": str(path)},
                          hint="`corral show RUN --json` cannot include it; the record and "
                          "the diff are separate files") from exc


def _replace_file(path: Path, data: bytes) -> None:
    """Replace one file of a run's directory atomically, leaving the others (backups,
    preimages) where they are."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def rewrite_record(ledger: Path, record: RunRecord) -> RunRecord:
    """Replace a run's ``record.json`` only, atomically (its diff, digest, transcript,
    journal and backups stay as they are); the record."""
    with indexed(ledger, run=record.run_id):
        _replace_file(ledger / record.run_id / "record.json",
                      _json(record.model_dump(mode="json")).encode())
    return record


def set_run_state(ledger: Path, run_id: str, state: RunState) -> RunRecord:
    """Record what the user did with a run's diff (``applied`` after ``corral apply``,
    ``discarded`` after ``corral discard``); only ``record.json`` is rewritten."""
    record = find_run(ledger, run_id)
    return rewrite_record(ledger, record.model_copy(
        update={"state": state, "state_changed_at": now_iso()}))


def discard_run(ledger: Path, run_id: str) -> tuple[RunRecord, bool]:
    """Mark run ``run_id`` discarded (``corral discard``, MCP ``discard_run``): its record
    and whether it already was. A running run and an applied one are refused: discarding
    either would claim what is not so."""
    record = find_run(ledger, run_id)
    if run_status(record) is RunStatus.RUNNING:
        raise ExecutorError(f"run {record.run_id} is still running", code="run_in_progress",
                            hint="wait for it to end (or stop it), then discard it")
    if record.state == "applied":
        raise ExecutorError(f"run {record.run_id} was applied {record.state_changed_at}; "
                            "discarding it now would not undo that", code="already_applied",
                            hint="undo the changes in the checkout with git (`git diff`, "
                            "`git restore`)")
    if record.state == "discarded":
        return record, True
    return set_run_state(ledger, record.run_id, "discarded"), False


def set_run_check(ledger: Path, run_id: str, check: Mapping[str, Any]) -> RunRecord:
    """Record the outcome of a fanout's check command on a finished run; only
    ``record.json`` is rewritten (the diff and its digest stay as they were)."""
    record = find_run(ledger, run_id)
    return rewrite_record(ledger, record.model_copy(update={"check": dict(check)}))


def finalize_crashed(ledger: Path, record: RunRecord, *, patch: bytes | None,
                     changed_files: list[dict[str, Any]], note: str) -> RunRecord:
    """Turn the ``running`` record of a run whose process died into a ``crashed`` one,
    with the diff ``corral gc`` captured from its sandbox (the patch first, the record
    last: a reader never sees a record whose diff is not there yet)."""
    update: dict[str, Any] = {"status": RunStatus.CRASHED, "owner": None,
                              "finished_at": record.finished_at or now_iso(),
                              "notes": [*record.notes, note],
                              "error": record.error or {
                                  "code": "crashed", "message": "the process running it "
                                  "died before it could finish its record"}}
    if patch is not None:
        update |= {"diff": patch.decode("utf-8", "replace"), "changed_files": changed_files,
                   "diff_sha256": hashlib.sha256(patch).hexdigest()}
        _replace_file(ledger / record.run_id / "diff.patch", patch)
    crashed = record.model_copy(update=update)
    with indexed(ledger, run=record.run_id):
        _replace_file(ledger / record.run_id / "record.json",
                      _json(crashed.model_dump(mode="json")).encode())
    return crashed
