"""Merging a child's diff into the parent's checkout, explicitly and safely (threats B3).

A child's diff is untrusted input. Before it touches the checkout,
:func:`inspect_patch` reads every header of it (``diff --git``, ``---``/
``+++``, ``rename``/``copy from``/``to``, modes) and refuses:

* paths that are absolute, contain ``..``, NUL or control characters, or
  have a ``.git`` component under any spelling (``.GIT``, ``.git.``,
  ``git~1``, ignorable code points);
* gitlinks (mode 160000) always; symlinks (mode 120000) and binary patches
  unless explicitly allowed; a path below a symlink the same patch creates;
* more than ``max_files`` files or ``max_bytes`` bytes.

It then lists every changed file with its review flags (mode changes, new
executables, CI, build, agent and git config). :func:`apply_to_checkout`
refuses a repository whose own config names a program (so no filter or
driver selected by a ``.gitattributes`` in the patch can run), runs
``git apply --check`` and then ``git apply`` with a hardened environment;
``git apply`` is all or nothing, so a patch that does not apply leaves the
checkout unchanged.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from executor.errors import ExecutorError
from sandbox.errors import SandboxError
from sandbox.gitsafe import check_repository_config, git_env, run_git
from sandbox.names import is_git_alias, review_flags

__all__ = ["MergeRefused", "PatchFile", "PatchPlan", "apply_to_checkout", "inspect_patch"]

MAX_BYTES = 64 * 1024 * 1024
MAX_FILES = 5000
_SUMMARY_RE = re.compile(
    r"^ (create|delete) mode (\d{6}) (.+)$|^ mode change (\d{6}) => (\d{6}) (.+)$")


class MergeRefused(ExecutorError):
    """The patch (or the checkout) is not safe to merge."""

    code = "merge_refused"
    exit_code = 4


@dataclass
class PatchFile:
    """One file of a patch."""

    path: str
    old_path: str | None = None
    status: str = "modified"
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False
    flags: tuple[str, ...] = ()


@dataclass
class PatchPlan:
    """What a patch would change, and why it may not be applied."""

    files: list[PatchFile] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[PatchFile]:
        """Files that need a second look before merging."""
        return [f for f in self.files if f.flags]


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(token: str) -> str | None:
    """git's C-style quoted path (``"caf\\303\\251"``) -> its text, or None when malformed."""
    if len(token) < 2 or not (token.startswith('"') and token.endswith('"')):
        return None
    body, out, i = token[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        else:
            return None
    return out.decode("utf-8", "surrogateescape")


def _clean(raw: str, prefix: str | None, plan: PatchPlan) -> str | None:
    text = raw.strip()
    if text == "/dev/null":
        return None
    if text.startswith('"'):
        decoded = unquote(text)
        if decoded is None:
            plan.problems.append(f"malformed quoted path {text}")
            return None
        text = decoded
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    if "\0" in text or any(ord(c) < 32 for c in text):
        plan.problems.append(f"path {text!r} contains control characters")
    elif text.startswith("/"):
        plan.problems.append(f"absolute path {text}")
    elif ".." in text.split("/"):
        plan.problems.append(f"path {text} leaves the repository ('..')")
    elif any(is_git_alias(part) for part in text.split("/")):
        plan.problems.append(f"path {text} is inside a .git directory")
    return text


def _header(rest: str) -> tuple[str, str] | None:
    """The two paths of ``diff --git <rest>``. git does not quote spaces, so the
    header is read as ``a/P b/P`` (both sides equal) or split at its one `` b/``;
    anything else is unreadable (and refused)."""
    if rest.startswith('"'):  # quoted (special characters): "a/..." "b/..."
        match = re.fullmatch(r'("(?:[^"\\]|\\.)*") ("(?:[^"\\]|\\.)*"|b/.*)', rest)
        return (match[1], match[2]) if match else None
    if rest.startswith("a/") and rest.endswith('"') and ' "b/' in rest:
        left, right = rest.split(' "b/', 1)
        return left, '"b/' + right
    if rest.startswith("a/") and len(rest) % 2 == 1:
        half = (len(rest) - 1) // 2
        left, gap, right = rest[:half], rest[half], rest[half + 1:]
        if gap == " " and right.startswith("b/") and left[2:] == right[2:]:
            return left, right
    if rest.startswith("a/") and rest.count(" b/") == 1:
        left, right = rest.split(" b/")
        return left, "b/" + right
    return None


def inspect_patch(patch: bytes | str, *, allow_symlinks: bool = False,
                  allow_binary: bool = False, max_bytes: int = MAX_BYTES,
                  max_files: int = MAX_FILES) -> PatchPlan:
    """Parse and judge a ``git diff`` patch (see the module docstring)."""
    plan = PatchPlan()
    data = patch.encode("utf-8", "surrogateescape") if isinstance(patch, str) else patch
    if len(data) > max_bytes:
        plan.problems.append(f"the patch is {len(data)} bytes; the limit is {max_bytes}")
        return plan
    text = data.decode("utf-8", "surrogateescape")
    current: PatchFile | None = None
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            paths = _header(line[len("diff --git "):])
            if paths is None:
                plan.problems.append(f"unreadable header: {line[:120]!r}")
                current = None
                continue
            old, new = _clean(paths[0], "a/", plan), _clean(paths[1], "b/", plan)
            current = PatchFile(path=new or old or "", old_path=old if old != new else None)
            plan.files.append(current)
            continue
        if current is None:
            continue
        key, _, value = line.partition(" ")
        if line.startswith(("rename from ", "copy from ")):
            current.old_path = _clean(line.split(" ", 2)[2], None, plan)
            current.status = "renamed" if key == "rename" else "copied"
        elif line.startswith(("rename to ", "copy to ")):
            current.path = _clean(line.split(" ", 2)[2], None, plan) or current.path
        elif line.startswith("new file mode "):
            current.status, current.new_mode = "added", value.split()[-1]
        elif line.startswith("deleted file mode "):
            current.status, current.old_mode = "deleted", value.split()[-1]
        elif line.startswith("old mode "):
            current.old_mode = value.split()[-1]
        elif line.startswith("new mode "):
            current.new_mode = value.split()[-1]
        elif line.startswith("index ") and len(value.split()) == 2:
            current.new_mode = current.new_mode or value.split()[1]
        elif line.startswith(("--- ", "+++ ")):
            _clean(line[4:].rstrip("\t"), "a/" if key == "---" else "b/", plan)
        elif line.startswith(("GIT binary patch", "Binary files ")):
            current.binary = True
    if not plan.files and text.strip():
        plan.problems.append("no 'diff --git' headers: not a git patch")
    _cross_check(data, plan)
    if len(plan.files) > max_files:
        plan.problems.append(f"{len(plan.files)} files; the limit is {max_files}")
    links = {f.path for f in plan.files if f.new_mode == "120000"}
    for item in plan.files:
        item.flags = review_flags(item.path, old_mode=item.old_mode, new_mode=item.new_mode)
        if "160000" in (item.new_mode, item.old_mode):
            plan.problems.append(f"{item.path}: gitlinks (submodules) are never merged")
        if item.new_mode == "120000" and not allow_symlinks:
            plan.problems.append(f"{item.path}: creates a symlink (pass --allow-symlinks to "
                                 "merge symlinks)")
        if item.binary and not allow_binary:
            plan.problems.append(f"{item.path}: binary change (pass --allow-binary)")
        parents = {"/".join(item.path.split("/")[:n]) for n in range(1, item.path.count("/") + 1)}
        if parents & links:
            plan.problems.append(f"{item.path}: lies beyond a symlink the patch creates")
    return plan


def _cross_check(data: bytes, plan: PatchPlan) -> None:
    """Ask git which paths and modes the patch touches; anything git sees that the
    reading above did not is refused (a header this parser misread must fail closed)."""
    if not data.strip():
        return
    with tempfile.TemporaryDirectory() as scratch:
        numstat = run_git(["apply", "--numstat", "-z", "-"], git_dir=None, cwd=Path(scratch),
                          input_bytes=data, check=False, operation="apply")
        summary = run_git(["apply", "--summary", "-"], git_dir=None, cwd=Path(scratch),
                          input_bytes=data, check=False, operation="apply")
    if numstat.returncode != 0:
        message = numstat.stderr.decode("utf-8", "replace").strip()
        plan.problems.append(f"git cannot read the patch: {message[:300]}")
        return
    ours = {f.path for f in plan.files} | {f.old_path for f in plan.files if f.old_path}
    for entry in numstat.stdout.decode("utf-8", "surrogateescape").split("\0"):
        path = entry.split("\t")[-1]
        if path and path not in ours:
            plan.problems.append(f"git reads a path this check did not: {path!r}")
    by_path = {f.path: f for f in plan.files}
    for line in summary.stdout.decode("utf-8", "surrogateescape").splitlines():
        match = _SUMMARY_RE.match(line)
        if not match:
            continue
        mode, path = (match[2], match[3]) if match[1] else (match[5], match[6])
        path = unquote(path) or path
        item = by_path.get(path)
        seen = item is not None and mode in (item.new_mode, item.old_mode)
        if not seen:
            plan.problems.append(f"git reads mode {mode} for {path!r}; this check did not")


def _git_dir(root: Path) -> tuple[Path, Path]:
    """(git dir, top of the working tree) of the checkout containing ``root``."""
    try:
        done = run_git(["rev-parse", "--absolute-git-dir", "--show-toplevel"], git_dir=None,
                       cwd=root, operation="apply")
    except SandboxError as exc:
        raise MergeRefused(f"{root} is not a git checkout: {exc.message}") from exc
    git_dir, top = done.stdout.decode("utf-8", "surrogateescape").splitlines()[:2]
    return Path(git_dir), Path(top)


def _renamed_modes(git_dir: Path, top: Path, plan: PatchPlan, *,
                   allow_symlinks: bool) -> None:
    """A pure rename or copy carries no mode line: take the source's mode from the
    checkout's index, and refuse a symlink or gitlink moved that way."""
    sources = {f.old_path: f for f in plan.files
               if f.status in ("renamed", "copied") and f.old_path and f.new_mode is None}
    if not sources:
        return
    done = run_git(["ls-files", "-s", "-z", "--", *(f":(literal){p}" for p in sources)],
                   git_dir=git_dir, work_tree=top, cwd=top, env=git_env(), check=False,
                   operation="apply")
    for entry in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        item = sources.get(path)
        if item is None or not meta:
            continue
        item.new_mode = meta.split()[0]
        if item.new_mode == "160000":
            raise MergeRefused(f"{item.path}: moves a gitlink (submodule); never merged")
        if item.new_mode == "120000" and not allow_symlinks:
            raise MergeRefused(f"{item.path}: moves a symlink (pass --allow-symlinks to merge "
                               "symlinks)")


def apply_to_checkout(root: Path, patch: bytes | str, *, plan: PatchPlan | None = None,
                      allow_symlinks: bool = False, check_only: bool = False) -> None:
    """``git apply --check`` then ``git apply`` at the top of the checkout containing
    ``root``, hardened; all or nothing."""
    git_dir, top = _git_dir(root)
    try:
        check_repository_config(git_dir)
    except SandboxError as exc:
        raise MergeRefused(exc.message, hint=exc.hint) from exc
    if plan is not None:
        _renamed_modes(git_dir, top, plan, allow_symlinks=allow_symlinks)
    data = patch.encode("utf-8", "surrogateescape") if isinstance(patch, str) else patch
    steps = [["apply", "--check", "-"]] + ([] if check_only else [["apply", "-"]])
    for args in steps:
        done = run_git(args, git_dir=git_dir, work_tree=top, cwd=top, env=git_env(),
                       input_bytes=data, check=False, operation="apply")
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip()
            raise MergeRefused(f"the patch does not apply: {message[:500]}",
                               hint="the checkout changed since the child's snapshot; apply "
                               "by hand with `corral diff RUN | git apply --3way`")
