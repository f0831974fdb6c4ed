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
from typing import Literal

from executor.errors import ExecutorError
from policies.loader.discovery import project_candidates
from sandbox.errors import SandboxError
from sandbox.state import check_state_dir, default_state_root

__all__ = ["TrustState", "project_digest", "trust", "trust_state", "untrust"]

_STORE = "trust.json"
Trust = Literal["trusted", "changed", "untrusted"]


@dataclass(frozen=True)
class TrustState:
    """Whether a repository's definitions are trusted: ``trusted`` (the digest matches),
    ``changed`` (trusted once, changed since), ``untrusted``; when it was trusted."""

    state: Trust
    trusted_at: str | None = None


def project_digest(root: Path) -> str:
    """The digest of the project's own definition files under ``root``."""
    root = root.resolve()
    found, _ = project_candidates(root)
    paths = {candidate.display: candidate.path for candidate in found}
    config = root / ".ngn" / "config.json"
    if config.exists() or config.is_symlink():
        paths[".ngn/config.json"] = config
        paths.update(_imported(config, root))
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


def _read(store: Path | None) -> dict[str, dict[str, str]]:
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
    if entry["digest"] != project_digest(root):
        return TrustState("changed", when)
    return TrustState("trusted", when)


def _write(store: Path, data: dict[str, dict[str, str]]) -> None:
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
    digest = project_digest(root)
    data[str(root.resolve())] = {"digest": digest,
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
