"""Escape suite, what a child leaves for the host once it stops: setuid files in the user's
checkout (threats.md B6.29, on the host side) and private state other local users could reach.

Inside the sandbox a setuid file is inert (bubblewrap binds are ``nosuid``; ``NoNewPrivs`` on
both isolating backends). The attack is the file that stays behind: corral runs as root in CI,
and so does the child on bubblewrap and, with ``allow_root_user``, on docker.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, sh

from policies.contract import SandboxMode
from sandbox.errors import SandboxError
from sandbox.files.confined import ConfinedFiles
from sandbox.gc import gc
from sandbox.workspaces.setid import clear_setid
from tests.timescale import scaled

SETID = stat.S_ISUID | stat.S_ISGID
PLANT = ("cp /bin/dash rootsh && chmod 4755 rootsh && cp /bin/dash groupsh && chmod 2755 groupsh"
         " && mkdir -p deep/er && cp /bin/dash deep/er/both && chmod 6755 deep/er/both")
PLANTED = ("deep/er/both", "groupsh", "rootsh")


def _setid_files(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            path = Path(dirpath, name)
            if not path.is_symlink() and path.stat().st_mode & SETID:
                found.append(str(path.relative_to(root)))
    return sorted(found)


def _plant(fs: ConfinedFiles) -> None:
    """The fake backend's stand-in for :data:`PLANT` (the file API itself never sets the bits)."""
    for rel, mode in (("rootsh", 0o4755), ("groupsh", 0o2755), ("deep/er/both", 0o6755)):
        fs.write_bytes(rel, Path("/bin/dash").read_bytes())
        (fs.root / rel).chmod(mode)


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_setuid_file_left_in_checkout_is_cleared(open_sb: OpenSandbox, repo: Path) -> None:
    """Found in review: in workspace-write mode ``cp /bin/dash x; chmod 4755 x`` left
    ``-rwsr-xr-x root`` in the user's checkout, for any local user to run. Defence: after the
    freeze that precedes every diff, and again at teardown, corral clears setuid/setgid on
    every regular file of the writable workspace (git never records those bits) and reports
    the paths. Without it the planted files keep their bits."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE)
    assert sb.root == repo
    sh(sb, PLANT, effect=_plant).check()
    assert _setid_files(repo) == sorted(PLANTED)  # the attack itself works
    diff = sb.collect_diff()
    assert _setid_files(repo) == []
    assert diff.setid_cleared == PLANTED
    flags = {change.path: change.flags for change in diff.changed}
    assert "setid_cleared" in flags["rootsh"]
    assert stat.S_IMODE((repo / "rootsh").stat().st_mode) == 0o755
    # Again after the last diff: teardown sweeps the checkout that stays.
    sh(sb, "chmod 4755 rootsh", effect=lambda fs: (fs.root / "rootsh").chmod(0o4755)).check()
    report = sb.teardown(discard=True)
    assert _setid_files(repo) == []
    assert set(PLANTED) <= set(report.setid_cleared)


def test_setid_sweep_walks_deep_trees_without_following_links(tmp_path: Path) -> None:
    """The child chooses the tree's shape: a setuid file 200 directories down (deeper than the
    descriptors the sweep keeps open) is still found; a symlink to a setuid file outside the
    workspace is never followed (the sweep would otherwise strip the host's own binaries); a
    directory keeps its setgid bit (group inheritance, not a privilege)."""
    outside = tmp_path / "outside-suid"
    shutil.copy("/bin/dash", outside)
    outside.chmod(0o4755)
    root = tmp_path / "ws"
    deep = root.joinpath(*(f"d{i}" for i in range(200)))
    deep.mkdir(parents=True)
    for path in (deep / "x", root / "top"):
        shutil.copy("/bin/dash", path)
        path.chmod(0o4711)
    (root / "link").symlink_to(outside)
    (deep / "link").symlink_to(outside)
    (root / "d0").chmod(0o2755)
    (root / ".git").mkdir()
    shutil.copy("/bin/dash", root / ".git" / "not-the-child's")
    (root / ".git" / "not-the-child's").chmod(0o4755)
    cleared = clear_setid(root)
    assert cleared == sorted(["top", str((deep / "x").relative_to(root))])
    assert not (deep / "x").stat().st_mode & SETID
    assert outside.stat().st_mode & stat.S_ISUID
    assert (root / "d0").stat().st_mode & stat.S_ISGID
    assert (root / ".git" / "not-the-child's").stat().st_mode & stat.S_ISUID
    assert clear_setid(tmp_path / "missing") == []


def test_setid_sweep_fails_closed(tmp_path: Path) -> None:
    """A sweep that cannot look everywhere says so instead of reporting success."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(SandboxError) as raised:
        clear_setid(not_a_dir)
    assert raised.value.code == "setid_sweep_failed"


PRIVATE = ("", "sandboxes", "worktrees", "results", "sandboxes/{id}", "worktrees/{id}",
           "results/{id}")


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_state_and_worktree_are_private_to_the_user(open_sb: OpenSandbox,
                                                    state_root: Path) -> None:
    """Found in review: worktrees were made ``0755`` and an existing state root kept its mode,
    so another local user could read a child's files (and a ``0755`` root exposes the
    patches under ``results/``) while it ran. Defence: every state directory is ``0700``,
    tightened when it already existed; a container still works through its bind mount."""
    state_root.mkdir(mode=0o755)
    state_root.chmod(0o755)
    sb = open_sb()
    sh(sb, "echo child > child.txt", effect=lambda fs: fs.write_text("child.txt", "child\n")
       ).check()
    assert [c.path for c in sb.collect_diff().changed] == ["child.txt"]
    for rel in PRIVATE:
        path = state_root / rel.format(id=sb.id)
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (rel, oct(path.stat().st_mode))


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_gc_clears_setuid_files_an_abandoned_child_left(open_sb: OpenSandbox, repo: Path,
                                                         state_root: Path) -> None:
    """A crash leaves no teardown to sweep the user's checkout; gc does it before capturing."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE)
    sh(sb, PLANT, effect=_plant).check()
    meta = sb.state.read_meta()
    sb.state.write_meta(meta.model_copy(update={"owner_pid": None}))  # the owner crashed
    [entry] = [e for e in gc(state_root).by_action("cleaned") if e.sandbox_id == sb.id]
    assert entry.setid_cleared == PLANTED
    assert _setid_files(repo) == []


#: A leftover that kills every other process of its uid, over and over: it kills the
#: command's wrapper and every reaper started as that uid inside the sandbox.
REAPER_KILLER = (
    "cp /bin/dash rootsh && chmod 4755 rootsh; python3 -c '\n"
    "import os, threading, time\n"
    "def spin():\n"
    "    while True:\n"
    "        try: os.kill(-1, 9)\n"
    "        except OSError: pass\n"
    "threading.Thread(target=spin, daemon=True).start()\n"
    "while True:\n"
    "    open(\"late.txt\", \"w\").write(str(time.time()))\n"
    "    time.sleep(0.2)\n"
    "' </dev/null >/dev/null 2>&1 & sleep 1; echo unreachable"
)


@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker"), fake=False),
                         indirect=True)
def test_a_leftover_that_kills_the_reaper_is_stopped_from_outside(open_sb: OpenSandbox,
                                                                  repo: Path) -> None:
    """Found in the second review: a leftover looping on ``kill(-1, 9)`` killed the docker
    kill-all exec (it runs as the child's uid), so the freeze failed, teardown removed
    nothing, and the process kept writing the checkout after the run ended, next to a
    setuid-root shell. Defence: when the in-sandbox reaper fails, the container is killed
    from the engine (bubblewrap: the cgroup), and teardown always removes what runs the child
    and sweeps the checkout. Without it ``late.txt`` keeps changing after teardown."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE)
    sh(sb, REAPER_KILLER)
    diff = sb.collect_diff()  # must not fail: the child is stopped by force if need be
    assert "rootsh" in diff.setid_cleared
    sb.teardown(discard=True)
    late = repo / "late.txt"
    before = late.read_text() if late.exists() else ""
    deadline = __import__("time").monotonic() + 2.0
    while __import__("time").monotonic() < deadline:  # nothing may still be writing
        assert (late.read_text() if late.exists() else "") == before
    assert _setid_files(repo) == []


@pytest.mark.parametrize("backend", backends(overlay=True, only=("host",)), indirect=True)
def test_a_failed_freeze_never_blocks_later_commands(open_sb: OpenSandbox,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in the second review: when stopping the child raised, the freeze left its
    bookkeeping set and every later command waited forever (past any deadline)."""
    sb = open_sb(SandboxMode.WORKTREE)
    calls = {"n": 0}
    real_stop = sb._stop

    def failing_stop() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise SandboxError("could not stop", code="test_stop_failed")
        real_stop()

    monkeypatch.setattr(sb, "_stop", failing_stop)
    with pytest.raises(SandboxError, match="could not stop"):
        sb.collect_diff()
    assert sh(sb, "echo still works", timeout=scaled(10)).stdout == b"still works\n"
