"""A workspace-write run's record tells the truth about your checkout (issue 16).

The attack that made it lie: the child leaves a survivor (a zombie leader whose
thread runs on) that keeps rewriting a tracked file and creating new ones, in
your checkout, while the diff is collected and until the sandbox closes. The
record showed one content, the checkout held another; the record listed 69 new
files, the checkout held 122. Now nothing of the child runs once its command
ended (and the host checks that before it reads the checkout), so after the
run the checkout is byte for byte its base plus the recorded diff.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file, git

from executor.cli import cli
from tests.backends import host_tasks_named, kill_tasks_named

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

#: Keeps writing src/m.py (a new length each time) and a new file every few ms, from a thread
#: whose leader has exited; every thread is named NAME so the host can look for it.
SURVIVOR = r"""
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None)
libc.prctl(15, sys.argv[1].encode(), 0, 0, 0)
def write():
    n = 0
    while True:
        n += 1
        with open("src/m.py", "w") as handle:
            handle.write("x = %d\n" % n * (n % 7 + 1))
        with open("gen_%05d.txt" % n, "w") as handle:
            handle.write(str(n))
        time.sleep(0.003)
threading.Thread(target=write).start()
time.sleep(0.05)
libc.syscall(60, 0)
"""


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but ``.git`` (and corral's own state), with its bytes."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git",)]
        for name in filenames:
            path = Path(dirpath) / name
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_the_checkout_equals_its_record_after_a_survivor_attack(
        repo: Path, tmp_path: Path, backend: str) -> None:
    (repo / "src").mkdir(exist_ok=True)
    (repo / "src" / "m.py").write_text("x = 0\n")
    agent_file(repo, "w", "tools: [shell, read_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "m")
    base = tmp_path / "base"
    git(tmp_path, "clone", "-q", str(repo), str(base))
    name = "ww" + secrets.token_hex(4)
    plant = ("cat > /tmp/s.py <<'PY'\n" + SURVIVOR + "\nPY\n"
             f"setsid python3 /tmp/s.py {name} >/dev/null 2>&1 &\n"
             "while [ ! -e gen_00020.txt ]; do sleep 0.01; done")
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": plant}}]}, {"text": "done"}]
    replay = tmp_path / "s.yaml"
    replay.write_text(yaml.safe_dump(turns))
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "w", "--backend", backend, "--mode", "workspace-write",
                            "--script", str(replay), "--json", "go")
    assert code == 0, err
    record = json.loads(out)
    try:
        assert host_tasks_named(name) == [], "a writer of the child outlived its run"
        # The record's diff, applied to the base, gives the checkout exactly.
        patch = tmp_path / "record.patch"
        patch.write_text(record["diff"])
        subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=base,
                       check=True)
        assert tree(repo) == tree(base)
        listed = {c["path"] for c in record["changed_files"]}
        assert listed == {p for p in tree(repo) if p.startswith("gen_")} | {"src/m.py"}
    finally:
        kill_tasks_named(name)
