"""The checkout a patch would be applied to, checked before anything is written.

:func:`open_checkout` finds the checkout (git dir, common dir, top) and
refuses a repository whose configuration names a program.
:func:`check_checkout` then looks at every path the patch reads or writes, and
at every parent directory of those paths, in the real checkout:

* a path the patch creates must not exist (a directory is allowed only when
  the patch deletes everything in it); a path it changes or deletes must be
  there, as the kind of file the patch expects;
* no parent may be a symlink, a file (unless the patch deletes that file), a
  FIFO or device, or a nested repository (a directory with its own ``.git``,
  a submodule, or a directory git would take for a git directory);
* a directory must not become a git directory through what the patch adds
  next to what is already there (:func:`executor.apply.patch.git_dir_problems`).

Each conflict names its path and why (tracked, untracked or ignored; what a
directory in the way holds), so nothing is blamed on "the checkout changed"
unless it did.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from executor.apply.errors import MergeRefused
from executor.apply.patch import PatchPlan, git_dir_problems
from executor.apply.steps import git, step
from sandbox.errors import SandboxError
from sandbox.gitsafe import check_repository_config, run_git
from sandbox.names import git_dir_signature, is_git_alias

__all__ = ["Checkout", "Conflict", "check_checkout", "open_checkout", "renamed_modes"]

_SHOWN = 3
_WALK_LIMIT = 10_000


@dataclass(frozen=True)
class Checkout:
    """The checkout an apply writes to (absolute paths)."""

    top: Path
    git_dir: Path
    common_dir: Path


@dataclass(frozen=True)
class Conflict:
    """One path of the checkout in the way of the patch, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def open_checkout(root: Path) -> Checkout:
    """The checkout containing ``root``; refuses a repository whose config runs programs."""
    step("git rev-parse")
    try:
        done = run_git(["rev-parse", "--path-format=absolute", "--absolute-git-dir",
                        "--git-common-dir", "--show-toplevel"], git_dir=None, cwd=root,
                       operation="apply")
    except SandboxError as exc:
        raise MergeRefused(f"{root} is not a git checkout: {exc.message}",
                           code="not_a_repository") from exc
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 3:
        raise MergeRefused(f"{root} is not a git checkout with a working tree",
                           code="not_a_repository")
    checkout = Checkout(top=Path(lines[2]), git_dir=Path(lines[0]), common_dir=Path(lines[1]))
    step("git config")
    try:
        check_repository_config(checkout.git_dir)
    except SandboxError as exc:
        raise MergeRefused(exc.message, code=exc.code, context=exc.context,
                           hint=exc.hint) from exc
    return checkout


def renamed_modes(checkout: Checkout, plan: PatchPlan, *, allow_symlinks: bool) -> None:
    """A pure rename or copy carries no mode line: take the source's mode from the
    checkout's index, and refuse a symlink or gitlink moved that way."""
    sources = {f.old_path: f for f in plan.files
               if f.status in ("renamed", "copied") and f.old_path and f.new_mode is None}
    if not sources:
        return
    done = git("ls-files", ["ls-files", "-s", "-z", "--",
                            *(f":(literal){p}" for p in sources)],
               git_dir=checkout.git_dir, top=checkout.top)
    for entry in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        item = sources.get(path)
        if item is None or not meta:
            continue
        item.new_mode = item.old_mode = meta.split()[0]
        if item.new_mode == "160000":
            raise MergeRefused(f"{item.path}: moves a gitlink (submodule); never merged")
        if item.new_mode == "120000" and not allow_symlinks:
            raise MergeRefused(f"{item.path}: moves a symlink (pass --allow-symlinks to merge "
                               "symlinks)")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "a special file (FIFO, socket or device)"


def _listing(top: Path, directory: str) -> tuple[set[str], set[str]]:
    """(files, directories) directly in a directory of the checkout; a symlink counts as
    both (git follows it)."""
    files: set[str] = set()
    dirs: set[str] = set()
    try:
        entries = list(os.scandir(top / directory))
    except (FileNotFoundError, NotADirectoryError):
        return files, dirs
    for entry in entries:
        if entry.is_symlink():
            files.add(entry.name)
            dirs.add(entry.name)
        elif entry.is_dir(follow_symlinks=False):
            dirs.add(entry.name)
        else:
            files.add(entry.name)
    return files, dirs


