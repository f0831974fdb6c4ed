"""The parent's repository as git reports it, and corral's own worktrees.

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
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxConfigError
from sandbox.gitsafe import run_git
from sandbox.state import SandboxMeta

__all__ = ["RepoInfo", "corral_worktree", "inspect_repo"]


@dataclass(frozen=True)
class RepoInfo:
    """The parent's repository, as git reports it (absolute paths)."""

    top: Path
    git_dir: Path
    common_dir: Path
    head: str | None



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

