"""A docker child's container ends with the corral that made it (issue 28, weak point).

A SIGKILLed corral cannot tear anything down; its container used to keep running
until ``corral gc`` (27 minutes seen). Its keep-alive now waits on a stdin that
only corral holds open: the engine closes it when corral's end goes, the keep-alive
exits, and the engine removes the container. Tried for real: a process opens a
docker sandbox, is seen running with its container, and is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.backends import require_backend
from tests.procs import wait_for
from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]

_OPENER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from policies.contract import SandboxMode
    from sandbox.config import DockerConfig
    from sandbox.factory import open_sandbox
    sandbox = open_sandbox(DockerConfig(), repo=Path(sys.argv[1]), mode=SandboxMode.WORKTREE,
                           state_root=Path(sys.argv[2]))
    assert sandbox.exec(["true"]).ok
    print(sandbox.id, flush=True)
    sys.stdin.read()  # until the test kills it
""")


def _running(name: str) -> bool:
    done = subprocess.run(["docker", "ps", "-q", "--filter", f"name=^{name}$"],
                          capture_output=True, text=True, check=True)
    return bool(done.stdout.strip())


def _exists(name: str) -> bool:
    done = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=^{name}$"],
                          capture_output=True, text=True, check=True)
    return bool(done.stdout.strip())


@pytest.mark.docker
def test_a_killed_corral_takes_its_container_with_it(tmp_path: Path) -> None:
    require_backend("docker")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "a").write_text("a\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "a"], check=True, env=env)
    with subprocess.Popen([sys.executable, "-c", _OPENER, str(repo), str(tmp_path / "state")],
                          cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        name = proc.stdout.readline().strip()
        assert name, proc.stderr.read()
        assert _running(name)  # alive while its corral is
        proc.kill()
        proc.wait(scaled(60))
        assert proc.returncode == -signal.SIGKILL
    # The engine notices the closed stdin and removes the container: wait on that state.
    assert wait_for(lambda: not _exists(name), scaled(60)), f"{name} outlived its corral"
