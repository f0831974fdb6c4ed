"""``corral shell RUN``: a person's work on a finished run's workspace, recorded in the run.

:func:`shell_on_run` rebuilds the run's workspace (:mod:`executor.run.resume`:
a fresh, non-disposable sandbox of the run's backend, mounts and environment,
no network, over the checkout as it is now, with the run's verified diff
applied), takes its diff once (the run's changes on this base), runs one
command (its output streamed to the caller, its exit code returned) or an
interactive shell on a pseudo-terminal of the sandbox's own
(:mod:`sandbox.terminal`), and takes the diff again. A path whose part of the
diff differs between the two was changed by hand. When one was, the run's
record is rewritten (atomically, :func:`executor.ledger.write_run`): the new
cumulative diff and its sha256, its changed files, its preimages for ``apply
--3way``, ``hand_changes`` (every path ever changed by hand) and one audit
entry, ``{"tool": "shell (by hand)", ...}``. Nothing changed: the record stays
as it was. The run's record is read again just before it is rewritten; if it
changed meanwhile (applied, discarded, continued, another shell), nothing is
overwritten: the session's diff is saved beside the record and named in the
error.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.apply import inspect_patch
from executor.apply.preimages import capture_preimages
from executor.errors import ExecutorError
from executor.ledger import RunRecord, find_run, now_iso, write_run
from executor.run.resume import ONTO
from sandbox.base import BaseSandbox
from sandbox.config import BackendConfig
from sandbox.environment import EnvironmentRef
from sandbox.errors import SandboxError
from sandbox.replay import open_replay
from sandbox.results import DiffResult
from sandbox.terminal import TerminalIO, relay, safe_term, terminal_argv

__all__ = ["BY_HAND", "SHELL", "HandWork", "shell_on_run"]

#: The audit entry's ``tool`` for a session of ``corral shell``.
BY_HAND = "shell (by hand)"
#: The interactive shell: bash when the sandbox has it (no rc files: the prompt is
#: corral's), else sh.
SHELL = ["/bin/sh", "-c",
         "if command -v bash >/dev/null 2>&1; then exec bash --norc --noprofile -i; fi; "
         "exec sh -i"]
#: Bytes of a command's output kept in memory (all of it is streamed to the caller).
_KEEP = 64 * 1024


@dataclass(frozen=True)
class HandWork:
    """What one ``corral shell`` session did: the run's record after it (rewritten when
    something changed), the command's or shell's exit code (``None``: it was stopped or
    timed out, ``timed_out`` says which), and the paths it changed."""

    record: RunRecord
    exit_code: int | None
    timed_out: bool
    changed: tuple[str, ...]


def _parts(diff: DiffResult) -> dict[str, Any]:
    """Each path's part of a diff: its section of the patch and its changed-file entry."""
    parts: dict[str, Any] = {}
    if diff.patch:
        plan = inspect_patch(diff.patch, allow_symlinks=True, allow_binary=True,
                             allow_git_dirs=True)
        for item in plan.files:
            for path in {item.path, item.old_path or item.path}:
                parts[f"patch:{path}"] = plan.section(item)
    for change in diff.changed:
        parts[f"file:{change.path}"] = change.model_dump(mode="json")
    return parts


def hand_changed(before: DiffResult, after: DiffResult) -> tuple[str, ...]:
    """The paths whose part of the diff differs between ``before`` and ``after``."""
    old, new = _parts(before), _parts(after)
    return tuple(sorted({key.split(":", 1)[1] for key in old.keys() | new.keys()
                         if old.get(key) != new.get(key)}))


def _session(sandbox: BaseSandbox, run_id: str, command: Sequence[str] | None,
             terminal: TerminalIO | None, timeout: float | None,
             on_output: Callable[[str, bytes], None] | None) -> tuple[int | None, bool]:
    env = {"CORRAL_RUN": run_id}
    if command is not None:
        done = sandbox.exec(list(command), timeout=timeout, output_cap=_KEEP, env=env,
                            on_output=on_output)
        return done.exit_code, done.timed_out
    if terminal is None:
        raise ExecutorError("an interactive shell needs a terminal", code="usage_error",
                            hint="pass a command to run")
    env |= {"TERM": safe_term(terminal.term), "PS1": f"(corral {run_id}) $ "}
    stream = sandbox.open_terminal(terminal_argv(SHELL, terminal), env=env)
    return relay(stream, terminal), False


