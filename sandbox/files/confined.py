"""The host-side file API for the executor's file tools, confined to one workspace.

Every call resolves its path with :class:`sandbox.files.resolver.Resolver` (directory
file descriptors, ``O_NOFOLLOW``, symlinks followed only inside the root), so
nothing the child did to the tree can point it elsewhere (threats B1.1, B1.2,
B1.6, B8.40). On top of that:

- any spelling of ``.git`` (:func:`sandbox.names.is_git_alias`) is refused for
  every call, reads included (``path_protected``); :meth:`ConfinedFiles.glob`
  never descends into one;
- reads open with ``O_NONBLOCK | O_NOFOLLOW`` and refuse anything that is not a
  regular file, so a FIFO never hangs them and a device is never read;
- writes are refused in read-only mode, go to a temporary file first and are
  renamed into place, so a concurrent swap can replace a link but never write
  through it; they never set or keep setuid/setgid bits (a replaced file keeps
  only its permission and sticky bits);
- in a workspace-write checkout, writes never reach its agent and editor
  configuration (``protected``, :data:`sandbox.names.CHILD_READ_ONLY`), existing
  or not (``path_protected``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Collection
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sandbox.errors import PathDenied
from sandbox.files.globbing import glob_regex, walk_names
from sandbox.files.resolver import DIR_FLAGS, Resolver

__all__ = ["ConfinedFiles", "DirEntry", "EntryKind", "FileInfo"]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 16


class EntryKind(StrEnum):
    """What a directory entry is, without following symlinks."""

    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


class FileInfo(BaseModel):
    """``lstat`` facts about one path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: EntryKind
    size: int
    mode: int
    executable: bool
    link_target: str | None = None


