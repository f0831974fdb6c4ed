"""Idle snapshots kept for reuse: exactly the state they were keyed by, bounded, aged out.

After its last lease a snapshot stays on disk so the next run on the same state
pays no commit, no checkout and no tree walk. These tests hold that to its
contract: a snapshot is reused only for exactly its state (any change to what a
child would start from gives another snapshot, whichever way it was made); at
most ``KEEP_IDLE`` idle snapshots per repository stay, the most recently used,
and a held one is never removed; gc removes idle ones past its age limit or of a
repository that is gone; a snapshot of a workspace under the state dir (a
delegating child's) is not kept; and gc racing an acquisition never removes what
the acquisition leased.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import threading
from pathlib import Path

import pytest
from sbx_support import git, held_snapshots, idle_snapshots, make_repo

from sandbox.gc import gc
from sandbox.workspaces.privategit import create_private_git
from sandbox.workspaces.repo import inspect_repo
from sandbox.workspaces.snapshot import (
    KEEP_IDLE,
    SNAPSHOTS,
    SnapshotRef,
    acquire_snapshot,
    release_snapshot,
    snapshot_checkout,
)
from sandbox.workspaces.snapstore import collect_snapshots
from sandbox.workspaces.staging import stage_snapshot
from sandbox.workspaces.statekey import listing_key
from tests.timescale import scaled

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _cycle(repo: Path, state_root: Path) -> SnapshotRef:
    """Acquire and release (a run that started and ended); the ref."""
    ref = acquire_snapshot(repo, state_root=state_root)
    release_snapshot(ref)
    return ref


def _files(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != ".git"}


def test_the_same_state_reuses_the_idle_snapshot_and_its_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("unstaged\n")
    (repo / "notes.txt").write_text("untracked\n")
    state_root = tmp_path / "state"
    first = acquire_snapshot(repo, state_root=state_root)
    tree = snapshot_checkout(first).tree
    inode = tree.stat().st_ino
    release_snapshot(first)
    assert held_snapshots(state_root) == [] and idle_snapshots(state_root) == [first.id]
    aliases = first.path / "aliases"
    assert len(list(aliases.iterdir())) == 1  # the staged index's bytes: found without git
    for _ in range(2):
        again = acquire_snapshot(repo, state_root=state_root)
        assert (again.id, again.commit, again.reused) == (first.id, first.commit, True)
        assert snapshot_checkout(again).tree.stat().st_ino == inode  # not checked out again
        release_snapshot(again)
    assert len(list(aliases.iterdir())) == 1
    assert _files(tree)["notes.txt"] == b"untracked\n"
    os.utime(repo / "notes.txt")  # the same state, staged with other stat data
    touched = _cycle(repo, state_root)
    assert (touched.id, touched.reused) == (first.id, True)  # found by its listing
    assert len(list(aliases.iterdir())) == 2


#: Each changes what a child would start from, and nothing else; (path, content) or a git
#: command. After each, the next snapshot must be a new one holding exactly the new state.
_CHANGES: dict[str, list[tuple[str, ...]]] = {
    # an untracked file's content, same size
    "untracked-same-size": [("write", "notes.txt", "UNTRACKED\n")],
    # a tracked file rewritten unstaged, its size and mtime kept
    "tracked-same-stat": [("same-stat", "README.md", "# DEMO\n\nHello.\n")],
    "staged": [("write", "src/app.py", "staged\n"), ("git", "add", "src/app.py")],
    "new-untracked": [("write", "docs/new.md", "new\n")],
    "deleted": [("rm", "docs/guide.md")],
    "mode": [("chmod", "README.md", "755")],
    "ignore-rules": [("exclude", "notes.txt")],  # .git/info/exclude
    "new-commit": [("git", "commit", "-q", "--allow-empty", "-m", "empty")],
    "intent-to-add": [("write", "ita.txt", ""), ("git", "add", "-N", "ita.txt")],
}


def _apply(repo: Path, change: tuple[str, ...]) -> None:
    kind, *args = change
    if kind == "git":
        git(repo, *args)
        return
    path = repo / args[0]
    if kind == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args[1])
    elif kind == "same-stat":
        before = path.stat()
        path.write_text(args[1])
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_size == before.st_size
    elif kind == "rm":
        path.unlink()
    elif kind == "chmod":
        path.chmod(int(args[1], 8))
    elif kind == "exclude":
        exclude = repo / ".git" / "info" / "exclude"
        exclude.write_text(exclude.read_text() + f"{args[0]}\n")


@pytest.mark.parametrize("what", sorted(_CHANGES))
def test_any_other_state_gets_another_snapshot(what: str, tmp_path: Path) -> None:
    """Reuse needs the exact state: the same HEAD with another tree, the same tree under
    another rule, a file rewritten with its size and mtime kept (its ctime moves)."""
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("untracked\n")
    state_root = tmp_path / "state"
    before = _cycle(repo, state_root)
    for change in _CHANGES[what]:
        _apply(repo, change)
    after = acquire_snapshot(repo, state_root=state_root)
    try:
        assert after.id != before.id and not after.reused
        made = _files(snapshot_checkout(after).tree)
        expected = {rel: data for rel, data in _files(repo).items()
                    if not rel.startswith(".git/")}
        if what == "ignore-rules":
            expected.pop("notes.txt")
        assert made == expected
    finally:
        release_snapshot(after)
    again = _cycle(repo, state_root)  # and that state is reused in its turn
    assert (again.id, again.reused) == (after.id, True)


def _stat_as_now(index: Path, rel: str, file: Path) -> None:
    """Give ``rel``'s entry of a version-2 ``index`` the current ``lstat`` of ``file`` (its
    object id kept), as git records an entry refreshed in the second the index was
    written, before a same-second change that keeps every stat field in whole seconds."""
    data = bytearray(index.read_bytes())
    count = struct.unpack_from(">I", data, 8)[0]
    pos = 12
    for _ in range(count):
        flags = struct.unpack_from(">H", data, pos + 60)[0]
        name = bytes(data[pos + 62:pos + 62 + (flags & 0xFFF)])
        if name == rel.encode():
            info = file.lstat()
            fields = struct.unpack_from(">10I", data, pos)
            struct.pack_into(">10I", data, pos, int(info.st_ctime), info.st_ctime_ns % 10**9,
                             int(info.st_mtime), info.st_mtime_ns % 10**9, *fields[4:])
        pos += (62 + (flags & 0xFFF) + 8) & ~7
    data[-20:] = hashlib.sha1(data[:-20]).digest()  # noqa: S324 - git's index checksum
    index.write_bytes(bytes(data))


def test_a_racily_clean_entry_is_hashed_as_git_would(tmp_path: Path) -> None:
    """A file changed in the second its entry was recorded and its index written keeps
    every stat field git compares (whole seconds): only the index file's own date tells
    git to hash it. A staging index dated when it was copied hid the change."""
    repo = make_repo(tmp_path / "repo")
    readme = repo / "README.md"
    readme.write_text("# DEMO\n\nHello.\n")  # same size, not staged
    second = (readme.stat().st_mtime_ns // 10**9 - 100) * 10**9  # all of it a while ago
    os.utime(readme, ns=(second, second))
    index = repo / ".git" / "index"
    _stat_as_now(index, "README.md", readme)  # recorded after the change, the old blob kept
    os.utime(index, ns=(second, second))  # written in that second: the entry is racy
    ref = acquire_snapshot(repo, state_root=tmp_path / "state")
    try:
        assert _files(snapshot_checkout(ref).tree)["README.md"] == b"# DEMO\n\nHello.\n"
    finally:
        release_snapshot(ref)


def test_an_index_with_extended_flags_is_keyed_by_its_commit(tmp_path: Path) -> None:
    """A skip-worktree entry stays in the staged index (version 3): its listing does not
    say everything the tree depends on, so the key is the commit's; reuse works alike."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "update-index", "--skip-worktree", "README.md")
    (repo / "README.md").write_text("local, not staged\n")
    state_root = tmp_path / "state"
    first = _cycle(repo, state_root)
    with (repo / ".git" / "index").open("rb") as index:
        assert index.read(8)[-1] == 3
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    info = inspect_repo(repo)
    create_private_git(scratch / "git", parent_git_dir=info.git_dir, common_dir=info.common_dir)
    staged = stage_snapshot(info, scratch, scratch / "git")
    assert listing_key(info, scratch / "git", staged.index) is None  # the listing hides flags
    again = acquire_snapshot(repo, state_root=state_root)
    try:
        assert (again.id, again.commit, again.reused) == (first.id, first.commit, True)
        assert _files(snapshot_checkout(again).tree)["README.md"] == b"# demo\n\nHello.\n"
    finally:
        release_snapshot(again)
    git(repo, "update-index", "--no-skip-worktree", "README.md")
    third = _cycle(repo, state_root)
    assert third.id != first.id


