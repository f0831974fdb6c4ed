"""Escape suite, git metadata that would execute on the host (threats.md B2, B3.13, B3.20).

A "canary" is a program that creates a file when run; every test asserts the
file never appears. Each docstring says how the canary fires without the
defence. Parent-side git runs the same hardened code on every backend, so most
of these hold on the host backend too; what only read-only mounts stop is a
strict expected failure there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sbx_support import OpenSandbox, backend_config, backends, child_git_dir, git, sh

from policies.contract import SandboxMode
from sandbox.config import Limits
from sandbox.errors import DiffTooLarge, PathDenied, UnsafeRepository
from sandbox.factory import open_sandbox
from sandbox.files.confined import ConfinedFiles
from sandbox.gc import gc
from sandbox.gitsafe import unsafe_config_keys

NO_OS_ISOLATION = "commands run on the host as the user"


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A script that records each run in ``canary.log``."""
    log = tmp_path / "canary.log"
    script = tmp_path / "canary.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {log}\ncat\n")
    script.chmod(0o755)
    return script


def fired(canary: Path) -> bool:
    return (canary.parent / "canary.log").exists()


def _hooks(repo: Path, canary: Path) -> None:
    hooks = repo / ".git" / "hooks"
    for name in ("post-checkout", "post-index-change", "pre-commit", "post-commit",
                 "reference-transaction", "pre-auto-gc", "fsmonitor-watchman", "post-merge"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\n{canary} hook-{name}\n")
        hook.chmod(0o755)


# -- B2.7 hooks ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION, fake=False),
                         indirect=True)
def test_child_cannot_write_hooks_in_common_dir(open_sb: OpenSandbox, repo: Path) -> None:
    """Without a read-only common dir, the child plants ``pre-commit`` for the next commit."""
    sb = open_sb()
    hook = repo / ".git" / "hooks" / "pre-commit"
    result = sh(sb, f"printf '#!/bin/sh\\necho pwned\\n' > {hook} && chmod +x {hook}")
    assert result.exit_code != 0
    assert not hook.exists()


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
def test_parent_git_runs_with_hooks_disabled(
    open_sb: OpenSandbox, repo: Path, canary: Path, mode: SandboxMode
) -> None:
    """Without ``core.hooksPath=/dev/null``, ``worktree add`` runs ``post-checkout`` and every
    index write (read-tree, add) runs ``post-index-change`` on the host."""
    _hooks(repo, canary)
    sb = open_sb(mode)
    sh(sb, "echo edit >> README.md",
       effect=lambda fs: fs.write_text("README.md", "edit\n")).check()
    assert not sb.collect_diff().is_empty
    sb.teardown()
    assert not fired(canary)


# -- B2.8 executable configuration -------------------------------------------------------------

EXECUTABLE = [
    ("core.fsmonitor", "{canary}"), ("core.hooksPath", ".githooks"), ("diff.external", "{canary}"),
    ("filter.lfs.clean", "{canary}"), ("filter.x.process", "{canary}"),
    ("diff.x.textconv", "{canary}"), ("diff.x.command", "{canary}"),
    ("merge.x.driver", "{canary}"), ("core.pager", "less"), ("core.sshCommand", "{canary}"),
    ("credential.helper", "{canary}"), ("uploadpack.packObjectsHook", "{canary}"),
    ("include.path", "/tmp/evil.cfg"), ("includeIf.gitdir:/.path", "/tmp/evil.cfg"),
    ("core.editor", "{canary}"), ("sequence.editor", "{canary}"), ("gpg.program", "{canary}"),
    ("pager.log", "{canary}"), ("core.alternateRefsCommand", "{canary}"),
]


@pytest.mark.parametrize("key,value", EXECUTABLE, ids=[key for key, _ in EXECUTABLE])
def test_parent_refuses_repo_with_executable_local_config(
    repo: Path, canary: Path, state_root: Path, key: str, value: str
) -> None:
    """Without the refusal, each key names a program some git command would run on the host
    (fsmonitor on every status, filters on every add, drivers on diff/merge...).

    Backend-independent (refused before any backend starts), so run once, on the fake."""
    git(repo, "config", key, value.format(canary=canary))
    with pytest.raises(UnsafeRepository) as raised:
        open_sandbox(backend_config("fake"), repo=repo, mode=SandboxMode.WORKTREE,
                     state_root=state_root)
    assert raised.value.code == "unsafe_git_config"
    assert key.lower() in raised.value.context["keys"].lower()
    assert not fired(canary)
    assert not (repo / ".git" / "worktrees").exists()


