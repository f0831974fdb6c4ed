"""Programs a child's contract denies whole, made unreachable where they would run.

A deny pattern on arguments (``Bash(git push:*)``) can only be a policy: the shell
reader (:mod:`policies.shellwords`) decides it before the call, and fails closed. A
deny pattern on a whole program (``Bash(rm:*)``, ``Bash(curl)``) is also a boundary:
inside the child's sandbox the program's file is covered by a read-only stand-in, a
two-line script that says the program is denied and exits 126. Whatever spelling
reaches it (``env -S``, ``script -c``, a heredoc fed to a shell, a ``BASH_FUNC_``
function, ``hash -p``, ``PS4``, ``xargs``, ``find -exec``, ``/bin/rm``, a symlink
to it), what runs is the stand-in; copying the file copies the stand-in.

Covered: every name of the program in the sandbox's ``PATH`` directories, the file
they resolve to (symlinks followed: ``/bin`` to ``/usr/bin``, Debian's alternatives),
and on bubblewrap every hard link to that file in those directories. Not covered (the
documented limit): another copy of the same code elsewhere (git's
``/usr/lib/git-core/git``, a busybox applet), a program the child writes or builds
itself, and an interpreter doing the same work (``python3 -c 'import os; ...'``).
The programs corral itself runs in every sandbox (:data:`PROTECTED`: the shell each
command line runs in, the supervisor's ``python3``, docker's keep-alive ``sleep``)
cannot be removed: a deny of one of them stays a policy, and says so.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox.base import SANDBOX_PATH

__all__ = ["PROTECTED", "Denial", "denial_covers", "host_denials", "image_denials"]

#: What corral runs inside every sandbox: never covered (see the module docstring).
PROTECTED = ("sh", "python3", "sleep")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
_DIRS = tuple(SANDBOX_PATH.split(":"))
_HOPS = 16


@dataclass(frozen=True)
class Denial:
    """Where one denied program is covered in a sandbox (``targets``), or why it is not."""

    name: str
    pattern: str
    targets: tuple[str, ...] = ()
    #: Why the program stays reachable (a policy only): it is one corral runs itself.
    kept: str | None = None


def _checked(denied: Mapping[str, str]) -> dict[str, str]:
    """``denied`` without a name that could not be a file name in ``PATH`` (never trusted:
    it is written into a script)."""
    return {name: pattern for name, pattern in denied.items() if _NAME.fullmatch(name)}


def host_denials(denied: Mapping[str, str]) -> list[Denial]:
    """Each denied program's files on this machine's ``/usr`` (bubblewrap binds it)."""
    if not denied:
        return []  # nearly every sandbox: not one look at the file system
    dirs: list[str] = []
    for directory in _DIRS:
        resolved = os.path.realpath(directory)
        if Path(resolved).is_dir() and resolved not in dirs:
            dirs.append(resolved)

    def is_file(path: str) -> bool:
        return Path(path).is_file()

    protected = {os.path.realpath(found) for name in PROTECTED
                 if (found := _first(dirs, name, is_file)) is not None}
    out = []
    for name, pattern in _checked(denied).items():
        files = {os.path.realpath(path) for directory in dirs
                 if is_file(path := posixpath.join(directory, name))}
        out.append(_denial(name, pattern, files | _hard_links(files, dirs), protected))
    return out


def _first(dirs: list[str], name: str, exists: Callable[[str], bool]) -> str | None:
    return next((path for d in dirs if exists(path := posixpath.join(d, name))), None)


def _hard_links(files: set[str], dirs: list[str]) -> set[str]:
    """Other names, in ``dirs``, of the files of ``files`` that have more than one."""
    wanted = set()
    for path in files:
        info = Path(path).stat()
        if info.st_nlink > 1:
            wanted.add((info.st_dev, info.st_ino))
    found: set[str] = set()
    for directory in dirs if wanted else ():
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) in wanted:
                        found.add(entry.path)
        except OSError:
            continue
    return found


def _denial(name: str, pattern: str, targets: set[str], protected: set[str]) -> Denial:
    shared = sorted(targets & protected)
    if shared:
        return Denial(name, pattern, kept=f"{shared[0]} is what corral itself runs in every "
                      "sandbox (sh, python3, sleep): the deny is a policy only")
    return Denial(name, pattern, tuple(sorted(targets)))


#: A path's type in an image: ``None`` absent, else (is a symlink, its target, is a file).
ImageStat = Callable[[str], "tuple[bool, str, bool] | None"]


def image_denials(denied: Mapping[str, str], image_stat: ImageStat) -> list[Denial]:
    """Each denied program's files in a docker image, asked of ``image_stat`` (the engine's
    archive ``HEAD``, which follows symlinks but the last component's)."""
    if not denied:
        return []  # nothing to ask the engine (nor a container to create to ask it)
    resolve = _Resolver(image_stat)
    dirs: list[str] = []
    for directory in _DIRS:
        resolved = resolve(directory, want_dir=True)
        if resolved is not None and resolved not in dirs:
            dirs.append(resolved)

    def is_file(path: str) -> bool:
        return resolve(path) is not None

    protected = {resolved for name in PROTECTED
                 if (found := _first(dirs, name, is_file)) is not None
                 if (resolved := resolve(found)) is not None}
    out = []
    for name, pattern in _checked(denied).items():
        files = {found for directory in dirs
                 if (found := resolve(posixpath.join(directory, name))) is not None}
        out.append(_denial(name, pattern, files, protected))
    return out


class _Resolver:
    """An image path's real path (symlinks resolved, component by component), through
    ``image_stat``; ``None`` when it is absent or not of the wanted type."""

    def __init__(self, image_stat: ImageStat) -> None:
        self.image_stat = image_stat
        self.dirs: dict[str, str | None] = {"/": "/"}

    def __call__(self, path: str, *, want_dir: bool = False, hops: int = 0) -> str | None:
        path = posixpath.normpath(path)
        if hops > _HOPS or not path.startswith("/"):
            return None
        if path == "/":
            return "/" if want_dir else None
        parent, leaf = posixpath.split(path)
        real_parent = self._dir(parent, hops)
        if real_parent is None:
            return None
        here = posixpath.join(real_parent, leaf)
        found = self.image_stat(here)
        if found is None:
            return None
        link, target, is_file = found
        if link:
            return self(posixpath.join(real_parent, target), want_dir=want_dir, hops=hops + 1)
        if want_dir:
            return None if is_file else here
        return here if is_file else None

    def _dir(self, path: str, hops: int) -> str | None:
        if path not in self.dirs:
            self.dirs[path] = self(path, want_dir=True, hops=hops + 1)
        return self.dirs[path]


_STAND_IN = """#!/bin/sh
echo "corral: {name} is denied to this agent by its contract: it does not run here" >&2
exit 126
"""


def denial_covers(denials: list[Denial], under: Path) -> list[tuple[str, Path]]:
    """(path to cover, the stand-in bound read-only over it) for every target of
    ``denials``; the stand-ins are written under ``under`` (the sandbox's private state)."""
    pairs = []
    for denial in denials:
        if not denial.targets:
            continue
        under.mkdir(mode=0o755, parents=True, exist_ok=True)
        script = under / denial.name
        script.write_text(_STAND_IN.format(name=denial.name), encoding="ascii")
        script.chmod(0o755)
        pairs += [(target, script) for target in denial.targets]
    return pairs
