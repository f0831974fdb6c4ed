"""Reading and judging a child's patch on its own, before it meets a checkout (threats B3).

A child's diff is untrusted input. :func:`inspect_patch` reads every header of
it (``diff --git``, ``---``/``+++``, ``rename``/``copy from``/``to``, modes,
``index`` blob ids, hunk positions) and refuses:

* paths that are absolute, contain ``..``, NUL or control characters, or
  have a ``.git`` component under any spelling (``.GIT``, ``.git.``,
  ``git~1``, ignorable code points);
* gitlinks (mode 160000) always; symlinks (mode 120000) and binary patches
  unless explicitly allowed; a path below a symlink the same patch creates;
* unless ``allow_git_dirs``: a directory the patch makes a git directory
  (:func:`sandbox.names.git_dir_signature`: ``HEAD``/``config``/``commondir``/
  ``gitdir``/``packed-refs`` next to ``objects/``, ``refs/`` or ``commondir``)
  and a file whose content starts with ``gitdir:`` (a git-directory pointer);
* more than ``max_files`` files or ``max_bytes`` bytes.

Then git itself reads the patch (``apply --numstat``/``--summary``) and any
path or mode it sees that this reading did not is refused, so a header this
parser misread fails closed. Every file gets its review flags
(:func:`sandbox.names.review_flags`) and the byte range of its section, so the
apply can check, diagnose and merge one file at a time.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.gitsafe import git_env, run_git
from sandbox.names import git_dir_signature, is_git_alias, review_flags

__all__ = ["Listing", "PatchFile", "PatchPlan", "git_dir_problems", "inspect_patch", "unquote"]

MAX_BYTES = 64 * 1024 * 1024
MAX_FILES = 5000
_SUMMARY_RE = re.compile(
    r"^ (create|delete) mode (\d{6}) (.+)$|^ mode change (\d{6}) => (\d{6}) (.+)$")
_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_NULL_BLOB = re.compile(r"0+")

#: (files, directories) directly in a directory of the checkout, by relative path.
Listing = Callable[[str], tuple[set[str], set[str]]]


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
    #: Blob ids of the ``index`` line (as abbreviated as git wrote them); None for none.
    old_blob: str | None = None
    new_blob: str | None = None
    #: Byte range of this file's section in the patch.
    start: int = 0
    end: int = 0
    #: The new content's first line starts with ``gitdir:``.
    gitdir_pointer: bool = False

    @property
    def sources(self) -> tuple[str, ...]:
        """The paths this file's section reads in the checkout."""
        if self.status == "added":
            return ()
        return (self.old_path or self.path,)

    @property
    def targets(self) -> tuple[str, ...]:
        """The paths this file's section writes (creates or changes) in the checkout."""
        return () if self.status == "deleted" else (self.path,)


@dataclass
class PatchPlan:
    """What a patch would change, and why it may not be applied."""

    files: list[PatchFile] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    data: bytes = b""

    def section(self, item: PatchFile) -> bytes:
        """The exact bytes of one file's section."""
        return self.data[item.start:item.end]

    @property
    def removed(self) -> set[str]:
        """Paths that stop existing: deleted files and sources of renames."""
        gone = {f.path for f in self.files if f.status == "deleted"}
        gone |= {f.old_path for f in self.files if f.status == "renamed" and f.old_path}
        return gone - {t for f in self.files for t in f.targets}

    @property
    def touched(self) -> list[str]:
        """Every path the patch reads or writes, sorted."""
        return sorted({p for f in self.files for p in (*f.sources, *f.targets)})

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
                  allow_binary: bool = False, allow_git_dirs: bool = False,
                  max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES) -> PatchPlan:
    """Parse and judge a ``git diff`` patch (see the module docstring)."""
    data = patch.encode("utf-8", "surrogateescape") if isinstance(patch, str) else patch
    plan = PatchPlan(data=data)
    if len(data) > max_bytes:
        plan.problems.append(f"the patch is {len(data)} bytes; the limit is {max_bytes}")
        return plan
    _parse(data, plan)
    if not plan.files and data.strip():
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
        if item.gitdir_pointer and not allow_git_dirs:
            plan.problems.append(f"{item.path}: its content starts with 'gitdir:', a pointer git "
                                 "follows to a repository (pass --allow-git-dirs to merge it)")
    if not allow_git_dirs:
        plan.problems += git_dir_problems(plan, None)
    plan.problems = list(dict.fromkeys(plan.problems))  # a path read in 3 headers: say it once
    return plan


