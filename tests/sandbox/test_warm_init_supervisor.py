"""The warm supervisor itself (``sandbox/backends/warm_init.py``), spoken to directly.

The supervisor runs as it runs in a sandbox, its source sent to :data:`BOOTSTRAP` under
the system's ``python3 -I -S``, but in a PID namespace of its own made by ``unshare`` (so its
``kill(-1)`` reaches nothing of this machine): as the namespace's PID 1 (bubblewrap's
``pid1`` mode) or, under a root ``sh`` as PID 1, as uid 1000 (docker's ``uid`` mode,
where it is not PID 1 and must be the child subreaper). Each test sends it frames and
reads its frames back, as :mod:`sandbox.backends.warm` does:

- a survivor that will not die (frozen in a cgroup v1 freezer: SIGKILL waits for the
  thaw) is reported with ``clean: false``, never as clean;
- output past a command's cap is cut at the cap and the report says how much there was;
- an orphan of a command is reparented to a ``uid`` supervisor (not to PID 1);
- a host that sends more than the input bound is not a host: the supervisor quits.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.backends import warm_init
from tests.procs import wait_for

SUPERVISOR = Path(warm_init.__file__)
PYTHON = "/usr/bin/python3"
FREEZER = Path("/sys/fs/cgroup/freezer")
WAIT = 120.0
pytestmark = pytest.mark.timeout(300)


class Channel:
    """The supervisor's control channel, from the host's side."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout

    def send(self, kind: bytes, payload: bytes) -> None:
        self.stdin.write(kind + len(payload).to_bytes(4, "big") + payload)
        self.stdin.flush()

    def frame(self) -> tuple[bytes, bytes]:
        header = self.stdout.read(5)
        assert len(header) == 5, f"the supervisor ended: {header!r}"
        size = int.from_bytes(header[1:], "big")
        payload = self.stdout.read(size)
        assert len(payload) == size
        return header[:1], payload

    def hello(self) -> dict[str, Any]:
        kind, payload = self.frame()
        assert kind == b"H", (kind, payload)
        return dict(json.loads(payload))

    def run(self, argv: list[str], *, cap: int = 1 << 20, env: dict[str, str] | None = None,
            timeout: float = WAIT) -> tuple[dict[str, bytes], dict[str, Any]]:
        """One command: (kept output by stream, the result)."""
        self.send(b"C", json.dumps({"argv": argv, "env": {"PATH": "/usr/bin:/bin", **(
            env or {})}, "cwd": "/tmp", "timeout": timeout, "cap": cap}).encode())
        kept = {"o": b"", "e": b""}
        while True:
            kind, payload = self.frame()
            if kind == b"R":
                return kept, dict(json.loads(payload))
            if kind in (b"o", b"e"):
                kept[kind.decode()] += payload


@contextlib.contextmanager
def supervisor(mode: str) -> Iterator[Channel]:
    """A supervisor in a PID namespace of its own, started as the backends start it (its
    source sent down the channel to :data:`BOOTSTRAP`); gone (and waited for) after."""
    python = [PYTHON, "-I", "-S", "-c", warm_init.BOOTSTRAP, mode]
    if mode == "pid1":
        argv = ["unshare", "--pid", "--fork", "--mount-proc", *python]
    else:  # PID 1 a root shell that only waits; the supervisor as uid 1000 below it
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
                'setpriv --reuid 1000 --regid 1000 --clear-groups "$@"; exit $?', "sh",
                *python]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    source = SUPERVISOR.read_bytes()
    assert proc.stdin is not None
    proc.stdin.write(len(source).to_bytes(4, "big") + source)
    proc.stdin.flush()
    try:
        yield Channel(proc)
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]


@pytest.fixture
def require_unshare() -> None:
    if os.geteuid() != 0 or not Path(PYTHON).is_file():
        pytest.skip("needs root and the system python3 (as the sandboxes run it)")


