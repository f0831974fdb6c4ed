"""A worktree child's diff trusts the checkout's stat data only where a hostile child cannot
fake it (:mod:`sandbox.workspaces.statcache`), so git hashes what changed and nothing else.

The attacks: a child rewrites a file in place and restores its size and mtime in the same
second as the checkout (git compares whole seconds, so its own stat check is fooled once the
index is dated a second later); and an entry whose ctime lies in the fence's tick, which a
change could keep. Both must end up hashed, and the patch must carry the edit.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, sh

from sandbox.names import is_git_alias
from sandbox.workspaces.scan import _may_alias, scan_tree
from sandbox.workspaces.statcache import prepare_index
from tests.procs import wait_for

NS = 1_000_000_000
TARGET = "src/app.py"
# In place (same inode, same size), then the mtime put back from a copy made before.
EDIT = (f"cp -p {TARGET} /tmp/ref && printf X | dd of={TARGET} bs=1 count=1 conv=notrunc "
        f"2>/dev/null && touch -r /tmp/ref {TARGET}")


def _recorded(index: Path, work_tree: Path, git_dir: Path) -> dict[str, tuple[int, int]]:
    """Path -> (ctime_ns, mtime_ns) as the index records them."""
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", f"--work-tree={work_tree}", "ls-files", "--debug"],
        env={**os.environ, "GIT_INDEX_FILE": str(index)}, check=True, capture_output=True,
        text=True).stdout
    found: dict[str, tuple[int, int]] = {}
    path = ""
    ctime = 0
    for line in out.splitlines():
        if not line.startswith(" "):
            path = line
        elif line.strip().startswith("ctime:"):
            sec, nsec = line.split()[1].split(":")
            ctime = int(sec) * NS + int(nsec)
        elif line.strip().startswith("mtime:"):
            sec, nsec = line.split()[1].split(":")
            found[path] = (ctime, int(sec) * NS + int(nsec))
    return found


@pytest.mark.parametrize("backend", backends(only=("host", "bubblewrap", "docker"), fake=False),
                         indirect=True)
def test_in_place_edit_with_restored_size_and_mtime_is_in_the_diff(open_sb: OpenSandbox,
                                                                   repo: Path) -> None:
    """Before: the baseline index was trusted as git trusts it, to the second. A child that
    rewrote a file in place in the checkout's second and restored its size and mtime was
    invisible to a collection a second later (the edit was missing from the patch).

    Files checked out after the target (``zz/``) keep its recorded ctime out of the fence's
    clock tick (timestamps are jiffy-coarse): an entry in that tick is hashed whatever its
    stat data says, and only an entry before it tests the nanosecond ctime comparison."""
    (repo / "zz").mkdir()
    for i in range(1000):
        (repo / "zz" / f"f{i:04d}").write_text(f"{i}\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "after the target"], check=True)
    for _attempt in range(20):
        sb = open_sb()
        target = sb.root / TARGET
        before = os.lstat(target)
        sh(sb, EDIT).check()
        after = os.lstat(target)
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino, before.st_size, before.st_mtime_ns)
        assert target.read_bytes().startswith(b"X")
        baseline = sb.workspace.baseline_index
        assert baseline is not None
        recorded = _recorded(baseline, sb.root, sb.state.private_git)[TARGET][0]
        if (after.st_ctime_ns // NS == before.st_ctime_ns // NS  # git sees one ctime second
                and recorded < baseline.stat().st_mtime_ns):  # and its entry is not in the
            break  # fence's tick (hashed anyway): only the nanosecond ctime check can see it
        sb.teardown(discard=True)  # a premise missed (the next second, a coarse tick): again
    else:
        pytest.fail("the child never edited the file in the checkout's second")
    second = after.st_ctime_ns // NS
    assert wait_for(lambda: time.time_ns() // NS > second)  # git's racy rule no longer helps
    diff = sb.collect_diff()
    assert [c.path for c in diff.changed] == [TARGET]
    assert b"+Xef main():" in diff.patch


@pytest.mark.parametrize("backend", backends(only=("host",), fake=False), indirect=True)
def test_entry_in_the_fence_tick_is_hashed(open_sb: OpenSandbox) -> None:
    """An entry whose recorded ctime is not strictly before the fence (the baseline index's
    mtime) could be changed in that same tick without its ctime moving: it is hashed even
    though its lstat matches; one a nanosecond older is trusted."""
    sb = open_sb()
    baseline = sb.workspace.baseline_index
    assert baseline is not None
    recorded = _recorded(baseline, sb.root, sb.state.private_git)
    ctime = recorded[TARGET][0]
    manifest = scan_tree(sb.root, manifest=True).manifest
    assert manifest is not None
    target = sb.state.dir / "probe.index"
    hash_size = len(sb.workspace.base_commit or "") // 2

    def untrusted(fence: int) -> set[str]:
        os.utime(baseline, ns=(fence, fence))
        prepare_index(baseline, target, manifest=manifest, hash_size=hash_size)
        return {path for path, (c, _m) in _recorded(target, sb.root, sb.state.private_git)
                .items() if c == 0}

    assert TARGET in untrusted(ctime)
    assert TARGET not in untrusted(ctime + 1)


@pytest.mark.parametrize("backend", backends(only=("host",), fake=False), indirect=True)
def test_only_changed_files_are_hashed(open_sb: OpenSandbox) -> None:
    """What makes the diff cheap: every entry whose file did not change keeps its stat data,
    and the index is dated after them all, so none is "racily clean" (before: a child
    collected in the second it was checked out had every file hashed again)."""
    sb = open_sb()
    baseline = sb.workspace.baseline_index
    assert baseline is not None
    fence = baseline.stat().st_mtime_ns
    recorded = _recorded(baseline, sb.root, sb.state.private_git)
    in_tick = {path for path, (ctime, _m) in recorded.items() if ctime >= fence}
    sb.files.write_text("README.md", "changed\n")
    sb.files.write_text("docs/guide.md", "changed too\n")
    manifest = scan_tree(sb.root, manifest=True).manifest
    assert manifest is not None
    target = sb.state.dir / "probe.index"
    plan = prepare_index(baseline, target, manifest=manifest,
                         hash_size=len(sb.workspace.base_commit or "") // 2)
    hashed = {path for path, (c, _m) in _recorded(target, sb.root, sb.state.private_git)
              .items() if c == 0}
    assert hashed == {"README.md", "docs/guide.md"} | in_tick
    assert plan.understood and plan.rehash == len(hashed)
    assert plan.trusted == len(recorded) - len(hashed)
    dated = target.stat().st_mtime_ns // NS
    assert all(m // NS < dated for path, (_c, m) in recorded.items() if path not in hashed)


def test_alias_pre_check_never_hides_an_alias() -> None:
    """The walk asks :func:`is_git_alias` only of names the cheap pre-check lets through:
    every ASCII name of up to five characters over the alphabet aliases are made of, and
    non-ASCII spellings, that are aliases pass it."""
    alphabet = ".gitGIT~1: "
    names = [""]
    for _ in range(5):
        names += [name + ch for name in names if len(name) == len(names[-1]) for ch in alphabet]
    names += [".g\u200cit", ".GİT", "\u212a.git", ".git\u3000", "ｇit~1", ".gıt"]
    aliases = [name for name in names if is_git_alias(name)]
    assert len(aliases) > 40
    assert all(_may_alias(name) for name in aliases)
