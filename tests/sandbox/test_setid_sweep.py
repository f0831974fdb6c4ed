"""The setuid sweep (threats.md B8): where a child may hide a setuid file from it.

The sweep leaves the workspace's own top-level ``.git`` alone (the parent's git
directory, or a worktree's pointer file), and nothing else: a child in
workspace-write mode makes ``sub/.git/`` (a nested repository, or just a
directory with that name) as freely as any other directory.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from sandbox.workspaces.scan import MAX_DEPTH, scan_tree
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


def _plant_everywhere(root: Path, outside: Path) -> list[str]:
    """Setuid/setgid files wherever a child can hide them from a scan (a nested repository's
    ``.git``, a ``.git`` alias, inside a nested repository, deeper than the scan goes); the
    paths a sweep must clear, sorted."""
    deep = Path(*(f"d{i}" for i in range(MAX_DEPTH + 12)))
    hidden = ["top", "sub/.git/x", "a/b/.git/hooks/y", ".GIT/z", "nested/src/s",
              str(deep / "far"), "plain/dir/setgid"]
    for rel in hidden:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy("/bin/dash", path)
        path.chmod(0o2755 if rel.endswith("setgid") else 0o4755)
    (root / "nested" / ".git").mkdir()
    (root / "link").symlink_to(outside)
    (root / ".git").mkdir()
    shutil.copy("/bin/dash", root / ".git" / "parent's")
    (root / ".git" / "parent's").chmod(0o4755)
    return sorted(hidden)


def test_the_diffs_walk_sweeps_everywhere_the_sweep_alone_does(tmp_path: Path) -> None:
    """Before a diff the sweep is part of the scan's walk (one pass). That walk must still
    reach what the scan itself never looks into (``sub/.git/``, an alias, a tree deeper than
    the scan's limit), never follow a symlink, leave the workspace's own ``.git`` alone,
    clear exactly what :func:`clear_setid` clears, and record the cleared files in the
    manifest as they are afterwards (the stat cache and the workspace-write comparison
    read it)."""
    outside = tmp_path / "outside-suid"
    shutil.copy("/bin/dash", outside)
    outside.chmod(0o4755)
    alone, together = tmp_path / "alone", tmp_path / "together"
    expected = _plant_everywhere(alone, outside)
    assert _plant_everywhere(together, outside) == expected
    assert clear_setid(alone) == expected
    scan = scan_tree(together, manifest=True, clear_setid=True)
    assert scan.setid_cleared == expected
    assert outside.stat().st_mode & stat.S_ISUID
    assert (together / ".git" / "parent's").stat().st_mode & stat.S_ISUID
    assert scan.manifest is not None
    for rel in expected:
        now = os.lstat(together / rel)
        assert not now.st_mode & SETID
        if rel in scan.manifest:  # the scan's own view (not inside .git, not too deep)
            assert scan.manifest[rel][0] == now.st_mode
            assert scan.manifest[rel][3] == now.st_ctime_ns
    assert {"top", "nested/src/s", ".GIT/z", "plain/dir/setgid"} <= scan.manifest.keys()
