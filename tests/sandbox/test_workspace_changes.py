"""workspace-write reports every change the child made (issue 7, item 8).

In workspace-write mode the child edits the user's checkout, and the diff's
base is the snapshot, which leaves out ignored files, nested repositories and
special files. Found by an attack review: an overwritten ignored file, a tracked
file replaced by a FIFO and an edit inside a nested repository were not in
``changed``. corral now records an lstat manifest of the whole tree at creation
and reports every difference git's diff does not (``in_patch=False``, with a
flag saying why). Each test is an attack: a change the child makes, sometimes
while hiding it (same size and mtime, a rename swap, a hard link, chmod, a
symlink over a directory), that must show up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, git, sh

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.errors import SandboxError
from sandbox.gc import gc
from sandbox.results import ChangedFile, DiffResult
from sandbox.workspaces.changes import TreeRecord, outside_changes

OLD_MTIME = 1_600_000_000


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout with ignored files and directories, a nested repository, tracked files."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    files = {
        ".gitignore": "*.log\nbuild/\nnode_modules/\n",
        "README.md": "# readme\n",
        "data.txt": "tracked data\n",
        "src/app.py": "print()\n",
        "src/util/x.py": "x = 1\n",
        "app.log": "log one\n",
        "cache-a.log": "aaaa\n",
        "cache-b.log": "bbbb\n",
        "build/out.o": "object\n",
        "build/sub/deep.o": "deep object\n",
        "vendor/lib/lib.c": "int lib;\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for name in ("app.log", "cache-a.log", "cache-b.log"):
        os.utime(repo / name, (OLD_MTIME, OLD_MTIME))
    nested = repo / "vendor" / "lib"
    git(nested, "init", "-q", "-b", "main")
    git(nested, "add", "-A")
    git(nested, "commit", "-q", "-m", "nested")
    git(repo, "add", ".gitignore", "README.md", "data.txt", "src")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def _collect(sb: BaseSandbox, script: str) -> DiffResult:
    sh(sb, script).check()
    return sb.collect_diff()


def _outside(diff: DiffResult) -> dict[str, ChangedFile]:
    found = {change.path: change for change in diff.changed if not change.in_patch}
    assert len(found) == len([c for c in diff.changed if not c.in_patch]), "a path twice"
    return found


def _assert_change(diff: DiffResult, path: str, status: str, *flags: str) -> ChangedFile:
    outside = _outside(diff)
    assert path in outside, f"{path} not reported; changed: {diff.changed}"
    change = outside[path]
    assert change.status == status, change
    assert set(flags) <= set(change.flags), change
    return change


WRITE_BACKENDS = backends(fake=False)


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_overwritten_and_deleted_ignored_files_reported(open_sb: OpenSandbox,
                                                        checkout: Path) -> None:
    """An ignored file is invisible to ``git add -A``: overwriting it changed nothing in
    ``changed``. Deleting one, too."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "echo overwritten > app.log && rm build/sub/deep.o")
    _assert_change(diff, "app.log", "modified", "ignored")
    _assert_change(diff, "build/sub/deep.o", "deleted", "ignored")
    assert diff.patch == b""  # nothing git could carry
    assert not diff.is_empty


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_tracked_file_replaced_by_fifo_reported(open_sb: OpenSandbox, checkout: Path) -> None:
    """The snapshot's pathspec leaves special files out, so git kept the baseline entry and
    reported nothing; only ``excluded`` named the FIFO."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "rm data.txt && mkfifo data.txt")
    _assert_change(diff, "data.txt", "type_changed", "special_file")
    assert [e.reason for e in diff.excluded if e.path == "data.txt"] == ["special_file"]


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_edit_inside_nested_repository_reported(open_sb: OpenSandbox, checkout: Path) -> None:
    """A nested repository is excluded as a whole; an edit inside it only showed up as the
    excluded directory, as before the child ran."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "echo 'int more;' >> vendor/lib/lib.c && echo new > vendor/lib/new.c")
    _assert_change(diff, "vendor/lib/lib.c", "modified", "nested_repository")
    _assert_change(diff, "vendor/lib/new.c", "added", "nested_repository")


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_rewrite_keeping_size_and_mtime_reported(open_sb: OpenSandbox, checkout: Path) -> None:
    """Same size, mtime set back (also through a hard link made elsewhere): only the ctime,
    which no process can set, and the inode tell."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, f"printf 'LOG ONE\\n' > app.log && touch -d @{OLD_MTIME} app.log"
                        f" && ln cache-a.log build/alias.o && printf 'AAAA\\n' > build/alias.o"
                        f" && touch -d @{OLD_MTIME} build/alias.o")
    assert (checkout / "app.log").stat().st_size == len("log one\n")
    assert (checkout / "app.log").stat().st_mtime == OLD_MTIME
    _assert_change(diff, "app.log", "modified", "ignored")
    _assert_change(diff, "cache-a.log", "modified", "ignored")
    _assert_change(diff, "build/alias.o", "added", "ignored")


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_rename_swap_reported(open_sb: OpenSandbox, checkout: Path) -> None:
    """Two ignored files of the same size and mtime swapped by renames: each path now has
    the other's inode."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "mv cache-a.log t.tmp && mv cache-b.log cache-a.log"
                        " && mv t.tmp cache-b.log")
    _assert_change(diff, "cache-a.log", "modified", "ignored")
    _assert_change(diff, "cache-b.log", "modified", "ignored")


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_chmod_reported(open_sb: OpenSandbox, checkout: Path) -> None:
    """Permission bits git does not record: on an ignored file, on a tracked file (git
    records only the owner's execute bit), on a directory."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "chmod 600 build/out.o && chmod 604 README.md && chmod 700 build/sub")
    _assert_change(diff, "build/out.o", "modified", "ignored", "mode_change")
    _assert_change(diff, "README.md", "modified", "mode_change")
    _assert_change(diff, "build/sub", "modified", "directory", "mode_change")
    assert "README.md" not in diff.patch.decode()


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_symlink_replacing_ignored_directory_reported(open_sb: OpenSandbox,
                                                      checkout: Path) -> None:
    """``build/`` ignores a directory, not a symlink of that name: git shows the new link,
    and what the directory held goes missing unless the manifest says so."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "rm -rf build && ln -s /tmp build")
    assert [c.path for c in diff.changed if c.in_patch] == ["build"]  # git's: a new symlink
    _assert_change(diff, "build/out.o", "deleted", "ignored")
    _assert_change(diff, "build/sub", "deleted", "directory")


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_new_directories_reported_once(open_sb: OpenSandbox, checkout: Path) -> None:
    """A dependency install into an ignored directory is one entry that counts what it
    holds, not thousands; an empty directory (git tracks none) is reported too."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "mkdir -p node_modules/pkg/lib node_modules/pkg-b emptydir"
                        " && touch node_modules/pkg/lib/a.js node_modules/pkg/index.js")
    change = _assert_change(diff, "node_modules", "added", "ignored", "directory")
    assert change.detail == "5 entries"
    assert _assert_change(diff, "emptydir", "added", "directory").detail == "empty"
    assert not any(c.path.startswith("node_modules/") for c in diff.changed)


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_reading_and_touching_reports_nothing(open_sb: OpenSandbox, checkout: Path) -> None:
    """No noise: reading every file, and touching a tracked file whose content git finds
    unchanged, is no change."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "cat app.log build/out.o vendor/lib/lib.c > /dev/null"
                        " && touch README.md data.txt")
    assert diff.changed == ()
    assert diff.is_empty


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_directories_git_covers_reported_by_git_alone(open_sb: OpenSandbox,
                                                      checkout: Path) -> None:
    """A tracked directory removed and a new one with a new file: git lists the files; the
    directories themselves add nothing (no duplicate, no bogus "ignored")."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    diff = _collect(sb, "rm -rf src && mkdir -p fresh/inner && echo new > fresh/inner/f.txt")
    assert sorted((c.path, c.status, c.in_patch) for c in diff.changed) == [
        ("fresh/inner/f.txt", "added", True), ("src/app.py", "deleted", True),
        ("src/util/x.py", "deleted", True)]


@pytest.mark.parametrize("backend", backends(only=("host",)), indirect=True)
def test_gc_reports_changes_outside_the_patch(open_sb: OpenSandbox, checkout: Path,
                                              state_root: Path) -> None:
    """A crashed owner leaves the manifest on disk; gc's capture lists the same changes."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    sh(sb, "echo overwritten > app.log").check()
    meta = sb.state.read_meta()
    sb.state.write_meta(meta.model_copy(update={"owner_pid": None}))
    [entry] = [e for e in gc(state_root).by_action("cleaned") if e.sandbox_id == sb.id]
    saved = json.loads((state_root / "results" / sb.id / "diff.json").read_text())
    assert entry.patch_path is not None
    assert {(c["path"], c["in_patch"]) for c in saved["changed"]} == {("app.log", False)}


