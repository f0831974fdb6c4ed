"""Where a sandbox keeps its state, so a crash leaves something :func:`sandbox.gc.gc` can clean.

Layout under the state root (default ``$CORRAL_STATE_DIR``, else
``$XDG_STATE_HOME/corral``, else ``~/.local/state/corral``)::

    sandboxes/<id>/meta.json        what exists (repo, worktree, container, cgroup, owner)
    sandboxes/<id>/*.index          private git indexes (never visible to the child)
    sandboxes/<id>/git/             the child's private git dir (read-only to the child):
                                    alternates to its own store and the parent's objects
    sandboxes/<id>/git/store/       the only object dir a git that WRITES objects sees
                                    (snapshot and diff objects; no alternates, so the
                                    parent's objects are never freshened)
    sandboxes/<id>/tree.manifest    workspace-write: the lstat manifest of the checkout at
                                    the start (changes no diff can show)
    sandboxes/<id>/stand-ins/       docker: 0755 stand-ins for image directories above a
                                    mount that the command's uid could not traverse
    sandboxes/<id>/home, tmp/       the host backend's HOME and TMPDIR
    sandboxes/<id>/overlay/upper, work/   an overlay workspace's layers (what the child wrote)
    worktrees/<id>/                 the child's worktree (worktree mode), or the mountpoint
                                    of its overlay over a shared snapshot's checkout
    snapshots/<id>/                 shared snapshots and their leases
                                    (:mod:`sandbox.workspaces.snapshot`)
    results/<id>/diff.patch         the captured diff, written before anything is removed
    results/<id>/diff.json          its structured description

The worktree lives outside the repository's working tree (so it never shows in
``git status``) and outside its git directory, which corral never writes.
The state root and the ``sandboxes``, ``worktrees`` and ``results``
directories are ``0700`` (tightened if they already existed), and so is each
sandbox's own directory and worktree: no other local user reaches a child's
files, patches or private git state while it runs or after. A container
sees its worktree through a bind mount, so these modes do not get in its way.

``meta.json``'s ``status`` says whether the stored result is the latest:
``captured`` only right after a collection, ``active`` again as soon as the
child may have changed something, so gc knows when to capture once more.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import psutil
from pydantic import BaseModel, ConfigDict

from policies.contract import SandboxMode
from sandbox.errors import SandboxConfigError
from sandbox.results import DiffResult

__all__ = [
    "PrivateDirUnsafe",
    "SandboxMeta",
    "SandboxState",
    "SandboxStatus",
    "StateDirMisplaced",
    "atomic_write",
    "check_state_dir",
    "default_state_root",
    "new_sandbox_id",
    "owner_alive",
    "owner_token",
    "private_dir",
    "private_problem",
]


def default_state_root(env: Mapping[str, str] | None = None) -> Path:
    """The state dir: ``$CORRAL_STATE_DIR``, else ``$XDG_STATE_HOME/corral``, else
    ``~/.local/state/corral`` (``env`` defaults to ``os.environ``).

    The one place that says where corral keeps state: sandboxes, worktrees,
    results and the runs ledger (``runs/``) all live under it. A relative
    ``XDG_STATE_HOME`` is ignored, as the XDG specification says; a relative
    ``CORRAL_STATE_DIR`` is taken from the current directory. Before use, a
    caller checks the place with :func:`check_state_dir`.
    """
    env = os.environ if env is None else env
    explicit = env.get("CORRAL_STATE_DIR")
    if explicit:
        return _absolute(Path(explicit))
    xdg = env.get("XDG_STATE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "corral"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state" / "corral"


class StateDirMisplaced(SandboxConfigError):
    """The state dir lies where a child could write it (see :func:`check_state_dir`)."""

    code = "state_dir_misplaced"


_FIX = ("corral keeps its state in $CORRAL_STATE_DIR, else $XDG_STATE_HOME/corral, else "
        "~/.local/state/corral: set CORRAL_STATE_DIR (or XDG_STATE_HOME) to a directory "
        "outside every git repository and every workspace a child may write")


def _absolute(path: Path) -> Path:
    """``path`` made absolute, ``..`` folded as written (no symlink resolved)."""
    return Path(os.path.normpath(path.absolute()))


def _is_git_dir(path: Path) -> bool:
    """Whether ``path`` looks like a git directory (a bare repository or a ``.git``)."""
    return ((path / "HEAD").is_file() and (path / "objects").is_dir()
            and (path / "refs").is_dir())


def _spellings(path: Path) -> list[Path]:
    """``path`` absolute as written, and with every symlink resolved (deduplicated)."""
    return list(dict.fromkeys([_absolute(path), Path(os.path.realpath(path))]))


def check_state_dir(path: Path, *, repositories: Iterable[Path] = (),
                    workspaces: Iterable[Path] = ()) -> None:
    """Refuse a state dir (or a ledger inside one) that a child could reach.

    Refused (:class:`StateDirMisplaced`, a user error) when the state dir, as
    written or with its symlinks resolved, lies inside

    * one of ``repositories`` (the repository being run on: its working tree, or
      its git dirs), whatever git says about the path (ignored or not);
    * one of ``workspaces``, the directories a child may write;
    * any git working tree: a directory on the way up with a ``.git`` entry of any
      kind (directory, ``gitdir:`` file, symlink), found on the filesystem, not by
      asking git, which a ``.gitignore`` or a ceiling would silence;
    * any git directory (a bare repository, or inside a ``.git``).

    Both spellings count: a symlink on the way that lies in a working tree is a
    symlink a child could replace. A working tree *inside* the state dir (the
    worktrees corral makes) is fine. Nothing is created or changed.
    """
    spellings = _spellings(path)
    places: list[tuple[str, Path]] = [("the repository being run on", p)
                                      for p in repositories]
    places += [("a workspace a child may write", p) for p in workspaces]
    for what, place in places:
        for inner in _spellings(place):
            if any(s == inner or s.is_relative_to(inner) for s in spellings):
                raise _misplaced(path, what, inner)
    for spelling in spellings:
        for directory in (spelling, *spelling.parents):
            if os.path.lexists(directory / ".git"):
                raise _misplaced(path, "the git working tree", directory)
            if _is_git_dir(directory):
                raise _misplaced(path, "the git directory", directory)


def _misplaced(path: Path, what: str, place: Path) -> StateDirMisplaced:
    resolved = Path(os.path.realpath(path))
    context = {"state dir": str(path), "inside": str(place)}
    if resolved != _absolute(path):
        context["resolved"] = str(resolved)
    return StateDirMisplaced(
        f"corral's state dir {path} lies inside {what} {place}: a child working there "
        "could rewrite other runs' diffs and read their transcripts",
        operation="check_state_dir", context=context, hint=_FIX,
    )


def new_sandbox_id() -> str:
    """A fresh id; also names the worktree, the container and the cgroup."""
    return f"corral-{secrets.token_hex(6)}"


def owner_token() -> tuple[str, int, float]:
    """(host, pid, process start time) of this process: who owns a sandbox."""
    return socket.gethostname(), os.getpid(), psutil.Process().create_time()


def owner_alive(host: str, pid: int | None, started: float | None) -> bool:
    """Whether the process that owns a sandbox still runs (a reused pid does not count)."""
    if pid is None or started is None:
        return False
    if host != socket.gethostname():
        return True  # cannot tell from here: assume in use
    try:
        return abs(psutil.Process(pid).create_time() - started) < 0.01
    except psutil.Error:
        return False


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


SandboxStatus = Literal["creating", "active", "captured"]
_PRIVATE = 0o700


class PrivateDirUnsafe(SandboxConfigError):
    """A directory corral keeps private is not: another user's, a symlink, or open to others
    (see :func:`private_dir` with ``verify``)."""

    code = "private_dir_unsafe"


def private_problem(path: Path) -> str | None:
    """Why ``path`` is not a directory only this process's user can reach (``None``: it is),
    read with ``os.lstat``: a symlink, not a directory, another owner than our euid, or any
    group or other permission bit."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "it does not exist"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if info.st_uid != os.geteuid():
        return f"it is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
    if info.st_mode & 0o077:
        return (f"its mode is {stat.S_IMODE(info.st_mode):04o}: other users may reach it "
                "(it must be 0700)")
    return None


