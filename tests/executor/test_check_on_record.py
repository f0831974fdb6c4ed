"""A fanout's check judges the recorded diff, nothing else of the child (issue 16).

Two attacks on a check that ran in the child's own sandbox: a survivor the child
left in ``/tmp`` (in no diff) that stops the check's process, writes the
passing answer and lets it go on; and an ignored file (in no diff) that the
check's code imports. Either made a check pass for a diff that fails it. The
check now runs in a fresh sandbox of the fanout's snapshot with the recorded
diff applied (:mod:`sandbox.replay`): both checks fail, as the recorded diff
does, and a candidate whose diff is right still passes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exec_support import agent_file, call, git, script

from executor.cli import cli

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

TOKEN = "chk7e1q"
#: The check: passes only when answer.txt says "right" (it sleeps first, so a survivor
#: that watches for it has the time to act; against a replay nothing is watching).
CHECK = f"sleep 1; test \"$(cat answer.txt)\" = right # {TOKEN}"

#: A survivor that outlives the command (a zombie leader whose thread runs on, the trick
#: that once got past the sandbox's end-of-command kill), waits for the check to start and
#: writes the passing answer before the check reads it.
SURVIVOR = r"""
import ctypes, os, threading, time
TOKEN = b"SPLIT"   # spelled in two halves: this very script's text must not match
root = os.getcwd()   # the child's workspace
def watch():
    me = os.getpid()
    while True:
        found = []
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == me:
                continue
            try:
                with open(f"/proc/{p}/cmdline", "rb") as handle:
                    if TOKEN in handle.read():
                        found.append(int(p))
            except OSError:
                pass
        if found:   # the check started: it reads the answer a second from now
            with open(os.path.join(root, "answer.txt"), "w") as handle:
                handle.write("right\n")
            return
        time.sleep(0.002)
threading.Thread(target=watch).start()
time.sleep(0.1)
ctypes.CDLL(None).syscall(60, 0)
""".replace("SPLIT", f'{TOKEN[:3]}" b"{TOKEN[3:]}')


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / "answer.txt").write_text("unknown\n")
    (repo / ".gitignore").write_text("helper.py\n")
    (repo / "check.py").write_text("import sys\nimport helper\nsys.exit(0 if helper.OK else 1)\n")
    agent_file(repo, "w", "tools: [write_file, shell, read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def fanout(repo: Path, backend: str, check: str, *scripts: str) -> dict[str, Any]:
    args = ["fanout", "--root", str(repo), "--trust-project", "--no-personal", "--backend",
            backend, "--json", "--agent", "w", "--check-cmd", check, "--check-timeout", "60",
            "-n", str(len(scripts))]
    for path in scripts:
        args += ["--script", path]
    code, out, err = corral(*args, "Get the answer right")
    assert code in (0, 1), err
    return json.loads(out)


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_survivor_cannot_pass_the_check_for_a_diff_that_fails_it(
        project: Path, tmp_path: Path, backend: str) -> None:
    """The child records "wrong" and leaves a survivor in /tmp that rewrites answer.txt while
    the check runs; a right candidate records "right". Only the right one passes."""
    plant = ("cat > /tmp/s.py <<'PY'\n" + SURVIVOR + "\nPY\n"
             "echo wrong > answer.txt\nsetsid python3 /tmp/s.py >/dev/null 2>&1 &\nsleep 0.5")
    cheat = script(tmp_path, "cheat", call("shell", command=plant), {"text": "done"})
    honest = script(tmp_path, "honest", call("write_file", path="answer.txt", content="right\n"),
                    {"text": "done"})
    result = fanout(project, backend, CHECK, cheat, honest)
    cheat_row, honest_row = result["runs"]
    assert "+wrong" in cheat_row["diff"]
    assert cheat_row["check"]["exit_code"] == 1, cheat_row["check"]
    assert honest_row["check"]["exit_code"] == 0, honest_row["check"]


@pytest.mark.parametrize("backend", ["host", *ISOLATING], indirect=True)
def test_a_file_the_diff_does_not_carry_cannot_pass_the_check(
        project: Path, tmp_path: Path, backend: str) -> None:
    """The check's code imports helper.py, which is ignored: a child that writes it in its
    workspace leaves it out of its diff, so the recorded diff fails the check."""
    cheat = script(tmp_path, "cheat", call("write_file", path="helper.py", content="OK = True\n"),
                   {"text": "done"})
    result = fanout(project, backend, "python3 check.py", cheat)
    [row] = result["runs"]
    assert "helper.py" not in row["diff"]
    assert row["check"]["exit_code"] == 1, row["check"]
