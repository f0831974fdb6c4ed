"""A hostile child in an overlay workspace: its upper layer is read on the host.

corral walks the upper layer of every overlay child and stages paths of the
merged view, on the host, as root. Each test performs one attack through what a
child controls (the merged view: names, types, links, xattrs, device nodes,
numbers of files) and demands the same diff a plain worktree gives for the same
actions, or that the attack fails where the sandbox forbids it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sbx_support import (
    TEST_LIMITS,
    OpenSandbox,
    backend_config,
    diff_facts,
    diffs_by_kind,
    git,
    make_repo,
    overlay_backends,
    sh,
)

from policies.contract import SandboxMode
from sandbox.factory import open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="overlay workspaces need root")


def _repo_with(path: Path, files: dict[str, str]) -> Path:
    repo = make_repo(path)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    return repo


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_upper_walk_never_follows_a_symlink(backend: str, tmp_path: Path) -> None:
    """The child replaces a tracked directory with a link to the host's ``/etc`` (where a file
    of the same name exists) and adds links to ``/dev`` and ``/``. Followed, the link makes
    the tracked ``conf/passwd`` look present (its deletion vanishes from the diff), and a
    walk through ``/dev`` reports the host's devices or never ends."""
    repo = _repo_with(tmp_path / "repo", {"conf/passwd": "not the host's\n"})
    script = "rm -rf conf && ln -s /etc conf && ln -s /dev devices && ln -s / host-root"
    diffs = diffs_by_kind(backend_config(backend), repo, tmp_path / "state", script)
    overlay = diffs["overlay"]
    assert diff_facts(overlay) == diff_facts(diffs["worktree"])
    changes = {(c.path, c.status) for c in overlay.changed}
    assert ("conf/passwd", "deleted") in changes
    assert {("conf", "added"), ("devices", "added"), ("host-root", "added")} <= changes
    assert overlay.excluded == ()


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_device_nodes_are_special_files_never_whiteouts(backend: str, tmp_path: Path) -> None:
    """A whiteout is a character device 0/0 in the upper layer. The child replaces a tracked
    file with a character device 1/3 (the host backend runs it as root) and another with a
    FIFO; a device read as a whiteout would be a deletion the merged view never shows (and
    the device would go unreported). In bubblewrap and docker ``mknod`` fails (no
    ``CAP_MKNOD``)."""
    script = ("rm README.md; mknod README.md c 1 3 || echo no-mknod; "
              "rm docs/guide.md; rm src/app.py; mkfifo src/app.py")
    diffs = diffs_by_kind(backend_config(backend), make_repo(tmp_path / "repo"),
                          tmp_path / "state", script)
    overlay = diffs["overlay"]
    assert diff_facts(overlay) == diff_facts(diffs["worktree"])
    excluded = {(e.path, e.reason, e.detail) for e in overlay.excluded}
    assert ("src/app.py", "special_file", "fifo") in excluded
    assert ("docs/guide.md", "deleted") in {(c.path, c.status) for c in overlay.changed}
    if backend == "host" and os.geteuid() == 0:
        assert ("README.md", "special_file", "device") in excluded
        assert "README.md" not in {c.path for c in overlay.changed}
    else:
        assert ("README.md", "deleted") in {(c.path, c.status) for c in overlay.changed}


@ROOT_ONLY
@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_overlay_names_and_xattrs_mean_nothing(backend: str, tmp_path: Path) -> None:
    """Names and xattrs other overlay tools read as whiteouts or opaque markers (aufs
    ``.wh.`` files, ``user.overlay.*`` and ``trusted.overlay.*`` xattrs, which overlayfs
    escapes when a child sets them through the merged view) are plain data here: honoured,
    they would hide the snapshot's files from the diff."""
    setxattrs = ("import os\n"
                 "for path, name in (('docs', 'user.overlay.opaque'),"
                 " ('docs', 'trusted.overlay.opaque'), ('src/app.py', 'user.overlay.whiteout'),"
                 " ('tools', 'user.overlay.redirect')):\n"
                 "    try: os.setxattr(path, name, b'y')\n"
                 "    except OSError as e: print(path, name, e)\n")
    script = ("printf x > .wh.README.md && mkdir -p docs && printf x > docs/.wh..wh..opq && "
              "printf x > docs/new.md && printf '# x\\n' >> src/app.py && "
              f"python3 -c \"{setxattrs}\"")
    diffs = diffs_by_kind(backend_config(backend), make_repo(tmp_path / "repo"),
                          tmp_path / "state", script)
    overlay = diffs["overlay"]
    assert diff_facts(overlay) == diff_facts(diffs["worktree"])
    assert {c.path for c in overlay.changed} == {".wh.README.md", "docs/.wh..wh..opq",
                                                 "docs/new.md", "src/app.py"}


