"""Staging a work tree into a private index, and the snapshot commit built from it.

The snapshot is the parent's working tree as it is now (``HEAD`` + staged +
unstaged + untracked, minus ignored files, nested repositories, ``.git``
aliases and special files), built with a private index and committed (fixed
identity and date, parent ``HEAD``) into the child's private object store
(:mod:`sandbox.workspaces.privategit`): nothing is written into the parent's
``.git``, not even an mtime (no git command that writes an object sees the
parent's store).

Ignored paths are left out by ``git add -A`` itself, whatever they hold, so an
exclusion (a nested repository, a special file) that git ignores anyway is
never handed to git: ``add`` refuses a pathspec that names an ignored path (an
editable install's ``.venv/src/pkg/.git``, a vendored clone under an ignored
directory), and such a repository could not run any child.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxError
from sandbox.gitsafe import run_git
from sandbox.workspaces.privategit import (
    reading_env,
    seed_index_blobs,
    seed_racy_blobs,
    set_head,
    write_commit,
    write_tree,
    writing_env,
)
from sandbox.workspaces.repo import RepoInfo
from sandbox.workspaces.scan import ScanResult, scan_tree

__all__ = ["Snapshot", "Staged", "commit_staged", "pathspec_file", "stage_snapshot", "stage_tree",
           "take_snapshot"]


_EXCLUDE = b":(top,exclude,literal)"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def pathspec_file(path: Path, excluded: list[str]) -> Path:
    """Write a NUL-separated pathspec: the whole tree minus ``excluded`` (literal paths)."""
    specs = [b":/", *(_EXCLUDE + _encode(rel) for rel in excluded)]
    path.write_bytes(b"".join(spec + b"\0" for spec in specs))
    return path


def _drop_ignored(spec: Path, *, git_dir: Path, work_tree: Path, env: dict[str, str]) -> None:
    """Rewrite ``spec`` without the exclusions git ignores (see the module docstring).

    ``check-ignore`` judges each path as ``add`` does (a path under an ignored
    directory is ignored; a path in the index never is), with the same rules: the
    work tree's ``.gitignore`` files and the git dir's ``info/exclude``.
    """
    entries = [entry for entry in spec.read_bytes().split(b"\0") if entry]
    excluded = [entry[len(_EXCLUDE):] for entry in entries if entry.startswith(_EXCLUDE)]
    if not excluded:
        return
    done = run_git(["check-ignore", "-z", "--stdin"], git_dir=git_dir, work_tree=work_tree,
                   env=env, input_bytes=b"".join(b":(top)" + rel + b"\0" for rel in excluded),
                   check=False, operation="stage_tree")
    if done.returncode not in (0, 1):  # 1: nothing is ignored
        raise SandboxError(f"git check-ignore failed: {done.stderr.decode(errors='replace')}",
                           code="git_failed", operation="stage_tree")
    ignored = {_EXCLUDE + out.removeprefix(b":(top)") for out in done.stdout.split(b"\0")
               if out}
    if ignored:
        spec.write_bytes(b"".join(entry + b"\0" for entry in entries if entry not in ignored))


def stage_tree(*, git_dir: Path, work_tree: Path, private_git: Path, index: Path, spec: Path,
               attributes: bool, recorded_ns: int | None, preload: bool = True,
               seed_racy: bool = True) -> None:
    """``git add -A`` of a work tree into ``index``, honouring ``spec``.

    New blobs go to the private git dir's store, and ``add`` sees no other
    object store, so it cannot freshen (rewrite the mtime of) an object of the
    parent's; the index blobs it must read or would re-write are copied first
    (:mod:`sandbox.workspaces.privategit`). ``attributes``: the tree may have attribute
    files; ``recorded_ns``: when the index's stat data was recorded; ``preload``:
    let git ``lstat`` every entry up front (in threads), which is wasted when every
    entry is either known unchanged (marked assume-valid) or must be hashed anyway
    (:mod:`sandbox.workspaces.statcache`); ``seed_racy``: copy racily clean entries'
    blobs first (else git re-writes them).
    """
    seed_index_blobs(git_dir=git_dir, work_tree=work_tree, private_git=private_git, index=index,
                     attributes=attributes, preload=preload)
    if seed_racy:
        seed_racy_blobs(git_dir=git_dir, work_tree=work_tree, private_git=private_git,
                        index=index, recorded_ns=recorded_ns)
    env = writing_env(private_git, index)
    _drop_ignored(spec, git_dir=git_dir, work_tree=work_tree, env=env)
    options = [] if preload else ["-c", "core.preloadIndex=false"]
    run_git([*options, "add", "-A", f"--pathspec-from-file={spec}", "--pathspec-file-nul"],
            git_dir=git_dir, work_tree=work_tree, env=env, operation="stage_tree")


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


@dataclass(frozen=True)
class Staged:
    """The parent's current tree staged into a private index (nothing committed yet)."""

    #: The index it was staged in (the parent's stat data).
    index: Path
    #: The walk of the parent's tree (with its lstat manifest, if asked); ``None``: the tree
    #: was staged with exclusions given by the caller and not walked.
    scan: ScanResult | None
    #: The paths left out of the staging (the walk's, or the ones given).
    excluded: tuple[str, ...]
    #: Whether the tree may hold attribute files (what staging assumed).
    attributes: bool


