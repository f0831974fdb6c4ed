"""Escape suite, filesystem (threats.md B1) and TOCTOU (B8).

Each test is an attack; its docstring says how it succeeds without the
defence. The host backend has no OS isolation: where only the OS layer stops
an attack, host is a strict expected failure. The fake backend runs no
process; its scripted ``effect`` plays the attacker through the file API or
raw ``os`` calls on the workspace.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backends, git, sh

from policies.contract import SandboxMode
from sandbox.errors import PathDenied
from sandbox.files.confined import ConfinedFiles
from sandbox.results import ExecResult
from tests.procs import pids_matching, wait_for
from tests.timescale import scaled

NO_OS_ISOLATION = "commands run on the host as the user"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the repository that no child may touch."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("TOP SECRET\n")
    return path


def _denied(fs: ConfinedFiles, path: str, code: str, *, write: bool = False) -> None:
    with pytest.raises(PathDenied) as raised:
        if write:
            fs.write_text(path, "pwned\n")
        else:
            fs.read_bytes(path)
    assert raised.value.code == code, (path, raised.value.code)


# -- B1.1 paths in tool arguments ---------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_tool_path_rejects_parent_traversal(open_sb: OpenSandbox, outside: Path) -> None:
    """Without the resolver, ``../../outside/secret.txt`` is an ordinary relative path."""
    sb = open_sb()
    rel = os.path.relpath(outside / "secret.txt", sb.root)
    for path in (rel, f"src/../{rel}", "..", "src/../../x"):
        _denied(sb.files, path, "path_outside_workspace")
        _denied(sb.files, path, "path_outside_workspace", write=True)
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_tool_path_rejects_absolute_outside_root(open_sb: OpenSandbox, outside: Path) -> None:
    """Without the resolver, an absolute path is opened wherever it points."""
    sb = open_sb()
    for path in (str(outside / "secret.txt"), "/etc/passwd", "/proc/self/root/etc/passwd",
                 f"/proc/self/root{sb.root}/README.md"):
        _denied(sb.files, path, "path_outside_workspace")
    _denied(sb.files, str(outside / "new.txt"), "path_outside_workspace", write=True)
    assert sb.files.read_text(str(sb.root / "README.md")).startswith("# demo")


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_tool_path_tilde_not_expanded_to_host_home(open_sb: OpenSandbox) -> None:
    """Without the check, a tool that expands ``~`` reads and writes the user's home."""
    home = Path(os.environ["HOME"])
    (home / "canary.txt").write_text("home secret\n")
    sb = open_sb()
    _denied(sb.files, "~/canary.txt", "path_outside_workspace")
    _denied(sb.files, "~/pwned.txt", "path_outside_workspace", write=True)
    sb.files.write_text("$HOME/literal.txt", "stays in the workspace\n")
    assert (sb.root / "$HOME" / "literal.txt").is_file()
    assert not (home / "pwned.txt").exists() and not (home / "literal.txt").exists()


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_shell_write_outside_worktree_denied(open_sb: OpenSandbox, outside: Path) -> None:
    """Without mount confinement a shell writes anywhere the user can (``echo x > /path``)."""
    sb = open_sb()
    target = outside / "pwn.txt"

    def attack(fs: ConfinedFiles) -> None:
        fs.write_text(str(target), "pwned\n")

    result = sh(sb, f"echo pwned > {target}", effect=attack)
    assert result.exit_code != 0
    assert not target.exists()


# -- B1.2 symlinks pointing out -----------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION),
                         indirect=True)
def test_symlink_out_of_worktree_write_denied(open_sb: OpenSandbox, outside: Path) -> None:
    """Without mount confinement ``ln -s /outside k; echo x > k/pwned`` writes outside."""
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        fs.symlink("k", str(outside))

    result = sh(sb, f"ln -s {outside} k && echo pwned > k/pwned.txt", effect=attack)
    assert result.exit_code != 0
    assert not (outside / "pwned.txt").exists()


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_parent_reads_result_files_without_following_symlinks(
    open_sb: OpenSandbox, outside: Path
) -> None:
    """Without ``O_NOFOLLOW`` and the in-root walk, reading ``link`` returns the target's bytes;
    a diff built by reading files would carry the secret."""
    sb = open_sb()
    rel = os.path.relpath(outside / "secret.txt", sb.root / "src")

    def attack(fs: ConfinedFiles) -> None:
        (fs.root / "abs-link").symlink_to(outside / "secret.txt")
        (fs.root / "src" / "rel-link").symlink_to(rel)

    sh(sb, f"ln -s {outside}/secret.txt abs-link && ln -s {rel} src/rel-link",
       effect=attack).check()
    for path in ("abs-link", "src/rel-link", "src/rel-link/x"):
        with pytest.raises(PathDenied) as raised:
            sb.files.read_bytes(path)
        assert raised.value.code == "path_symlink_escape"
    assert sb.files.stat("abs-link").link_target == str(outside / "secret.txt")
    diff = sb.collect_diff()
    assert b"TOP SECRET" not in diff.patch
    assert str(outside / "secret.txt").encode() in diff.patch