@pytest.mark.parametrize("key,value", [("core.fsmonitor", "false"),
                                       ("core.hooksPath", "/dev/null"), ("user.name", "x"),
                                       ("core.autocrlf", "input"), ("diff.renames", "copies")])
def test_harmless_local_config_is_accepted(repo: Path, key: str, value: str) -> None:
    git(repo, "config", key, value)
    assert unsafe_config_keys(repo / ".git") == []


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_fsmonitor_canary_not_run_by_parent(open_sb: OpenSandbox, repo: Path,
                                            canary: Path) -> None:
    """Verified on git 2.39: ``core.fsmonitor`` in the repository's config fires on a plain
    ``git status``. Set after the child started (by the child on the host backend, or by
    anyone), it would fire during diff collection without ``-c core.fsmonitor=false``; corral
    computes the diff with the child's private git dir and never reads the parent's config."""
    sb = open_sb()
    sb.files.write_text("change.txt", "x\n")
    git(repo, "config", "core.fsmonitor", str(canary))
    assert b"change.txt" in sb.collect_diff().patch
    sb.teardown()
    assert not fired(canary)


# -- B2.9 attribute-selected drivers -------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_gitattributes_filter_not_executed_by_parent_diff(
    open_sb: OpenSandbox, repo: Path, canary: Path
) -> None:
    """The user's global config defines a ``clean`` filter (say git-lfs, here a canary); the child
    writes ``.gitattributes`` selecting it. Verified on git 2.39: host ``git add -A`` runs it even
    with hooks and fsmonitor off. Defence: global and system config off, a repository-local
    driver refused at creation, and the diff computed with the child's private git dir, whose
    config names no driver."""
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text(f"[filter \"canary\"]\n\tclean = {canary}\n"
                                     f"\tsmudge = {canary}\n\tprocess = {canary}\n")
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        fs.write_text(".gitattributes", "* filter=canary diff=canary merge=canary\n")
        fs.write_text("README.md", "changed\n")

    sh(sb, "echo '* filter=canary diff=canary merge=canary' > .gitattributes; "
           "echo changed > README.md", effect=attack).check()
    assert b"+changed" in sb.collect_diff().patch
    git(repo, "config", "filter.canary.clean", str(canary))  # now in the repository itself
    assert b"+changed" in sb.collect_diff().patch  # computed without the parent's config
    assert not fired(canary)


# -- B2.10 / B2.11 worktree pointer and admin dir ---------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_parent_ignores_child_modified_dot_git_pointer(
    open_sb: OpenSandbox, tmp_path: Path, canary: Path
) -> None:
    """Verified on git 2.39: a rewritten ``.git`` pointer makes host ``git -C wt status`` run the
    attacker repository's fsmonitor. Corral never follows the pointer (explicit --git-dir)."""
    evil = tmp_path / "evil"
    git(tmp_path, "init", "-q", str(evil))
    git(evil, "config", "core.fsmonitor", str(canary))
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        (fs.root / ".git").write_text(f"gitdir: {evil}/.git\n")
        fs.write_text("README.md", "changed\n")

    sh(sb, f"echo 'gitdir: {evil}/.git' > .git; echo changed > README.md",
       effect=attack)
    diff = sb.collect_diff()
    assert [c.path for c in diff.changed] == ["README.md"]
    assert not fired(canary)


@pytest.mark.parametrize("backend", backends(overlay=True, host_xfail=NO_OS_ISOLATION, fake=False),
                         indirect=True)
