"""Trust once: ``corral trust [PATH]`` remembers that you read a project's definitions.

A project's own definitions (``.claude/agents``, ``.ngn``, ``zuno.json``, ...) are
untrusted by default: a repository you cloned must not choose what runs. Passing
``--trust-project`` on every command is friction, so ``corral trust`` records the
repository together with a digest of those definitions, in your state dir
(``trust.json``, outside every repository). Later commands load them as if
``--trust-project`` were given, **while the digest matches**: once a definition is
added, changed or removed (a ``git pull``), the trust lapses, a warning says so,
and ``corral trust`` asks again. ``corral untrust`` forgets it.

The digest covers every file project discovery would load (its relative path and
bytes; a symlink by its target, never followed), ``.ngn/config.json``, and every file
in the repository that config imports (an ``agent_imports`` path, directory or glob,
as the loader reads it); a file it imports from outside the repository is not part of
it (the import's entry is).

It covers what a trusted run executes besides definitions too: the repository's
environment (``.corral/``, whose ``environment.toml`` setup runs before every child and
check, every file of ``.devcontainer/``, and a Dockerfile either names elsewhere in the
repository). A change to one of them lapses the trust the same way, and the warning
names which part changed (:attr:`TrustState.changed`).
A trust store in a state dir a child could reach is never read (the state dir's
own check), so no child can trust itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from executor.errors import ExecutorError
from policies.loader.discovery import project_candidates
from sandbox.errors import SandboxError
from sandbox.state import check_state_dir, default_state_root

__all__ = ["PARTS", "TrustState", "project_digest", "trust", "trust_state", "untrust"]

_STORE = "trust.json"
Trust = Literal["trusted", "changed", "untrusted"]
#: What a trust covers, each part digested on its own so a lapse can name what changed.
PARTS = ("definitions", "environment")
#: The project's environment places, digested whole (every file below a directory).
_ENVIRONMENT_PLACES = (".corral", ".devcontainer")
#: At most this many files of an environment place are digested; past it the digest says
#: "more" (a change beyond it is not seen: such a place is not an environment's).
_MAX_FILES = 2000


@dataclass(frozen=True)
class TrustState:
    """Whether a repository's definitions are trusted: ``trusted`` (the digest matches),
    ``changed`` (trusted once, changed since), ``untrusted``; when it was trusted."""

    state: Trust
    trusted_at: str | None = None
    #: ``changed``: the parts (of :data:`PARTS`) that changed since; empty when the stored
    #: trust predates per-part digests (then only "something changed" is known).
    changed: tuple[str, ...] = ()


def _definition_files(root: Path) -> dict[str, Path]:
    found, _ = project_candidates(root)
    paths = {candidate.display: candidate.path for candidate in found}
    config = root / ".ngn" / "config.json"
    if config.exists() or config.is_symlink():
        paths[".ngn/config.json"] = config
        paths.update(_imported(config, root))
    return paths


def _environment_files(root: Path) -> dict[str, Path]:
    """Every file of the environment places (a symlink as itself, never followed), and a
    Dockerfile the environment names elsewhere in the repository."""
    found: dict[str, Path] = {}
    for place in _ENVIRONMENT_PLACES:
        top = root / place
        if top.is_symlink() or top.is_file():
            found[f"environment:{place}"] = top
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            here = Path(dirpath)
            names = sorted(filenames) + [d for d in dirnames if (here / d).is_symlink()]
            for name in names:
                if len(found) >= _MAX_FILES:
                    found["environment:more"] = root / place
                    return found
                found[f"environment:{(here / name).relative_to(root).as_posix()}"] = here / name
    dockerfile = _named_dockerfile(root)
    if dockerfile is not None:
        found.setdefault(f"environment:{dockerfile}", root / dockerfile)
    return found


def _named_dockerfile(root: Path) -> str | None:
    """The Dockerfile the repository's environment description names (read as a trusted
    run reads it), when it lies inside the repository; ``None`` when none or unreadable
    (an unreadable description is digested by its bytes all the same)."""
    from policies.environment import load_environment  # noqa: PLC0415 - only when described
    from policies.errors import PolicyError  # noqa: PLC0415

    try:
        spec, _ = load_environment(root, None, trust_project=True)
    except (PolicyError, OSError, ValueError):
        return None
    if spec is None or not spec.dockerfile:
        return None
    path = root / spec.dockerfile
    try:
        inside = path.resolve().is_relative_to(root)
    except OSError:
        return None
    return spec.dockerfile if inside else None


def _hash(paths: dict[str, Path]) -> str:
    digest = hashlib.sha256()
    for display in sorted(paths):
        path = paths[display]
        try:
            content = (b"symlink:" + str(path.readlink()).encode("utf-8", "surrogateescape")
                       if path.is_symlink() else path.read_bytes())
        except OSError as exc:
            content = f"unreadable:{exc.errno}".encode()
        digest.update(display.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def _digests(root: Path) -> tuple[str, dict[str, str]]:
    """The whole digest and each part's (:data:`PARTS`)."""
    root = root.resolve()
    parts = {"definitions": _definition_files(root), "environment": _environment_files(root)}
    whole = {display: path for files in parts.values() for display, path in files.items()}
    return _hash(whole), {name: _hash(files) for name, files in parts.items()}


