"""A run's journal: every event of a run, appended as it happens (``journal.jsonl``).

The record (:mod:`executor.ledger.store`) is written when a run starts and when
it ends; the journal is what happened in between, one JSON object per line in
the run's directory, appended while the child works, so ``corral show`` and
``corral logs -f`` see a running run and a run killed with SIGKILL keeps
everything up to the kill. Each line is ``{"t": unix time, "kind": ..., ...}``:

- ``prompt``: a turn starts (``text``: the task or a follow-up);
- ``turn``: the model answered (``step``, ``text``, ``calls``: id and name each);
- ``tool_call``: a call starts (``step``, ``call_id``, ``tool``, ``arguments``);
- ``decision``: what the rules decided, before anything ran (``decision``, ``reason``);
- ``output``: a chunk of a command's output as it streams (``call_id``, ``stream``,
  ``data``);
- ``tool_result``: the call ended (``decision``, ``reason``, ``is_error``,
  ``duration_ms``, ``result``, and ``output_bytes`` / ``output_dropped``);
- ``phase``: the run's own stage (``detail``: ``sandbox``, ``diff``...);
- ``end``: the turn's outcome (``status``, ``error``), written just before the record;
- ``truncated``: the journal reached :data:`MAX_BYTES`; nothing but ``end`` follows.

**Bounded.** A text field longer than its limit is cut and ``<field>_omitted``
says how many characters were left out; a call's output past
:data:`CALL_OUTPUT` is counted, not written; the whole journal stops at
:data:`MAX_BYTES` with one ``truncated`` event. **Unforgeable.** Every line is
ASCII JSON written whole by one ``write``: a newline, a quote or an escape
sequence in a child's output is a JSON escape inside a string, so output can
never start a line (an event) of its own. Nothing is escaped for a terminal
here: readers do that when they show it (:mod:`executor.text`).

**Durable.** Each line reaches the kernel before :meth:`Journal.event` returns
(a SIGKILL of corral loses nothing written); ``fdatasync`` runs at every event
boundary (every kind but ``output``) in a thread of the journal's own, so the
run never waits on the disk (a boundary is on disk within one sync's time).
One writer per run, thread-safe: a run's commands stream output from other
threads, and parallel children each have a run, and a journal, of their own.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["CALL_OUTPUT", "JOURNAL", "MAX_BYTES", "Journal", "read_journal"]

JOURNAL = "journal.jsonl"
#: The journal's size limit; past it one ``truncated`` event, then only ``end`` events.
MAX_BYTES = 8 << 20
#: Room kept past :data:`MAX_BYTES` for the ``end`` events of a truncated journal.
_END_ROOM = 64 << 10
#: The output of one call written to the journal (the rest is counted).
CALL_OUTPUT = 256 << 10
#: Characters of output in one ``output`` event (a larger chunk is split).
CHUNK = 16 << 10
#: Characters of a text field (a result, the model's text, a prompt) or of the arguments'
#: JSON.
TEXT = 64 << 10
#: What one read of :func:`read_journal` takes at most.
_READ = 4 << 20


def _cut(fields: dict[str, Any], key: str, limit: int = TEXT) -> None:
    value = fields.get(key)
    if isinstance(value, str) and len(value) > limit:
        fields[key] = value[:limit]
        fields[f"{key}_omitted"] = len(value) - limit


def _line(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, ensure_ascii=True, separators=(",", ":"), default=str)
            + "\n").encode("ascii")


class Journal:
    """The appending end of one run's journal (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        self._fd = os.open(path, flags, 0o600)
        self._size = os.fstat(self._fd).st_size
        self._lock = threading.Lock()
        self._truncated = self._closed = False
        self._call = ""
        self._output = self._dropped = 0
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        self._dirty = threading.Condition(self._lock)
        self._pending = False
        self._retired: list[int] = []
        self._syncer = threading.Thread(target=self._sync_loop, daemon=True,
                                        name=f"journal-sync-{path.parent.name}")
        self._syncer.start()

    # -- writing ---------------------------------------------------------------------------

    def event(self, kind: str, **fields: Any) -> None:
        """Append one event (its text fields cut to their limits); never raises for a full
        disk or a closed journal: the journal is a view, the record is the truth."""
        with self._lock:
            if self._closed:
                return
            if kind == "tool_call":
                self._call = str(fields.get("call_id", ""))
                self._output = self._dropped = 0
                self._decoders.clear()
                arguments = json.dumps(fields.get("arguments"), ensure_ascii=False, default=str)
                if len(arguments) > TEXT:
                    fields["arguments"] = {"_cut": arguments[:TEXT]}
                    fields["arguments_omitted"] = len(arguments) - TEXT
            elif kind == "tool_result":
                self._flush_decoders()
                if self._output or self._dropped:
                    fields |= {"output_bytes": self._output + self._dropped}
                    if self._dropped:
                        fields["output_dropped"] = self._dropped
                self._call = ""
            for key in ("text", "result", "reason", "detail"):
                _cut(fields, key)
            self._append({"t": round(time.time(), 6), "kind": kind, **fields}, sync=True)

    def output(self, stream: str, chunk: bytes) -> None:
        """A chunk of the running call's ``stream`` (``stdout``/``stderr``), as it arrives
        (``on_output`` of :meth:`sandbox.protocol.Sandbox.exec`); written, not synced (the
        next boundary syncs it)."""
        with self._lock:
            if self._closed or not chunk:
                return
            room = max(CALL_OUTPUT - self._output, 0)
            taken, self._dropped = chunk[:room], self._dropped + len(chunk) - min(room,
                                                                                  len(chunk))
            self._output += len(taken)
            if taken:
                self._write_output(stream, taken, final=False)

    def _write_output(self, stream: str, data: bytes, *, final: bool) -> None:
        decoder = self._decoders.get(stream)
        if decoder is None:
            decoder = self._decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data, final=final)
        for start in range(0, len(text), CHUNK):
            self._append({"t": round(time.time(), 6), "kind": "output", "call_id": self._call,
                          "stream": stream, "data": text[start:start + CHUNK]}, sync=False)

    def _flush_decoders(self) -> None:
        for stream in list(self._decoders):
            self._write_output(stream, b"", final=True)  # a cut multi-byte character
        self._decoders.clear()

    def _append(self, event: dict[str, Any], *, sync: bool) -> None:
        """Write one line whole (the lock is held)."""
        data = _line(event)
        limit = MAX_BYTES + _END_ROOM if event["kind"] == "end" else MAX_BYTES
        if self._size + len(data) > limit:
            if self._truncated or event["kind"] == "end":
                return
            self._truncated = True
            data = _line({"t": event["t"], "kind": "truncated", "limit": MAX_BYTES})
            sync = True
        elif self._truncated and event["kind"] != "end":
            return
        try:
            written = os.write(self._fd, data)
        except OSError:
            return  # a full disk: the record at the end is what counts
        self._size += written
        if sync:
            self._pending = True
            self._dirty.notify()

    def reattach(self) -> None:
        """Write to the file now at :attr:`path` if it is another one (a record rewrite on a
        file system without hard links copied the journal: the copy holds every line)."""
        with self._lock:
            if self._closed:
                return
            try:
                if self.path.stat().st_ino == os.fstat(self._fd).st_ino:
                    return
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                return
            self._retired.append(self._fd)  # closed with the journal (the syncer may use it)
            self._fd = fd
            self._size = os.fstat(fd).st_size

    # -- syncing and closing ---------------------------------------------------------------

    def _sync_loop(self) -> None:
        """fdatasync whenever a boundary was written since the last one (group commit)."""
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._dirty.wait()
                if not self._pending:
                    return  # closed, and everything synced
                self._pending = False
                fd = self._fd
            with contextlib.suppress(OSError):
                os.fdatasync(fd)

    def close(self) -> None:
        """Flush what a cut character held back, sync, close (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._flush_decoders()
            self._closed = True
            self._pending = True
            self._dirty.notify()
        self._syncer.join()
        for fd in (*self._retired, self._fd):
            os.close(fd)


def read_journal(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The events of ``path`` from byte ``offset`` and the offset after the last whole line
    (a line still being written is left for the next read; at most a few MiB per read).
    A line that is not a JSON object (the file was edited) is skipped."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(_READ)
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) >= _READ:  # one line over the read's size: not ours, skip it
        return [], offset + len(data)
    events: list[dict[str, Any]] = []
    for line in data[:end].splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("kind"), str):
            events.append(event)
    return events, offset + end