def test_child_cannot_write_worktree_admin_dir(open_sb: OpenSandbox) -> None:
    """Without a read-only git dir, the child adds config (``core.fsmonitor``, a filter) or
    redirects its object lookup for the next git command run in its worktree."""
    sb = open_sb()
    private = child_git_dir(sb)
    before = {p.name: p.read_bytes() for p in private.iterdir() if p.is_file()}
    alternates = (private / "objects" / "info" / "alternates").read_bytes()
    result = sh(sb, f"echo '[core]' >> {private}/config; echo x > {private}/config.worktree; "
                    f"echo /tmp > {private}/objects/info/alternates")
    assert result.exit_code != 0
    assert {p.name: p.read_bytes() for p in private.iterdir() if p.is_file()} == before
    assert (private / "objects" / "info" / "alternates").read_bytes() == alternates


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_unsafe_commondir_rejected(open_sb: OpenSandbox, state_root: Path) -> None:
    """The private git dir's ``objects/info/alternates`` plays the role of a linked worktree's
    ``commondir``: redirected (by the child on the host backend) it points git at an attacker's
    objects. Corral records it and refuses a changed one, keeping the worktree for review."""
    sb = open_sb()
    sb.files.write_text("work.txt", "x\n")
    (sb.state.private_git / "objects" / "info" / "alternates").write_text("/tmp/evil\n")
    with pytest.raises(UnsafeRepository) as raised:
        sb.collect_diff()
    assert raised.value.code == "gitdir_tampered"
    with pytest.raises(UnsafeRepository):
        sb.teardown()
    assert sb.root.is_dir()  # kept: no diff was captured
    assert gc(state_root).by_action("kept")[0].sandbox_id == sb.id
    [entry] = [e for e in gc(state_root, force=True).by_action("cleaned") if e.sandbox_id == sb.id]
    assert entry.patch_path is None and not sb.root.exists()


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.READ_ONLY, SandboxMode.WORKTREE])
def test_git_dir_not_readable_through_file_tools(open_sb: OpenSandbox, repo: Path,
                                                 mode: SandboxMode) -> None:
    """Found in review: the file tools refused writes into ``.git`` but not reads, so a
    reviewer read ``.git/config`` and the run ledger under ``.git/corral`` (and a worktree
    child its pointer to the private git dir). Every path through ``.git`` in any spelling is
    now refused for reads, stat, listing and a command's ``cwd``."""
    (repo / ".git" / "corral" / "runs").mkdir(parents=True)
    (repo / ".git" / "corral" / "runs" / "run.json").write_text('{"secret": 1}\n')
    sb = open_sb(mode)
    fs = sb.files
    for path in (".git", ".git/config", ".GIT/HEAD", ".git/corral/runs/run.json",
                 f"{sb.root}/.git/config"):
        for method in (fs.read_bytes, fs.stat, fs.list_dir, fs.exists):
            with pytest.raises(PathDenied) as raised:
                method(path)
            assert raised.value.code == "path_protected", (path, method)
            assert "not accessible through file tools" in raised.value.message
    with pytest.raises(PathDenied):
        sb.exec(["cat", "config"], cwd=".git")
    assert not [p for p in fs.glob("**") if ".git" in p.lower()]