class DirEntry(BaseModel):
    """One entry of :meth:`ConfinedFiles.list_dir`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: EntryKind


def _kind(mode: int) -> EntryKind:
    if stat.S_ISREG(mode):
        return EntryKind.FILE
    if stat.S_ISDIR(mode):
        return EntryKind.DIRECTORY
    if stat.S_ISLNK(mode):
        return EntryKind.SYMLINK
    return EntryKind.OTHER


class ConfinedFiles(Resolver):
    """Read, write, list, stat and glob inside one workspace root, and nowhere else.

    ``owner`` (``uid``, ``gid``) is given to files and directories this API
    creates, so a container user that owns the worktree can keep editing them.
    ``on_write`` is called before every write operation (the sandbox notes that
    its last diff may be stale).
    """

    def __init__(
        self,
        root: Path,
        *,
        writable: bool,
        owner: tuple[int, int] | None = None,
        max_read_bytes: int = 16 * 1024 * 1024,
        on_write: Callable[[], None] | None = None,
        protected: Collection[str] = (),
    ) -> None:
        super().__init__(root, owner=owner, protected=protected)
        self.writable = writable
        self.max_read_bytes = max_read_bytes
        self._on_write = on_write

    # -- paths ---------------------------------------------------------------

    # -- reading -------------------------------------------------------------

    def read_bytes(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """The content of a regular file; refuses FIFOs, devices, directories, big files."""
        limit = self.max_read_bytes if max_bytes is None else max_bytes
        dir_fd, name, _ = self._resolve(path, follow_last=True)
        try:
            if name is None:
                raise PathDenied(f"{path} is a directory", code="path_not_regular", path=path)
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                if not stat.S_ISREG(mode):
                    raise PathDenied(f"{path} is not a regular file ({_kind(mode).value})",
                                     code="path_not_regular", path=path)
                fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                raise PathDenied(f"{path}: no such file", code="path_not_found",
                                 path=path) from None
            except OSError as exc:
                raise PathDenied(f"{path}: cannot open ({exc.strerror})",
                                 code="path_not_regular", path=path) from exc
        finally:
            os.close(dir_fd)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PathDenied(f"{path} is not a regular file", code="path_not_regular",
                                 path=path)
            if info.st_size > limit:
                raise PathDenied(f"{path} is {info.st_size} bytes, over the {limit}-byte limit",
                                 code="path_too_large", path=path)
            chunks: list[bytes] = []
            total = 0
            while chunk := os.read(fd, _CHUNK):
                total += len(chunk)
                if total > limit:
                    raise PathDenied(f"{path} grew over the {limit}-byte limit",
                                     code="path_too_large", path=path)
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read_text(self, path: str, *, encoding: str = "utf-8", errors: str = "replace") -> str:
        """:meth:`read_bytes`, decoded."""
        return self.read_bytes(path).decode(encoding, errors)

    def stat(self, path: str) -> FileInfo:
        """``lstat`` of ``path`` (a final symlink is described, not followed)."""
        dir_fd, name, _ = self._resolve(path, follow_last=False)
        try:
            if name is None:
                info = os.fstat(dir_fd)
                target = None
            else:
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    raise PathDenied(f"{path}: no such file", code="path_not_found",
                                     path=path) from None
                target = os.readlink(name, dir_fd=dir_fd) if stat.S_ISLNK(info.st_mode) else None
        finally:
            os.close(dir_fd)
        return FileInfo(
            path="/".join(self.parts(path)) or ".", kind=_kind(info.st_mode), size=info.st_size,
            mode=stat.S_IMODE(info.st_mode), executable=bool(info.st_mode & 0o111),
            link_target=target,
        )

    def exists(self, path: str) -> bool:
        """Whether ``path`` names anything (a dangling symlink counts)."""
        try:
            self.stat(path)
        except PathDenied as exc:
            if exc.code == "path_not_found":
                return False
            raise
        return True

    def _open_dir(self, path: str) -> int:
        dir_fd, name, _ = self._resolve(path, follow_last=True)
        if name is None:
            return dir_fd
        try:
            return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise PathDenied(f"{path}: no such directory", code="path_not_found",
                             path=path) from None
        except OSError as exc:
            raise PathDenied(f"{path} is not a directory", code="path_not_directory",
                             path=path) from exc
        finally:
            os.close(dir_fd)

    def list_dir(self, path: str = ".") -> list[DirEntry]:
        """The entries of a directory, sorted by name (symlinks are not followed)."""
        fd = self._open_dir(path)
        entries = []
        try:
            with os.scandir(fd) as listing:
                for entry in listing:
                    try:
                        mode = entry.stat(follow_symlinks=False).st_mode
                    except FileNotFoundError:  # removed while listing
                        continue
                    entries.append(DirEntry(name=entry.name, kind=_kind(mode)))
        finally:
            os.close(fd)
        return sorted(entries, key=lambda entry: entry.name)

    def glob(self, pattern: str, *, limit: int = 1000) -> list[str]:
        """Relative paths matching ``pattern`` (``*``, ``?``, ``[...]``, ``**/``), sorted.

        ``.git`` (any spelling) is never descended into, symlinked directories
        are listed but not followed, and at most ``limit`` paths are returned.
        """
        regex = glob_regex("/".join(self.parts(pattern)) if pattern.strip("/") else "**")
        found: list[str] = []
        fd = self._open_dir(".")
        try:
            with contextlib.closing(walk_names(fd)) as names:
                for rel in names:
                    if regex.match(rel):
                        found.append(rel)
                        if len(found) >= limit:
                            break
        finally:
            os.close(fd)
        return sorted(found)

    # -- writing -------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes, *, make_parents: bool = True) -> None:
        """Replace (or create) a regular file atomically; refused in read-only mode."""
        dir_fd, name = self._target(path, follow_last=True, make_parents=make_parents)
        try:
            perms = 0o666
            try:
                existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None:
                if not stat.S_ISREG(existing.st_mode):
                    raise PathDenied(f"{path} is not a regular file",
                                     code="path_not_regular", path=path)
                perms = stat.S_IMODE(existing.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
            self._replace(dir_fd, name, data, perms, keep_mode=existing is not None)
        finally:
            os.close(dir_fd)

    def write_text(self, path: str, text: str, *, encoding: str = "utf-8") -> None:
        """:meth:`write_bytes` of encoded text."""
        self.write_bytes(path, text.encode(encoding))

    def _replace(self, dir_fd: int, name: str, data: bytes, perms: int, *, keep_mode: bool) -> None:
        tmp = f".corral-write-{secrets.token_hex(6)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, perms, dir_fd=dir_fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if keep_mode:
                    os.fchmod(fd, perms)
                if self.owner is not None:
                    os.fchown(fd, *self.owner)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise

    def _target(
        self, path: str, *, follow_last: bool, make_parents: bool = False
    ) -> tuple[int, str]:
        if not self.writable:
            raise PathDenied(f"{path}: the workspace is read-only", code="read_only_workspace",
                             path=path, hint="this agent runs in read-only mode")
        if self._on_write is not None:
            self._on_write()
        dir_fd, name, _ = self._resolve(path, follow_last=follow_last,
                                        make_dirs=make_parents, guard=True)
        if name is None:
            os.close(dir_fd)
            raise PathDenied(f"{path} is the workspace root", code="path_invalid", path=path)
        return dir_fd, name

    def remove(self, path: str) -> None:
        """Remove a file, a symlink (not its target) or an empty directory."""
        dir_fd, name = self._target(path, follow_last=False)
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                os.rmdir(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            raise PathDenied(f"{path}: no such file", code="path_not_found", path=path) from None
        except OSError as exc:
            raise PathDenied(f"{path}: {exc.strerror}", code="path_not_removable",
                             path=path) from exc
        finally:
            os.close(dir_fd)

    def make_dir(self, path: str) -> None:
        """Create a directory (and its parents); an existing directory is fine."""
        dir_fd, name = self._target(path, follow_last=True, make_parents=True)
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)
            self._chown(name, dir_fd)
        except FileExistsError:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            if not stat.S_ISDIR(mode):
                raise PathDenied(f"{path} exists and is not a directory",
                                 code="path_not_directory", path=path) from None
        finally:
            os.close(dir_fd)

    def rename(self, source: str, destination: str) -> None:
        """Move a file or directory inside the workspace (links are moved, not followed)."""
        src_fd, src_name = self._target(source, follow_last=False)
        try:
            dst_fd, dst_name = self._target(destination, follow_last=False, make_parents=True)
            try:
                os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            except FileNotFoundError:
                raise PathDenied(f"{source}: no such file", code="path_not_found",
                                 path=source) from None
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)

    def chmod(self, path: str, mode: int) -> None:
        """Set permission bits (``0o777`` at most: never setuid) of a file or directory."""
        dir_fd, name = self._target(path, follow_last=True)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except OSError as exc:
            raise PathDenied(f"{path}: cannot open ({exc.strerror})", code="path_not_regular",
                             path=path) from exc
        finally:
            os.close(dir_fd)
        try:
            os.fchmod(fd, mode & 0o777)
        finally:
            os.close(fd)

    def symlink(self, path: str, target: str) -> None:
        """Create a symlink whose (relative) target stays inside the workspace."""
        depth = len(self.parts(path)) - 1
        level = depth
        for part in target.split("/"):
            level += -1 if part == ".." else 0 if part in ("", ".") else 1
            if level < 0:
                break
        if not target or "\0" in target or target.startswith("/") or level < 0:
            raise PathDenied(f"{path}: symlink target {target!r} leaves the workspace",
                             code="path_symlink_escape", path=path)
        dir_fd, name = self._target(path, follow_last=False, make_parents=True)
        try:
            os.symlink(target, name, dir_fd=dir_fd)
        except FileExistsError:
            raise PathDenied(f"{path} already exists", code="path_exists", path=path) from None
        finally:
            os.close(dir_fd)

