"""Agent and editor configuration a workspace-write child's command created: moved out.

A workspace-write child writes the user's checkout itself, and what it leaves in
``.claude/``, ``.corral/``, ``.vscode/``, ``.envrc`` (:data:`sandbox.names.CHILD_READ_ONLY`)
is read by the next run, the user's harness or editor as the project's own
configuration, with no review between. The sandbox binds the existing ones read-only
(:meth:`sandbox.workspaces.model.Workspace.mounts`) and the file tools refuse them all
(:class:`sandbox.files.resolver.Resolver`), but a path that does not exist has no mount
point to bind over without writing the user's checkout first: a command can create it.
So before each diff (and when gc captures a crashed run's), every such path that is not
what the child found (the workspace's :class:`sandbox.workspaces.changes.TreeRecord`:
absent, or another inode or type) is moved to the sandbox's results directory,
``results/<id>/held/<path>``, kept for the person to look at and copy back by hand.
Held paths are named in the diff (:attr:`sandbox.results.DiffResult.held`) and the
run's record.

A component on the way that the child replaced with a symlink is held itself (the
link), so nothing outside the workspace is ever moved.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path

from sandbox.state import SandboxState
from sandbox.workspaces.changes import RECORD_FILE, TreeRecord
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.scan import Manifest

__all__ = ["HELD_DIR", "hold_created"]

#: Under the sandbox's results directory (kept after teardown, like the patch).
HELD_DIR = "held"


def _same(was: tuple[int, ...] | None, now: os.stat_result) -> bool:
    return (was is not None and stat.S_IFMT(was[0]) == stat.S_IFMT(now.st_mode)
            and was[4] == now.st_ino)


def _created(root: Path, rel: str, found: Manifest) -> str | None:
    """The first component of ``rel`` the child created or replaced that is the owned
    path itself or a link on the way to it (``None``: none, or the path is absent); a new
    directory on the way (``.github`` made for ``.github/agents``) is not owned, so the
    walk goes on below it. Walked with ``lstat``: a link is judged, never followed."""
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        try:
            now = os.lstat(root / prefix)
        except (FileNotFoundError, NotADirectoryError):
            return None
        link = stat.S_ISLNK(now.st_mode)
        if _same(found.get(prefix), now):
            if link and depth < len(parts):
                return None  # a link the child found: what it leads to is bound or outside
            continue
        if depth == len(parts) or link:
            return prefix
    return None


def _move(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.path.lexists(destination):  # held before, made again: keep both
        stamp = 1
        while os.path.lexists(destination.with_name(f"{destination.name}.{stamp}")):
            stamp += 1
        destination = destination.with_name(f"{destination.name}.{stamp}")
    try:
        source.rename(destination)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        if source.is_symlink() or not source.is_dir():
            shutil.copy2(source, destination, follow_symlinks=False)
            source.unlink()
        else:
            shutil.copytree(source, destination, symlinks=True)
            shutil.rmtree(source)


def hold_created(ws: Workspace, state: SandboxState) -> tuple[str, ...]:
    """Move the read-only configuration paths a workspace-write child created out of the
    checkout, into ``results/<id>/held/``; the paths moved (relative, sorted). The child's
    processes must be stopped. Nothing to do in other modes."""
    if not ws.read_only_config:
        return ()
    record = ws.record
    if record is None and (state.dir / RECORD_FILE).exists():
        record = ws.record = TreeRecord.load(state.dir / RECORD_FILE)
    if record is None:
        return ()
    held: list[str] = []
    for rel in ws.read_only_config:
        created = _created(ws.root, rel, record.entries)
        if created is None or created in held:
            continue
        with contextlib.suppress(FileNotFoundError):
            _move(ws.root / created, state.make_results_dir() / HELD_DIR / created)
            held.append(created)
    return tuple(sorted(held))
