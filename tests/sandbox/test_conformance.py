"""What "works" means for every backend: host, bubblewrap, docker and the fake.

The same edit gives a byte-identical diff everywhere (equal to plain
``git diff --cached --binary -M`` of the same edit), read-only stays
read-only, teardown leaves nothing behind, a timeout is the same result and
the same error, and a crash leaves state ``gc`` cleans without losing the diff.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sbx_support import (
    OpenSandbox,
    backend_config,
    backends,
    child_git_dir,
    git,
    held_snapshots,
    run,
    sh,
)

from policies.contract import SandboxMode
from sandbox.backends.fake import FakeSandbox
from sandbox.errors import CommandTimeout, PathDenied
from sandbox.files.confined import ConfinedFiles
from sandbox.gc import gc
from sandbox.workspaces.overlay import overlay_mounts
from tests.procs import pids_matching, wait_for
from tests.timescale import scaled

EDIT_SCRIPT = r"""
printf 'child edit\n' >> README.md
printf 'VALUE = 42\n' > src/new_module.py
rm docs/guide.md
mv src/app.py src/main.py
chmod 755 tools/build.sh
printf '\000\001\002\377' > data.bin
ln -s README.md link-to-readme
"""


def edit(fs: ConfinedFiles) -> None:
    """The same edit as :data:`EDIT_SCRIPT`, through the confined file API."""
    fs.write_bytes("README.md", fs.read_bytes("README.md") + b"child edit\n")
    fs.write_bytes("src/new_module.py", b"VALUE = 42\n")
    fs.remove("docs/guide.md")
    fs.rename("src/app.py", "src/main.py")
    fs.chmod("tools/build.sh", 0o755)
    fs.write_bytes("data.bin", b"\x00\x01\x02\xff")
    fs.symlink("link-to-readme", "README.md")


def reference_patch(repo: Path, tmp_path: Path) -> bytes:
    """Plain git's diff of the same edit on a plain copy of the repository."""
    copy = tmp_path / "reference"
    shutil.copytree(repo, copy, symlinks=True)
    edit(ConfinedFiles(copy, writable=True))
    env = {"GIT_INDEX_FILE": str(tmp_path / "reference.index")}
    git(copy, "read-tree", "HEAD", env=env)
    git(copy, "add", "-A", env=env)
    done = subprocess.run(["git", "diff", "--cached", "--binary", "-M", "HEAD"], cwd=copy,
                          env={**env, "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"},
                          capture_output=True, check=True)
    return done.stdout


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_same_edit_gives_identical_diff(open_sb: OpenSandbox, repo: Path, tmp_path: Path) -> None:
    sb = open_sb()
    result = sh(sb, EDIT_SCRIPT, effect=edit)
    assert result.exit_code == 0, result.stderr
    diff = sb.collect_diff()
    assert diff.patch == reference_patch(repo, tmp_path)
    by_path = {change.path: change for change in diff.changed}
    assert by_path["src/main.py"].status == "renamed"
    assert by_path["src/main.py"].old_path == "src/app.py"
    assert by_path["tools/build.sh"].new_mode == "100755"
    assert "mode_change" in by_path["tools/build.sh"].flags
    assert by_path["data.bin"].binary
    assert by_path["link-to-readme"].flags == ("symlink",)
    assert by_path["docs/guide.md"].status == "deleted"
    assert diff.patch_path is not None and diff.patch_path.read_bytes() == diff.patch


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_diff_applies_onto_parent_state_at_snapshot(
    open_sb: OpenSandbox, repo: Path, tmp_path: Path
) -> None:
    (repo / "README.md").write_text("# demo\n\nParent's uncommitted line.\n")
    (repo / "notes.txt").write_text("untracked parent notes\n")
    sb = open_sb()
    sh(sb, EDIT_SCRIPT, effect=edit).check()
    diff = sb.collect_diff()
    assert git(repo, "apply", "--check", "--binary", "-", input=diff.patch.decode()).returncode == 0
    scratch = tmp_path / "scratch"  # the parent's state at snapshot time (unchanged since)
    shutil.copytree(repo, scratch, symlinks=True)
    git(scratch, "apply", "--binary", "-", input=diff.patch.decode())
    for rel in ("README.md", "src/main.py", "src/new_module.py", "data.bin", "notes.txt"):
        assert (scratch / rel).read_bytes() == sb.files.read_bytes(rel)
    assert (scratch / "link-to-readme").readlink() == Path("README.md")
    assert not (scratch / "docs/guide.md").exists()


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_child_starts_from_parent_current_state(open_sb: OpenSandbox, repo: Path) -> None:
    (repo / "README.md").write_text("staged\n")
    git(repo, "add", "README.md")
    (repo / "src/app.py").write_text("unstaged\n")
    (repo / "docs/guide.md").unlink()
    (repo / "notes.txt").write_text("untracked\n")
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "debug.log").write_text("ignored\n")
    status_before = git(repo, "status", "--porcelain", "--ignored").stdout
    sb = open_sb()
    fs = sb.files
    assert sb.root != repo
    assert fs.read_text("README.md") == "staged\n"
    assert fs.read_text("src/app.py") == "unstaged\n"
    assert fs.read_text("notes.txt") == "untracked\n"
    assert not fs.exists("docs/guide.md")
    assert not fs.exists("debug.log")
    sh(sb, "printf 'child\\n' >> notes.txt",
       effect=lambda f: f.write_text("notes.txt", "untracked\nchild\n")).check()
    assert git(repo, "status", "--porcelain", "--ignored").stdout == status_before
    assert (repo / "notes.txt").read_text() == "untracked\n"
    diff = sb.collect_diff()
    assert [change.path for change in diff.changed] == ["notes.txt"]


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_workspace_write_edits_the_parent_checkout(open_sb: OpenSandbox, repo: Path) -> None:
    (repo / "notes.txt").write_text("parent's own change\n")
    sb = open_sb(SandboxMode.WORKSPACE_WRITE)
    assert sb.root == repo
    sh(sb, "printf 'child\\n' >> README.md",
       effect=lambda f: f.write_bytes("README.md", f.read_bytes("README.md") + b"child\n")
       ).check()
    assert (repo / "README.md").read_text().endswith("child\n")
    diff = sb.collect_diff()
    assert [change.path for change in diff.changed] == ["README.md"]


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_read_only_file_api_refuses_writes(open_sb: OpenSandbox, repo: Path) -> None:
    sb = open_sb(SandboxMode.READ_ONLY)
    assert sb.root == repo
    assert sb.files.read_text("README.md").startswith("# demo")
    with pytest.raises(PathDenied) as denied:
        sb.files.write_text("README.md", "changed\n")
    assert denied.value.code == "read_only_workspace"
    assert denied.value.exit_code == 4
    assert sb.collect_diff().is_empty
    assert git(repo, "status", "--porcelain").stdout == ""


