"""scripts/load_check.py: its burners never outlive it, and pytest's exit status is its own.

Each case runs the real script on a tiny pytest file of its own (one burner, so the check
stays cheap on a shared machine) and looks for the burner pids it printed afterwards.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import wait_for
from tests.timescale import scaled

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "load_check.py"


def _alive(pid: int) -> bool:
    """A running process with this pid that is still one of our burners (not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z" and b"getppid" in cmdline


def _burners(output: str) -> list[int]:
    found = re.search(r"burners \(pids ([\d ]+)\)", output)
    assert found, output
    return [int(p) for p in found[1].split()]


def _check(tmp_path: Path, body: str, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "test_target.py").write_text(body)
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--burners", "1", *args, str(tmp_path / "test_target.py"),
         "--", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)


@pytest.mark.parametrize(("body", "code"), [
    ("def test_ok():\n    pass\n", 0),
    ("def test_bad():\n    assert False\n", 1),
    ("x = 1\n", 5),  # pytest's own status (no tests collected) comes through as it is
])
def test_the_exit_status_is_the_rounds_and_no_burner_outlives_the_check(
        tmp_path: Path, body: str, code: int) -> None:
    rounds = 2 if code == 0 else 1
    proc = _check(tmp_path, body, "--rounds", str(rounds))
    out, _ = proc.communicate(timeout=scaled(120))
    assert proc.returncode == code, out
    assert out.count("load check: round ") == rounds and "load 1-min mean" in out
    assert f"{rounds if code == 0 else 0}/{rounds} rounds passed" in out
    pids = _burners(out)
    assert not [p for p in pids if _alive(p)]


_WAITING = """
import os, time
from pathlib import Path
import pytest
@pytest.fixture
def server():
    yield
    Path("torn-down").touch()  # a server it started would be stopped here
def test_waits(server):
    Path("started").touch()
    deadline = time.monotonic() + 120
    while not Path("never").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sigkill"])
def test_an_interrupted_check_leaves_no_burner(tmp_path: Path, how: str) -> None:
    """Ctrl-C (SIGINT to the foreground group), SIGTERM to the check alone: pytest tears its
    fixtures down, burners killed, exit 130; SIGKILL: each burner sees its parent gone and
    ends by itself."""
    proc = _check(tmp_path, _WAITING)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    pids = _burners(first)
    assert wait_for((tmp_path / "started").exists, scaled(60)), first
    assert all(_alive(p) for p in pids)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    if how == "sigkill":
        assert proc.wait(timeout=scaled(60)) == -signal.SIGKILL
        os.killpg(proc.pid, signal.SIGKILL)  # its pytest, left behind with it
        proc.communicate(timeout=scaled(60))
        assert wait_for(lambda: not [p for p in pids if _alive(p)], scaled(30))
    else:
        out, _ = proc.communicate(timeout=scaled(60))
        assert proc.returncode == 130, first + out
        assert "burners killed" in out
        assert (tmp_path / "torn-down").exists()  # pytest was stopped before the burners
        assert not [p for p in pids if _alive(p)]