@dataclass(frozen=True)
class Snapshot:
    """The parent's state as committed into a private store."""

    commit: str
    tree: str
    #: The index it was staged in (the parent's stat data).
    index: Path
    #: The walk of the parent's tree (with its lstat manifest, if asked).
    scan: ScanResult


def stage_snapshot(repo: RepoInfo, work_dir: Path, private_git: Path, *,
                   manifest: bool = False, exclusions: Sequence[str] | None = None,
                   attributes: bool = False) -> Staged:
    """Stage the parent's current working tree into ``work_dir``'s private index.

    ``exclusions`` (with ``attributes``, whether the tree held attribute files then): stage
    with these exclusions instead of walking the tree for them (a caller that knows them
    from the last walk, and checks the result: :mod:`sandbox.workspaces.statekey`).
    """
    index = work_dir / "snapshot.index"
    copied = _reusable_index(repo)
    recorded: int | None = None
    if copied:  # the parent's stat cache makes add -A hash only what changed
        original = (repo.git_dir / "index").stat()
        recorded = original.st_mtime_ns
        shutil.copyfile(repo.git_dir / "index", index)
        # git tells a racily clean entry (recorded in the second its index was written, so
        # a change later in that second keeps its stat data) by the index file's mtime: the
        # copy keeps the parent's, so git re-hashes those entries as it would in the parent
        # (a copy dated now let such a change through). Stat taken first: a newer index
        # copied with an older date only makes more entries racy.
        os.utime(index, ns=(original.st_atime_ns, original.st_mtime_ns))
    else:
        _index_from_head(repo, private_git, index)
    scan = scan_tree(repo.top, manifest=manifest) if exclusions is None else None
    excluded = scan.paths if scan is not None else list(exclusions or ())
    spec = pathspec_file(work_dir / "snapshot.pathspec", excluded)
    found = scan.attributes if scan is not None else attributes
    attrs = found or (repo.common_dir / "info" / "attributes").is_file()

    def stage(recorded_ns: int | None) -> None:
        # Seeding the store with racy entries' blobs pays when most entries are racy: an
        # index written this very second (a checkout just made). An older index's few racy
        # entries git re-adds itself.
        seed = recorded_ns is None or recorded_ns // 10**9 >= int(time.time())
        stage_tree(git_dir=repo.git_dir, work_tree=repo.top, private_git=private_git,
                   index=index, spec=spec, attributes=attrs, recorded_ns=recorded_ns,
                   seed_racy=seed)

    try:
        stage(recorded)
    except SandboxError:
        if not copied:
            raise
        index.unlink()  # an index git cannot reuse here: start from HEAD
        _index_from_head(repo, private_git, index)
        stage(None)
    return Staged(index=index, scan=scan, excluded=tuple(excluded), attributes=found)


def commit_staged(repo: RepoInfo, private_git: Path, index: Path) -> tuple[str, str]:
    """Write the staged ``index`` as the snapshot commit into ``private_git``'s store, and
    detach its ``HEAD`` there: (tree, commit)."""
    tree = write_tree(git_dir=repo.git_dir, private_git=private_git, index=index)
    commit = write_commit(git_dir=repo.git_dir, private_git=private_git, tree=tree,
                          parent=repo.head)
    set_head(private_git, commit)
    return tree, commit


def take_snapshot(repo: RepoInfo, work_dir: Path, private_git: Path, *,
                  manifest: bool = False) -> Snapshot:
    """Commit the parent's current working tree into ``private_git``'s store.

    ``work_dir`` (private to corral) receives the staging index and pathspec.
    """
    staged = stage_snapshot(repo, work_dir, private_git, manifest=manifest)
    assert staged.scan is not None  # noqa: S101 - walked: no exclusions were given
    tree, commit = commit_staged(repo, private_git, staged.index)
    return Snapshot(commit=commit, tree=tree, index=staged.index, scan=staged.scan)