@pytest.mark.parametrize(
    "backend", backends(host_xfail="commands run as the user: nothing is read-only"),
    indirect=True,
)
def test_read_only_stays_read_only(open_sb: OpenSandbox, repo: Path) -> None:
    sb = open_sb(SandboxMode.READ_ONLY)
    write = sh(sb, "echo x >> README.md", effect=lambda f: f.write_text("README.md", "x\n"))
    create = sh(sb, "touch new-file", effect=lambda f: f.write_text("new-file", ""))
    assert write.exit_code != 0
    assert create.exit_code != 0
    assert git(repo, "status", "--porcelain").stdout == ""


def tree_digest(path: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``path``: mode and content (or link target)."""
    found = {}
    for entry in sorted(path.rglob("*")):
        info = entry.lstat()
        data = (str(entry.readlink()).encode() if entry.is_symlink()
                else entry.read_bytes() if entry.is_file() else b"")
        found[str(entry.relative_to(path))] = (info.st_mode, data)
    return found


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
def test_parent_git_dir_is_never_written(open_sb: OpenSandbox, repo: Path,
                                         mode: SandboxMode) -> None:
    (repo / "untracked.txt").write_text("parent's untracked file\n")
    before = tree_digest(repo / ".git")
    sb = open_sb(mode)
    sh(sb, "echo child > child.txt", effect=lambda fs: fs.write_text("child.txt", "child\n"))
    assert [c.path for c in sb.collect_diff().changed] == ["child.txt"]
    sb.teardown()
    assert tree_digest(repo / ".git") == before


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_teardown_leaves_nothing_behind(open_sb: OpenSandbox, repo: Path, state_root: Path,
                                       marker: str) -> None:
    sb = open_sb()
    run(sb, ["sh", "-c", f"sleep {marker} >/dev/null 2>&1 &"]).check()
    sb.files.write_text("kept.txt", "the diff survives teardown\n")
    worktree = sb.root
    assert worktree.is_dir() and worktree.is_relative_to(state_root)
    report = sb.teardown()
    assert report.diff_captured and report.patch_path is not None
    assert b"kept.txt" in report.patch_path.read_bytes()
    assert not worktree.exists()
    assert git(repo, "worktree", "list", "--porcelain").stdout.count("worktree ") == 1
    assert git(repo, "status", "--porcelain").stdout == ""
    assert not (state_root / "sandboxes" / sb.id).exists()
    assert wait_for(lambda: not pids_matching(f"sleep {marker}"), timeout=scaled(5))
    assert not list(Path("/sys/fs/cgroup").glob(f"*/corral/*/{sb.id}"))
    if sb.backend == "docker":
        listed = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={sb.id}"],
                                capture_output=True, text=True, check=True)
        assert listed.stdout.strip() == ""
    assert sb.teardown() == report  # idempotent


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_timeout_maps_to_the_same_result_and_error(open_sb: OpenSandbox) -> None:
    sb = open_sb()
    result = run(sb, ["sleep", "30"], timeout=1, fake_duration=30)
    assert result.timed_out and result.exit_code is None and not result.stopped
    assert result.duration_seconds < 10
    with pytest.raises(CommandTimeout) as raised:
        result.check()
    assert raised.value.code == "command_timeout" and raised.value.retryable
    assert run(sb, ["true"]).ok  # the sandbox still works


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_exit_code_streams_cwd_and_env(open_sb: OpenSandbox) -> None:
    sb = open_sb()
    result = run(sb, ["sh", "-c", 'echo "out $FOO"; pwd; echo err >&2; exit 3'], cwd="src",
                 env={"FOO": "bar"}, fake_exit=3,
                 fake_stdout=f"out bar\n{sb.root}/src\n".encode())
    assert result.exit_code == 3
    assert result.stdout == f"out bar\n{sb.root}/src\n".encode()
    if not isinstance(sb, FakeSandbox):
        assert result.stderr == b"err\n"
        missing = sb.exec(["no-such-command-xyz"])
        assert missing.exit_code == 127


_CRASH = """
import json, os, signal, sys
from pathlib import Path
from pydantic import TypeAdapter
from policies.contract import SandboxMode
from sandbox.config import BackendConfig, FakeConfig
from sandbox.factory import open_sandbox
data = json.loads(sys.argv[1])
adapter = TypeAdapter(BackendConfig)
fake = data["type"] == "fake"
config = FakeConfig.model_validate(data) if fake else adapter.validate_python(data)
sb = open_sandbox(config, repo=Path(sys.argv[2]), mode=SandboxMode.WORKTREE,
                  state_root=Path(sys.argv[3]), workspace=sys.argv[4])
assert sb.workspace_kind == sys.argv[4]
sb.files.write_text("crash.txt", "written before the crash\\n")
print(sb.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_gc_after_a_crash_keeps_the_diff(backend: str, workspace: str, repo: Path,
                                         state_root: Path) -> None:
    config = backend_config(backend)
    done = subprocess.run([sys.executable, "-c", _CRASH, config.model_dump_json(), str(repo),
                           str(state_root), workspace], capture_output=True, text=True,
                          check=False)
    assert done.returncode == -9, done.stderr
    sandbox_id = done.stdout.strip()
    worktree = state_root / "worktrees" / sandbox_id
    assert (worktree / "crash.txt").is_file()
    report = gc(state_root)
    [entry] = [e for e in report.entries if e.sandbox_id == sandbox_id and e.action == "cleaned"]
    assert entry.patch_path is not None and b"crash.txt" in entry.patch_path.read_bytes()
    assert not worktree.exists()
    assert json.loads((state_root / "results" / sandbox_id / "diff.json").read_text())[
        "changed"][0]["path"] == "crash.txt"
    if backend == "docker":
        listed = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={sandbox_id}"],
                                capture_output=True, text=True, check=True)
        assert listed.stdout.strip() == ""
    assert not overlay_mounts(state_root)
    assert held_snapshots(state_root) == []  # an overlay's snapshot stays idle, for reuse
    assert not gc(state_root).by_action("cleaned")  # nothing left to do


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_gc_leaves_live_sandboxes_alone(open_sb: OpenSandbox, state_root: Path) -> None:
    sb = open_sb()
    report = gc(state_root)
    assert [e.action for e in report.entries if e.sandbox_id == sb.id] == ["in_use"]
    assert sb.root.is_dir()


@pytest.mark.parametrize("backend", backends(overlay=True, only=("bubblewrap", "docker")),
                         indirect=True)
def test_gc_removes_orphaned_containers_and_cgroups(open_sb: OpenSandbox, state_root: Path
                                                    ) -> None:
    """State lost before its metadata (a crash mid-creation): gc still finds the container or
    cgroup by its label or name, within this state root only."""
    sb = open_sb()
    shutil.rmtree(sb.state.dir)  # the metadata is gone; the container / cgroup is not
    report = gc(state_root)
    assert {e.sandbox_id for e in report.by_action("orphan_removed")} == {sb.id}
    assert not list(Path("/sys/fs/cgroup").glob(f"*/corral/*/{sb.id}"))
    assert not overlay_mounts(state_root)
    if sb.backend == "docker":
        listed = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={sb.id}"],
                                capture_output=True, text=True, check=True)
        assert listed.stdout.strip() == ""


@pytest.mark.parametrize("backend", backends(overlay=True, fake=False), indirect=True)
def test_child_git_reads_its_worktree(open_sb: OpenSandbox) -> None:
    """The child's own git works read-only: status and diff show its changes since the
    snapshot, and the snapshot's parent is the parent's HEAD."""
    sb = open_sb()
    result = sh(sb, "echo more >> README.md && git status --porcelain && git log --format=%s "
                    "-2 && git diff --stat")
    assert result.ok, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[:3] == [" M README.md", "corral snapshot", "initial"]
    assert "README.md | 1 +" in lines[3]


@pytest.mark.parametrize(
    "backend", backends(overlay=True,
                        fake=False, host_xfail="the private git dir is writable on the host"),
    indirect=True)
def test_child_cannot_commit(open_sb: OpenSandbox) -> None:
    """Children never commit: their git dir is read-only (the diff is the only result)."""
    sb = open_sb()
    result = sh(sb, "echo more >> README.md && git -c user.name=c -c user.email=c@c "
                    "commit -qam 'child commit'")
    assert result.exit_code != 0
    assert (child_git_dir(sb) / "HEAD").read_text().strip() == sb.base_commit