def test_an_exclusion_that_no_longer_holds_is_walked_again(tmp_path: Path) -> None:
    """A nested repository leaves the snapshot; once its ``.git`` is gone its files are the
    parent's untracked files, and a snapshot staged with the old exclusions would miss them
    (the same listing, a false reuse). A new nested repository is left out again: git
    refuses to stage it with the old exclusions, and the walk finds it."""
    repo = make_repo(tmp_path / "repo")
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "lib.py").write_text("vendored\n")
    state_root = tmp_path / "state"
    first = _cycle(repo, state_root)
    assert [(e.path, e.reason) for e in first.excluded] == [("vendor/lib", "nested_repository")]
    shutil.rmtree(nested / ".git")
    second = acquire_snapshot(repo, state_root=state_root)
    try:
        assert second.id != first.id and second.excluded == ()
        assert _files(snapshot_checkout(second).tree)["vendor/lib/lib.py"] == b"vendored\n"
    finally:
        release_snapshot(second)
    other = repo / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "x.txt").write_text("x\n")
    third = acquire_snapshot(repo, state_root=state_root)
    try:  # left out, the same content as before: the same snapshot, this walk's exclusions
        assert [(e.path, e.reason) for e in third.excluded] == [("other", "nested_repository")]
        assert (third.id, third.reused) == (second.id, True)
        assert "other/x.txt" not in _files(snapshot_checkout(third).tree)
    finally:
        release_snapshot(third)


