"""Replays: a fresh sandbox holding exactly a recorded diff (:mod:`sandbox.replay`).

A fanout's check and a response reviewer run in one. It must hold what the
recorded patch says, every change shape included (text, binary, deletion,
rename, mode, symlink), with files the sandbox's commands may change; a patch
that does not apply is an error that leaves nothing behind; and a replay
abandoned by a crash is removed by ``gc`` without a diff being kept (nothing
in it is anyone's work).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends

from sandbox.errors import SandboxError
from sandbox.gc import gc
from sandbox.replay import open_replay
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot
from tests.timescale import scaled

CHANGES = """
printf 'changed\\n' >> README.md
printf '\\000\\001\\002binary' > blob.bin
rm docs/guide.md
git mv -f src/app.py src/main.py 2>/dev/null || mv src/app.py src/main.py
chmod +x data.bin
ln -s README.md link
mkdir -p new/deep && echo made > new/deep/file.txt
"""


def _tree(root: Path) -> dict[str, tuple[str, bytes]]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            if name == ".git":  # the pointer to each workspace's own git dir
                continue
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = ("link", str(path.readlink()).encode())
            else:
                kind = "exec" if os.access(path, os.X_OK) else "file"
                found[rel] = (kind, path.read_bytes())
    return found


@pytest.mark.parametrize("backend", backends(fake=False), indirect=True)
def test_a_replay_holds_exactly_the_recorded_diff(open_sb: OpenSandbox, repo: Path,
                                                  state_root: Path, backend: str) -> None:
    child = open_sb()
    assert child.exec(["sh", "-c", CHANGES]).ok
    diff = child.collect_diff()
    expected = _tree(child.root)
    ref = acquire_snapshot(repo, state_root=state_root)
    try:
        replay = open_replay(child_config(child), repo=repo, snapshot=ref, patch=diff.patch,
                             state_root=state_root)
    finally:
        release_snapshot(ref)
    try:
        assert _tree(replay.root) == expected
        # Files the patch made belong to whoever the sandbox's commands run as.
        assert replay.exec(["sh", "-c", "echo more >> new/deep/file.txt && touch new/x"]).ok
    finally:
        replay.teardown(discard=True)


def child_config(child: object) -> object:
    return child.config  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", backends(only=("host", "bubblewrap"), fake=False),
                         indirect=True)
def test_a_patch_that_does_not_apply_is_an_error_and_leaves_nothing(
        open_sb: OpenSandbox, repo: Path, state_root: Path) -> None:
    child = open_sb()
    bad = (b"diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
           b"@@ -1,1 +1,1 @@\n-no such line\n+x\n")
    ref = acquire_snapshot(repo, state_root=state_root)
    try:
        with pytest.raises(SandboxError) as raised:
            open_replay(child_config(child), repo=repo, snapshot=ref, patch=bad,
                        state_root=state_root)
    finally:
        release_snapshot(ref)
    assert raised.value.code == "replay_failed"
    sandboxes = sorted(p.name for p in (state_root / "sandboxes").iterdir())
    assert sandboxes == [child.id]  # the failed replay removed itself


@pytest.mark.parametrize("backend", backends(only=("bubblewrap",), fake=False), indirect=True)
def test_an_abandoned_replay_is_removed_by_gc_without_a_diff(repo: Path, state_root: Path,
                                                             backend: str) -> None:
    """A process that opened a replay and died (a crash mid-check): gc cleans it and keeps no
    diff, where an abandoned child's diff is always kept."""
    program = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{str(Path.cwd())!r}]
        from pathlib import Path
        from sandbox.config import BubblewrapConfig, Limits
        from sandbox.replay import open_replay
        from sandbox.workspaces.snapshot import acquire_snapshot
        ref = acquire_snapshot(Path({str(repo)!r}), state_root=Path({str(state_root)!r}))
        replay = open_replay(BubblewrapConfig(limits=Limits(pids=64)), repo=ref.repo.top,
                             snapshot=ref, patch=b"", state_root=ref.state_root)
        replay.exec(["sh", "-c", "echo check output > written-by-the-check.txt"])
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", program], check=True, timeout=scaled(120))
    report = gc(state_root)
    cleaned = [e for e in report.entries if e.action == "cleaned" and e.sandbox_id]
    assert cleaned and all(e.patch_path is None for e in cleaned), report
    assert not any((state_root / "sandboxes").iterdir())
