"""An overlay workspace and a plain worktree give the same diff for the same child actions.

Issue 8's acceptance: on host, bubblewrap and docker, the same shell script run by
a child in an overlay over a shared snapshot, in a worktree checked out from that
snapshot (the fallback), and in a worktree that snapshots the parent itself (no
shared snapshot, as before) gives byte-identical patches and identical lists of
changed, excluded and setid-cleared files. The script covers new, edited,
deleted, renamed and mode-changed files, binary files, symlinks, files under
ignored and untracked paths, directories renamed (``EXDEV`` in an overlay: ``mv``
copies), deleted and replaced by files or links, files replaced by directories,
copy-ups that change nothing, a ``.gitignore`` and a ``.gitattributes`` the child
writes, a nested repository, a ``.git`` alias, a FIFO, a setuid file, a tree
deeper than the scan goes, and submodule (gitlink) directories written into and
removed. (The outside-the-diff report of workspace-write mode does not apply:
overlays are for worktree mode only.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sbx_support import (
    TEST_LIMITS,
    backend_config,
    diff_facts,
    git,
    held_snapshots,
    overlay_backends,
    sh,
)

from policies.contract import SandboxMode
from sandbox.factory import open_sandbox
from sandbox.results import DiffResult
from sandbox.workspaces.scan import MAX_DEPTH
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot

DEEP = "/".join(["z"] * (MAX_DEPTH + 3))

ACTIONS = rf"""
set -e
printf 'child edit\n' >> README.md
printf 'VALUE = 1\n' > src/new_module.py
rm docs/guide.md
mv src/app.py src/main.py
chmod 755 tools/build.sh
chmod 644 tools/run.sh
printf '\000\001\002\377binary edit' > data.bin
ln -s README.md link-to-readme
ln -s no/such/target dangling
mkdir -p build && printf 'object\n' > build/out.o
printf 'ignored\n' > child.log
printf 'more\n' >> parent-untracked.txt
printf 'x\n' > parent-untracked-dir/new.txt
rm parent-untracked-dir/old.txt
mv lib lib-moved
rm -rf old-dir
rm file-to-dir && mkdir file-to-dir && printf 'inside\n' > file-to-dir/inner.txt
rm -rf dir-to-file && printf 'now a file\n' > dir-to-file
rm -rf dir-to-link && ln -s src dir-to-link
mkdir empty-dir
mkdir -p nested/repo/.git && printf 'x\n' > nested/repo/file.txt
mkdir .GIT && printf 'x\n' > .GIT/config
mkfifo a-fifo
printf '*.tmp\n' >> .gitignore && printf 'tmp\n' > scratch.tmp
printf '*.crlf text eol=lf\n' > .gitattributes && printf 'a\r\nb\r\n' > win.crlf
printf 'x' > 'with space é.txt'
mkdir -p a/b/c/d && printf 'deep\n' > a/b/c/d/e.txt
cp tools/build.sh setuid.sh && chmod 4755 setuid.sh
chmod 755 docs/index.md && chmod 644 docs/index.md
touch -m -d '2001-01-01' docs/keep.md
rm docs/same.md && printf 'same\n' > docs/same.md
printf 'into a submodule dir\n' > sub-written/file.txt
rmdir sub-removed
mkdir -p {DEEP} && printf 'too deep\n' > {DEEP}/f.txt
"""


def rich_repo(path: Path) -> Path:
    """A committed tree with every shape the script changes, uncommitted and untracked state,
    and two gitlinks (submodules without a checkout)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    files = {
        "README.md": "# demo\n", "src/app.py": "def main():\n    return 1\n",
        "docs/guide.md": "Guide\n", "docs/index.md": "Index\n", "docs/keep.md": "Keep\n",
        "docs/same.md": "same\n", "tools/build.sh": "#!/bin/sh\necho build\n",
        "lib/a.py": "A = 1\n" * 20, "lib/b.py": "B = 2\n" * 20, "old-dir/x/y.txt": "y\n",
        "file-to-dir": "a file\n", "dir-to-file/inner.txt": "inner\n",
        "dir-to-link/inner.txt": "inner\n", ".gitignore": "build/\n*.log\n",
    }
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    (path / "tools/run.sh").write_text("#!/bin/sh\n")
    (path / "tools/run.sh").chmod(0o755)
    (path / "data.bin").write_bytes(bytes(range(256)) * 4)
    git(path, "add", "-A")
    blob = "1" * 40
    for sub in ("sub-written", "sub-removed"):
        git(path, "update-index", "--add", "--cacheinfo", f"160000,{blob},{sub}")
        (path / sub).mkdir()  # as a clone without its submodules checked out
    git(path, "commit", "-q", "-m", "initial")
    (path / "README.md").write_text("# demo\n\nstaged by the parent\n")
    git(path, "add", "README.md")
    (path / "src/app.py").write_text("def main():\n    return 2  # unstaged\n")
    (path / "parent-untracked.txt").write_text("untracked by the parent\n")
    (path / "parent-untracked-dir").mkdir()
    (path / "parent-untracked-dir/old.txt").write_text("old\n")
    (path / "parent.log").write_text("ignored: never in the snapshot\n")
    return path


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_overlay_and_worktrees_give_identical_diffs(backend: str, tmp_path: Path) -> None:
    repo = rich_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    config = backend_config(backend, TEST_LIMITS)
    ref = acquire_snapshot(repo, state_root=state_root)
    diffs: dict[str, DiffResult] = {}
    try:
        for kind in ("overlay", "worktree", "own-snapshot"):
            if kind == "own-snapshot":
                sb = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                                  state_root=state_root)
            else:
                sb = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                                  state_root=state_root, snapshot=ref, workspace=kind)
            assert sb.workspace_kind == ("worktree" if kind == "own-snapshot" else kind)
            assert sb.workspace_fallback is None
            try:
                result = sh(sb, ACTIONS)
                assert result.exit_code == 0, result.stderr.decode()
                diffs[kind] = sb.collect_diff()
            finally:
                sb.teardown(discard=True)
    finally:
        release_snapshot(ref)
    overlay = diffs["overlay"]
    assert diff_facts(overlay) == diff_facts(diffs["worktree"])
    assert diff_facts(overlay) == diff_facts(diffs["own-snapshot"])
    by_path = {change.path: change for change in overlay.changed}
    assert by_path["src/main.py"].status == "renamed"
    assert by_path["lib-moved/a.py"].status == "renamed"
    assert by_path["docs/guide.md"].status == "deleted"
    assert by_path["old-dir/x/y.txt"].status == "deleted"
    assert by_path["tools/build.sh"].new_mode == "100755"
    assert by_path["tools/run.sh"].new_mode == "100644"
    assert by_path["data.bin"].binary
    assert by_path["link-to-readme"].new_mode == "120000"
    assert by_path["dir-to-link"].new_mode == "120000"
    assert by_path["file-to-dir/inner.txt"].status == "added"
    assert by_path["dir-to-file"].status == "added"
    assert by_path["parent-untracked.txt"].status == "modified"
    assert by_path["parent-untracked-dir/old.txt"].status == "deleted"
    assert "setid_cleared" in by_path["setuid.sh"].flags
    assert {"scratch.tmp", "child.log", "build/out.o", "docs/index.md", "docs/keep.md",
            "docs/same.md", "empty-dir", "sub-written/file.txt"}.isdisjoint(by_path)
    assert b"+a\n+b\n" in overlay.patch and b"+a\r" not in overlay.patch  # its .gitattributes
    assert {(e.path, e.reason) for e in overlay.excluded} == {
        ("nested/repo", "nested_repository"), (".GIT", "protected_name"),
        ("a-fifo", "special_file"), ("sub-removed", "gitlink"),
        ("/".join(["z"] * (MAX_DEPTH + 1)), "too_deep")}
    assert overlay.setid_cleared == ("setuid.sh",)
    assert held_snapshots(state_root) == []  # idle, kept for the next run
