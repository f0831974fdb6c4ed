"""The setuid sweep (threats.md B8): where a child may hide a setuid file from it.

The sweep leaves the workspace's own top-level ``.git`` alone (the parent's git
directory, or a worktree's pointer file), and nothing else: a child in
workspace-write mode makes ``sub/.git/`` (a nested repository, or just a
directory with that name) as freely as any other directory.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from sandbox.workspaces.setid import clear_setid

SETID = stat.S_ISUID | stat.S_ISGID


def test_setuid_file_hidden_in_a_nested_git_dir(tmp_path: Path) -> None:
    """Without the top-level-only exception, ``sub/.git/x`` (and ``.git/`` of a deeper
    nested repository) keeps its setuid bit in the user's checkout."""
    root = tmp_path / "ws"
    hidden = [root / "sub" / ".git" / "x", root / "a" / "b" / ".git" / "hooks" / "y"]
    for path in hidden:
        path.parent.mkdir(parents=True)
        shutil.copy("/bin/dash", path)
        path.chmod(0o6755)
    (root / ".git").mkdir()
    shutil.copy("/bin/dash", root / ".git" / "parent's")
    (root / ".git" / "parent's").chmod(0o4755)
    cleared = clear_setid(root)
    assert cleared == ["a/b/.git/hooks/y", "sub/.git/x"]
    for path in hidden:
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert (root / ".git" / "parent's").stat().st_mode & stat.S_ISUID  # not the child's
