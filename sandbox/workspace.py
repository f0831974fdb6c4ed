"""Child workspaces: a snapshot of the parent's current state, and where the child writes.

The snapshot is the parent's working tree as it is now (``HEAD`` + staged +
unstaged + untracked, minus ignored files, nested repositories, ``.git``
aliases and special files), built with a private index and committed (fixed
identity and date, parent ``HEAD``) into the child's private object store
(:mod:`sandbox.privategit`): nothing is written into the parent's ``.git``, not
even an mtime (no git command that writes an object sees the parent's store).
Modes:

- ``read-only``: the parent's checkout itself, nothing writable, no snapshot;
- ``workspace-write``: the parent's checkout, writable; its git directories
  (and any nested repository's ``.git``) read-only; the snapshot is the diff base,
  and an lstat manifest of the whole tree finds what git's diff cannot show
  (:mod:`sandbox.changes`);
- ``worktree``: a fresh checkout of the snapshot under the state root
  (``worktrees/<id>``, outside the working tree and the git dir, so never in
  ``git status`` or ``git worktree list``), populated by a hardened
  ``read-tree -u`` (no hooks, no filters); its ``.git`` points at the private
  git directory. The parent's checkout is untouched.

A child of a child (delegation) is opened on its parent's worktree, which the
docker backend gave to the container's uid: git's discovery would refuse it
("dubious ownership"). :func:`inspect_repo` recognises corral's own worktrees
(``<state root>/worktrees/<id>`` whose sandbox metadata, owned by this user,
names it) and allows exactly that directory (``-c safe.directory=<it>``) for
the discovery command alone; every later command names its git directory
explicitly, and the repository's configuration is still checked
(:func:`sandbox.gitsafe.check_repository_config`).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from policies.contract import SandboxMode
from sandbox.changes import RECORD_FILE, TreeRecord
from sandbox.errors import SandboxConfigError, SandboxError
from sandbox.gitsafe import check_repository_config, git_env, run_git
from sandbox.privategit import (
    create_private_git,
    object_dirs,
    read_tracked,
    reading_env,
    seed_index_blobs,
    seed_racy_blobs,
    set_head,
    write_commit,
    write_tree,
    writing_env,
)
from sandbox.results import ExcludedPath
from sandbox.scan import ScanResult, scan_tree
from sandbox.state import SandboxMeta, SandboxState

__all__ = [
    "Mount",
    "RepoInfo",
    "Workspace",
    "chown_tree",
    "corral_worktree",
    "create_workspace",
    "inspect_repo",
    "pathspec_file",
    "remove_tree",
    "stage_tree",
    "take_snapshot",
]


@dataclass(frozen=True)
class RepoInfo:
    """The parent's repository, as git reports it (absolute paths)."""

    top: Path
    git_dir: Path
    common_dir: Path
    head: str | None


@dataclass(frozen=True)
class Mount:
    """One host path made visible at the same path inside a sandbox."""

    path: Path
    writable: bool


@dataclass
class Workspace:
    """Where one child works, and what corral needs to compute its diff later."""

    repo: RepoInfo
    mode: SandboxMode
    root: Path
    base_commit: str | None = None
    baseline_index: Path | None = None
    worktree: Path | None = None
    #: The child's private git directory (worktree and workspace-write modes).
    private_git: Path | None = None
    #: Its tracked files as created (see :func:`sandbox.privategit.verify_private_git`).
    git_files: dict[str, str] = field(default_factory=dict)
    snapshot_excluded: tuple[ExcludedPath, ...] = ()
    nested_git: tuple[str, ...] = ()
    #: The tree as the child found it (workspace-write; see :mod:`sandbox.changes`).
    record: TreeRecord | None = None

    @property
    def writable(self) -> bool:
        """Whether the child may write the workspace."""
        return self.mode is not SandboxMode.READ_ONLY

    def mounts(self) -> list[Mount]:
        """Bind mounts, parents before children (a later mount shadows an earlier one).

        The workspace is writable only when the mode allows; its ``.git`` (pointer
        or directory), nested repositories' ``.git``, and every git directory the
        child's own git needs (a worktree's private git dir and the parent's
        object stores; otherwise the parent's git and common dirs) are read-only.
        """
        mounts = [Mount(self.root, self.writable)]
        dot_git = self.root / ".git"
        if os.path.lexists(dot_git):
            mounts.append(Mount(dot_git, False))
        mounts += [Mount(self.root / nested, False) for nested in self.nested_git]
        if self.worktree is not None and self.private_git is not None:
            git_paths = [self.private_git, *object_dirs(self.repo.common_dir)]
        else:
            git_paths = [self.repo.git_dir, self.repo.common_dir]
        for git_path in git_paths:
            if not any(git_path.is_relative_to(m.path) and not m.writable for m in mounts):
                mounts.append(Mount(git_path, False))
        unique = {mount.path: mount for mount in mounts}
        return sorted(unique.values(), key=lambda mount: len(mount.path.parts))


