"""apply_patch(patch): a strict unified-diff (or V4A, :mod:`executor.tools.v4a`) applier
over the confined file API.

No external ``patch``/``git apply`` runs on the child's tree: the diff is
parsed here and applied through :class:`sandbox.files.confined.ConfinedFiles`, so every
path gets the same confinement as ``write_file``. Rules:

* ``--- a/x`` / ``+++ b/x`` headers (``a/``/``b/`` optional, ``/dev/null`` for
  a new or a deleted file), ``@@ -l,n +l,n @@`` hunks, ``\\ No newline`` lines;
* context and removed lines must match the file exactly (no fuzz, no offset
  search beyond the hunk's stated line): a mismatch fails with the hunk and
  the line;
* all or nothing: every file's new content is computed first; nothing is
  written unless every hunk of every file applies;
* binary patches, mode changes and renames are refused with a clear error
  (use ``write_file`` and ``shell`` for those).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import Field

from executor.tools.context import Args, ToolContext
from executor.tools.dispatch import ToolFailure, ToolOutput
from executor.tools.v4a import apply_op, is_v4a, parse_v4a
from sandbox.errors import SandboxError
from sandbox.files.confined import ConfinedFiles
from sandbox.names import is_git_alias

__all__ = ["ApplyPatchTool", "FilePatch", "apply_hunks", "parse_patch"]

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    old: str | None  # None: a new file
    new: str | None  # None: a deleted file
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new or self.old or ""


def _header_name(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith('"'):
        raise ToolFailure(f"quoted paths are not supported in patches: {name}")
    return name


def _header_pair(old_raw: str, new_raw: str) -> tuple[str | None, str | None]:
    """Both header paths; ``a/``/``b/`` are git's prefixes only when *both* sides carry
    them (or ``/dev/null``), so a real directory named ``a`` keeps its name."""
    old, new = _header_name(old_raw), _header_name(new_raw)
    git_style = (old is None or old.startswith("a/")) and (new is None or new.startswith("b/"))
    if git_style:
        old = old[2:] if old is not None else None
        new = new[2:] if new is not None else None
    return old, new


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a unified diff; raise ToolFailure naming the line on anything unexpected."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    patches: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("GIT binary patch", "Binary files ")):
            raise ToolFailure("binary patches are not supported; write the file instead")
        if line.startswith(("old mode", "new mode", "rename from", "copy from",
                            "similarity index")):
            raise ToolFailure(f"line {i + 1}: {line.split(' ')[0]} changes are not supported; "
                              "use write_file and shell")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _header_pair(line[4:], lines[i + 1][4:])
            patch = FilePatch(old=old, new=new)
            if patch.old is None and patch.new is None:
                raise ToolFailure(f"line {i + 1}: both sides are /dev/null")
            if any(p.path == patch.path for p in patches):
                raise ToolFailure(f"the patch changes {patch.path} in two sections; put all its "
                                  "hunks in one")
            patches.append(patch)
            i += 2
            continue
        match = _HUNK_RE.match(line)
        if match:
            if not patches:
                raise ToolFailure(f"line {i + 1}: a hunk before any ---/+++ file header")
            hunk = Hunk(int(match[1]), int(match[2] or 1), int(match[3]), int(match[4] or 1))
            i += 1
            old_seen = new_seen = 0
            while i < len(lines) and (old_seen < hunk.old_count or new_seen < hunk.new_count
                                      or lines[i].startswith("\\")):
                body = lines[i]
                tag = body[:1]
                if tag == "\\":
                    hunk.lines.append(body)
                elif tag in (" ", "-", "+") or body == "":
                    body = body or " "
                    hunk.lines.append(body)
                    old_seen += body[0] in " -"
                    new_seen += body[0] in " +"
                else:
                    raise ToolFailure(f"line {i + 1}: unexpected line in a hunk: {body[:60]!r}")
                i += 1
            if old_seen != hunk.old_count or new_seen != hunk.new_count:
                raise ToolFailure(f"hunk at line {line!r} has the wrong line counts")
            patches[-1].hunks.append(hunk)
            continue
        i += 1
    if not patches:
        raise ToolFailure("no file changes found: expected ---/+++ headers and @@ hunks")
    return patches


def apply_hunks(original: str | None, patch: FilePatch) -> str | None:
    """The new content of one file, or ``None`` for a deletion."""
    source: list[str] = []
    if original:
        pieces = original.split("\n")
        source = [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    # A CRLF file keeps CRLF: context matches with or without the \r, added lines get it.
    ended = [line for line in source if line.endswith("\n")]
    newline = "\r\n" if ended and all(line.endswith("\r\n") for line in ended) else "\n"
    out: list[str] = []
    position = 0
    for number, hunk in enumerate(patch.hunks, start=1):
        start = max(hunk.old_start - 1, 0) if hunk.old_count else hunk.old_start
        if start < position:
            raise ToolFailure(f"{patch.path}: hunk {number} overlaps the previous one")
        out.extend(source[position:start])
        position = start
        previous: str | None = None
        for line in hunk.lines:
            if line.startswith("\\"):
                if previous == "+" and out:
                    out[-1] = out[-1].rstrip("\n").removesuffix("\r")
                continue
            tag, text = line[0], line[1:]
            if tag in " -":
                actual = source[position] if position < len(source) else None
                if actual is None or actual.rstrip("\n").removesuffix("\r") != \
                        text.removesuffix("\r"):
                    raise ToolFailure(
                        f"{patch.path}: hunk {number} does not apply at line {position + 1}: "
                        f"expected {text[:80]!r}, found "
                        f"{'end of file' if actual is None else repr(actual.rstrip(chr(10))[:80])}"
                    )
                if tag == " ":
                    out.append(actual)
                position += 1
            else:
                out.append(text.removesuffix("\r") + newline)
            previous = tag
    out.extend(source[position:])
    if patch.new is None:
        if "".join(out):
            raise ToolFailure(f"{patch.path}: a deletion must remove every line")
        return None
    return "".join(out)


Write = tuple[str, str | None, str | None]  # path, its text before (None: new), after (None: gone)


def _write_all(files: ConfinedFiles, results: list[Write]) -> None:
    """Write every file; on a failure, put back what was already written."""
    done: list[tuple[str, str | None]] = []
    try:
        for path, original, content in results:
            if content is None:
                files.remove(path)
            else:
                files.write_text(path, content)
            done.append((path, original))
    except SandboxError:
        for path, original in reversed(done):
            if original is None:
                files.remove(path)
            else:
                files.write_text(path, original)
        raise


class PatchArgs(Args):
    patch: str = Field(min_length=1, description="A unified diff (git diff -u) or a "
                       "'*** Begin Patch' patch.")


class ApplyPatchTool:
    """apply_patch(patch): all-or-nothing, exact context (a unified diff, or V4A)."""

    name = "apply_patch"
    description = ("Apply a patch to workspace files: a unified diff, or a '*** Begin Patch' "
                   "patch. Context lines must match; nothing is written unless all of it "
                   "applies.")
    args = PatchArgs

    def subjects(self, args: PatchArgs) -> list[str | None]:
        try:
            if is_v4a(args.patch):
                return [p for op in parse_v4a(args.patch)
                        for p in dict.fromkeys((op.path, op.move_to)) if p is not None]
            patches = parse_patch(args.patch)
        except ToolFailure:
            return [None]
        return [p for fp in patches for p in {fp.old, fp.new} if p is not None] or [None]

    def run(self, args: PatchArgs, context: ToolContext) -> ToolOutput:
        files = context.sandbox.files
        try:
            results = (_v4a_writes(files, args.patch) if is_v4a(args.patch)
                       else _unified_writes(files, args.patch))
            _write_all(files, results)
        except SandboxError as exc:
            raise ToolFailure(exc.message) from exc
        except UnicodeDecodeError as exc:
            raise ToolFailure("a patched file is not UTF-8 text") from exc
        summary = ", ".join(("deleted " if after is None else "created " if before is None
                             else "patched ") + path for path, before, after in results)
        return ToolOutput(summary, data={"files": len(results)})


def _writable(files: ConfinedFiles, path: str) -> None:
    if any(is_git_alias(part) for part in files.parts(path)):
        raise ToolFailure(f"{path}: .git is never writable")


def _unified_writes(files: ConfinedFiles, text: str) -> list[Write]:
    results: list[Write] = []
    for fp in parse_patch(text):
        if fp.old is not None and fp.new is not None and fp.old != fp.new:
            raise ToolFailure(f"renames are not supported ({fp.old} -> {fp.new})")
        _writable(files, fp.path)
        original = None if fp.old is None else files.read_text(fp.old, errors="strict")
        if fp.old is None and files.exists(fp.path):
            raise ToolFailure(f"{fp.path} already exists; the patch creates it")
        results.append((fp.path, original, apply_hunks(original, fp)))
    return results


def _v4a_writes(files: ConfinedFiles, text: str) -> list[Write]:
    results: list[Write] = []
    for op in parse_v4a(text):
        _writable(files, op.path)
        if op.kind == "add":
            if files.exists(op.path):
                raise ToolFailure(f"{op.path} already exists; the patch adds it")
            results.append((op.path, None, "".join(f"{line}\n" for line in op.added)))
            continue
        original = files.read_text(op.path, errors="strict")
        if op.kind == "delete":
            results.append((op.path, original, None))
            continue
        content = apply_op(original, op)
        if op.move_to is None or op.move_to == op.path:
            results.append((op.path, original, content))
            continue
        _writable(files, op.move_to)
        if files.exists(op.move_to):
            raise ToolFailure(f"{op.move_to} already exists; the patch moves {op.path} there")
        results += [(op.move_to, None, content), (op.path, original, None)]
    return results