@pytest.mark.parametrize("backend", backends(only=("host",)), indirect=True)
def test_tampered_manifest_refuses_the_diff(open_sb: OpenSandbox, checkout: Path) -> None:
    """A manifest that is not one (the host backend's child can write the state dir) is an
    error naming it, never a silently shorter list."""
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=checkout)
    sb.workspace.record = None  # as gc finds it: only on disk
    (sb.state.dir / "tree.manifest").write_bytes(b"corral-tree-manifest-1\n\x01")
    with pytest.raises(SandboxError) as raised:
        sb.collect_diff()
    assert raised.value.code == "manifest_invalid"


# -- worktree mode: what the patch cannot carry is at least named -----------------------------


@pytest.mark.parametrize("backend", WRITE_BACKENDS, indirect=True)
def test_worktree_mode_names_fifo_and_nested_repository(open_sb: OpenSandbox,
                                                        checkout: Path) -> None:
    """In worktree mode the patch is the product: a tracked file replaced by a FIFO and a
    repository the child made are left out of it, and ``excluded`` says why."""
    sb = open_sb(SandboxMode.WORKTREE, repo_path=checkout)
    diff = _collect(sb, "rm data.txt && mkfifo data.txt && mkdir -p tool"
                        " && git init -q tool && echo x > tool/x.c")
    reasons = {e.path: e.reason for e in diff.excluded}
    assert reasons == {"data.txt": "special_file", "tool": "nested_repository"}
    assert diff.changed == ()