_SANDBOX_ID = re.compile(r"corral-[0-9a-f]{12}")


def corral_worktree(path: Path) -> Path | None:
    """The corral worktree that contains ``path``, or ``None``.

    That is a ``<root>/worktrees/<id>`` directory whose ``<root>/sandboxes/<id>/meta.json``
    belongs to this user and records it as the sandbox's worktree.
    """
    try:
        resolved = path.resolve(strict=True)
    except OSError:
        return None
    for candidate in (resolved, *resolved.parents):
        if candidate.parent.name != "worktrees" or not _SANDBOX_ID.fullmatch(candidate.name):
            continue
        meta_path = candidate.parent.parent / "sandboxes" / candidate.name / "meta.json"
        try:
            if meta_path.lstat().st_uid != os.geteuid():
                return None
            meta = SandboxMeta.model_validate_json(meta_path.read_bytes())
            recorded = meta.worktree.resolve(strict=True) if meta.worktree else None
        except (OSError, ValueError):
            return None
        return candidate if recorded == candidate else None
    return None


def inspect_repo(path: Path) -> RepoInfo:
    """Find the repository whose working tree contains ``path``."""
    if not path.is_dir():
        raise SandboxConfigError(f"{path} is not a directory", code="not_a_repository",
                                 operation="open_sandbox")
    own = corral_worktree(path)  # possibly given to a container uid: allow it, and only it
    trust = ["-c", f"safe.directory={own}"] if own is not None else []
    done = run_git(
        [*trust, "rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir",
         "--git-common-dir"],
        git_dir=None, cwd=path, check=False, operation="open_sandbox",
    )
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if done.returncode != 0 or len(lines) != 3:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise SandboxConfigError(
            f"{path} is not inside a git working tree: {stderr[:300]}",
            code="not_a_repository", operation="open_sandbox",
            hint="corral runs children on a git repository with a working tree",
        )
    git_dir = Path(lines[1])
    head = run_git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], git_dir=git_dir,
                   check=False, operation="open_sandbox")
    head_id = head.stdout.decode().strip() if head.returncode == 0 else ""
    return RepoInfo(top=Path(lines[0]), git_dir=git_dir, common_dir=Path(lines[2]),
                    head=head_id or None)


def pathspec_file(path: Path, excluded: list[str]) -> Path:
    """Write a NUL-separated pathspec: the whole tree minus ``excluded`` (literal paths)."""
    specs = [":/", *(f":(top,exclude,literal){rel}" for rel in excluded)]
    path.write_bytes(b"".join(spec.encode("utf-8", "surrogateescape") + b"\0" for spec in specs))
    return path


def stage_tree(*, git_dir: Path, work_tree: Path, private_git: Path, index: Path, spec: Path,
               attributes: bool, recorded_ns: int | None) -> None:
    """``git add -A`` of a work tree into ``index``, honouring ``spec``.

    New blobs go to the private git dir's store, and ``add`` sees no other
    object store, so it cannot freshen (rewrite the mtime of) an object of the
    parent's; the index blobs it must read or would re-write are copied first
    (:mod:`sandbox.privategit`). ``attributes``: the tree may have attribute
    files; ``recorded_ns``: when the index's stat data was recorded.
    """
    seed_index_blobs(git_dir=git_dir, work_tree=work_tree, private_git=private_git, index=index,
                     attributes=attributes)
    seed_racy_blobs(git_dir=git_dir, work_tree=work_tree, private_git=private_git, index=index,
                    recorded_ns=recorded_ns)
    run_git(["add", "-A", f"--pathspec-from-file={spec}", "--pathspec-file-nul"],
            git_dir=git_dir, work_tree=work_tree, env=writing_env(private_git, index),
            operation="stage_tree")


def _reusable_index(repo: RepoInfo) -> bool:
    """Whether the parent's index can be copied: it exists and is not split (git freshens
    the ``sharedindex.*`` file of a split index it reads, in the parent's git dir)."""
    return (repo.git_dir / "index").is_file() and not any(repo.git_dir.glob("sharedindex.*"))


def _index_from_head(repo: RepoInfo, private_git: Path, index: Path) -> None:
    """Fill a fresh ``index`` from ``HEAD`` with current stat data (reads objects only)."""
    if repo.head is None:
        return
    env = reading_env(private_git, index)
    run_git(["read-tree", repo.head], git_dir=repo.git_dir, env=env, operation="snapshot")
    run_git(["update-index", "-q", "--refresh"], git_dir=repo.git_dir, work_tree=repo.top,
            env=env, check=False, operation="snapshot")


