"""The checkout under a patch, checked before any write: each kind of thing in the way is a
conflict (or a refusal) named with its path and why, and nothing is written."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from apply_support import checkout_digest
from exec_support import git

from executor.apply import ApplyFailed, MergeRefused, apply_to_checkout


def make_patch(repo: Path, tmp_path: Path, change: Callable[[Path], None]) -> bytes:
    """The binary diff ``change`` makes to a clone of the repository's HEAD."""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    change(clone)
    git(clone, "add", "-A")
    return subprocess.run(["git", "diff", "--cached", "--binary", "-M"], cwd=clone,
                          capture_output=True, check=True).stdout


def refused(repo: Path, patch: bytes, **options: bool) -> str:
    before = checkout_digest(repo)
    with pytest.raises(MergeRefused) as caught:
        apply_to_checkout(repo, patch, **options)
    assert checkout_digest(repo) == before
    error = caught.value
    return f"{error.message} {error.context} {error.hint}"


def test_a_tracked_file_where_the_patch_creates_one(repo: Path, tmp_path: Path) -> None:
    patch = make_patch(repo, tmp_path, lambda c: (c / "docs.md").write_text("child\n"))
    (repo / "docs.md").write_text("mine\n")
    git(repo, "add", "docs.md")
    git(repo, "commit", "-qm", "mine")
    text = refused(repo, patch)
    assert "docs.md: the patch creates it, but the checkout has tracked file there" in text


def test_a_file_the_patch_changes_is_missing(repo: Path, tmp_path: Path) -> None:
    patch = make_patch(repo, tmp_path, lambda c: (c / "README.md").write_text("new\n"))
    (repo / "README.md").unlink()
    text = refused(repo, patch)
    assert "README.md: the patch changes it, but it is not in the checkout" in text


def test_a_file_the_patch_deletes_that_is_already_gone_is_already_applied(
    repo: Path, tmp_path: Path,
) -> None:
    patch = make_patch(repo, tmp_path, lambda c: (c / "README.md").unlink())
    (repo / "README.md").unlink()
    assert apply_to_checkout(repo, patch).status == "already_applied"


def test_a_directory_where_the_patch_changes_a_file(repo: Path, tmp_path: Path) -> None:
    patch = make_patch(repo, tmp_path, lambda c: (c / "README.md").write_text("new\n"))
    (repo / "README.md").unlink()
    (repo / "README.md").mkdir()
    (repo / "README.md" / "kept.txt").write_text("mine\n")
    text = refused(repo, patch)
    assert "README.md: the patch changes a file, but the checkout has a directory there" in text


def test_a_symlink_where_the_patch_changes_a_file(repo: Path, tmp_path: Path) -> None:
    patch = make_patch(repo, tmp_path, lambda c: (c / "README.md").write_text("new\n"))
    (repo / "README.md").unlink()
    (repo / "README.md").symlink_to(tmp_path)
    text = refused(repo, patch)
    assert "README.md: the patch changes a file, but the checkout has a symlink there" in text


def test_a_submodule_in_the_way(repo: Path, tmp_path: Path) -> None:
    upstream = tmp_path / "up"
    upstream.mkdir()
    (upstream / "a.c").write_text("int a;\n")
    git(upstream, "init", "-q")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "up")
    patch = make_patch(repo, tmp_path, lambda c: ((c / "lib").mkdir(),
                                                  (c / "lib" / "b.c").write_text("int b;\n")))
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream),
        "lib")
    git(repo, "commit", "-qm", "submodule")
    text = refused(repo, patch)
    assert "lib/b.c: lies inside lib, which is a submodule" in text


def test_a_directory_the_checkout_made_a_git_directory(repo: Path, tmp_path: Path) -> None:
    """The patch alone looks harmless (a HEAD file); next to the objects/ and refs/ an
    ignored build step left in the checkout, git would take the directory for a repo."""
    patch = make_patch(repo, tmp_path, lambda c: ((c / "out").mkdir(),
                                                  (c / "out" / "HEAD").write_text(
                                                      "ref: refs/heads/main\n")))
    for sub in ("objects", "refs"):
        (repo / "out" / sub).mkdir(parents=True)
    text = refused(repo, patch)
    assert "out: the patch makes it a git directory (head, objects/, refs/)" in text
    apply_to_checkout(repo, patch, allow_git_dirs=True)
    assert (repo / "out" / "HEAD").is_file()