@pytest.fixture
def freezer(tmp_path: Path, require_unshare: None) -> Iterator[Path]:
    """A cgroup v1 freezer of this test's own, thawed and removed after it."""
    if not (FREEZER / "cgroup.procs").is_file():
        pytest.skip("no cgroup v1 freezer on this machine")
    path = FREEZER / f"corral-test-{tmp_path.name}-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        (path / "freezer.state").write_text("THAWED\n")
        with contextlib.suppress(OSError):
            for pid in (path / "cgroup.procs").read_text().split():
                os.kill(int(pid), 9)
        assert wait_for(lambda: not (path / "cgroup.procs").read_text().split(), WAIT)
        path.rmdir()


def test_a_survivor_that_will_not_die_is_reported_unclean(freezer: Path) -> None:
    """A command leaves a process the kernel will not let die (frozen: a SIGKILL waits for
    the thaw); the supervisor's report names it and says ``clean: false`` (the host then
    stops the whole sandbox), never that everything was reaped."""
    script = ('sleep 600 & until [ "$(cat /proc/$!/comm)" = sleep ]; do :; done; '
              'echo $! > "$FZ/cgroup.procs" && echo FROZEN > "$FZ/freezer.state"'
              ' && until grep -qx FROZEN "$FZ/freezer.state"; do :; done')
    with supervisor("pid1") as channel:
        channel.hello()
        try:
            _, result = channel.run(["/bin/sh", "-c", script], env={"FZ": str(freezer)})
        finally:  # thawed, it dies with the supervisor (a frozen one would hold its exit)
            (freezer / "freezer.state").write_text("THAWED\n")
        assert result["exit"] == 0
        assert [s.split()[1] for s in result["survivors"]] == ["sleep"], result
        assert result["clean"] is False, result


def test_output_past_the_cap_is_cut_and_the_report_says_how_much(
        require_unshare: None) -> None:
    """100000 bytes on each stream under a cap of 1000: 1000 bytes of each reach the host,
    and the report counts all of them (the host says the output was cut)."""
    with supervisor("pid1") as channel:
        channel.hello()
        kept, result = channel.run(
            ["/bin/sh", "-c", "head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2"],
            cap=1000)
        assert (len(kept["o"]), len(kept["e"])) == (1000, 1000)
        assert (result["out_bytes"], result["err_bytes"]) == (100000, 100000), result
        assert result["exit"] == 0 and result["clean"] is True


def test_an_orphan_is_reparented_to_the_uid_supervisor_and_reaped(
        require_unshare: None) -> None:
    """As docker's exec (not PID 1), the supervisor is the child subreaper: a process whose
    parent ended comes back to it (not to PID 1, which would leave its zombie unreaped), and
    it is killed and reaped before the report."""
    script = ("p=$(sh -c 'sleep 600 >/dev/null 2>&1 & echo $!'); "
              "echo \"ppid=$(cut -d' ' -f4 /proc/$p/stat)\"")
    with supervisor("uid") as channel:
        hello = channel.hello()
        assert hello["pid"] != 1
        kept, result = channel.run(["/bin/sh", "-c", script])
        assert kept["o"].decode().strip() == f"ppid={hello['pid']}", (kept, hello)
        assert len(result["survivors"]) == 1, result  # the orphan (sleep, or sh before exec)
        assert result["clean"] is True


def test_a_host_sending_past_the_input_bound_is_no_host(require_unshare: None) -> None:
    """A frame announcing 2 GiB, then more than 64 MiB of it: the supervisor stops reading
    and quits (a pipe write then fails) instead of holding it all in memory."""
    with supervisor("pid1") as channel:
        channel.hello()
        refused = False
        try:
            channel.stdin.write(b"C" + (2**31 - 1).to_bytes(4, "big"))
            chunk = bytes(1 << 20)
            for _ in range(80):
                channel.stdin.write(chunk)
            channel.stdin.flush()
        except BrokenPipeError:
            refused = True
        assert refused, "the supervisor read 80 MiB of one frame"
        assert channel.proc.wait(timeout=WAIT) == 0