def take_snapshot(repo: RepoInfo, state: SandboxState, private_git: Path, *,
                  manifest: bool = False) -> tuple[str, Path, ScanResult]:
    """Commit the parent's current working tree into ``private_git``'s store.

    Returns (commit, index, the scan of the tree, with its lstat manifest if asked).
    """
    index = state.dir / "snapshot.index"
    copied = _reusable_index(repo)
    recorded: int | None = None
    if copied:  # the parent's stat cache makes add -A hash only what changed
        recorded = (repo.git_dir / "index").stat().st_mtime_ns
        shutil.copyfile(repo.git_dir / "index", index)
    else:
        _index_from_head(repo, private_git, index)
    scan = scan_tree(repo.top, manifest=manifest)
    spec = pathspec_file(state.dir / "snapshot.pathspec", scan.paths)
    attributes = scan.attributes or (repo.common_dir / "info" / "attributes").is_file()

    def stage(recorded_ns: int | None) -> None:
        stage_tree(git_dir=repo.git_dir, work_tree=repo.top, private_git=private_git,
                   index=index, spec=spec, attributes=attributes, recorded_ns=recorded_ns)

    try:
        stage(recorded)
    except SandboxError:
        if not copied:
            raise
        index.unlink()  # an index git cannot reuse here: start from HEAD
        _index_from_head(repo, private_git, index)
        stage(None)
    tree = write_tree(git_dir=repo.git_dir, private_git=private_git, index=index)
    commit = write_commit(git_dir=repo.git_dir, private_git=private_git, tree=tree,
                          parent=repo.head)
    set_head(private_git, commit)
    return commit, index, scan


def create_workspace(
    repo: RepoInfo, mode: SandboxMode, state: SandboxState, *, chown: tuple[int, int] | None = None
) -> Workspace:
    """Make the child's workspace in ``mode`` (see the module docstring).

    ``chown`` gives a fresh worktree to another uid (the docker user) and
    refreshes the private index afterwards.
    """
    if mode is SandboxMode.READ_ONLY:
        return Workspace(repo=repo, mode=mode, root=repo.top)
    check_repository_config(repo.git_dir)  # the snapshot runs git with the parent's config
    private_git = state.private_git
    create_private_git(private_git, parent_git_dir=repo.git_dir, common_dir=repo.common_dir)
    in_place = mode is SandboxMode.WORKSPACE_WRITE
    commit, index, scan = take_snapshot(repo, state, private_git, manifest=in_place)
    baseline = state.dir / "baseline.index"
    workspace = Workspace(repo=repo, mode=mode, root=repo.top, base_commit=commit,
                          baseline_index=baseline, private_git=private_git,
                          git_files=read_tracked(private_git),
                          snapshot_excluded=tuple(scan.excluded))
    if in_place:  # the child writes the checkout: remember all of it, git's view or not
        shutil.copyfile(index, baseline)
        workspace.nested_git = tuple(scan.nested_git)
        workspace.record = TreeRecord.of(scan)
        workspace.record.save(state.dir / RECORD_FILE)
        return workspace
    worktree = state.worktree
    worktree.mkdir(mode=0o700)  # the owner only (chowned to the container user below)
    (worktree / ".git").write_text(f"gitdir: {private_git}\n")
    env = git_env(index_file=baseline)
    run_git(["read-tree", "--reset", "-u", commit], git_dir=private_git, work_tree=worktree,
            env=env, operation="create_worktree")
    _make_gitlink_dirs(private_git, worktree, env)
    if chown is not None:
        chown_tree(worktree, *chown)
        run_git(["update-index", "-q", "--refresh"], git_dir=private_git, work_tree=worktree,
                env=env, check=False, operation="create_worktree")
    shutil.copyfile(baseline, private_git / "index")  # the child's own `git status` starts clean
    workspace.root = workspace.worktree = worktree
    return workspace


def _make_gitlink_dirs(common_dir: Path, worktree: Path, env: dict[str, str]) -> None:
    """Empty directories for submodules, as ``git checkout`` makes them (read-tree does not)."""
    listing = run_git(["ls-files", "-s", "-z"], git_dir=common_dir, work_tree=worktree,
                      env=env, operation="create_worktree").stdout
    for entry in listing.split(b"\0"):
        if entry.startswith(b"160000 "):
            rel = entry.split(b"\t", 1)[1].decode("utf-8", "surrogateescape")
            (worktree / rel).mkdir(parents=True, exist_ok=True)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give every entry under ``root`` (not the ``.git`` pointer) to ``uid:gid``."""
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            if base == root and name == ".git":
                continue
            os.lchown(base / name, uid, gid)


def _force_remove(function: object, path: str, excinfo: object) -> None:
    del function, excinfo
    target = Path(path)
    target.parent.chmod(0o700)  # a child may have made its own directories unreadable
    if target.is_dir() and not target.is_symlink():
        target.chmod(0o700)
        shutil.rmtree(target)
    else:
        target.unlink()


def remove_tree(path: Path) -> None:
    """Remove a directory tree the child wrote (never following its symlinks)."""
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=_force_remove)
