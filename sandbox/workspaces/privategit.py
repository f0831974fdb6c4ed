"""A private git directory per child, so the parent's repository is never written.

A worktree child's ``.git`` points at ``sandboxes/<id>/git`` under the state
root, not at the parent's repository. So creating, diffing and removing a child
writes nothing into the parent's ``.git`` (no objects, no ``worktrees/<id>``
admin dir), the child's ``git status``/``log``/``diff`` still work (read-only),
and the only git configuration corral's own commands read for a child is the
one written here: a copy of a few data-only keys (line endings, file modes,
object format), never a program.

Objects live in two places:

- ``store/`` holds every object corral writes (the snapshot, the blobs of the
  diff). It has no ``info/alternates``, and every git command that writes an
  object runs with ``GIT_OBJECT_DIRECTORY`` set to it (:func:`writing_env`).
- ``objects/`` holds nothing; its ``info/alternates`` lists ``store/`` and the
  parent's object directories. Every command that only reads (``diff-index``,
  ``read-tree``, the child's own ``git log``) sees all of them through it.

Why two: git "freshens" an object it is asked to write but already has, by
setting the mtime of the loose file or of the whole ``.pack``, in its own store
*or in any alternate* (git 2.39 ``write_object_file``). A ``git add`` of a file
whose content the parent already has would therefore rewrite mtimes in the
parent's ``.git``. A writing command that sees no alternate cannot touch
anything but ``store/``. What it loses is reading the parent's objects, and git
needs them in only three places, each handled here:

- ``write-tree`` checks that every blob exists: ``--missing-ok``; it also
  rewrites the trees it cannot find into ``store/`` (a few bytes per directory);
- ``commit-tree`` reads the parent commit: the commit object is written with
  ``hash-object -t commit`` instead (:func:`write_commit`, same bytes and id);
- ``add`` under ``text=auto`` / ``core.autocrlf`` reads the index's blob of a
  modified file to keep CRLF line endings that are already committed ("safer
  autocrlf"): those blobs are copied into ``store/`` first
  (:func:`seed_index_blobs`), so the result is what git with alternates gives.

One more thing freshening used to make free: ``add`` re-hashes and re-writes
every "racily clean" entry (its file's mtime is in the same second as the
index's), which is every file of a worktree collected in the second it was
checked out (a fast child). Their blobs are copied into ``store/`` first as
one pack (:func:`seed_racy_blobs`), so ``add`` finds them there instead of
writing thousands of loose objects.

The files that decide what git does with this directory (``HEAD``, ``config``,
``objects/info/alternates``, and ``store/info/alternates``, which must never
exist) are recorded at creation and compared before the diff is computed; a
change (possible on the host backend, where the child can write the state dir)
refuses the diff (``gitdir_tampered``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from sandbox.errors import UnsafeRepository
from sandbox.gitsafe import SNAPSHOT_IDENTITY, git_env, run_git

__all__ = ["STORE", "TRACKED", "create_private_git", "object_dirs", "read_tracked",
           "reading_env", "seed_index_blobs", "seed_racy_blobs", "set_head", "verify_private_git",
           "write_alternates", "write_commit", "write_tree", "writing_env"]

#: Where corral writes objects (a directory of the private git dir, with no alternates).
STORE = "store"
#: Files whose content decides what git does with the private directory (a missing one
#: is recorded as missing: ``store/info/alternates`` must never appear).
TRACKED = ("HEAD", "config", "objects/info/alternates", f"{STORE}/info/alternates")
# Data-only settings copied from the parent: how content maps to blobs, never a program.
_COPIED = ("core.repositoryformatversion", "core.autocrlf", "core.eol", "core.safecrlf",
           "core.filemode", "core.symlinks", "core.ignorecase", "core.precomposeunicode",
           "core.checkroundtripencoding", "extensions.objectformat")
_REGULAR = ("100644", "100755")
_TRUE = frozenset({"true", "yes", "on", "1"})


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


def reading_env(private_git: Path, index: Path | None) -> dict[str, str]:
    """For git commands that only read objects: the store and the parent's, via alternates."""
    return git_env(index_file=index, object_dir=private_git / "objects")


def writing_env(private_git: Path, index: Path | None = None) -> dict[str, str]:
    """For git commands that write objects: the store alone, no alternate to freshen."""
    return git_env(index_file=index, object_dir=private_git / STORE)


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