# -- B1.3 / B1.4 protected paths -----------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION, fake=False),
                         indirect=True)
def test_protected_path_symlink_swap_denied(open_sb: OpenSandbox, tmp_path: Path) -> None:
    """Without read-only mounts the child replaces ``.git`` with a link to a decoy repository."""
    sb = open_sb()
    pointer = (sb.root / ".git").read_bytes()
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    sh(sb, f"rm -rf .git; ln -s {decoy} .git")
    assert not (sb.root / ".git").is_symlink()
    assert (sb.root / ".git").read_bytes() == pointer


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION, fake=False),
                         indirect=True)
def test_protected_path_create_fresh_denied(open_sb: OpenSandbox, repo: Path) -> None:
    """A repository without ``hooks/``: without a read-only common dir the child creates it and
    plants a hook the user's next ``git commit`` runs."""
    hooks = repo / ".git" / "hooks"
    for hook in hooks.iterdir():
        hook.unlink()
    hooks.rmdir()
    sb = open_sb()
    sh(sb, f"mkdir -p {hooks} && printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > {hooks}/pre-commit")
    assert not hooks.exists()


@pytest.mark.parametrize("backend", backends(overlay=True, only=("bubblewrap", "docker")),
                         indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
def test_ro_bind_mountpoint_cannot_be_renamed(open_sb: OpenSandbox, mode: SandboxMode) -> None:
    """Docker nested ``:ro`` binds were reported bypassable by ``mv .git .gitold`` (fletch #565);
    a mount point cannot be renamed (EBUSY), so the copy never replaces it."""
    sb = open_sb(mode)
    result = sh(sb, "mv .git .gitold && cp -r .gitold .git")
    assert result.exit_code != 0
    assert not (sb.root / ".gitold").exists()
    assert (sb.root / ".git").exists()


@pytest.mark.parametrize("backend", backends(only=("bubblewrap", "docker")), indirect=True)
def test_ro_bind_cannot_be_remounted_read_write(open_sb: OpenSandbox, repo: Path) -> None:
    """Found on this machine: ``bwrap --unshare-all`` run as root leaves the child all
    capabilities in the user namespace that owns its mounts, and ``mount -o remount,rw,bind``
    undoes every read-only bind. Defences: ``--cap-drop ALL`` and ``--disable-userns`` (which
    moves the child into a nested user namespace); without both this test fails. Docker:
    ``--cap-drop ALL``."""
    sb = open_sb(SandboxMode.READ_ONLY)
    result = sh(sb, f"mount -o remount,rw,bind {repo} {repo}; echo pwned >> README.md")
    assert result.exit_code != 0
    assert b"pwned" not in (repo / "README.md").read_bytes()


# -- B1.5 aliases of .git -------------------------------------------------------------------

ALIASES = [".git/hooks/pre-commit", ".GIT/hooks/pre-commit", ".Git/config", ".git./config",
           ".git /config", "GIT~1/config", "git~1/config", ".g\u200cit/config",
           ".git\ufeff/config", "sub/.git/hooks/x", "sub/.GiT/config",
           ".git::$INDEX_ALLOCATION/config"]


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_protected_name_aliases_rejected(open_sb: OpenSandbox) -> None:
    """Without alias folding, ``.GIT/hooks/x`` is an ordinary path on Linux and becomes
    ``.git/hooks/x`` when the patch lands on a case-insensitive (macOS, Windows) checkout."""
    sb = open_sb()
    for path in ALIASES:
        _denied(sb.files, path, "path_protected", write=True)

    def attack(fs: ConfinedFiles) -> None:
        for name in (".GIT", "git~1", "sub/.Git"):
            (fs.root / name).mkdir(parents=True)
            (fs.root / name / "config").write_text("[core]\n\tfsmonitor = evil\n")

    sh(sb, "for d in .GIT git~1 sub/.Git; do mkdir -p $d; echo x > $d/config; done",
       effect=attack).check()
    diff = sb.collect_diff()
    assert {e.path for e in diff.excluded if e.reason == "protected_name"} == {
        ".GIT", "git~1", "sub/.Git"}
    assert not diff.changed


# -- B1.6 special files --------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_parent_skips_non_regular_files_in_result(open_sb: OpenSandbox) -> None:
    """Without the type checks, reading a FIFO the child made blocks the parent forever."""
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        os.mkfifo(fs.root / "fifo")
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(fs.root / "sock"))
        fs.write_text("normal.txt", "ok\n")

    script = ("mkfifo fifo && python3 -c \"import socket; socket.socket(socket.AF_UNIX)"
              ".bind('sock')\" && echo ok > normal.txt")
    sh(sb, script, effect=attack).check()
    start = time.monotonic()
    for path in ("fifo", "sock"):
        with pytest.raises(PathDenied) as raised:
            sb.files.read_bytes(path)
        assert raised.value.code == "path_not_regular"
    diff = sb.collect_diff()
    assert time.monotonic() - start < scaled(10)
    assert {(e.path, e.reason) for e in diff.excluded} == {
        ("fifo", "special_file"), ("sock", "special_file")}
    assert [c.path for c in diff.changed] == ["normal.txt"]


