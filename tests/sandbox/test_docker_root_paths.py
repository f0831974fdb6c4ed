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
from pathlib import Path, PurePosixPath

import docker
import pytest
from sbx_support import OpenSandbox, backends, make_repo, sh

from policies.contract import SandboxMode
from sandbox.backends.standins import GO_DIR, GO_SYMLINK, closed_ancestors, make_stand_ins
from sandbox.config import DockerConfig

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="corral must run as root (as in CI)")

DOCKER = backends(only=("docker",))
DOCKER_OVERLAY = backends(only=("docker",), overlay=True)


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


@ROOT_ONLY
@pytest.mark.parametrize("backend", DOCKER_OVERLAY, indirect=True)
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


@ROOT_ONLY
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


@ROOT_ONLY
@pytest.mark.parametrize("backend", DOCKER, indirect=True)
def test_what_an_image_is_known_to_need_costs_one_create(open_sb: OpenSandbox, under_root: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: the image's directory modes are learnt once per image (a created container's
    archive HEAD) and kept under the state dir, so the next sandbox of that image is created
    once, with its stand-in, not created, inspected, removed and created again."""
    from sandbox.backends.docker import DockerSandbox

    repo = make_repo(under_root / "repo")
    creates: list[str] = []
    real = DockerSandbox._create

    def counting(self: DockerSandbox, options: dict[str, object]) -> object:
        creates.append(self.id)
        return real(self, options)

    monkeypatch.setattr(DockerSandbox, "_create", counting)
    first = open_sb(SandboxMode.READ_ONLY, repo_path=repo)
    assert creates.count(first.id) == 2  # learnt: created, inspected, made again
    second = open_sb(SandboxMode.READ_ONLY, repo_path=repo)
    assert creates.count(second.id) == 1
    done = sh(second, 'cat "$PWD/README.md"')
    assert done.exit_code == 0 and b"# demo" in done.stdout, done.stderr


# -- which directories get a stand-in, and what is in one (no docker needed) ------------------

IMAGE = {"/root": GO_DIR | 0o700, "/home": GO_DIR | 0o755, "/home/me": GO_DIR | 0o700,
         "/srv": GO_SYMLINK | 0o777, "/opt": GO_DIR | 0o711, "/tmp": GO_DIR | 0o1777}


def test_closed_ancestors_topmost_and_only_closed() -> None:
    looked_up: list[str] = []

    def image_mode(path: str) -> int | None:
        looked_up.append(path)
        return IMAGE.get(path)

    mounts = [Path("/root/.local/state/wt"), Path("/root/.local/state/wt/.git"),
              Path("/home/me/repo"), Path("/srv/x/y"), Path("/opt/app/repo"),
              Path("/tmp/pytest/repo/.git/objects"), Path("/new/dir/repo")]
    assert closed_ancestors(mounts, image_mode=image_mode, uid=1000, fresh=("/tmp",)) == [
        PurePosixPath("/root"), PurePosixPath("/home/me")]
    assert "/tmp" not in looked_up and "/root/.local" not in looked_up  # below a stand-in
    assert "/new/dir" not in looked_up  # "/new" is not in the image: nothing below is
    # root (without capabilities) owns the image's root-owned directories
    assert closed_ancestors(mounts, image_mode=IMAGE.get, uid=0, fresh=("/tmp",)) == []


def test_stand_in_holds_only_mount_points(tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "wt").mkdir(parents=True)
    (host / "wt" / "secret.txt").write_text("never copied")
    (host / "pointer").write_text("gitdir: x\n")
    mounts = [host / "wt", host / "wt" / "nested", host / "pointer"]
    mask = PurePosixPath(host)
    [(covered, source)] = make_stand_ins([mask], mounts, under=tmp_path / "stand-ins")
    assert covered == mask
    made = sorted(str(p.relative_to(source)) for p in source.rglob("*"))
    assert made == ["pointer", "wt"]  # wt/nested lands inside the wt mount
    assert (source / "pointer").read_text() == ""
    assert all(p.stat().st_mode & 0o777 == 0o755 for p in (source, source / "wt"))
