"""File tools over the sandbox's confined file API: read, list, find, write, edit.

Every path goes through :class:`sandbox.files.confined.ConfinedFiles`: ``..``,
absolute paths outside the workspace, ``~``, symlinks out and special files
are refused there, writes are refused in read-only mode and into ``.git``.
Their refusals reach the model as tool errors.
"""

from __future__ import annotations

from pydantic import Field

from executor.tools.context import Args, ToolContext
from executor.tools.dispatch import ToolFailure, ToolOutput
from sandbox.errors import SandboxError
from sandbox.files.confined import EntryKind
from sandbox.names import has_git_alias

__all__ = ["EditTool", "FindTool", "ListFilesTool", "ReadFileTool", "WriteFileTool"]

MAX_READ_BYTES = 512 * 1024
MAX_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_ENTRIES = 1000


def _fail(exc: SandboxError) -> ToolFailure:
    return ToolFailure(exc.message + (f" ({exc.hint})" if exc.hint else ""))


class ReadArgs(Args):
    path: str = Field(description="File path, relative to the workspace root.")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based).")
    limit: int | None = Field(default=None, ge=1, le=MAX_LINES,
                              description=f"How many lines to read (at most {MAX_LINES}).")


class ReadFileTool:
    """read_file(path, offset, limit): numbered lines, with a truncation marker."""

    name = "read_file"
    description = ("Read a text file of the workspace. Lines are numbered; long files are cut "
                   "with a marker telling how to read on (offset, limit).")
    args = ReadArgs

    def subjects(self, args: ReadArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: ReadArgs, context: ToolContext) -> ToolOutput:
        try:
            data = context.sandbox.files.read_bytes(args.path, max_bytes=MAX_READ_BYTES)
        except SandboxError as exc:
            raise _fail(exc) from exc
        if b"\0" in data[:8192]:
            return ToolOutput(f"{args.path}: binary file, {len(data)} bytes (not shown)",
                              data={"bytes": len(data), "binary": True})
        lines = data.decode("utf-8", errors="replace").splitlines()
        first = args.offset - 1
        count = args.limit or MAX_LINES
        shown = lines[first:first + count]
        body = "\n".join(f"{number:6}\t{line[:MAX_LINE_CHARS]}"
                         for number, line in enumerate(shown, start=args.offset))
        end = first + len(shown)
        if not lines:
            body = "(empty file)"
        elif first >= len(lines):
            body = f"(the file has {len(lines)} lines; offset {args.offset} is past the end)"
        elif end < len(lines):
            body += (f"\n[truncated: showing lines {args.offset}-{end} of {len(lines)}; call "
                     f"read_file with offset={end + 1} to read on]")
        return ToolOutput(body, data={"lines": len(lines), "shown": len(shown)})


class ListArgs(Args):
    path: str = Field(default=".", description="Directory, relative to the workspace root.")


class ListFilesTool:
    """list_files(path): one entry a line; directories end in '/', symlinks in '@'."""

    name = "list_files"
    description = ("List a directory of the workspace: directories end with '/', symlinks "
                   "with '@'.")
    args = ListArgs

    def subjects(self, args: ListArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: ListArgs, context: ToolContext) -> ToolOutput:
        try:
            entries = context.sandbox.files.list_dir(args.path)
        except SandboxError as exc:
            raise _fail(exc) from exc
        suffix = {EntryKind.DIRECTORY: "/", EntryKind.SYMLINK: "@", EntryKind.OTHER: "|"}
        names = [e.name + suffix.get(e.kind, "") for e in entries]
        text = "\n".join(names[:MAX_ENTRIES]) or "(empty directory)"
        if len(names) > MAX_ENTRIES:
            text += f"\n[truncated: showing {MAX_ENTRIES} of {len(names)} entries]"
        return ToolOutput(text, data={"entries": len(names)})


class FindArgs(Args):
    pattern: str = Field(description="Glob pattern, e.g. '**/*.py' or 'src/*.ts'.")
    path: str = Field(default=".", description="Directory to search under.")


class FindTool:
    """find(pattern, path): workspace paths matching a glob."""

    name = "find"
    description = "Find files by glob pattern ('**' crosses directories); returns paths."
    args = FindArgs

    def subjects(self, args: FindArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: FindArgs, context: ToolContext) -> ToolOutput:
        base = args.path.strip("/")
        pattern = args.pattern if base in ("", ".") else f"{base}/{args.pattern}"
        try:
            found = context.sandbox.files.glob(pattern, limit=MAX_ENTRIES + 1)
        except SandboxError as exc:
            raise _fail(exc) from exc
        hidden = len(found)
        found = [path for path in found
                 if not has_git_alias(path) and context.shown(self.name, path)]
        hidden -= len(found)
        text = "\n".join(found[:MAX_ENTRIES]) or "(no matches)"
        if hidden:
            text += f"\n[{hidden} path(s) hidden by permission rules]"
        if len(found) > MAX_ENTRIES:
            text += f"\n[truncated: showing the first {MAX_ENTRIES} matches; narrow the pattern]"
        return ToolOutput(text, data={"matches": min(len(found), MAX_ENTRIES)})


class WriteArgs(Args):
    path: str = Field(description="File path, relative to the workspace root.")
    content: str = Field(description="The whole new content of the file.")


class WriteFileTool:
    """write_file(path, content): create or overwrite a file."""

    name = "write_file"
    description = "Create or overwrite a file of the workspace with the given content."
    args = WriteArgs

    def subjects(self, args: WriteArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: WriteArgs, context: ToolContext) -> ToolOutput:
        files = context.sandbox.files
        try:
            existed = files.exists(args.path)
            files.write_text(args.path, args.content)
        except SandboxError as exc:
            raise _fail(exc) from exc
        verb = "overwrote" if existed else "created"
        size = len(args.content.encode())
        return ToolOutput(f"{verb} {args.path} ({size} bytes)", data={"bytes": size})


class EditArgs(Args):
    path: str = Field(description="File path, relative to the workspace root.")
    old_string: str = Field(min_length=1, description="The exact text to replace.")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False,
                              description="Replace every occurrence instead of exactly one.")


class EditTool:
    """edit(path, old_string, new_string): exact replace; zero or ambiguous matches fail."""

    name = "edit"
    description = ("Replace an exact string in a file. Fails when the string is not found, or "
                   "found more than once (unless replace_all): include more context then.")
    args = EditArgs

    def subjects(self, args: EditArgs) -> list[str | None]:
        return [args.path]

    def run(self, args: EditArgs, context: ToolContext) -> ToolOutput:
        files = context.sandbox.files
        try:
            data = files.read_bytes(args.path)
        except SandboxError as exc:
            raise _fail(exc) from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailure(f"{args.path} is not UTF-8 text; edit cannot change it") from exc
        count = text.count(args.old_string)
        if count == 0:
            raise ToolFailure(f"old_string was not found in {args.path} (it must match "
                              "exactly, whitespace included)")
        if count > 1 and not args.replace_all:
            raise ToolFailure(f"old_string appears {count} times in {args.path}; include more "
                              "surrounding text to make it unique, or set replace_all")
        updated = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
        try:
            files.write_text(args.path, updated)
        except SandboxError as exc:
            raise _fail(exc) from exc
        return ToolOutput(f"replaced {count if args.replace_all else 1} occurrence(s) in "
                          f"{args.path}", data={"replacements": count if args.replace_all else 1})

