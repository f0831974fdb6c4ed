"""Read-only git metadata inside a writable workspace (``Workspace.mounts``).

A child may write its workspace, never the git metadata in it: a hook or a config
line planted there runs on the user's host the next time git runs in that
repository. Two places are easy to forget because the workspace's own bind mount
would otherwise make them writable: the ``.git`` of a repository nested in the
parent's checkout (workspace-write mode), and the ``.git`` pointer file at the top of
a worktree or overlay (it names the git dir git uses there). Only the OS layer stops
these writes; the host backend has none, so it is a strict expected failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, git, sh

from policies.contract import SandboxMode

NO_OS_ISOLATION = "commands run on the host as the user"


@pytest.fixture
def nested(repo: Path) -> Path:
    """A repository of its own inside the parent's checkout (``sub/``, not a submodule)."""
    sub = repo / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "lib.c").write_text("int x;\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "nested")
    return sub


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("backend", backends(host_xfail=NO_OS_ISOLATION, fake=False),
                         indirect=True)
def test_nested_repository_git_dir_is_read_only_in_workspace_write(
        open_sb: OpenSandbox, nested: Path) -> None:
    """Without the read-only bind of ``sub/.git``, a workspace-write child plants
    ``sub/.git/hooks/post-commit`` (and a ``core.fsmonitor`` in ``sub/.git/config``): the
    user's next ``git commit`` (or ``git status``) in ``sub`` runs the child's program."""
    before = _tree(nested / ".git")
    sb = open_sb(SandboxMode.WORKSPACE_WRITE)
    attacks = {
        "hook": "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > sub/.git/hooks/post-commit && "
                "chmod +x sub/.git/hooks/post-commit",
        "config": "printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' >> sub/.git/config",
        "replace": "rm -f sub/.git/HEAD && echo 'ref: refs/heads/evil' > sub/.git/HEAD",
    }
    for name, script in attacks.items():
        result = sh(sb, script)
        assert result.exit_code != 0, (name, result.stdout, result.stderr)
    ok = sh(sb, "echo 'int y;' >> sub/lib.c")  # the nested repository's files stay writable
    assert ok.exit_code == 0, ok.stderr
    assert not (nested / ".git" / "hooks" / "post-commit").exists()
    assert _tree(nested / ".git") == before
    diff = sb.collect_diff()
    assert [(c.path, c.status) for c in diff.changed] == [("sub/lib.c", "modified")]


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION,
                                             fake=False), indirect=True)
def test_top_git_pointer_is_read_only(open_sb: OpenSandbox, tmp_path: Path) -> None:
    """The worktree's ``.git`` is a file, ``gitdir: <private git dir>``. Without its read-only
    bind a child rewrites it (in place, appending, truncating; or, in docker, where the
    pointer stays root's in a worktree given to the child's uid, replaces it) to point git
    at a repository of its choosing, whose config then runs for whoever opens the worktree
    with git."""
    sb = open_sb()
    pointer = sb.root / ".git"
    before = pointer.read_bytes()
    assert before.startswith(b"gitdir: ")
    evil = tmp_path / "evil"
    for script in (f"echo 'gitdir: {evil}' > .git", f"echo 'gitdir: {evil}' >> .git",
                   ": > .git", "truncate -s 0 .git", "cp /dev/null .git",
                   # docker: the pointer is root's, but the worktree is the child's uid's
                   f"rm -f .git && echo 'gitdir: {evil}' > .git", "mv .git moved-pointer"):
        result = sh(sb, script)
        assert result.exit_code != 0, (script, result.stdout, result.stderr)
    assert pointer.read_bytes() == before
    inside = sh(sb, "git rev-parse --absolute-git-dir")  # the child's git still works
    assert inside.exit_code == 0 and str(evil) not in inside.stdout.decode()
    sh(sb, "echo changed > README.md").check()
    diff = sb.collect_diff()
    assert [(c.path, c.status) for c in diff.changed] == [("README.md", "modified")]
    assert not diff.excluded
    report = sb.teardown()
    assert report.patch_path is not None and report.patch_path.read_bytes() == diff.patch