# -- B2.12 / B2.13 nested repositories, gitlinks, .gitmodules ----------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_nested_repo_hooks_never_executed(open_sb: OpenSandbox, canary: Path) -> None:
    """Host git run inside (or over) a child-made ``vendor/x/.git`` runs its hooks and
    fsmonitor. Corral never runs git there and leaves nested repositories out of the diff."""
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        nested = fs.root / "vendor" / "x"
        git(fs.root, "init", "-q", str(nested))
        git(nested, "config", "core.fsmonitor", str(canary))
        for hook in ("post-index-change", "pre-commit"):
            (nested / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\n{canary}\n")
            (nested / ".git" / "hooks" / hook).chmod(0o755)
        (nested / "code.py").write_text("x = 1\n")

    script = (f"git init -q vendor/x && git -C vendor/x config core.fsmonitor {canary} && "
              f"for h in post-index-change pre-commit; do printf '#!/bin/sh\\n{canary}\\n' "
              "> vendor/x/.git/hooks/$h; chmod +x vendor/x/.git/hooks/$h; done && "
              "echo 'x = 1' > vendor/x/code.py")
    sh(sb, script, effect=attack).check()
    diff = sb.collect_diff()
    assert [(e.path, e.reason) for e in diff.excluded] == [("vendor/x", "nested_repository")]
    assert not diff.changed
    sb.teardown()
    assert not fired(canary)


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_diff_excludes_nested_dot_git(open_sb: OpenSandbox) -> None:
    """Without the exclusion, ``git add -A`` records a child's nested repository as a gitlink
    (or fails on ``.GIT/``), and the patch would carry ``.git`` internals."""
    sb = open_sb()

    def attack(fs: ConfinedFiles) -> None:
        nested = fs.root / "lib"
        git(fs.root, "init", "-q", str(nested))
        (nested / "f.txt").write_text("f\n")
        git(nested, "add", "f.txt")
        git(nested, "commit", "-q", "-m", "nested")
        (fs.root / "src" / ".git").write_text("gitdir: /tmp/elsewhere\n")
        fs.write_text("ok.txt", "fine\n")

    script = ("git init -q lib && echo f > lib/f.txt && git -C lib add f.txt && "
              "git -C lib -c user.name=c -c user.email=c@c commit -q -m nested && "
              "echo 'gitdir: /tmp/elsewhere' > src/.git && echo fine > ok.txt")
    sh(sb, script, effect=attack).check()
    diff = sb.collect_diff()
    assert {(e.path, e.reason) for e in diff.excluded} == {
        ("lib", "nested_repository"), ("src", "nested_repository")}
    assert [c.path for c in diff.changed] == ["ok.txt"]
    assert b"160000" not in diff.patch and b".git" not in diff.patch


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_patch_with_gitlink_rejected(open_sb: OpenSandbox, repo: Path) -> None:
    """The parent has a submodule entry (mode 160000). Without the gitlink check, a child that
    replaces it with a file makes the patch move submodule state."""
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},mod")
    git(repo, "commit", "-q", "-m", "submodule")
    (repo / "mod").mkdir()  # an uninitialised submodule, as a clone leaves it
    sb = open_sb()
    assert sb.files.stat("mod").kind == "directory"
    assert sb.collect_diff().is_empty

    def attack(fs: ConfinedFiles) -> None:
        (fs.root / "mod").rmdir()
        fs.write_text("mod", "not a submodule any more\n")
        fs.write_text("other.txt", "x\n")

    sh(sb, "rmdir mod && echo 'not a submodule any more' > mod && echo x > other.txt",
       effect=attack).check()
    diff = sb.collect_diff()
    assert ("mod", "gitlink") in {(e.path, e.reason) for e in diff.excluded}
    assert [c.path for c in diff.changed] == ["other.txt"]
    assert b"160000" not in diff.patch


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_gitmodules_change_flagged_for_review(open_sb: OpenSandbox) -> None:
    """``.gitmodules`` can carry ``update = !cmd`` (CVE-2019-19604): it reaches review flagged."""
    sb = open_sb()
    text = '[submodule "x"]\n\tpath = x\n\turl = ../x\n\tupdate = !touch /tmp/pwned\n'
    sh(sb, f"printf '{text}' > .gitmodules".replace("\n", "\\n").replace("\t", "\\t"),
       effect=lambda fs: fs.write_text(".gitmodules", text)).check()
    [change] = sb.collect_diff().changed
    assert change.path == ".gitmodules" and "git_metadata" in change.flags


# -- B2.14 worktree creation ------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_worktree_creation_runs_no_hooks_or_filters(
    open_sb: OpenSandbox, repo: Path, canary: Path
) -> None:
    """Creating a worktree of a branch that selects a smudge filter (kcap-cli #432) or with a
    ``post-checkout`` hook runs them on the host, unless hooks and filters are off."""
    (repo / ".gitattributes").write_text("*.txt filter=canary\n")
    (repo / "a.txt").write_text("content\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "attributes")
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text(f"[filter \"canary\"]\n\tsmudge = {canary}\n"
                                     f"\tclean = {canary}\n")
    _hooks(repo, canary)
    sb = open_sb()
    assert sb.files.read_text("a.txt") == "content\n"
    assert not fired(canary)


# -- B3.20 patch bombs ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends(overlay=True), indirect=True)
def test_patch_over_byte_cap_refused(open_sb: OpenSandbox) -> None:
    """Without a cap, a child's 100 MB diff lands in the parent's memory and ledger."""
    sb = open_sb(limits=Limits(max_diff_bytes=4096))
    sh(sb, "head -c 20000 /dev/zero | tr '\\0' x > big.txt",
       effect=lambda fs: fs.write_text("big.txt", "x" * 20000)).check()
    with pytest.raises(DiffTooLarge) as raised:
        sb.collect_diff()
    assert raised.value.code == "diff_too_large"
