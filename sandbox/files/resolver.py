"""Resolving a tool's path inside one workspace root, one component at a time.

:class:`Resolver` is the single place that turns a path a tool was given into
a directory file descriptor and a final name, with ``openat`` semantics
(``os.open(..., dir_fd=...)``) and ``O_NOFOLLOW`` at every step:

- relative paths only, or absolute paths *under the root*; ``..`` components,
  ``~`` and every other absolute path (``/proc/self/root``, the user's home)
  are refused;
- a symlink is followed only when its target is relative and stays inside the
  root (resolved component by component, like ``RESOLVE_IN_ROOT`` but
  refusing instead of clamping); an absolute target is refused;
- an intermediate directory swapped for a symlink between the check and the
  open fails the open (``O_NOFOLLOW | O_DIRECTORY``) and is refused;
- any spelling of ``.git`` on the way (given, or reached through an in-root
  symlink) is refused, for reads, stat, listing and a command's ``cwd`` as
  much as for writes: the git directory holds the repository's configuration,
  the child's private git state and the run ledger, none of which a tool may
  read or change;
- a write (:meth:`Resolver._resolve` with ``guard``) whose realized path is, or is under,
  one of ``protected`` (paths relative to the root, the agent and editor configuration
  of a workspace-write checkout, :data:`sandbox.names.CHILD_READ_ONLY`) is refused, by
  whatever spelling or in-root symlink it arrives.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path

from sandbox.errors import PathDenied
from sandbox.names import is_git_alias

__all__ = ["DIR_FLAGS", "Resolver"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_SYMLINKS = 40


class Resolver:
    """Confined path resolution under ``root``; ``owner`` gets what it creates."""

    def __init__(self, root: Path, *, owner: tuple[int, int] | None = None,
                 protected: Collection[str] = ()) -> None:
        self.root = root
        self.owner = owner
        #: Realized paths (component tuples) no write may reach.
        self.protected = frozenset(tuple(p.split("/")) for p in protected)

    def parts(self, path: str) -> list[str]:
        """The components of ``path`` relative to the root, or :class:`PathDenied`."""
        if not isinstance(path, str) or "\0" in path:
            raise PathDenied("path is not a valid string", code="path_invalid", path=repr(path))
        text = path
        if text.startswith("~"):
            raise PathDenied(
                f"{path}: '~' is not expanded; use a path relative to the workspace root",
                code="path_outside_workspace", path=path,
            )
        if text.startswith("/"):
            root = self.root.as_posix().rstrip("/")
            if text != root and not text.startswith(root + "/"):
                raise PathDenied(
                    f"{path} is outside the workspace {root}",
                    code="path_outside_workspace", path=path,
                    hint="use a path relative to the workspace root",
                )
            text = text[len(root):]
        parts = [part for part in text.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise PathDenied(
                f"{path}: '..' is not allowed", code="path_outside_workspace", path=path,
                hint="use a path relative to the workspace root, without '..'",
            )
        return parts

    def _resolve(
        self, path: str, *, follow_last: bool, make_dirs: bool = False, guard: bool = False
    ) -> tuple[int, str | None, list[str]]:
        """Walk ``path`` from the root; return (parent dir fd, final name, realized names).

        The returned fd belongs to the caller. ``name`` is ``None`` when the path
        is the root or resolves to a directory through trailing symlinks. ``guard``
        (writes): refuse a realized path in :attr:`protected`, before anything is made.
        """
        todo = list(reversed(self.parts(path)))
        guard = guard and bool(self.protected)
        if guard:  # as given, before the walk makes a parent (links are judged on the way)
            self._guard(path, [], list(reversed(todo)))
        try:
            fds = [os.open(self.root, DIR_FLAGS)]
        except OSError as exc:
            raise PathDenied(f"the workspace {self.root} is gone ({exc.strerror})",
                             code="workspace_unavailable", path=path) from exc
        names: list[str] = []
        hops = 0
        try:
            while todo:
                name = todo.pop()
                if name in ("", "."):
                    continue
                if name == "..":
                    if len(fds) == 1:
                        raise PathDenied(f"{path}: a symlink leads outside the workspace",
                                         code="path_symlink_escape", path=path)
                    os.close(fds.pop())
                    names.pop()
                    continue
                if is_git_alias(name):
                    raise PathDenied(
                        f"{path}: the git directory (.git, in any spelling) is not accessible "
                        "through file tools", code="path_protected", path=path,
                        hint="use git commands through the shell, where the sandbox allows them",
                    )
                if guard:
                    self._guard(path, names, [name])
                last = not todo
                if last and not follow_last:
                    return fds.pop(), name, names
                try:
                    mode = os.stat(name, dir_fd=fds[-1], follow_symlinks=False).st_mode
                except FileNotFoundError:
                    if last:
                        return fds.pop(), name, names
                    if not make_dirs:
                        raise PathDenied(f"{path}: no such directory", code="path_not_found",
                                         path=path) from None
                    os.mkdir(name, 0o777, dir_fd=fds[-1])
                    self._chown(name, fds[-1])
                    mode = stat.S_IFDIR
                if stat.S_ISLNK(mode):
                    hops += 1
                    target = os.readlink(name, dir_fd=fds[-1])
                    if target.startswith("/") or hops > _MAX_SYMLINKS:
                        raise PathDenied(
                            f"{path}: symlink {name!r} points outside the workspace",
                            code="path_symlink_escape", path=path, context={"target": target},
                        )
                    todo.extend(reversed(target.split("/")))
                    continue
                if last:
                    return fds.pop(), name, names
                if not stat.S_ISDIR(mode):
                    raise PathDenied(f"{path}: {name!r} is not a directory",
                                     code="path_not_directory", path=path)
                try:
                    fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
                except OSError as exc:  # swapped for a symlink or removed meanwhile
                    raise PathDenied(f"{path}: {name!r} changed while resolving",
                                     code="path_symlink_escape", path=path) from exc
                names.append(name)
            return fds.pop(), None, names
        except PathDenied:
            raise
        except OSError as exc:  # the tree changed under us (a racing child): refuse
            raise PathDenied(f"{path}: changed while resolving ({exc.strerror})",
                             code="path_changed", path=path) from exc
        finally:
            for fd in fds:
                os.close(fd)

    def _guard(self, path: str, names: list[str], more: list[str]) -> None:
        """Refuse a write whose realized path so far (``names``, then ``more``) is, or
        passes through, a protected path."""
        for depth in range(1, len(more) + 1):
            reached = (*names, *more[:depth])
            if reached in self.protected:
                raise PathDenied(
                    f"{path}: {'/'.join(reached)} is agent or editor configuration, "
                    "read-only to a workspace-write child", code="path_protected", path=path,
                    hint="the next run, the user's harness or editor would read it as the "
                         "project's own; run the agent in worktree mode to propose it as a "
                         "reviewed diff")

    def _chown(self, name: str, dir_fd: int) -> None:
        if self.owner is not None:
            os.chown(name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)

    def resolve_dir(self, path: str) -> Path:
        """The host path of an existing directory inside the workspace (for a command's cwd)."""
        fd, name, names = self._resolve(path, follow_last=True)
        try:
            if name is not None:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                if not stat.S_ISDIR(mode):
                    raise PathDenied(f"{path} is not a directory", code="path_not_directory",
                                     path=path)
                names = [*names, name]
        except FileNotFoundError:
            raise PathDenied(f"{path}: no such directory", code="path_not_found",
                             path=path) from None
        finally:
            os.close(fd)
        return self.root.joinpath(*names)