class _Checker:
    def __init__(self, checkout: Checkout, plan: PatchPlan) -> None:
        self.top = checkout.top
        self.checkout = checkout
        self.plan = plan
        self.removed = plan.removed
        #: Paths some section deletes (another may create them again: a type change).
        self.deleted = {f.path for f in plan.files if f.status == "deleted"} | {
            f.old_path for f in plan.files if f.status == "renamed" and f.old_path}
        self.conflicts: dict[str, str] = {}
        self._nested: dict[str, str | None] = {}
        self.gitlinks = self._gitlinks()
        self._ignored: set[str] | None = None
        self._tracked: set[str] | None = None

    def _gitlinks(self) -> set[str]:
        dirs = sorted({"/".join(p.split("/")[:n]) for p in self.plan.touched
                       for n in range(1, p.count("/") + 1)})
        if not dirs:
            return set()
        done = git("ls-files", ["ls-files", "-s", "-z", "--",
                                *(f":(literal){d}" for d in dirs)],
                   git_dir=self.checkout.git_dir, top=self.top)
        found = set()
        for entry in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
            meta, _, path = entry.partition("\t")
            if meta.startswith("160000 "):
                found.add(path)
        return found

    def add(self, path: str, reason: str) -> None:
        self.conflicts.setdefault(path, reason)

    def nested_repository(self, rel: str) -> str | None:
        if rel not in self._nested:
            self._nested[rel] = self._nested_repository(rel)
        return self._nested[rel]

    def _nested_repository(self, rel: str) -> str | None:
        if rel in self.gitlinks:
            return "a submodule"
        directory = self.top / rel
        try:
            names = [entry.name for entry in directory.iterdir()]
        except OSError:
            return None
        if any(is_git_alias(name) for name in names):
            return "a nested repository (it has its own .git)"
        files, dirs = _listing(self.top, rel)
        if git_dir_signature(files, dirs):
            return "a git directory (git would take it for a repository)"
        return None

    def parents(self, path: str) -> bool:
        """Check every parent of ``path``; False when one is in the way."""
        parts = path.split("/")
        for depth in range(1, len(parts)):
            rel = "/".join(parts[:depth])
            info = _lstat(self.top / rel)
            if info is None:
                return True  # created by the apply, with everything below it
            if stat.S_ISDIR(info.st_mode):
                nested = self.nested_repository(rel)
                if nested is not None:
                    self.add(path, f"lies inside {rel}, which is {nested}; the patch never "
                             "writes into another repository")
                    return False
                continue
            if (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)) \
                    and rel in self.removed:
                return True  # the patch deletes that file or symlink, then makes a directory
            what = _kind(info.st_mode)
            self.add(path, f"its parent {rel} is {what} in the checkout, not a directory"
                     + (" (the patch would write beyond a symlink)"
                        if stat.S_ISLNK(info.st_mode) else ""))
            return False
        return True

    def classify(self, rels: list[str]) -> dict[str, str]:
        """'tracked', 'ignored' or 'untracked' for paths of the checkout."""
        if self._tracked is None:
            done = git("ls-files", ["ls-files", "-z", "--",
                                    *(f":(literal){p}" for p in self.plan.touched)],
                       git_dir=self.checkout.git_dir, top=self.top)
            self._tracked = set(done.stdout.decode("utf-8", "surrogateescape").split("\0"))
        done = git("check-ignore", ["check-ignore", "-z", "--stdin"],
                   git_dir=self.checkout.git_dir, top=self.top,
                   input_bytes=b"".join(r.encode("utf-8", "surrogateescape") + b"\0"
                                        for r in rels))
        ignored = set(done.stdout.decode("utf-8", "surrogateescape").split("\0"))
        return {r: "tracked" if r in self._tracked else "ignored" if r in ignored
                else "untracked" for r in rels}

    def absent(self, path: str) -> None:
        """``path`` is created by the patch."""
        info = _lstat(self.top / path)
        if info is None or path in self.deleted:
            return
        if not stat.S_ISDIR(info.st_mode):
            status = self.classify([path])[path]
            self.add(path, f"the patch creates it, but the checkout has {status} "
                     f"{_kind(info.st_mode)[2:]} there")
            return
        nested = self.nested_repository(path)
        if nested is not None:
            self.add(path, f"the patch creates a file where the checkout has {nested}")
            return
        left = self.remaining(path)
        if not left:
            return  # the patch empties the directory first, as git does
        kinds = self.classify(left[:_SHOWN])
        shown = ", ".join(f"{rel} ({kinds[rel]})" for rel in left[:_SHOWN])
        count = f"{_WALK_LIMIT}+" if len(left) >= _WALK_LIMIT else str(len(left))
        more = " and more" if len(left) > _SHOWN else ""
        self.add(path, f"the patch creates a file where the checkout has a directory holding "
                 f"{count} file(s) the patch does not remove: {shown}{more}")

    def remaining(self, path: str) -> list[str]:
        """Files (and symlinks) under a directory that the patch does not delete."""
        left: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.top / path):
            dirnames.sort()
            base = Path(dirpath).relative_to(self.top).as_posix()
            for name in sorted(filenames) + [d for d in dirnames
                                             if (Path(dirpath) / d).is_symlink()]:
                rel = f"{base}/{name}"
                if rel not in self.deleted:
                    left.append(rel)
                    if len(left) >= _WALK_LIMIT:
                        return left
        return left

    def present(self, path: str, mode: str | None, verb: str) -> None:
        """``path`` is read (changed, deleted, renamed or copied) by the patch."""
        info = _lstat(self.top / path)
        if info is None:
            self.add(path, f"the patch {verb} it, but it is not in the checkout (deleted or "
                     "moved since the child's snapshot)")
            return
        want = "a symlink" if mode == "120000" else "a file"
        have = _kind(info.st_mode)
        if have != want:
            self.add(path, f"the patch {verb} {want}, but the checkout has {have} there")


def check_checkout(checkout: Checkout, plan: PatchPlan, *, allow_git_dirs: bool
                   ) -> tuple[list[str], list[Conflict]]:
    """(unsafe, conflicts): what the patch would do to this checkout that is refused, and
    the paths in its way (see the module docstring)."""
    step("precheck")
    checker = _Checker(checkout, plan)
    for item in plan.files:
        verb = {"deleted": "deletes", "renamed": "moves", "copied": "copies"}.get(
            item.status, "changes")
        for source in item.sources:
            if checker.parents(source):
                checker.present(source, item.old_mode or item.new_mode, verb)
        for target in item.targets:
            if target in item.sources:
                continue
            if checker.parents(target):
                checker.absent(target)
    unsafe = [] if allow_git_dirs else git_dir_problems(
        plan, lambda directory: _listing(checkout.top, directory))
    conflicts = [Conflict(path, reason) for path, reason in sorted(checker.conflicts.items())]
    return unsafe, conflicts