@pytest.mark.parametrize("backend", overlay_backends(fake=False), indirect=True)
def test_many_and_deep_files_in_the_upper_layer(backend: str, tmp_path: Path) -> None:
    """Thousands of new files, tracked ones deleted, a tree 300 levels deep with a setuid file
    at the bottom: the walk stays bounded (the deep tree is left out of the diff, as a full
    walk leaves it out) and the sweep still finds and clears the file."""
    files = {f"many/d{i % 20}/f{i}.txt": f"{i}\n" for i in range(600)}
    repo = _repo_with(tmp_path / "repo", files)
    deep = "/".join(["d"] * 300)
    script = (f"for d in $(seq 0 39); do mkdir -p new/$d; for f in $(seq 0 99); do "
              f"echo $d$f > new/$d/$f; done; done; rm -rf many/d1 many/d2 many/d3; "
              f"mkdir -p {deep} && cp tools/build.sh {deep}/su && chmod 4755 {deep}/su")
    diffs = diffs_by_kind(backend_config(backend), repo, tmp_path / "state", script)
    overlay = diffs["overlay"]
    assert diff_facts(overlay) == diff_facts(diffs["worktree"])
    statuses = [c.status for c in overlay.changed]
    renamed = statuses.count("renamed")  # new files with a deleted file's content
    assert statuses.count("added") + renamed == 4000
    assert statuses.count("deleted") + renamed == 90
    assert [e.reason for e in overlay.excluded] == ["too_deep"]  # the setuid file's tree
    assert overlay.setid_cleared == (f"{deep}/su",)


@pytest.mark.parametrize("backend", overlay_backends(
    fake=False, host_xfail="commands run on the host as the user"), indirect=True)
def test_child_reaches_neither_layers_nor_the_shared_checkout(open_sb: OpenSandbox) -> None:
    """The upper and work dirs, the snapshot's shared checkout and a sibling's workspace are
    host paths under the state root; a child that could write them would change what the
    diff sees, or what every sibling starts from."""
    sb = open_sb()
    sibling = open_sb()
    layers = sb.workspace.overlay
    assert layers is not None and sibling.workspace.overlay is not None
    lower_readme = layers.lower / "README.md"
    before = lower_readme.read_bytes()
    targets = [layers.upper, layers.work, layers.lower, sibling.root,
               sibling.workspace.overlay.upper]
    script = "; ".join(f"echo pwned > {target}/README.md 2>/dev/null && echo WROTE {target}"
                       for target in targets)
    result = sh(sb, script + "; ls " + " ".join(map(str, targets)) + " 2>&1; true")
    assert b"WROTE" not in result.stdout
    assert lower_readme.read_bytes() == before
    assert sibling.files.read_bytes("README.md") == before
    assert sb.files.read_bytes("README.md") == before
    assert sb.collect_diff().is_empty and sibling.collect_diff().is_empty


@ROOT_ONLY
@pytest.mark.parametrize("backend", overlay_backends(only=("host",)), indirect=True)
def test_merged_view_is_nosuid_and_nodev_on_the_host(open_sb: OpenSandbox) -> None:
    """The merged view lives at a host path: without ``nodev`` a device node the child makes
    there (the host backend runs it as root) opens as that device on the host, and without
    ``nosuid`` a setuid file there would run with its owner's rights until the sweep. A
    whiteout (a 0/0 device) cannot be made through the overlay at all."""
    sb = open_sb()
    sh(sb, "mknod null-device c 1 3 && cp /bin/true suid-true && chmod 4755 suid-true").check()
    forged = sh(sb, "rm README.md && mknod README.md c 0 0")
    assert forged.exit_code != 0 and not sb.files.exists("README.md")
    device = sb.root / "null-device"
    assert stat.S_ISCHR(device.lstat().st_mode)
    with pytest.raises(PermissionError):
        device.open("rb").close()
    options = next(line.split(" ")[5] for line in Path("/proc/self/mountinfo").read_text()
                   .splitlines() if line.split(" ")[4] == str(sb.root))
    assert {"nosuid", "nodev"} <= set(options.split(","))


@pytest.mark.parametrize("backend", overlay_backends(only=("host", "bubblewrap"), fake=False),
                         indirect=True)
def test_a_child_of_a_child_snapshots_the_overlay(backend: str, tmp_path: Path) -> None:
    """Delegation: a child opened on an overlay child's workspace snapshots the merged view
    (its parent's changes included) without writing the shared checkout's git dir."""
    repo = make_repo(tmp_path / "repo")
    state_root = tmp_path / "state"
    config = backend_config(backend, TEST_LIMITS)
    ref = acquire_snapshot(repo, state_root=state_root)
    parent = open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE, state_root=state_root,
                          snapshot=ref, workspace="overlay")
    release_snapshot(ref)
    try:
        sh(parent, "echo parent > parent.txt").check()
        git_dir = parent.workspace.child_git
        assert git_dir is not None
        before = {p: p.stat().st_mtime_ns for p in git_dir.rglob("*")}
        inner = acquire_snapshot(parent.root, state_root=state_root)
        child = open_sandbox(config, repo=parent.root, mode=SandboxMode.WORKTREE,
                             state_root=state_root, snapshot=inner, workspace="overlay")
        release_snapshot(inner)
        try:
            assert child.files.read_text("parent.txt") == "parent\n"
            sh(child, "echo child > child.txt").check()
            assert [c.path for c in child.collect_diff().changed] == ["child.txt"]
        finally:
            child.teardown()
        assert {p: p.stat().st_mtime_ns for p in git_dir.rglob("*")} == before
        assert [c.path for c in parent.collect_diff().changed] == ["parent.txt"]
    finally:
        parent.teardown()
