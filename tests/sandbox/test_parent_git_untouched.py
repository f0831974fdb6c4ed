"""The parent's ``.git`` is never written, mtimes included (issue 7, item 7).

Found by an attack review: git "freshens" an object it is asked to write but
already has (``utime`` on the loose file or on the whole ``.pack``), in its own
store *or in any alternate*. corral's snapshot (``add -A``, ``write-tree``,
``commit-tree``) and diff (``add -A``) ran with the parent's object directories
as alternates, so a run whose files matched existing blobs rewrote mtimes in
the parent's ``.git``. Each test records every entry under the parent's
``.git`` (type, mode, size, mtime and ctime in ns, content hash) before the
sandbox opens and after it is torn down, and demands they are identical.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, git, sh

from policies.contract import SandboxMode
from sandbox.files.confined import ConfinedFiles
from sandbox.gitsafe import run_git
from sandbox.workspaces.privategit import STORE, create_private_git, seed_racy_blobs, writing_env

PACKED = "packed content\n"
LOOSE = "loose content\n"
DEEP = "deep, never changed\n"

Entry = tuple[str, int, int, int, int, str | None]


def git_manifest(git_dir: Path) -> dict[str, Entry]:
    """Every entry under ``git_dir``: (kind, mode, size, mtime_ns, ctime_ns, sha256)."""
    found: dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(git_dir):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            info = path.lstat()
            digest = (hashlib.sha256(path.read_bytes()).hexdigest()
                      if stat.S_ISREG(info.st_mode) else None)
            found[str(path.relative_to(git_dir))] = (
                stat.filemode(info.st_mode), info.st_mode, info.st_size, info.st_mtime_ns,
                info.st_ctime_ns, digest)
    return found


def assert_untouched(before: dict[str, Entry], after: dict[str, Entry]) -> None:
    changed = {path: (before.get(path), after.get(path))
               for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)}
    assert not changed, f"the parent's .git was written: {changed}"


def _write(repo: Path, rel: str, text: str, *, mtime: int | None = None) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def packed_and_loose_repo(repo: Path) -> Path:
    """Objects in a pack and loose; uncommitted edits and untracked files whose content the
    object store already has; a subtree nobody changes."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    _write(repo, "packed.txt", PACKED)
    _write(repo, "edited.txt", "first version\n")
    _write(repo, "sub/deep/unchanged.txt", DEEP)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "packed")
    git(repo, "gc", "-q")  # every object so far is in a pack
    assert list((repo / ".git" / "objects" / "pack").glob("*.pack"))
    _write(repo, "loose.txt", LOOSE)
    _write(repo, "edited.txt", "second version\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "loose")
    assert any(p.name not in {"pack", "info"}
               for p in (repo / ".git" / "objects").iterdir())
    # Uncommitted: an edit back to content the pack has, a rewrite with identical content
    # (stat-dirty, same blob), untracked copies of a packed and of a loose blob.
    _write(repo, "edited.txt", "first version\n")
    _write(repo, "loose.txt", LOOSE, mtime=1_000_000)
    _write(repo, "untracked-packed.txt", PACKED)
    _write(repo, "untracked-loose.txt", LOOSE)
    return repo


def _child_writes(fs: ConfinedFiles) -> None:
    fs.write_text("copy-of-packed.txt", PACKED)
    fs.write_text("copy-of-loose.txt", LOOSE)
    fs.write_text("edited.txt", "second version\n")
    fs.write_text("sub/deep/unchanged.txt", DEEP)
    fs.write_text("sub/new/packed.txt", PACKED)


CHILD_SCRIPT = (
    f"printf '{PACKED}' > copy-of-packed.txt && printf '{LOOSE}' > copy-of-loose.txt"
    " && printf 'second version\\n' > edited.txt"
    f" && printf '{DEEP}' > sub/deep/unchanged.txt"
    f" && mkdir -p sub/new && printf '{PACKED}' > sub/new/packed.txt"
)


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
def test_parent_git_untouched_by_snapshot_diff_and_teardown(
    open_sb: OpenSandbox, tmp_path: Path, mode: SandboxMode
) -> None:
    """Without a store of its own for every object-writing git command, the snapshot's
    ``add -A``/``write-tree`` and the diff's ``add -A`` freshened the pack and the loose
    objects of the parent whose content the child (or the parent's own edits) repeated."""
    repo = packed_and_loose_repo(tmp_path / "parent")
    before = git_manifest(repo / ".git")
    sb = open_sb(mode, repo_path=repo)
    sh(sb, CHILD_SCRIPT, effect=_child_writes).check()
    diff = sb.collect_diff()
    paths = {change.path for change in diff.changed}
    assert {"copy-of-packed.txt", "copy-of-loose.txt", "sub/new/packed.txt"} <= paths
    sb.collect_diff()  # a second collection finds every object in the store already
    sb.teardown()
    assert_untouched(before, git_manifest(repo / ".git"))


@pytest.mark.parametrize("backend", backends(overlay=True, only=("host",)), indirect=True)
def test_split_index_of_parent_not_freshened(open_sb: OpenSandbox, tmp_path: Path) -> None:
    """git freshens the ``sharedindex.*`` file of a split index whenever it reads one: a
    copy of the parent's index made the snapshot touch it. corral now builds the snapshot
    index from ``HEAD`` when the parent's index is split."""
    repo = packed_and_loose_repo(tmp_path / "parent")
    git(repo, "update-index", "--split-index")
    _write(repo, "staged.txt", "staged\n")
    git(repo, "add", "staged.txt")
    assert list((repo / ".git").glob("sharedindex.*"))
    before = git_manifest(repo / ".git")
    sb = open_sb(SandboxMode.WORKSPACE_WRITE, repo_path=repo)
    sh(sb, CHILD_SCRIPT, effect=_child_writes).check()
    diff = sb.collect_diff()
    assert "copy-of-packed.txt" in {change.path for change in diff.changed}
    assert "staged.txt" not in {change.path for change in diff.changed}  # in the snapshot
    sb.teardown()
    assert_untouched(before, git_manifest(repo / ".git"))


# -- what a store without alternates must not change: git's "safer autocrlf" ------------------


@pytest.mark.parametrize("backend", backends(overlay=True, only=("host", "bubblewrap")),
                         indirect=True)
@pytest.mark.parametrize("setting", ["text-auto-attribute", "core-autocrlf"])
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
def test_committed_crlf_kept_when_child_edits(open_sb: OpenSandbox, tmp_path: Path,
                                               setting: str, mode: SandboxMode) -> None:
    """Under ``text=auto`` or ``core.autocrlf``, ``git add`` keeps the CRLF line endings of
    a file committed with them (it reads the index's blob to decide). A ``git add`` that
    sees no alternate cannot read it and rewrote every line to LF, so the child's one-line
    edit became a whole-file diff; corral copies such blobs into its store first."""
    repo = tmp_path / "parent"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "crlf committed")
    if setting == "core-autocrlf":
        git(repo, "config", "core.autocrlf", "true")
    else:
        (repo / ".gitattributes").write_text("* text=auto\n")
        git(repo, "add", ".gitattributes")
        git(repo, "commit", "-q", "-m", "attributes")
    git(repo, "gc", "-q")
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\nparent\r\n")  # uncommitted edit
    sb = open_sb(mode, repo_path=repo)
    sh(sb, "printf 'child\\r\\n' >> win.txt",
       effect=lambda fs: fs.write_bytes(
           "win.txt", fs.read_bytes("win.txt") + b"child\r\n")).check()
    patch = sb.collect_diff().patch
    lines = patch.split(b"\n")
    added = [line for line in lines if line.startswith(b"+") and not line.startswith(b"+++")]
    removed = [line for line in lines if line.startswith(b"-") and not line.startswith(b"---")]
    assert (added, removed) == ([b"+child\r"], []), patch.decode()