def project_digest(root: Path) -> str:
    """The digest of what a trusted run of ``root`` executes of the project's own: its
    definition files and its environment's (see the module docstring)."""
    return _digests(root)[0]


def _imported(config: Path, root: Path) -> dict[str, Path]:
    """The files in ``root`` that the project's ngn JSON config imports (read by the loader
    itself, as a trusted run would read them): a change to one is a change of what runs."""
    from policies.contract import Scope  # noqa: PLC0415 - only with an ngn config
    from policies.loader.base import Options  # noqa: PLC0415
    from policies.loader.ngnjson import load_json_config  # noqa: PLC0415

    found: dict[str, Path] = {}
    for outcome in load_json_config(config, ".ngn/config.json", Scope.PROJECT, Options()):
        path = root / outcome.display
        try:
            inside = path.resolve().is_relative_to(root) and path.resolve().is_file()
        except OSError:
            continue
        if inside:
            found[f"import:{path.resolve().relative_to(root).as_posix()}"] = path.resolve()
    return found


def _store(state_root: Path | None, root: Path) -> Path | None:
    """The trust store, or ``None`` when its state dir is one a child could write."""
    state = state_root or default_state_root()
    try:
        check_state_dir(state, repositories=[root.resolve()])
    except SandboxError:
        return None
    return state / _STORE


def _read(store: Path | None) -> dict[str, dict[str, Any]]:
    if store is None or not store.is_file():
        return {}
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}  # an unreadable store trusts nothing
    return data if isinstance(data, dict) else {}


def trust_state(root: Path, *, state_root: Path | None = None) -> TrustState:
    """Whether ``root``'s definitions are trusted now (see the module docstring)."""
    entry = _read(_store(state_root, root)).get(str(root.resolve()))
    if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
        return TrustState("untrusted")
    when = str(entry.get("trusted_at", ""))
    whole, parts = _digests(root)
    if entry["digest"] != whole:
        stored = entry.get("parts")
        changed = (tuple(name for name in PARTS if stored.get(name) != parts[name])
                   if isinstance(stored, dict) else ())
        return TrustState("changed", when, changed)
    return TrustState("trusted", when)


def _write(store: Path, data: dict[str, dict[str, Any]]) -> None:
    store.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = store.with_name(f".{_STORE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(store)


def trust(root: Path, *, state_root: Path | None = None) -> str:
    """Trust ``root``'s definitions as they are now; their digest."""
    store = _store(state_root, root)
    if store is None:
        raise ExecutorError("the state dir lies where a child could write it: trust is not "
                            "kept there", code="state_dir_misplaced",
                            hint="set CORRAL_STATE_DIR outside every repository")
    data = _read(store)
    digest, parts = _digests(root)
    data[str(root.resolve())] = {"digest": digest, "parts": parts,
                                 "trusted_at": datetime.now(UTC).isoformat(timespec="seconds")}
    _write(store, data)
    return digest


def untrust(root: Path, *, state_root: Path | None = None) -> bool:
    """Forget ``root``'s trust; whether there was any."""
    store = _store(state_root, root)
    data = _read(store)
    if store is None or data.pop(str(root.resolve()), None) is None:
        return False
    _write(store, data)
    return True
