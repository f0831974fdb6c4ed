"""Docker, corral running as root: the child reaches its workspace by absolute path
(issue 7, item 9).

Found by an attack review: as root, corral's state dir is ``~/.local/state/corral``
under ``/root``, and the image's ``/root`` is ``0700``; the container's uid 1000
could not traverse it, so ``python3 /abs/path/x.py`` failed with EACCES (and so did
the child's own git, whose ``.git`` pointer is absolute) while relative paths
worked. corral now puts a read-only stand-in (mode 755, only mount points) over
an image directory above a mount that the command's uid cannot traverse. These
tests put the state dir and the repository under the real ``/root``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from sbx_support import OpenSandbox, backends, make_repo, sh

from policies.contract import SandboxMode
from sandbox.config import DockerConfig

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="corral must run as root (as in CI)")]

DOCKER = backends(only=("docker",))


@pytest.fixture
def under_root() -> Iterator[Path]:
    """A directory under the real ``/root`` (removed afterwards), with a canary file."""
    top = Path("/root") / f".corral-test-{secrets.token_hex(4)}"
    top.mkdir(mode=0o700)
    (top / "secret.txt").write_text("host secret\n")
    try:
        yield top
    finally:
        shutil.rmtree(top)


@pytest.fixture
def state_root(under_root: Path) -> Path:
    """corral's state dir under ``/root``, as ``~/.local/state/corral`` is for root."""
    return under_root / ".local" / "state" / "corral"


def _image_root_closed_to_uid_1000() -> bool:
    """The premise: in the image, uid 1000 cannot enter ``/root``."""
    client = docker.from_env()
    try:
        output = client.containers.run(DockerConfig().image, ["sh", "-c", "cd /root && echo open"
                                                              " || echo closed"],
                                       user="1000:1000", network_mode="none", remove=True)
    finally:
        client.close()
    return bool(output.strip() == b"closed")


@pytest.mark.parametrize("backend", DOCKER, indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.READ_ONLY,
                                  SandboxMode.WORKSPACE_WRITE])
def test_child_reaches_its_workspace_by_absolute_path(open_sb: OpenSandbox, under_root: Path,
                                                      mode: SandboxMode) -> None:
    """``pwd``, then the same path absolutely: a script, a file, the child's own git."""
    assert _image_root_closed_to_uid_1000()
    repo = make_repo(under_root / "repo")
    (repo / "hello.py").write_text("print('hello from', __file__)\n")
    sb = open_sb(mode, repo_path=repo)
    assert str(sb.root).startswith(str(under_root))
    result = sh(sb, 'cd "$(pwd)" && python3 "$PWD/hello.py" && cat "$PWD/README.md"'
                    ' && git -C "$PWD" status --porcelain && git -C "$PWD" log --oneline -1')
    assert result.exit_code == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert f"hello from {sb.root}/hello.py" in out
    assert "# demo" in out


@pytest.mark.parametrize("backend", DOCKER, indirect=True)
def test_stand_in_exposes_nothing_and_stays_read_only(open_sb: OpenSandbox,
                                                      under_root: Path) -> None:
    """What replaces the image's ``/root`` holds only the way to the mounts: no host file
    beside them, nothing writable, and the root file system is still read-only."""
    repo = make_repo(under_root / "repo")
    sb = open_sb(SandboxMode.READ_ONLY, repo_path=repo)
    listing = sh(sb, f"ls -A /root; ls -A {under_root}; cat {under_root}/secret.txt;"
                          " touch /root/new; touch /usr/new; echo done")
    out, err = listing.stdout.decode(), listing.stderr.decode()
    assert out.split() == [under_root.name, "repo", "done"], out
    assert "host secret" not in out
    assert "secret.txt: No such file" in err
    assert err.count("Read-only file system") == 2, err
    mounts = sh(sb, "grep ' /root ' /proc/self/mountinfo").stdout.decode()
    assert " ro," in mounts or " ro " in mounts, mounts
    stand_ins = sb.state.dir / "stand-ins"
    assert stand_ins.is_dir()
    sb.teardown()
    assert not stand_ins.exists()