# -- B8 TOCTOU ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(
    overlay=True, fake=False, host_xfail="a setsid'd writer leaves the process group and "
    "outlives the command"), indirect=True)
def test_diff_computed_only_after_child_terminated(open_sb: OpenSandbox, marker: str) -> None:
    """A writer that left the command's process group (double fork + ``setsid``) waits until
    the parent has read the diff, then rewrites the file the diff showed. Without stopping
    every process of the child before the diff, the diff is not what the parent later sees.

    Deterministic: the command says ``spawned`` only once the intermediate shell has exited
    (the writer is nobody's descendant then), the writer says ``before`` once it runs in its
    own session, and it writes ``after`` only when the test creates ``go``, after the diff.
    On the host backend it survives and writes, always; on bubblewrap and docker it is dead
    before the diff starts. Every wait is on state."""
    sb = open_sb()
    results: list[ExecResult] = []
    writer = ("echo before > ticker.txt; until [ -e go ]; do sleep 0.01; done; "
              "echo after > ticker.txt")
    command = (f"(setsid sh -c '{writer}' {marker} >/dev/null 2>&1 &); "
               f"echo spawned > spawned.txt; sleep {marker}")
    thread = threading.Thread(target=lambda: results.append(sb.exec(["sh", "-c", command])))
    thread.start()
    try:
        assert wait_for(lambda: sb.files.exists("spawned.txt")
                        and sb.files.exists("ticker.txt")
                        and sb.files.read_text("ticker.txt") == "before\n", timeout=scaled(30))
        diff = sb.collect_diff()
        thread.join(scaled(30))
        assert results and results[0].stopped
        assert b"+before" in diff.patch and b"+after" not in diff.patch
        sb.files.write_text("go", "")
        # the writer ends by itself once it has seen ``go`` (host); it is dead already (else)
        assert wait_for(lambda: not pids_matching(marker), timeout=scaled(30))
        assert sb.files.read_text("ticker.txt") == "before\n"  # what the diff showed
    finally:
        sb.teardown(discard=True)
        thread.join(scaled(30))


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_symlink_swap_during_export_not_followed(open_sb: OpenSandbox, outside: Path) -> None:
    """The child swaps a tracked file for a link to a secret just before export; a parent that
    follows links exports the secret (git reads links as links; the file API refuses)."""
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        (fs.root / "README.md").unlink()
        (fs.root / "README.md").symlink_to(outside / "secret.txt")

    sh(sb, f"rm README.md && ln -s {outside}/secret.txt README.md", effect=attack).check()
    diff = sb.collect_diff()
    assert b"TOP SECRET" not in diff.patch
    [change] = diff.changed
    assert change.status == "type_changed" and change.new_mode == "120000"
    with pytest.raises(PathDenied):
        sb.files.read_bytes("README.md")


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_post_run_sweep_flags_new_protected_files(open_sb: OpenSandbox, repo: Path) -> None:
    """Paths that run code or steer agents when the parent opens the repository again must be
    flagged in the result, whether or not they existed when the child started."""
    sb = open_sb()
    files = {".claude/settings.json": "{}", ".vscode/tasks.json": "{}", ".gitattributes": "*",
             ".github/workflows/ci.yml": "on: push", "Makefile": "all:", "conftest.py": ""}

    def attack(fs: ConfinedFiles) -> None:
        for path, text in files.items():
            fs.write_text(path, text + "\n")
        fs.chmod("src/app.py", 0o755)

    script = "; ".join(f"mkdir -p $(dirname {p}) && echo '{t}' > {p}" for p, t in files.items())
    sh(sb, script + "; chmod 755 src/app.py", effect=attack).check()
    flags = {c.path: set(c.flags) for c in sb.collect_diff().changed}
    assert "agent_config" in flags[".claude/settings.json"]
    assert "agent_config" in flags[".vscode/tasks.json"]
    assert "git_metadata" in flags[".gitattributes"]
    assert "ci_config" in flags[".github/workflows/ci.yml"]
    assert "build_script" in flags["Makefile"] and "build_script" in flags["conftest.py"]
    assert {"executable", "mode_change"} <= flags["src/app.py"]
    assert git(repo, "status", "--porcelain").stdout == ""
