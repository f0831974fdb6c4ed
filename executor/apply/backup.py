"""The backup an apply keeps, the restore that undoes a failed apply, and its proof.

Before anything is written, :meth:`Backup.create` saves every path the patch
reads or writes and every parent directory of those paths: whether it
existed, its kind, mode, bytes (a file) or target (a symlink), into
``<backup>/files/`` and ``manifest.json`` (with the checkout's index entries
for those paths and a :func:`fingerprint` of the checkout), each fsynced, with
the manifest's ``state`` set to ``applying``. On any failure,
:meth:`Backup.restore` puts every saved path back (it removes only what the
apply created: files it wrote and directories that are empty again, never a
tree), then verifies the fingerprint is the one taken before; a step that
fails is retried once, and a restore that cannot be verified raises
:class:`executor.apply.errors.RestoreFailed` naming the backup, which stays.

The fingerprint covers what the apply may change and what it must not: each
saved path (kind, mode, sha256 of its bytes or its target), the index file
(sha256), the refs (``for-each-ref`` and ``HEAD``), and the ignored files of
the checkout (collapsed ignored directories by their own metadata).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from executor.apply.checkout import Checkout
from executor.apply.errors import RestoreFailed
from executor.apply.steps import git, step
from policies.errors import CorralError

__all__ = ["INTERRUPTED", "Backup", "Saved", "backed_paths", "fingerprint"]

#: Manifest states of an apply that did not finish cleanly.
INTERRUPTED = frozenset({"applying", "restore_failed"})
_HASHED_IGNORED_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Saved:
    """One path as it was before the apply."""

    path: str
    kind: str  # absent | file | symlink | dir | other
    mode: int = 0
    size: int = 0
    sha256: str | None = None
    target: str | None = None
    blob: str | None = None  # the copy's name under files/


def backed_paths(touched: list[str]) -> list[str]:
    """The touched paths and every parent directory of them, shallowest first."""
    paths = set(touched)
    for path in touched:
        parts = path.split("/")
        paths.update("/".join(parts[:n]) for n in range(1, len(parts)))
    return sorted(paths, key=lambda p: (p.count("/"), p))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _describe(top: Path, rel: str) -> Saved:
    path = top / rel
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return Saved(rel, "absent")
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Saved(rel, "symlink", mode, target=str(path.readlink()))
    if stat.S_ISDIR(info.st_mode):
        return Saved(rel, "dir", mode)
    if stat.S_ISREG(info.st_mode):
        return Saved(rel, "file", mode, info.st_size, _sha256_file(path))
    return Saved(rel, "other", stat.S_IFMT(info.st_mode) | mode)


def _state_key(saved: Saved) -> str:
    if saved.kind == "file":
        return f"file {saved.mode:o} {saved.sha256}"
    if saved.kind == "symlink":
        return f"symlink {saved.target}"
    if saved.kind in ("dir", "other"):
        return f"{saved.kind} {saved.mode:o}"
    return "absent"


def _ignored(checkout: Checkout) -> str:
    done = git("ls-files --ignored", ["ls-files", "-z", "--others", "--ignored",
                                      "--exclude-standard", "--directory"],
               git_dir=checkout.git_dir, top=checkout.top)
    digest = hashlib.sha256()
    for raw in sorted(done.stdout.split(b"\0")):
        if not raw:
            continue
        rel = raw.decode("utf-8", "surrogateescape").rstrip("/")
        path = checkout.top / rel
        digest.update(raw + b"\0")
        try:
            info = path.lstat()
        except OSError:
            digest.update(b"gone\0")
            continue
        digest.update(f"{info.st_mode} {info.st_size}\0".encode())
        if stat.S_ISREG(info.st_mode) and info.st_size <= _HASHED_IGNORED_BYTES:
            digest.update(_sha256_file(path).encode())
        elif stat.S_ISLNK(info.st_mode):
            digest.update(str(path.readlink()).encode("utf-8", "surrogateescape"))
        else:
            digest.update(f"{info.st_ino} {info.st_mtime_ns}".encode())
    return digest.hexdigest()


def fingerprint(checkout: Checkout, paths: list[str]) -> dict[str, str]:
    """What must be identical after a failed apply (see the module docstring)."""
    step("fingerprint")
    out = {f"path {rel}": _state_key(_describe(checkout.top, rel)) for rel in paths}
    index = checkout.git_dir / "index"
    out["index"] = _sha256_file(index) if index.is_file() else "absent"
    refs = git("for-each-ref", ["for-each-ref", "--format=%(objectname) %(refname)"],
               git_dir=checkout.git_dir, top=checkout.top)
    head = checkout.git_dir / "HEAD"
    out["refs"] = hashlib.sha256(
        refs.stdout + b"\0" + (head.read_bytes() if head.is_file() else b"")).hexdigest()
    out["ignored"] = _ignored(checkout)
    return out


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


class Backup:
    """A saved copy of every path one apply may change (see the module docstring)."""

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.dir = directory
        self.manifest = manifest

    @property
    def saved(self) -> list[Saved]:
        """The saved paths, shallowest first."""
        return [Saved(**entry) for entry in self.manifest["entries"]]

    @property
    def state(self) -> str:
        """``applying``, ``applied``, ``conflicts``, ``restored``, ``restore_failed`` or
        ``saved`` (a copy taken before a recovery)."""
        return str(self.manifest["state"])

    @classmethod
    def load(cls, directory: Path) -> Backup:
        """A backup written earlier."""
        return cls(directory, json.loads((directory / "manifest.json").read_text("utf-8")))

    @classmethod
    def create(cls, parent: Path, checkout: Checkout, paths: list[str],
               before: dict[str, str], *, label: str, state: str = "applying") -> Backup:
        """Save ``paths`` of the checkout under a new directory of ``parent``; on any
        failure nothing is left behind (and nothing in the checkout was touched)."""
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory = parent / f"{label}-{secrets.token_hex(4)}"
        (directory / "files").mkdir(parents=True, mode=0o700)
        try:
            entries = []
            for number, rel in enumerate(paths):
                step(f"backup {rel}")
                saved = _describe(checkout.top, rel)
                if saved.kind == "file":
                    name = str(number)
                    shutil.copyfile(checkout.top / rel, directory / "files" / name,
                                    follow_symlinks=False)
                    with (directory / "files" / name).open("rb+") as handle:
                        os.fsync(handle.fileno())
                    copied = _sha256_file(directory / "files" / name)
                    if copied != saved.sha256:
                        raise OSError(f"{rel} changed while it was saved")
                    saved = Saved(**{**asdict(saved), "blob": name})
                entries.append(asdict(saved))
            index = git("ls-files -s", ["ls-files", "-s", "-z", "--",
                                        *(f":(literal){p}" for p in paths)],
                        git_dir=checkout.git_dir, top=checkout.top)
            manifest = {
                "version": 1, "label": label, "top": str(checkout.top),
                "git_dir": str(checkout.git_dir), "state": state, "entries": entries,
                "index_entries": [e for e in index.stdout.decode(
                    "utf-8", "surrogateescape").split("\0") if e],
                "fingerprint": before,
            }
            backup = cls(directory, manifest)
            step("backup manifest")
            backup._write_manifest()
            _fsync_dir(directory / "files")
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return backup

    def _write_manifest(self) -> None:
        tmp = self.dir / f".manifest-{secrets.token_hex(4)}.tmp"
        _write_synced(tmp, json.dumps(self.manifest, indent=1, ensure_ascii=True).encode())
        tmp.replace(self.dir / "manifest.json")
        _fsync_dir(self.dir)

    def mark(self, state: str) -> None:
        """Record how the apply ended."""
        step(f"manifest {state}")
        self.manifest["state"] = state
        self._write_manifest()

    # -- restore -----------------------------------------------------------------------

    def restore(self, checkout: Checkout, *, paths_only: bool = False) -> None:
        """Put every saved path back and verify the fingerprint (only the saved paths'
        part when ``paths_only``); retried once; raises :class:`RestoreFailed` (the
        backup stays) when it cannot be verified."""
        before: dict[str, str] = {
            key: value for key, value in self.manifest["fingerprint"].items()
            if not paths_only or key.startswith("path ")}
        errors: list[str] = []
        differ: list[str] = []
        for _attempt in range(2):
            errors = self._restore_once(checkout.top)
            try:
                step("verify restored")
                now = fingerprint(checkout, [s.path for s in self.saved])
            except (OSError, CorralError) as exc:
                errors.append(f"verification: {exc}")
                continue
            differ = [key for key in before if now.get(key) != before[key]]
            if not differ:
                with contextlib.suppress(OSError, CorralError):
                    self.mark("restored")  # verified: the checkout is whole either way
                return
        self.manifest["state"] = "restore_failed"
        try:
            self._write_manifest()
        except OSError as exc:
            errors.append(f"manifest: {exc}")
        raise RestoreFailed(
            "the failed apply could not be undone and verified",
            context={"differs": ", ".join(k.removeprefix("path ") for k in differ) or "unknown",
                     "errors": "; ".join(errors)[:800] or "none", "backup": self.dir},
            hint="your saved files are in the backup directory above; run `corral apply "
                 "--recover RUN` to put them back once the cause is fixed")

    def _restore_once(self, top: Path) -> list[str]:
        errors: list[str] = []
        saved = self.saved
        for entry in sorted(saved, key=lambda s: (-s.path.count("/"), s.path)):
            try:
                step(f"restore clear {entry.path}")
                self._clear(top, entry)
            except (OSError, CorralError) as exc:
                errors.append(f"{entry.path}: {exc}")
        for entry in saved:
            if entry.kind != "dir":
                continue
            try:
                step(f"restore dir {entry.path}")
                path = top / entry.path
                if not path.is_dir() or path.is_symlink():
                    path.mkdir(mode=0o700)
                if stat.S_IMODE(path.lstat().st_mode) != entry.mode:
                    path.chmod(entry.mode)
            except (OSError, CorralError) as exc:
                errors.append(f"{entry.path}: {exc}")
        for entry in saved:
            if entry.kind not in ("file", "symlink"):
                continue
            try:
                step(f"restore file {entry.path}")
                self._put_back(top, entry)
            except (OSError, CorralError) as exc:
                errors.append(f"{entry.path}: {exc}")
        return errors

    @staticmethod
    def _clear(top: Path, entry: Saved) -> None:
        """Remove what the apply put where ``entry`` was something else (or nothing)."""
        current = _describe(top, entry.path)
        if current.kind in ("absent", entry.kind):
            return
        path = top / entry.path
        if current.kind == "dir":
            path.rmdir()  # only an empty directory the apply made; never a tree
        elif current.kind in ("file", "symlink"):
            path.unlink()
        else:
            raise OSError(f"{entry.path} is now {current.kind}; not touched")

    def _put_back(self, top: Path, entry: Saved) -> None:
        current = _describe(top, entry.path)
        if _state_key(current) == _state_key(entry):
            return
        if current.kind == "dir":
            raise OSError(f"{entry.path} is a directory now")
        path = top / entry.path
        tmp = path.parent / f".corral-restore-{secrets.token_hex(4)}"
        try:
            if entry.kind == "symlink":
                tmp.symlink_to(entry.target or "")
            else:
                shutil.copyfile(self.dir / "files" / (entry.blob or ""), tmp)
                with tmp.open("rb+") as handle:
                    os.fsync(handle.fileno())
                tmp.chmod(entry.mode)
            tmp.replace(path)
        finally:
            if os.path.lexists(tmp):
                tmp.unlink()
