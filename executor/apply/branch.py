"""A recorded run's diff kept as a branch: ``corral apply RUN --branch NAME``.

The diff becomes one commit on a new branch whose parent is the checkout's
``HEAD``, made entirely in git's object store: the patch is applied to a
temporary index read from ``HEAD`` (``git apply --cached``), written as a tree,
committed, and the branch created only if it does not exist yet (``update-ref``
with the zero old value, atomic). The working tree, the index and every other
ref are never touched, so nothing a diff holds can run or land in the checkout
until someone checks the branch out.

The diff is verified (digest, display text) and judged (paths, symlinks,
binaries, git directories) exactly as for an apply; files flagged for review are
named in the result but need no ``--yes``: a branch changes nothing until it is
checked out or merged, which is where a person reads it. A run made over
uncommitted changes may not apply to ``HEAD``: that is refused with its reason
(``corral apply`` into the checkout is the way then).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from executor.apply.checkout import open_checkout
from executor.apply.errors import MergeRefused
from executor.apply.patch import PatchPlan, inspect_patch
from executor.apply.recorded import ApplyOptions, verified_patch
from executor.errors import ExecutorError
from executor.ledger import RunRecord, RunStatus, find_run
from sandbox.errors import SandboxError
from sandbox.gitsafe import git_env, run_git

__all__ = ["BranchResult", "branch_run", "check_branch_name"]

_ZERO = "0" * 40
#: Who the commit says made it (a person commits and signs when they adopt it).
_EMAIL = "corral@localhost"


@dataclass(frozen=True)
class BranchResult:
    """The branch made from a run: its name, the commit, and the commit it starts from."""

    branch: str
    commit: str
    parent: str


def _git(args: list[str], git_dir: Path, *, env: dict[str, str] | None = None,
         input_bytes: bytes | None = None, check: bool = True) -> str:
    done = run_git(args, git_dir=git_dir, env=env, input_bytes=input_bytes, check=check,
                   operation="apply_branch")
    return done.stdout.decode("utf-8", "surrogateescape").strip()


def _message(record: RunRecord) -> str:
    prompt = (record.prompt or "").strip().splitlines()
    title = prompt[0][:72] if prompt else f"changes of run {record.run_id}"
    return (f"{title}\n\nMade by corral run {record.run_id} (agent {record.agent}).\n"
            f"Its record: `corral show {record.run_id}`.\n")


_VALID_HINT = ("a name such as corral/fix-readme (no spaces, '..', '~', '^', ':', '@{', a "
               "leading '-' or '.', or a trailing '/' or '.lock')")
_AMBIGUOUS_HINT = ("pick a name no tag, remote-tracking branch or other ref already has, "
                   "such as corral/<name>: git reads an ambiguous name as the other ref, so "
                   "`git checkout` or `git merge` of it would not take this branch")
#: Names git reads as one of its own refs in the git dir (HEAD, ORIG_HEAD, FETCH_HEAD...).
_PSEUDO = re.compile(r"[A-Z_]*HEAD")
_OBJECT_ID = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


def _ambiguous(branch: str, why: str) -> MergeRefused:
    return MergeRefused(f"branch name {branch!r} is ambiguous: {why}", code="bad_branch",
                        context={"branch": branch}, hint=_AMBIGUOUS_HINT)


def check_branch_name(branch: str, git_dir: Path) -> str:
    """The ref ``refs/heads/<branch>`` of a new branch, once ``branch`` is a valid name that
    means nothing else in the repository at ``git_dir``; else :class:`MergeRefused`.

    Valid is what ``git check-ref-format --branch`` accepts, as it is (``@{-1}``, which
    git expands to another name, is not). Refused as ambiguous: ``HEAD``, ``@`` and git's
    own refs (``ORIG_HEAD``...), a name starting with ``refs/`` (``refs/heads/main`` would
    be ``refs/heads/refs/heads/main``), an object id, and a name git already resolves
    (its dwim: ``<name>``, ``refs/<name>``, ``refs/tags/<name>``,
    ``refs/remotes/<name>``, ``refs/remotes/<name>/HEAD``, an abbreviated object id):
    ``origin/main``, ``v1.0`` when that tag exists, ``heads/main``. An existing branch is
    ``branch_exists``: corral never moves one.
    """
    if not branch or branch.startswith("-"):
        raise MergeRefused(f"{branch!r} is not a valid branch name", code="bad_branch",
                           context={"branch": branch}, hint=_VALID_HINT)
    done = run_git(["check-ref-format", "--branch", branch], git_dir=git_dir, check=False,
                   operation="apply_branch")
    said = done.stdout.decode("utf-8", "surrogateescape").strip()
    if done.returncode != 0:
        raise MergeRefused(f"{branch!r} is not a valid branch name", code="bad_branch",
                           context={"branch": branch, "git": done.stderr.decode(
                               "utf-8", "replace").strip()[:300]}, hint=_VALID_HINT)
    if said != branch:
        raise MergeRefused(f"{branch!r} is not a valid branch name: git reads it as branch "
                           f"{said!r}", code="bad_branch", context={"branch": branch},
                           hint=_VALID_HINT)
    ref = f"refs/heads/{branch}"
    if _git(["rev-parse", "--verify", "--quiet", ref], git_dir, check=False):
        raise MergeRefused(f"branch {branch!r} already exists", code="branch_exists",
                           hint="pick another name; corral never moves an existing branch")
    if branch == "@" or _PSEUDO.fullmatch(branch):
        raise _ambiguous(branch, "git reads it as HEAD or one of its own refs")
    if branch.startswith("refs/"):
        raise _ambiguous(branch, f"it names a full ref; the branch would be {ref}")
    if _OBJECT_ID.fullmatch(branch):
        raise _ambiguous(branch, "it is spelled like an object id")
    for other in (f"refs/{branch}", f"refs/tags/{branch}", f"refs/remotes/{branch}",
                  f"refs/remotes/{branch}/HEAD"):
        if run_git(["show-ref", "--verify", "--quiet", other], git_dir=git_dir, check=False,
                   operation="apply_branch").returncode == 0:
            raise _ambiguous(branch, f"{other} exists")
    resolved = run_git(["rev-parse", "--verify", "--quiet", "--symbolic-full-name", branch],
                       git_dir=git_dir, check=False, operation="apply_branch")
    if resolved.returncode == 0:  # refs/heads/<branch> does not exist: git means another
        what = resolved.stdout.decode("utf-8", "surrogateescape").strip()
        raise _ambiguous(branch, f"git already resolves it, to {what or 'an object'}")
    return ref


def branch_run(root: Path, ledger: Path, run_id: str, branch: str,
               options: ApplyOptions) -> tuple[RunRecord, PatchPlan, BranchResult]:
    """Commit run ``run_id``'s verified diff on a new branch ``branch`` from ``HEAD`` of
    the checkout at ``root`` (see the module docstring)."""
    record = find_run(ledger, run_id)
    if record.status is RunStatus.RUNNING:
        raise ExecutorError(f"run {record.run_id} is still running: its diff is not final yet",
                            code="run_in_progress", hint="make the branch when it has ended")
    patch = verified_patch(ledger, record, allow_unverified=options.allow_unverified)
    if not patch:
        raise ExecutorError(f"run {record.run_id} changed nothing", code="empty_diff")
    plan = inspect_patch(patch, allow_symlinks=options.allow_symlinks,
                         allow_binary=options.allow_binary,
                         allow_git_dirs=options.allow_git_dirs)
    if plan.problems:
        raise MergeRefused("the diff is not safe to keep as a branch",
                           context={"problems": "; ".join(plan.problems)})
    git_dir = open_checkout(root).git_dir
    ref = check_branch_name(branch, git_dir)
    try:
        head = _git(["rev-parse", "--verify", "HEAD^{commit}"], git_dir)
    except SandboxError as exc:
        raise MergeRefused("the checkout has no commit to branch from", code="no_head",
                           hint="commit once, then make the branch") from exc
    who = {"GIT_AUTHOR_NAME": f"{record.agent} (corral)", "GIT_AUTHOR_EMAIL": _EMAIL,
           "GIT_COMMITTER_NAME": f"{record.agent} (corral)", "GIT_COMMITTER_EMAIL": _EMAIL}
    with tempfile.TemporaryDirectory(prefix="corral-branch-") as scratch:
        env = git_env(index_file=Path(scratch) / "index", extra=who)
        _git(["read-tree", head], git_dir, env=env)
        try:
            _git(["apply", "--cached", "--whitespace=nowarn", "-"], git_dir, env=env,
                 input_bytes=patch)
        except SandboxError as exc:
            raise MergeRefused(
                f"the diff of run {record.run_id} does not apply to HEAD ({head[:12]}): "
                "the run started from uncommitted changes, or HEAD moved since",
                code="branch_conflict", context={"git": exc.message},
                hint=f"`corral apply {record.run_id}` merges it into your checkout instead "
                     "(with --3way where files changed)") from exc
        tree = _git(["write-tree"], git_dir, env=env)
        commit = _git(["commit-tree", tree, "-p", head, "-F", "-"], git_dir, env=env,
                      input_bytes=_message(record).encode())
    try:
        _git(["update-ref", "-m", f"corral apply {record.run_id} --branch", ref, commit,
              _ZERO], git_dir)
    except SandboxError as exc:  # made by someone else meanwhile: never moved
        raise MergeRefused(f"branch {branch!r} could not be created: {exc.message}",
                           code="branch_exists") from exc
    return record, plan, BranchResult(branch=branch, commit=commit, parent=head)
