"""A fanout's check command: the user's own test command, run on each child's recorded diff.

It runs after the child ended, **after its diff was recorded and its sandbox
removed**, in a fresh sandbox of the fanout's snapshot with that recorded diff
applied (:mod:`sandbox.replay`), under the same isolation and limits as the
child's own commands (a check runs the child's code: a test suite the child
edited, a ``conftest.py`` it planted). Nothing of the child's session reaches
it: no process it left behind, nothing of its ``/tmp``, no file its diff does
not carry (an ignored file, a FIFO). A pass therefore means the recorded diff
passes, the diff ``corral apply`` merges. Whatever the check writes is never
part of any diff: the replay is discarded without collecting one.

Recorded per child (``RunRecord.check``): the command, its exit code
(``None`` when it timed out or was stopped), its time, whether it timed out,
the last :data:`TAIL_BYTES` of its output (stdout and stderr interleaved, as
a terminal shows them), how many bytes it wrote in all, and whether the kernel's OOM
killer killed one of its processes (``oom_killed``: the sandbox's memory cap was reached;
then it is an ``error`` with code ``oom_killed``, never a failed test). A check skipped
(read-only child, cancelled fanout, no time left) says why in ``skipped``; a check
that could not run as asked (its sandbox did not open, the environment its fanout
asked for was not under it) is an ``error`` (``{"code", "message"}``), never a
failure of the candidate.

A check's verdict is only as trustworthy as the code it runs: the child wrote
some of it. A pass is evidence, not proof; read the diff.
"""

from __future__ import annotations

from typing import Any, Literal

from executor.text import one_line
from sandbox.errors import SandboxError
from sandbox.protocol import Sandbox
from sandbox.setupfailure import missing_command

__all__ = ["TAIL_BYTES", "Verdict", "check_verdict", "errored_check", "not_found_hint",
           "run_check", "skipped_check"]

Verdict = Literal["passed", "failed", "timed out", "skipped", "error"]

#: Bytes of a check's output kept in the record: its end, where test runners summarise.
TAIL_BYTES = 16 * 1024

# `sh -c "$1"` runs the command exactly as a shell would; its output goes to a file in the
# sandbox's own temporary directory, of which the end is printed; the size goes to stderr.
_WRAPPER = (
    'out=$(mktemp "${TMPDIR:-/tmp}/corral-check.XXXXXX") || exit 125\n'
    'sh -c "$1" >"$out" 2>&1 </dev/null\n'
    "rc=$?\n"
    'wc -c <"$out" >&2\n'
    f'tail -c {TAIL_BYTES} "$out"\n'
    'rm -f "$out"\n'
    'exit "$rc"\n'
)


def skipped_check(command: str, why: str) -> dict[str, Any]:
    """The record of a check that did not run, and why."""
    return {"command": command, "exit_code": None, "duration_seconds": 0.0, "timed_out": False,
            "output_tail": "", "output_bytes": 0, "skipped": why}


def errored_check(command: str, error: SandboxError) -> dict[str, Any]:
    """The record of a check that could not run as asked, and why."""
    return {"command": command, "exit_code": None, "duration_seconds": 0.0, "timed_out": False,
            "output_tail": "", "output_bytes": 0, "skipped": None,
            "error": {"code": error.code, "message": error.message}}


def check_verdict(check: dict[str, Any] | None) -> Verdict | None:
    """How a recorded check ended (``None``: no check was asked for)."""
    if not check:
        return None
    if check.get("error"):
        return "error"
    if check.get("skipped"):
        return "skipped"
    if check.get("timed_out"):
        return "timed out"
    return "passed" if check.get("exit_code") == 0 else "failed"


def run_check(sandbox: Sandbox, command: str, *, timeout: float) -> dict[str, Any]:
    """Run ``command`` (``sh -c``) at the workspace root of ``sandbox`` (a replay of the
    recorded diff); its record."""
    done = sandbox.exec(["sh", "-c", _WRAPPER, "corral-check", command], timeout=timeout,
                        output_cap=TAIL_BYTES + 4096)
    size_line = done.stderr.decode("ascii", "replace").strip().splitlines()[:1]
    size = int(size_line[0]) if size_line and size_line[0].isdigit() else len(done.stdout)
    tail = done.stdout[-TAIL_BYTES:].decode("utf-8", "replace")
    found = {} if done.exit_code != 127 else not_found_hint(tail)
    return {
        "command": command,
        "exit_code": None if done.timed_out or done.stopped else done.exit_code,
        "duration_seconds": round(done.duration_seconds, 3),
        "timed_out": done.timed_out,
        "output_tail": tail,
        "output_bytes": size,
        "skipped": None,
        "error": _oom(sandbox) if done.oom_killed else None,
        "oom_killed": done.oom_killed,
        **found,
    }


def not_found_hint(tail: str) -> dict[str, str]:
    """``{"hint": ...}`` for a check whose shell did not find a command (exit 127): most
    often ``python``, which the sandbox does not have (Debian's is ``python3``)."""
    name = missing_command(tail)
    if name is None:
        return {}
    if name == "python":
        return {"hint": "the sandbox has no `python`, only `python3`: write the check with "
                "python3 (`python3 -m pytest`), or name the venv's interpreter "
                "(`.venv/bin/python -m pytest`) when the project's environment makes one"}
    return {"hint": f"`{one_line(name)}` is not in the sandbox: install it in the project's "
                    "environment (setup), or check with a command the sandbox has"}


def _oom(sandbox: Sandbox) -> dict[str, str]:
    """An OOM in a check: the sandbox's cap, not the candidate's test, ended it."""
    cap = sandbox.limits.memory_bytes
    size = f"{cap / (1 << 20):.0f}M" if cap is not None else "its cap"
    return {"code": "oom_killed",
            "message": f"the check ran out of memory: the kernel killed one of its processes "
            f"at the sandbox's cap of {size} (all its processes together); raise it with "
            "--memory or [sandbox] memory in your corral config"}