def private_dir(path: Path, *, parents: bool = False, verify: bool = False,
                hint: str | None = None) -> None:
    """Make ``path`` (or keep it) a directory only its owner can reach.

    By default an existing directory is tightened to ``0700``. With ``verify`` (a place other
    users may have made first, such as the temp dir) nothing is tightened or followed:
    ``path`` is made ``0700`` if it is missing, then checked with ``os.lstat`` on every call
    (:func:`private_problem`), and refused (:class:`PrivateDirUnsafe`, naming the path, what
    is wrong and ``hint``) unless it is a directory of this user's, no symlink, with no
    group or other bits.
    """
    if not verify:
        path.mkdir(mode=_PRIVATE, parents=parents, exist_ok=True)
        if path.stat().st_mode & 0o077:
            path.chmod(_PRIVATE)
        return
    if parents:
        path.parent.mkdir(mode=_PRIVATE, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # what is there is checked, never followed
        path.mkdir(mode=_PRIVATE)
    problem = private_problem(path)
    if problem is not None:
        raise PrivateDirUnsafe(
            f"corral's private directory {path} is not safe to use: {problem}",
            operation="private_dir", context={"path": str(path), "problem": problem},
            hint=hint or f"remove {path} if it is not yours (another user may have made it "
                         "to read or change what corral keeps there), then run again")


class SandboxMeta(BaseModel):
    """What one sandbox created, written before each thing is created."""

    model_config = ConfigDict(extra="forbid")

    id: str
    backend: str
    mode: SandboxMode
    repo_top: Path
    git_dir: Path
    common_dir: Path
    workspace: Path
    worktree: Path | None = None
    private_git: Path | None = None
    git_files: dict[str, str] = {}
    base_commit: str | None = None
    worktree_owner: tuple[int, int] | None = None
    container: str | None = None
    docker_base_url: str | None = None
    cgroup: Path | None = None
    #: The sandbox's own memory cgroup (cgroup v1; on v2 the memory cap is on ``cgroup``).
    memory_cgroup: Path | None = None
    #: ``checkout``, ``worktree`` or ``overlay`` (``None``: written before kinds existed).
    workspace_kind: str | None = None
    #: Why a worktree was made where an overlay was wanted.
    workspace_fallback: str | None = None
    #: The shared snapshot the workspace starts from, and this sandbox's lease on it.
    snapshot_id: str | None = None
    snapshot_lease: str | None = None
    #: An overlay's layers: lower (the snapshot checkout), upper, work; merged = worktree.
    overlay_lower: Path | None = None
    overlay_upper: Path | None = None
    overlay_work: Path | None = None
    #: Layers under the snapshot checkout (an environment's); gc mounts those still there.
    overlay_below: tuple[Path, ...] = ()
    #: A read-only child's throwaway layer (:mod:`sandbox.workspaces.scratch`): its
    #: tmpfs, at ``worktrees/<id>``; gc unmounts what a crash left.
    scratch: Path | None = None
    #: The environment this sandbox runs in (:mod:`sandbox.environment`), by key.
    environment: str | None = None
    #: Object dirs the private git borrows from (the snapshot's store).
    shared_objects: tuple[Path, ...] = ()
    #: Whether the snapshot holds ``.gitattributes`` files.
    attributes: bool = False
    #: Nothing in it is anyone's work (a replay for a check or a reviewer): gc removes it
    #: without capturing a diff.
    disposable: bool = False
    owner_host: str = ""
    owner_pid: int | None = None
    owner_started: float | None = None
    created_at: float = 0.0
    status: SandboxStatus = "creating"


class SandboxState:
    """The on-disk state of one sandbox."""

    def __init__(self, root: Path, sandbox_id: str) -> None:
        self.root = root
        self.id = sandbox_id
        self.dir = root / "sandboxes" / sandbox_id
        self.worktree = root / "worktrees" / sandbox_id
        self.results = root / "results" / sandbox_id
        self.meta_path = self.dir / "meta.json"

    @property
    def private_git(self) -> Path:
        """The child's private git directory (see :mod:`sandbox.workspaces.privategit`)."""
        return self.dir / "git"

    @property
    def patch_path(self) -> Path:
        """The captured diff."""
        return self.results / "diff.patch"

    @property
    def result_path(self) -> Path:
        """The captured diff's JSON description."""
        return self.results / "diff.json"

    def create(self) -> None:
        """Make the directories (``0700``: private to the user)."""
        private_dir(self.root, parents=True)
        for name in ("sandboxes", "worktrees", "results"):
            private_dir(self.root / name)
        self.dir.mkdir(mode=_PRIVATE)

    def write_meta(self, meta: SandboxMeta) -> None:
        """Persist ``meta`` atomically."""
        atomic_write(self.meta_path, meta.model_dump_json(indent=2).encode())

    def read_meta(self) -> SandboxMeta:
        """Load the persisted meta."""
        return SandboxMeta.model_validate_json(self.meta_path.read_bytes())

    def new_meta(self, **fields: object) -> SandboxMeta:
        """A meta owned by this process."""
        host, pid, started = owner_token()
        return SandboxMeta.model_validate({
            "id": self.id, "owner_host": host, "owner_pid": pid, "owner_started": started,
            "created_at": time.time(), **fields,
        })

    def make_results_dir(self) -> Path:
        """``results/<id>`` (``0700``), made if needed."""
        private_dir(self.results, parents=True)
        return self.results

    def save_result(self, result: DiffResult) -> DiffResult:
        """Persist a captured diff (patch, then JSON); return it with ``patch_path`` set."""
        self.make_results_dir()
        atomic_write(self.patch_path, result.patch)
        saved = result.model_copy(update={"patch_path": self.patch_path})
        self.save_description(saved)
        return saved

    def save_description(self, result: DiffResult) -> None:
        """Persist the JSON description of a result (never its patch bytes)."""
        description = result.model_dump(mode="json", exclude={"patch"})
        atomic_write(self.result_path, json.dumps(description, indent=2).encode())

    def has_result(self) -> bool:
        """Whether a captured diff was saved (without reading it)."""
        return self.result_path.is_file() and self.patch_path.is_file()

    def load_result(self) -> DiffResult | None:
        """The captured diff, if one was saved."""
        if not (self.result_path.is_file() and self.patch_path.is_file()):
            return None
        data = json.loads(self.result_path.read_bytes())
        return DiffResult.model_validate({**data, "patch": self.patch_path.read_bytes()})

    def remove_private(self) -> None:
        """Remove ``sandboxes/<id>`` (indexes, objects, meta); results are kept."""
        shutil.rmtree(self.dir, ignore_errors=True)