# -- the comparison itself ------------------------------------------------------------------


def _stat(mode: int = 0o100644, size: int = 1, mtime: int = 1, ino: int = 1) -> tuple[
        int, int, int, int, int, int, int, int]:
    return (mode, size, mtime, mtime, ino, 0, 0, 0)


def test_unreadable_directory_reported_not_its_contents() -> None:
    """A child that ``chmod 000``s a directory (corral not root) hides what is inside from
    the walk: the directory is reported, its entries are not called deleted."""
    entries = {"secret": _stat(0o40755), "secret/a.log": _stat(), "secret/b.log": _stat()}
    before = TreeRecord(entries=entries)
    after = TreeRecord(entries={"secret": _stat(0o40000)}, unreadable=frozenset({"secret"}))
    [change] = outside_changes(before, after, tracked=(), reported=())
    assert (change.path, change.status) == ("secret", "modified")
    assert {"unreadable", "directory"} <= set(change.flags)
    assert change.detail == "cannot be read any more"


_AS_ANOTHER_USER = """
import json, os, sys
from pathlib import Path
from sandbox.workspaces.changes import TreeRecord, outside_changes
from sandbox.workspaces.scan import scan_tree
tree = Path(sys.argv[1])
before = TreeRecord.of(scan_tree(tree, manifest=True))
(tree / "secret" / "a.log").write_text("changed where the walk cannot look")
os.chmod(tree / "secret", 0)
scan = scan_tree(tree, manifest=True)
changes = outside_changes(before, TreeRecord.of(scan), tracked=(), reported=())
print(json.dumps({"excluded": [[e.path, e.reason] for e in scan.excluded],
                  "changes": [[c.path, c.status, list(c.flags)] for c in changes]}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="runs the walk as another uid (setpriv, as root)")
def test_unreadable_directory_reported_by_a_non_root_walk() -> None:
    """corral not running as root, the child (same uid) ``chmod 000``s a directory after
    writing into it: the walk raised PermissionError and the collection failed. It now
    excludes the directory and reports it ``unreadable`` (its contents are unknown)."""
    tree = Path(tempfile.mkdtemp(prefix="corral-unreadable-"))  # /tmp: reachable by any uid
    try:
        (tree / "secret").mkdir()
        (tree / "secret" / "a.log").write_text("a")
        (tree / "visible.txt").write_text("v")
        for path in (tree, tree / "secret", tree / "secret" / "a.log", tree / "visible.txt"):
            os.chown(path, 65534, 65534)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-c", _AS_ANOTHER_USER, str(tree)],
            capture_output=True, text=True, check=False,
            env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": os.defpath})
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["excluded"] == [["secret", "unreadable"]]
        assert result["changes"] == [["secret", "modified", ["unreadable", "directory"]]]
    finally:
        (tree / "secret").chmod(0o700)
        shutil.rmtree(tree)


def test_record_round_trip(tmp_path: Path) -> None:
    """Saved and loaded exactly: odd names, negative times, 64-bit inodes."""
    record = TreeRecord(
        entries={"a": _stat(mtime=-5), "dir/ü\udcff name": _stat(ino=2**64 - 1),
                 "dir": _stat(0o40755)},
        nested=frozenset({"vendor/lib"}), unreadable=frozenset({"x y"}))
    record.save(tmp_path / "m")
    assert TreeRecord.load(tmp_path / "m") == record