# -- what a store without alternates must not cost: racily clean entries ----------------------


def test_racily_clean_entries_found_in_the_store(tmp_path: Path) -> None:
    """``git add`` re-hashes and re-writes every racily clean entry (mtime not before the
    index's second): every file of a worktree collected in the second it was checked out.
    With the parent's objects as alternates that write was a free "freshen"; into a store of
    its own it was one loose object per file (10k files: seconds). corral packs those blobs
    into the store first, so ``add`` writes no loose object for them."""
    repo = tmp_path / "parent"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(200):
        _write(repo, f"d{i % 7}/f{i}.txt", f"content {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    future = int(time.time()) + 10_000  # racy whatever the clock does during the test
    for path in repo.rglob("f*.txt"):
        os.utime(path, (future, future))
    git(repo, "update-index", "--refresh")
    private = tmp_path / "private"
    create_private_git(private, parent_git_dir=repo / ".git", common_dir=repo / ".git")
    index = tmp_path / "copy.index"
    shutil.copyfile(repo / ".git" / "index", index)
    seeded = seed_racy_blobs(git_dir=repo / ".git", work_tree=repo, private_git=private,
                             index=index, recorded_ns=None)
    assert seeded == 200
    run_git(["add", "-A", ":/"], git_dir=repo / ".git", work_tree=repo,
            env=writing_env(private, index))
    loose = [p for p in (private / STORE).rglob("*")
             if p.is_file() and p.parent.name not in ("pack", "info")]
    assert loose == []