def create_private_git(path: Path, *, parent_git_dir: Path, common_dir: Path,
                       shared: Sequence[Path] = ()) -> None:
    """Make the directory (unborn ``HEAD``; call :func:`set_head` once the snapshot exists).

    ``shared``: object directories read after its own store and before the
    parent's (a shared snapshot's store, :mod:`sandbox.workspaces.snapshot`).
    """
    for sub in ("objects/info", f"{STORE}/pack", "refs/heads", "refs/tags", "info"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    write_alternates(path, common_dir=common_dir, shared=shared)
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


def write_alternates(path: Path, *, common_dir: Path, shared: Sequence[Path] = (),
                     moving_to: Path | None = None) -> None:
    """(Re)write ``objects/info/alternates``: its store, ``shared``, the parent's object dirs.

    ``moving_to``: where the directory is about to be renamed (its store's path there).
    """
    alternates = "".join(f"{directory}\n" for directory in
                         ((moving_to or path) / STORE, *shared, *object_dirs(common_dir)))
    (path / "objects" / "info" / "alternates").write_text(alternates)


def set_head(path: Path, commit: str) -> None:
    """Detach ``HEAD`` at the snapshot commit."""
    (path / "HEAD").write_text(f"{commit}\n")


def write_tree(*, git_dir: Path, private_git: Path, index: Path) -> str:
    """``write-tree`` of ``index`` into the store (blobs it names may live in the parent's)."""
    done = run_git(["write-tree", "--missing-ok"], git_dir=git_dir,
                   env=writing_env(private_git, index), operation="snapshot")
    return done.stdout.decode().strip()


def write_commit(*, git_dir: Path, private_git: Path, tree: str, parent: str | None) -> str:
    """The snapshot commit (fixed identity and date), written into the store.

    Byte for byte what ``commit-tree -m "corral snapshot"`` writes with
    :data:`sandbox.gitsafe.SNAPSHOT_IDENTITY`, but ``commit-tree`` must read the
    parent commit, which only the parent's store holds.
    """
    author = f"{SNAPSHOT_IDENTITY['GIT_AUTHOR_NAME']} <{SNAPSHOT_IDENTITY['GIT_AUTHOR_EMAIL']}>"
    committer = (f"{SNAPSHOT_IDENTITY['GIT_COMMITTER_NAME']} "
                 f"<{SNAPSHOT_IDENTITY['GIT_COMMITTER_EMAIL']}>")
    lines = [f"tree {tree}", *([f"parent {parent}"] if parent else []),
             f"author {author} 0 +0000", f"committer {committer} 0 +0000", "",
             "corral snapshot", ""]
    done = run_git(["hash-object", "-t", "commit", "-w", "--stdin"], git_dir=git_dir,
                   env=writing_env(private_git), input_bytes="\n".join(lines).encode(),
                   operation="snapshot")
    return done.stdout.decode().strip()


def _autocrlf(private_git: Path) -> bool:
    """``core.autocrlf`` as copied from the parent (the file is corral's own, verified)."""
    try:
        lines = (private_git / "config").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    for line in lines:
        key, _, value = line.strip().partition(" = ")
        if key == "autocrlf":
            return value.lower() == "input" or value.lower() in _TRUE
    return False


def _may_keep_crlf(attrs: dict[str, str], autocrlf: bool) -> bool:
    """Whether git's "safer autocrlf" rule may apply (git 2.39 ``convert_attrs``), erring
    on yes: ``text=auto`` (or the old ``crlf=auto``), or no text setting under autocrlf."""
    text, crlf = attrs.get("text", "unspecified"), attrs.get("crlf", "unspecified")
    if "auto" in (text, crlf):
        return True
    decided = {"set", "unset", "input"}
    return autocrlf and text not in decided and crlf not in decided


def _dirty_blobs(git_dir: Path, work_tree: Path, env: dict[str, str],
                 preload: bool) -> dict[str, str]:
    """Path -> index blob of every tracked regular file whose stat data changed (a few
    more than ``add`` will hash, e.g. under excluded paths, do no harm)."""
    options = [] if preload else ["-c", "core.preloadIndex=false"]
    raw = run_git([*options, "diff-files", "--raw", "-z", "--no-renames", "--ignore-submodules"],
                  git_dir=git_dir, work_tree=work_tree, env=env,
                  operation="stage_tree").stdout.split(b"\0")
    found: dict[str, str] = {}
    for header, path in zip(raw[0::2], raw[1::2], strict=False):
        fields = header[1:].decode().split(" ")
        if len(fields) == 5 and fields[0] in _REGULAR and fields[4] in ("M", "T"):
            found[path.decode("utf-8", "surrogateescape")] = fields[2]
    return found


def _attributes(git_dir: Path, work_tree: Path, env: dict[str, str],
                paths: Iterable[str]) -> dict[str, dict[str, str]]:
    listing = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
    out = run_git(["check-attr", "-z", "--stdin", "text", "crlf"], git_dir=git_dir,
                  work_tree=work_tree, env=env, input_bytes=listing,
                  operation="stage_tree").stdout.split(b"\0")
    found: dict[str, dict[str, str]] = {}
    for path, name, value in zip(out[0::3], out[1::3], out[2::3], strict=False):
        found.setdefault(path.decode("utf-8", "surrogateescape"), {})[name.decode()] = (
            value.decode("utf-8", "replace"))
    return found


def seed_index_blobs(*, git_dir: Path, work_tree: Path, private_git: Path, index: Path,
                     attributes: bool, preload: bool = True) -> int:
    """Copy into the store the index blobs ``add`` will read (see the module docstring).

    Those are the blobs of modified tracked files to which git's "safer
    autocrlf" rule may apply; nothing is done unless ``core.autocrlf`` is on or
    ``attributes`` says the tree has attribute files (``preload``: as for
    :func:`sandbox.workspaces.staging.stage_tree`). Returns how many were copied.
    """
    autocrlf = _autocrlf(private_git)
    if not (autocrlf or attributes):
        return 0
    env = reading_env(private_git, index)
    dirty = _dirty_blobs(git_dir, work_tree, env, preload)
    if not dirty:
        return 0
    attrs = _attributes(git_dir, work_tree, env, dirty)
    wanted = sorted({blob for path, blob in dirty.items()
                     if _may_keep_crlf(attrs.get(path, {}), autocrlf)})
    if not wanted:
        return 0
    pack = run_git(["pack-objects", "--stdout", "-q"], git_dir=git_dir, env=env,
                   input_bytes="".join(f"{blob}\n" for blob in wanted).encode(),
                   operation="stage_tree").stdout
    run_git(["unpack-objects", "-q"], git_dir=git_dir, env=writing_env(private_git),
            input_bytes=pack, operation="stage_tree")
    return len(wanted)


def _racy_blobs(listing: bytes, timestamp: int) -> set[str]:
    """Blobs of the entries of ``ls-files -s --debug -z`` whose mtime second is not before
    ``timestamp`` (git 2.39 without USE_NSEC compares seconds)."""
    found: set[str] = set()
    chunks = listing.split(b"\0")
    header = chunks[0]
    for chunk in chunks[1:]:
        lines = chunk.split(b"\n", 5)
        if len(lines) < 6:
            break
        mode, oid = header.split(b" ", 2)[:2]
        mtime = lines[1].strip().removeprefix(b"mtime: ").split(b":")[0]
        if mode in (b"100644", b"100755", b"120000") and int(mtime) >= timestamp:
            found.add(oid.decode())
        header = lines[5]
    return found


def seed_racy_blobs(*, git_dir: Path, work_tree: Path, private_git: Path, index: Path,
                    recorded_ns: int | None) -> int:
    """Copy into the store, as one pack, the blobs ``add`` will re-write as racily clean.

    An entry is racy when its recorded mtime is not in an earlier second than
    ``index``'s own mtime; ``recorded_ns`` is when the stat data in ``index``
    was recorded (the mtime of the index it was copied from; ``None``: unknown).
    When that is an earlier second, no entry can be racy and nothing runs.
    Returns how many blobs were copied.
    """
    if not index.exists():
        return 0  # no index yet (a repository without commits): nothing to re-write
    timestamp = index.stat().st_mtime_ns // 10**9
    if recorded_ns is not None and recorded_ns // 10**9 < timestamp:
        return 0
    env = reading_env(private_git, index)
    listing = run_git(["ls-files", "-s", "--debug", "-z"], git_dir=git_dir, work_tree=work_tree,
                      env=env, operation="stage_tree").stdout
    wanted = sorted(_racy_blobs(listing, timestamp))
    if wanted:
        run_git(["pack-objects", "-q", str(private_git / STORE / "pack" / "pack")],
                git_dir=git_dir, env=env, input_bytes="".join(f"{o}\n" for o in wanted).encode(),
                operation="stage_tree")
    return len(wanted)


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
            hint="something rewrote HEAD, config or objects/info/alternates (or created "
            "store/info/alternates); inspect the worktree, then discard it",
        )