def _parse(data: bytes, plan: PatchPlan) -> None:
    """Read every header, blob id and hunk position, and each section's byte range."""
    text = data.decode("utf-8", "surrogateescape")
    current: PatchFile | None = None
    offset = 0
    first_line = False  # the next new-side line of the current hunk is the file's first
    for line in text.split("\n"):
        start = offset
        offset += len(line.encode("utf-8", "surrogateescape")) + 1
        if line.startswith("diff --git "):
            if current is not None:
                current.end = start
            paths = _header(line[len("diff --git "):])
            if paths is None:
                plan.problems.append(f"unreadable header: {line[:120]!r}")
                current = None
                continue
            old, new = _clean(paths[0], "a/", plan), _clean(paths[1], "b/", plan)
            current = PatchFile(path=new or old or "", old_path=old if old != new else None,
                                start=start)
            plan.files.append(current)
            first_line = False
            continue
        if current is None:
            continue
        if first_line and line[:1] in (" ", "+"):
            first_line = False
            current.gitdir_pointer = current.gitdir_pointer or \
                line[1:].lstrip().casefold().startswith("gitdir:")
        key, _, value = line.partition(" ")
        if line.startswith("@@ "):
            hunk = _HUNK_RE.match(line)
            first_line = hunk is not None and int(hunk[1]) <= 1
        elif line.startswith(("rename from ", "copy from ")):
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
        elif line.startswith("index "):
            ids = value.split()
            old_blob, _, new_blob = ids[0].partition("..") if ids else ("", "", "")
            current.old_blob = None if _NULL_BLOB.fullmatch(old_blob) else old_blob or None
            current.new_blob = None if _NULL_BLOB.fullmatch(new_blob) else new_blob or None
            if len(ids) == 2:
                current.new_mode = current.new_mode or ids[1]
        elif line.startswith(("--- ", "+++ ")):
            _clean(line[4:].rstrip("\t"), "a/" if key == "---" else "b/", plan)
        elif line.startswith(("GIT binary patch", "Binary files ")):
            current.binary = True
    if current is not None:
        current.end = len(data)


def git_dir_problems(plan: PatchPlan, listing: Listing | None) -> list[str]:
    """Directories the patch would make git directories (see the module docstring).

    ``listing`` gives what a directory of the checkout already holds (``None``:
    judge the patch alone); a directory is refused only when the patch adds
    one of the names that make it a git directory.
    """
    added: dict[str, tuple[set[str], set[str]]] = {}
    for item in plan.files:
        for target in item.targets:
            parts = target.split("/")
            for depth, name in enumerate(parts):
                files, dirs = added.setdefault("/".join(parts[:depth]), (set(), set()))
                (files if depth == len(parts) - 1 else dirs).add(name)
    removed = plan.removed
    problems = []
    for directory, (files, dirs) in sorted(added.items()):
        have_files, have_dirs = listing(directory) if listing is not None else (set(), set())
        prefix = f"{directory}/" if directory else ""
        have_files = {name for name in have_files if prefix + name not in removed}
        signature = git_dir_signature(files | have_files, dirs | have_dirs)
        ours = {name.casefold() for name in files | dirs} & set(signature)
        if signature and ours:
            shown = ", ".join(name + ("/" if name in ("objects", "refs") else "")
                              for name in signature)
            problems.append(
                f"{directory or '.'}: the patch makes it a git directory ({shown}): git would "
                "treat it as a repository and run what its config names (pass --allow-git-dirs "
                "to merge it)")
    return problems


def _cross_check(data: bytes, plan: PatchPlan) -> None:
    """Ask git which paths and modes the patch touches; anything git sees that the
    reading above did not is refused (a header this parser misread must fail closed)."""
    if not data.strip():
        return
    with tempfile.TemporaryDirectory() as scratch:
        # No repository: git must not discover one above the scratch directory.
        env = git_env(extra={"GIT_CEILING_DIRECTORIES": str(Path(scratch).parent)})
        numstat = run_git(["apply", "--numstat", "-z", "-"], git_dir=None, cwd=Path(scratch),
                          env=env, input_bytes=data, check=False, operation="apply")
        summary = run_git(["apply", "--summary", "-"], git_dir=None, cwd=Path(scratch),
                          env=env, input_bytes=data, check=False, operation="apply")
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