def test_a_git_directory_already_in_the_checkout_is_never_written_into(
    repo: Path, tmp_path: Path,
) -> None:
    patch = make_patch(repo, tmp_path, lambda c: ((c / "bare" / "hooks").mkdir(parents=True),
                                                  (c / "bare" / "hooks" / "post-checkout")
                                                  .write_text("#!/bin/sh\n")))
    git(tmp_path, "init", "-q", "--bare", str(repo / "bare"))
    text = refused(repo, patch)
    assert "bare/hooks/post-checkout: lies inside bare, which is a git directory" in text


def test_a_file_the_patch_replaces_by_a_directory_and_back(repo: Path, tmp_path: Path) -> None:
    def change(clone: Path) -> None:
        (clone / "README.md").unlink()
        (clone / "README.md").mkdir()
        (clone / "README.md" / "index.md").write_text("moved\n")
        (clone / "src" / "app.py").unlink()
        (clone / "src").rmdir()
        (clone / "src").write_text("now a file\n")

    patch = make_patch(repo, tmp_path, change)
    apply_to_checkout(repo, patch)
    assert (repo / "README.md" / "index.md").read_text() == "moved\n"
    assert (repo / "src").read_text() == "now a file\n"


def test_a_directory_with_an_untracked_file_where_the_patch_writes_a_file(
    repo: Path, tmp_path: Path,
) -> None:
    def change(clone: Path) -> None:
        (clone / "src" / "app.py").unlink()
        (clone / "src").rmdir()
        (clone / "src").write_text("now a file\n")

    patch = make_patch(repo, tmp_path, change)
    (repo / "src" / "notes.txt").write_text("mine, untracked\n")
    text = refused(repo, patch)
    assert "src: the patch creates a file where the checkout has a directory holding 1 " \
           "file(s) the patch does not remove: src/notes.txt (untracked)" in text


def test_a_repository_that_is_not_a_checkout_is_a_refusal(tmp_path: Path) -> None:
    with pytest.raises(MergeRefused, match="not a git checkout"):
        apply_to_checkout(tmp_path, b"diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n"
                          b"+++ b/x\n@@ -0,0 +1 @@\n+x\n")


def test_an_unreadable_checkout_fails_before_writing(repo: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that cannot even look (here: the precheck) fails as infrastructure."""
    from executor.apply import steps as merge_steps

    patch = make_patch(repo, tmp_path, lambda c: (c / "x.txt").write_text("x\n"))

    def broken(name: str) -> None:
        if name == "precheck":
            raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(merge_steps, "fault_hook", broken)
    with pytest.raises(ApplyFailed, match="nothing was changed"):
        apply_to_checkout(repo, patch)
    assert not (repo / "x.txt").exists()


def test_a_linked_worktree_of_the_user_is_applied_to_and_restored(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A linked worktree keeps its index and HEAD in .git/worktrees/<name>: the fingerprint
    and the restore use those, and the main checkout is never touched."""
    from executor.apply import steps as merge_steps

    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    patch = make_patch(repo, tmp_path, lambda c: (c / "README.md").write_text("new\n"))
    before, main_before = checkout_digest(linked), checkout_digest(repo)

    def fail(name: str) -> None:
        if name == "applied":
            raise OSError(5, "injected")

    monkeypatch.setattr(merge_steps, "fault_hook", fail)
    with pytest.raises(ApplyFailed):
        apply_to_checkout(linked / "src", patch)
    assert checkout_digest(linked) == before
    monkeypatch.setattr(merge_steps, "fault_hook", None)
    assert apply_to_checkout(linked / "src", patch).status == "applied"
    assert (linked / "README.md").read_text() == "new\n"
    assert checkout_digest(repo) == main_before
