"""A private git directory per child, so the parent's repository is never written.

A worktree child's ``.git`` points at ``sandboxes/<id>/git`` under the state
root, not at the parent's repository: its ``objects`` directory holds the
snapshot (and, later, the blobs of the diff) and borrows everything else from
the parent's object store through ``objects/info/alternates``. So creating,
diffing and removing a child writes nothing into the parent's ``.git`` (no
objects, no ``worktrees/<id>`` admin dir), the child's ``git status``/``log``/
``diff`` still work (read-only), and the only git configuration corral's own
commands read for a child is the one written here: a copy of a few data-only
keys (line endings, file modes, object format), never a program.

The files that decide what git does with this directory (``HEAD``, ``config``,
``objects/info/alternates``) are recorded at creation and compared before the
diff is computed; a change (possible on the host backend, where the child can
write the state dir) refuses the diff (``gitdir_tampered``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sandbox.errors import UnsafeRepository
from sandbox.gitsafe import run_git

__all__ = ["TRACKED", "create_private_git", "object_dirs", "read_tracked", "set_head",
           "verify_private_git"]

#: Files whose content decides what git does with the private directory.
TRACKED = ("HEAD", "config", "objects/info/alternates")
# Data-only settings copied from the parent: how content maps to blobs, never a program.
_COPIED = ("core.repositoryformatversion", "core.autocrlf", "core.eol", "core.safecrlf",
           "core.filemode", "core.symlinks", "core.ignorecase", "core.precomposeunicode",
           "core.checkroundtripencoding", "extensions.objectformat")


def object_dirs(common_dir: Path) -> list[Path]:
    """The parent's object directory and the ones it borrows from (absolute)."""
    objects = common_dir / "objects"
    found = [objects]
    try:
        lines = (objects / "info" / "alternates").read_text().splitlines()
    except OSError:
        lines = []
    for raw in lines:
        line = raw.strip()
        if line and not line.startswith("#"):
            path = Path(line) if line.startswith("/") else (objects / line).resolve()
            if path.is_dir():
                found.append(path)
    return found


def _settings(git_dir: Path) -> list[tuple[str, str]]:
    pattern = "^(" + "|".join(key.replace(".", r"\.") for key in _COPIED) + ")$"
    done = run_git(["config", "-z", "--get-regexp", pattern], git_dir=git_dir, check=False,
                   operation="create_worktree")
    settings = []
    for entry in done.stdout.split(b"\0"):
        key, _, value = entry.decode("utf-8", "replace").partition("\n")
        if key and value and "\n" not in value and '"' not in value and "\\" not in value:
            settings.append((key.lower(), value))
    return settings


def create_private_git(path: Path, *, parent_git_dir: Path, common_dir: Path) -> None:
    """Make the directory (unborn ``HEAD``; call :func:`set_head` once the snapshot exists)."""
    for sub in ("objects/info", "refs/heads", "refs/tags", "info"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    alternates = "".join(f"{directory}\n" for directory in object_dirs(common_dir))
    (path / "objects" / "info" / "alternates").write_text(alternates)
    sections: dict[str, list[str]] = {"core": [], "extensions": []}
    settings = dict(_settings(parent_git_dir))
    settings.setdefault("core.repositoryformatversion", "0")
    settings["core.bare"] = "false"
    for key, value in sorted(settings.items()):
        section, _, name = key.partition(".")
        sections[section].append(f"\t{name} = {value}\n")
    (path / "config").write_text(
        "".join(f"[{name}]\n" + "".join(lines) for name, lines in sections.items() if lines))
    (path / "HEAD").write_text("ref: refs/heads/corral-snapshot\n")
    exclude = common_dir / "info" / "exclude"
    if exclude.is_file():  # ignore rules are data; the child sees the same ignored files
        shutil.copyfile(exclude, path / "info" / "exclude")


def set_head(path: Path, commit: str) -> None:
    """Detach ``HEAD`` at the snapshot commit."""
    (path / "HEAD").write_text(f"{commit}\n")


def read_tracked(path: Path) -> dict[str, str]:
    """The current content of the tracked files (missing ones are absent)."""
    found = {}
    for name in TRACKED:
        try:
            found[name] = (path / name).read_text()
        except (OSError, UnicodeDecodeError):
            continue
    return found


def verify_private_git(path: Path, recorded: dict[str, str]) -> None:
    """Refuse a private git directory whose tracked files changed since creation."""
    if read_tracked(path) != recorded:
        raise UnsafeRepository(
            "the child's private git directory was changed since corral created it",
            code="gitdir_tampered", operation="collect_diff", context={"git_dir": path},
            hint="something rewrote HEAD, config or objects/info/alternates; inspect the "
            "worktree, then discard it",
        )