def test_at_most_keep_idle_per_repository_and_never_a_held_one(tmp_path: Path) -> None:
    repo, other = make_repo(tmp_path / "repo"), make_repo(tmp_path / "other")
    state_root = tmp_path / "state"
    theirs = _cycle(other, state_root)
    held = acquire_snapshot(repo, state_root=state_root)  # the oldest of all, and held
    made = []
    for i in range(KEEP_IDLE + 2):
        (repo / "state.txt").write_text(f"state {i}\n")
        made.append(_cycle(repo, state_root))
    newest = [ref.id for ref in made[-KEEP_IDLE:]]
    assert held_snapshots(state_root) == [held.id]
    assert idle_snapshots(state_root) == sorted([theirs.id, *newest])
    release_snapshot(held)  # now idle and the most recently used: an older one goes
    assert idle_snapshots(state_root) == sorted([theirs.id, held.id, newest[-1]])


def test_gc_removes_idle_snapshots_past_its_limit_or_of_a_repository_gone(
        tmp_path: Path) -> None:
    repo, gone = make_repo(tmp_path / "repo"), make_repo(tmp_path / "gone")
    state_root = tmp_path / "state"
    old, lost = _cycle(repo, state_root), _cycle(gone, state_root)
    (repo / "x.txt").write_text("newer\n")
    fresh = _cycle(repo, state_root)
    (state_root / SNAPSHOTS / old.id / "used").write_text("0\n")  # idle since 1970
    shutil.rmtree(gone)
    held = acquire_snapshot(repo, state_root=state_root)
    try:
        assert held.id == fresh.id
        (state_root / SNAPSHOTS / fresh.id / "used").write_text("0\n")
        report = gc(state_root)
        cleaned = {e.sandbox_id: e.detail for e in report.by_action("cleaned")}
        assert cleaned.keys() == {old.id, lost.id}
        assert "unused for" in cleaned[old.id] and "gone" in cleaned[lost.id]
        assert [e.sandbox_id for e in report.by_action("in_use")] == [fresh.id]
    finally:
        release_snapshot(held)
    assert idle_snapshots(state_root) == [fresh.id]  # its release made it recent again
    assert not gc(state_root).entries
    assert [e.sandbox_id for e in gc(state_root, snapshot_max_idle=0).entries] == [fresh.id]
    assert idle_snapshots(state_root) == []


def test_a_snapshot_of_a_workspace_under_the_state_dir_is_not_kept(tmp_path: Path) -> None:
    """A delegating child's workspace is a path no later run starts from."""
    state_root = tmp_path / "state"
    workspace = make_repo(state_root / "worktrees" / "corral-0123456789ab")
    ref = acquire_snapshot(workspace, state_root=state_root)
    assert ref.path.is_dir()
    release_snapshot(ref)
    assert not ref.path.exists() and idle_snapshots(state_root) == []


def test_gc_racing_acquisitions_never_removes_a_leased_snapshot(tmp_path: Path) -> None:
    """A run that starts while gc removes the idle snapshot of its state either leased it
    first (gc keeps it) or finds it gone (and makes a fresh one): every acquired snapshot
    exists, whole, while its lease is held."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    _cycle(repo, state_root)
    stop = threading.Event()
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            while not stop.is_set():
                collect_snapshots(state_root, max_idle=0)
        except BaseException as exc:  # reported below
            errors.append(exc)

    sweeper = threading.Thread(target=sweep)
    sweeper.start()
    try:
        reused = fresh = 0
        for _ in range(12):
            ref = acquire_snapshot(repo, state_root=state_root)
            try:
                assert (ref.path / "snapshot.json").is_file()
                assert (ref.path / "leases" / f"{ref.lease}.json").is_file()
                assert (snapshot_checkout(ref).tree / "README.md").is_file()
                reused, fresh = reused + ref.reused, fresh + (not ref.reused)
            finally:
                release_snapshot(ref)
    finally:
        stop.set()
        sweeper.join(scaled(60))
    assert not errors, errors
    assert reused + fresh == 12
