"""A snapshot as a git bundle, and back: how a snapshot reaches a machine that shares nothing.

:func:`bundle_snapshot` writes the snapshot commit (and its history) as one git
bundle, read from the snapshot's private git dir (its store, and the parent's
objects through its alternates); nothing is written to the parent's ``.git``.
:func:`unpack_snapshot` makes, on the other machine, a repository whose
:func:`sandbox.workspaces.snapshot.acquire_snapshot` gives the *same* snapshot
commit: its ``HEAD`` is the parent's ``HEAD`` commit (or unborn, as the
parent's was) and its index and working tree hold the snapshot's tree, so the
snapshot taken there (fixed identity and date, that parent) is byte for byte
the one taken here, and every diff made there is relative to the same base.

Both run only hardened git (:mod:`sandbox.gitsafe`: no hooks, no config of a
repository's). A bundle is untrusted input on the receiving machine: git
verifies it (``bundle verify``, object checks on fetch) and the commit it must
hold is named by the sender; a bundle without it is refused.
"""

from __future__ import annotations

import re
import secrets
import tempfile
from pathlib import Path

from sandbox.errors import SandboxError
from sandbox.gitsafe import run_git
from sandbox.state import private_dir
from sandbox.workspaces.snapstore import locked
from sandbox.workspaces.worktree import remove_tree

__all__ = ["bundle_snapshot", "unpack_snapshot"]

_REF = "refs/corral/snapshot"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _check_sha(value: str, what: str) -> None:
    if not _SHA.fullmatch(value):
        raise SandboxError(f"{what} {value!r} is not a commit id", code="bundle_refused",
                           operation="unpack_snapshot")


def bundle_snapshot(git_dir: Path, commit: str) -> bytes:
    """The bundle of ``commit`` (with its history), read through ``git_dir`` (a snapshot's
    private git dir: its ``objects/`` sees the store and the parent's objects)."""
    _check_sha(commit, "snapshot")
    with tempfile.TemporaryDirectory(prefix="corral-bundle-") as scratch:
        bare = Path(scratch) / "git"
        run_git(["init", "-q", "--bare", str(bare)], git_dir=None, operation="bundle_snapshot")
        (bare / "objects" / "info" / "alternates").write_text(
            f"{(git_dir / 'objects').resolve()}\n", encoding="utf-8")
        run_git(["update-ref", _REF, commit], git_dir=bare, operation="bundle_snapshot")
        out = Path(scratch) / "snapshot.bundle"
        run_git(["bundle", "create", "-q", str(out), _REF], git_dir=bare,
                operation="bundle_snapshot")
        return out.read_bytes()


def unpack_snapshot(bundle: bytes, *, into: Path, commit: str, head: str | None) -> Path:
    """The repository of snapshot ``commit`` under ``into`` (made once: later calls, from
    any process, find it), ``HEAD`` at ``head`` (``None``: unborn); its path."""
    _check_sha(commit, "snapshot")
    if head is not None:
        _check_sha(head, "HEAD")
    private_dir(into, parents=True)
    repo = into / commit
    with locked(into / f".{commit}.lock"):
        done = into / f".{commit}.done"
        if done.is_file() and repo.is_dir():
            return repo
        remove_tree(repo)  # left half made by a crash
        tmp = into / f".new-{secrets.token_hex(6)}"
        try:
            private_dir(tmp)
            (tmp / "snapshot.bundle").write_bytes(bundle)
            work = tmp / "repo"
            run_git(["init", "-q", str(work)], git_dir=None, operation="unpack_snapshot")
            git_dir = work / ".git"
            run_git(["bundle", "verify", "-q", str(tmp / "snapshot.bundle")], git_dir=git_dir,
                    work_tree=work, operation="unpack_snapshot")
            run_git(["-c", "protocol.file.allow=always", "-c", "transfer.fsckObjects=true",
                     "fetch", "-q", "--no-tags", str(tmp / "snapshot.bundle"),
                     f"{_REF}:{_REF}"], git_dir=git_dir, work_tree=work,
                    operation="unpack_snapshot")
            got = run_git(["rev-parse", "--verify", f"{_REF}^{{commit}}"], git_dir=git_dir,
                          operation="unpack_snapshot").stdout.decode().strip()
            if got != commit:
                raise SandboxError(f"the bundle holds {got}, not snapshot {commit}",
                                   code="bundle_refused", operation="unpack_snapshot")
            if head is not None:
                run_git(["checkout", "-q", "--detach", commit], git_dir=git_dir,
                        work_tree=work, operation="unpack_snapshot")
                run_git(["reset", "-q", "--soft", head], git_dir=git_dir, work_tree=work,
                        operation="unpack_snapshot")
            else:
                run_git(["checkout", "-q", "--orphan", "corral-unborn", commit],
                        git_dir=git_dir, work_tree=work, operation="unpack_snapshot")
            work.rename(repo)
            done.touch()
        finally:
            remove_tree(tmp)
    return repo
