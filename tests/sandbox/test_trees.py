"""corral builds the trees of an overlay child's diff itself: byte for byte git's trees.

A tree whose entries are out of git's order, or written in another form, would get
another id than git gives the same content (every unchanged directory would then
look changed) or confuse ``diff-tree``, which walks entries in order. Here every tree
git wrote for awkward names (``a``, ``a.b``, ``a-``, ``a/``, a file and a directory
sorting around each other, non-ASCII, a symlink, an executable, a gitlink) is
rebuilt from its entries and must get git's id, for SHA-1 and SHA-256 repositories;
the pack written for new trees must be readable by git.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sbx_support import git

from sandbox.gitsafe import git_env
from sandbox.workspaces.trees import TREE_MODE, TreeReader, store_trees, tree_object

NAMES = ["a-", "a.b", "a/inner", "a0", "a.c/inner", "b", "é.txt", "z z", "ab/c/d"]


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_rebuilt_trees_get_gits_ids(tmp_path: Path, object_format: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", f"--object-format={object_format}")
    for name in NAMES:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    (repo / "link").symlink_to("a.b")
    (repo / "run").write_text("#!/bin/sh\n")
    (repo / "run").chmod(0o755)
    git(repo, "add", "-A")
    blob_id = git(repo, "rev-parse", ":a-").stdout.strip()
    commit_id = "1" * len(blob_id)
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit_id},sub")
    root = git(repo, "write-tree").stdout.strip()
    env = git_env()
    with TreeReader(git_dir=repo / ".git", env=env) as reader:
        pending = [root]
        seen = 0
        while pending:
            oid = pending.pop()
            entries = reader.tree(oid)
            assert tree_object(entries, sha256=object_format == "sha256")[0] == oid
            pending += [inner for mode, inner in entries.values() if mode == TREE_MODE]
            seen += 1
        assert seen >= 5
        top = dict(reader.tree(root))
    top["new-dir"] = (TREE_MODE, root)  # a tree that does not exist yet, holding the old root
    new_root, content = tree_object(top, sha256=object_format == "sha256")
    store_trees(git_dir=repo / ".git", env=env, trees={new_root: content})
    listing = git(repo, "ls-tree", "-r", "--name-only", new_root).stdout.split()
    assert "new-dir/a/inner" in listing and "a.c/inner" in listing
    assert git(repo, "fsck", "--no-dangling", "--connectivity-only").returncode == 0