def shell_on_run(*, root: Path, ledger: Path, record: RunRecord, patch: bytes,
                 backend: BackendConfig, state_root: Path | None,
                 environment: EnvironmentRef | None, command: Sequence[str] | None,
                 terminal: TerminalIO | None, timeout: float | None = None,
                 on_output: Callable[[str, bytes], None] | None = None) -> HandWork:
    """Run ``command`` (or, with ``command`` ``None``, an interactive shell on
    ``terminal``) in ``record``'s rebuilt workspace, ``patch`` being its verified diff
    (:func:`executor.run.resume.replayable_patch`); record what it changed (see the module
    docstring)."""
    started = time.monotonic()
    sandbox = open_replay(backend, repo=root, snapshot=None, patch=patch,
                          state_root=state_root, environment=environment, disposable=False,
                          onto=ONTO)
    kept = False
    try:
        before = sandbox.collect_diff()
        code, timed_out = _session(sandbox, record.run_id, command, terminal, timeout,
                                   on_output)
        after = sandbox.collect_diff()
        changed = hand_changed(before, after)
        preimages = capture_preimages(after.patch, sandbox.files.read_bytes) if changed else {}
        kept = True
    finally:
        # A session that failed half way keeps its sandbox's diff for `corral gc` to name.
        with contextlib.suppress(SandboxError):
            sandbox.teardown(discard=kept)
    if not changed:
        return HandWork(record, code, timed_out, ())
    entry = {"index": len(record.audit), "step": record.steps,
             "call_id": f"shell-{now_iso()}", "tool": BY_HAND,
             "arguments": {"command": list(command)} if command is not None
             else {"interactive": True},
             "decision": "by hand", "reason": "corral shell",
             "result": (f"exit {code}" if code is not None else
                        "timed out" if timed_out else "stopped")
             + f"; changed by hand: {', '.join(changed)}",
             "is_error": code != 0, "duration_ms": round((time.monotonic() - started) * 1000, 3)}
    return HandWork(_record(ledger, record, after, preimages, changed, entry), code,
                    timed_out, changed)


def _record(ledger: Path, seen: RunRecord, after: DiffResult, preimages: dict[str, bytes],
            changed: tuple[str, ...], entry: dict[str, Any]) -> RunRecord:
    """Rewrite the run's record with the session's diff, unless it changed meanwhile."""
    current = find_run(ledger, seen.run_id)
    if (current.diff_sha256, current.state, current.continued_by) != (
            seen.diff_sha256, "pending", None):
        saved = ledger / current.run_id / f"shell-{int(time.time())}.patch"
        saved.write_bytes(after.patch)
        raise ExecutorError(
            f"run {current.run_id} changed while the shell was open (now {current.state}"
            f"{', continued' if current.continued_by else ''}): what you changed was not "
            "recorded in it", code="run_changed", context={"saved": str(saved)},
            hint="the saved diff holds the run's changes and yours; read it before you "
                 "redo your change where the run is now")
    updated = current.model_copy(update={
        "diff": after.patch.decode("utf-8", "replace"),
        "changed_files": [c.model_dump(mode="json") for c in after.changed],
        "excluded_files": [e.model_dump(mode="json") for e in after.excluded],
        "setid_cleared": sorted({*current.setid_cleared, *after.setid_cleared}),
        "base_commit": after.base_commit,
        "hand_changes": sorted({*current.hand_changes, *changed}),
        "audit": [*current.audit, entry],
    })
    write_run(ledger, updated, [], patch=after.patch, keep_transcript=True,
              preimages=preimages)
    return find_run(ledger, current.run_id)
