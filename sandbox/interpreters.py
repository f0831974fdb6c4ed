"""What a carried venv, conda env or ``node_modules`` runs from outside itself.

A venv made by pyenv, uv or a conda Python links its ``bin/python`` to an
interpreter in a prefix of its own (``~/.pyenv/versions/3.11.7``,
``~/.local/share/uv/python/cpython-3.12-linux-x86_64-gnu``), and Python finds its
standard library from ``pyvenv.cfg``'s ``home``. Carried into a sandbox
(:mod:`sandbox.environment`'s ``carry``) without that prefix, every command of
it fails with 127 (bubblewrap: not in the sandbox) or 126 (docker: ``Permission
denied`` under a directory the container's uid cannot enter).

:func:`find_carried` reads each carried path: a venv's ``pyvenv.cfg`` (``home``,
``executable``, ``base-executable``, ``base-prefix``) and its ``bin/python*``
links, a conda env's (``conda-meta/``) ``bin/`` links, and a ``node_modules``'
``.bin`` links and package links; each path they name outside the carried tree,
the repository and the system directories is followed, link by link, to the
installation it lies in. :func:`interpreter_mounts` binds each installation
read-only at its real path, and at each outside link that leads to it (uv's
``cpython-3.12-...`` is a link to ``cpython-3.12.8-...``).

Only an installation is bound, never a path as named: a directory holding
``lib/python3*/os.py`` (a Python prefix), ``conda-meta/`` (a conda prefix),
``info/index.json`` (a conda package) or, for a ``node_modules`` link, the package
(the nearest directory with a ``package.json``); never ``/``, nor a directory
holding your home, the repository or corral's state. ``pyvenv.cfg`` is a file of
the checkout (a repository may carry its venv), so what it names beyond that is
not shown to any child.

:func:`verify_interpreters` then runs each interpreter inside the new sandbox
(``python -I -S -c pass``: no ``site``, no ``.pth`` file of the venv runs), after
every mount, before any command of the child: one the sandbox cannot run (a
docker image with another libc, a loader it lacks, a library outside its prefix)
is ``interpreter_unrunnable`` (a :class:`sandbox.errors.SandboxConfigError`,
exit code 2) naming the interpreter, the ELF loader and glibc it needs, what the
sandbox has, and the setup-command alternative.
"""

from __future__ import annotations

import configparser
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sandbox.errors import SandboxConfigError
from sandbox.workspaces.model import Mount

if TYPE_CHECKING:
    from sandbox.protocol import Sandbox

__all__ = ["Carried", "elf_needs", "find_carried", "interpreter_mounts", "verify_interpreters"]

#: Directories a sandbox has of its own (bubblewrap binds the host's; a docker image has
#: its own): never bound from here, and the probe says whether the interpreter runs.
SYSTEM = tuple(Path("/", name) for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64",
                                             "libx32"))
#: How many entries of a ``bin/`` or ``.bin`` are looked at, at most.
_MAX_ENTRIES = 512
_MAX_LINKS = 40
_PROBE_TIMEOUT = 60.0
_CFG_PATHS = ("home", "executable", "base-executable", "base-prefix")
# Each interpreter given runs (no site, isolated); a node link must only lead somewhere.
# What failed is printed as "<index> <exit> <loader present: 1/0>" lines; the sandbox's
# glibc on the last line.
_PROBE = r"""i=0; bad=0
while [ $# -gt 0 ]; do
  kind=$1; path=$2; loader=$3; shift 3
  if [ "$kind" = node ]; then said=""; [ -e "$path" ]; rc=$?
  else said=$("$path" -I -S -c pass 2>&1 </dev/null); rc=$?; fi
  if [ "$rc" != 0 ]; then
    has=0; if [ -n "$loader" ] && [ -e "$loader" ]; then has=1; fi
    printf 'fail %s %s %s\n' "$i" "$rc" "$has"
    printf '%s\n' "$said" | head -c 400 | tr '\n' ' '; printf '\n'
    bad=1
  fi
  i=$((i+1))
done
printf 'glibc %s\n' "$(getconf GNU_LIBC_VERSION 2>/dev/null)"
[ "$bad" = 0 ] || exit 3
"""
Kind = Literal["venv", "conda", "node"]


@dataclass
class Carried:
    """One carried path's program from outside itself, and what it needs bound."""

    carried: str
    kind: Kind
    #: What runs, at its path inside the sandbox (the carried path's original path).
    program: Path
    #: The real file it is.
    real: Path
    #: Installations bound read-only at their real path.
    prefixes: list[Path] = field(default_factory=list)
    #: (link outside, the installation it leads to): bound there too.
    links: list[tuple[Path, Path]] = field(default_factory=list)
    #: Paths named but not bound, each with why.
    skipped: list[str] = field(default_factory=list)


def _walk(path: Path) -> tuple[Path, list[Path]]:
    """``path`` resolved component by component: (where it leads, each link followed)."""
    pending = list(path.parts[1:])
    current, links, follows = Path("/"), [], 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        candidate = current / name
        if candidate.is_symlink() and follows < _MAX_LINKS:
            follows += 1
            links.append(candidate)
            target = candidate.readlink()
            pending = [*(target.parts[1:] if target.is_absolute()
                         else (*current.parts[1:], *target.parts)), *pending]
            current = Path("/")
            continue
        current = candidate
    return current, links


def _inside(path: Path, roots: tuple[Path, ...] | list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _installation(real: Path, kind: Kind) -> Path | None:
    """The installation the real file or directory ``real`` lies in, or ``None``."""
    if kind == "node":
        for parent in (real, *real.parents):
            if parent != Path("/") and (parent / "package.json").is_file():
                return parent
        return None
    base = real if real.is_dir() else real.parent
    for prefix in (base.parent if base.name == "bin" else base, base):
        if (any(prefix.glob("lib/python[23]*/os.py")) or (prefix / "conda-meta").is_dir()
                or (prefix / "info" / "index.json").is_file()):
            return prefix
    return None


def _refusal(prefix: Path, guarded: tuple[Path, ...]) -> str | None:
    """Why ``prefix`` is never bound (``None``: it may be)."""
    if prefix == Path("/"):
        return "it is /"
    for path in guarded:
        if path == prefix or path.is_relative_to(prefix):
            return f"it holds {path}"
    return None


class _Finder:
    def __init__(self, repo: Path, guarded: tuple[Path, ...]) -> None:
        self.repo, self.guarded = repo, guarded

    def follow(self, found: Carried, named: Path, *, visible: tuple[Path, ...]) -> None:
        """Bind the installation ``named`` (a path outside ``visible``) leads to."""
        real, links = _walk(named)
        if _inside(real, (*visible, *SYSTEM)) or not os.path.lexists(real):
            return
        prefix = _installation(real, found.kind)
        if prefix is None:
            found.skipped.append(f"{named}: not in a Python, conda or node installation")
            return
        why = _refusal(prefix, self.guarded)
        if why is not None:
            found.skipped.append(f"{named}: its installation {prefix} is not shown ({why})")
            return
        if prefix not in found.prefixes:
            found.prefixes.append(prefix)
        for link in links:
            if _inside(link, (prefix, *visible, *SYSTEM)):
                continue
            lead = link.resolve()
            if _inside(lead, (prefix,)) and (link, lead) not in found.links:
                found.links.append((link, lead))

    def venv(self, rel: str, source: Path, kind: Kind) -> Carried | None:
        program = next((source / "bin" / name for name in ("python", "python3")
                        if os.path.lexists(source / "bin" / name)), None)
        if program is None:
            return None
        found = Carried(rel, kind, program, program.resolve())
        visible = (source.resolve(), source)
        if kind == "venv":
            cfg = configparser.ConfigParser(interpolation=None)
            try:
                cfg.read_string("[venv]\n" + (source / "pyvenv.cfg").read_text("utf-8", "replace"))
            except (OSError, configparser.Error) as exc:
                found.skipped.append(f"{source / 'pyvenv.cfg'}: unreadable ({exc})")
            else:
                for key in _CFG_PATHS:
                    value = cfg.get("venv", key, fallback="").strip()
                    if value and Path(value).is_absolute():
                        self.follow(found, Path(value), visible=visible)
        for entry in _entries(source / "bin"):
            if entry.is_symlink():
                self.follow(found, entry, visible=visible)
        return found

    def node(self, rel: str, source: Path) -> Carried | None:
        found: Carried | None = None
        visible = (self.repo, source.resolve())
        links = [e for e in _entries(source / ".bin") if e.is_symlink()]
        packages = [e for e in _entries(source) if e.is_symlink()]
        for scope in _entries(source):
            if scope.name.startswith("@") and scope.is_dir() and not scope.is_symlink():
                packages += [e for e in _entries(scope) if e.is_symlink()]
        for entry in (*links, *packages):
            real = entry.resolve()
            if _inside(real, (*visible, *SYSTEM)):
                continue
            if found is None:
                found = Carried(rel, "node", entry, real)
            self.follow(found, entry, visible=visible)
        return found


def _entries(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as listing:
            names = sorted(entry.name for entry in listing)
    except OSError:
        return []
    return [directory / name for name in names[:_MAX_ENTRIES]]


def find_carried(repo: Path, carry: tuple[str, ...], *, guarded: tuple[Path, ...] = (),
                 ) -> list[Carried]:
    """Each carried venv, conda env and ``node_modules`` (with a link outside) of ``repo``,
    with what its programs need from outside it (see the module docstring).
    ``guarded``: paths no bound installation may hold (corral's state)."""
    repo = repo.resolve()
    keep = (repo, Path.home().resolve(), *(p.resolve() for p in guarded))
    finder = _Finder(repo, keep)
    found: list[Carried] = []
    for rel in carry:
        source = repo / rel
        if not source.is_dir():
            continue
        item: Carried | None = None
        if (source / "pyvenv.cfg").is_file():
            item = finder.venv(rel, source, "venv")
        elif (source / "conda-meta").is_dir():
            item = finder.venv(rel, source, "conda")
        elif (source / ".bin").is_dir() or source.name == "node_modules":
            item = finder.node(rel, source)
        if item is not None:
            found.append(item)
    return found


def _outside(item: Carried) -> bool:
    """Whether ``item`` runs anything but what its own tree and the system directories hold."""
    return bool(item.prefixes or item.links or item.skipped) or not _inside(
        item.real, (*SYSTEM, item.program.parent.parent.resolve()))


def interpreter_mounts(found: list[Carried], *, visible: tuple[Path, ...] = ()) -> list[Mount]:
    """Read-only binds of each installation (its real path, and each outside link to it),
    but for those already inside ``visible`` (the workspace of a checkout child)."""
    mounts: dict[Path, Mount] = {}
    for item in found:
        for prefix in item.prefixes:
            if not _inside(prefix, visible):
                mounts.setdefault(prefix, Mount(prefix, False))
        for link, lead in item.links:
            if not _inside(link, visible):
                mounts.setdefault(link, Mount(link, False, lead))
    return list(mounts.values())


def elf_needs(path: Path) -> tuple[str | None, str | None]:
    """(the ELF loader ``path`` names, the newest ``GLIBC_x.y`` it needs): ``None`` each
    where it is not a 64-bit little-endian ELF or names none."""
    try:
        data = path.read_bytes()
    except OSError:
        return None, None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None, None
    try:
        return _elf_loader(data), _elf_glibc(data)
    except (struct.error, IndexError, ValueError):
        return None, None


def _elf_loader(data: bytes) -> str | None:
    phoff, = struct.unpack_from("<Q", data, 0x20)
    size, count = struct.unpack_from("<HH", data, 0x36)
    for index in range(count):
        kind, = struct.unpack_from("<I", data, phoff + index * size)
        if kind == 3:  # PT_INTERP
            offset, = struct.unpack_from("<Q", data, phoff + index * size + 8)
            length, = struct.unpack_from("<Q", data, phoff + index * size + 0x20)
            return data[offset:offset + length].rstrip(b"\0").decode("utf-8", "replace")
    return None


def _elf_glibc(data: bytes) -> str | None:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQII", data, shoff + i * size) for i in range(count)]
    best: tuple[int, ...] | None = None
    for _name, kind, _flags, _addr, offset, _size, link, _info in sections:
        if kind != 0x6FFFFFFE:  # SHT_GNU_verneed
            continue
        strings = sections[link][4]
        entry = offset
        while True:
            _version, aux_count, _file, aux, following = struct.unpack_from("<HHIII", data, entry)
            at = entry + aux
            for _ in range(aux_count):
                _hash, _flags2, _other, name, after = struct.unpack_from("<IHHII", data, at)
                end = data.index(b"\0", strings + name)
                text = data[strings + name:end].decode("ascii", "replace")
                match = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", text)
                if match:
                    version = tuple(int(p) for p in match.group(1).split("."))
                    best = version if best is None or version > best else best
                at += after
                if not after:
                    break
            if not following:
                break
            entry += following
    return None if best is None else ".".join(map(str, best))


def verify_interpreters(sandbox: Sandbox, found: list[Carried], *, backend: str,
                        image: str | None = None) -> None:
    """Run each of ``found``'s programs inside ``sandbox`` (see the module docstring);
    ``interpreter_unrunnable`` for the first the sandbox cannot run. On bubblewrap, whose
    system directories are this machine's, an interpreter there is not asked; a docker
    image has its own, so there each is."""
    found = [item for item in found if backend == "docker" or _outside(item)]
    if not found:
        return
    argv = ["sh", "-c", _PROBE, "corral-interpreter-probe"]
    for item in found:
        loader = elf_needs(item.real)[0] if item.kind != "node" else None
        argv += [item.kind, str(item.program), loader or ""]
    done = sandbox.exec(argv, timeout=_PROBE_TIMEOUT, output_cap=64 * 1024)
    if done.ok:
        return
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    glibc = next((line[6:].strip() for line in lines if line.startswith("glibc ")), "")
    failures = [(i, line.split()) for i, line in enumerate(lines) if line.startswith("fail ")]
    if not failures:
        index, rc, has, said = 0, str(done.exit_code), "?", "the probe did not finish"
    else:
        at, (_, number, rc, has) = failures[0]
        index, said = int(number), lines[at + 1].strip() if at + 1 < len(lines) else ""
    raise _unrunnable(found[min(index, len(found) - 1)], rc=rc, loader_present=has,
                      said=said, glibc=glibc, backend=backend, image=image)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _unrunnable(item: Carried, *, rc: str, loader_present: str, said: str, glibc: str,
                backend: str, image: str | None) -> SandboxConfigError:
    where = f"the docker image {image}" if backend == "docker" and image else backend
    loader, needs = elf_needs(item.real) if item.kind != "node" else (None, None)
    why = [f"exit {rc}" + (f": {said[:300]}" if said else "")]
    if loader:
        why.append(f"it names the ELF loader {loader}"
                   + (", which the sandbox lacks" if loader_present == "0" else ""))
    has = glibc.removeprefix("glibc ").strip()
    if needs and has and _version(needs) > _version(has):
        why.append(f"it needs glibc {needs}, the sandbox has only {has}")
    elif needs and not has:
        why.append(f"it needs glibc {needs}, the sandbox has none (another libc)")
    why += item.skipped
    bound = ", ".join(str(p) for p in item.prefixes) or "nothing"
    if item.kind == "node":
        alternative = ('install the packages inside the sandbox with a setup command '
                       '(setup = ["npm ci"], setup_network = true) in place of carry')
    else:
        alternative = ('make the environment inside the sandbox with a setup command '
                       '(setup = ["python3 -m venv .venv", ".venv/bin/pip install -r '
                       'requirements.txt"], setup_network = true) in place of carry')
    if backend == "docker":
        alternative += ", or give an image that has this interpreter (image or dockerfile)"
    else:
        alternative += ", or give what it needs as ro_paths in your [environment]"
    return SandboxConfigError(
        f"the carried {item.carried} cannot run in {where}: its {item.program} "
        f"({item.real}) does not start there ({'; '.join(why)})",
        code="interpreter_unrunnable", operation="open_sandbox",
        context={"carried": item.carried, "interpreter": item.real,
                 "bound": bound, "backend": backend},
        hint=f"nothing ran; {alternative}")
