"""pi's model roles from ``~/.pi/agent/settings.json`` (``$PI_CODING_AGENT_DIR``).

pi-subagent-format.md: "`model`/`models` entries may reference *roles* instead
of concrete models: `"@fast"`, `"@coder"`, `"@smart"`, or any role defined
under `subagent.roles` in `~/.pi/agent/settings.json`. A role expands to an
ordered fallback chain (string with commas, or array)."

The file is personal (trusted, like ``~/.pi/agent/agents``) and read only for
``subagent.roles``; every other key belongs to pi. A role's chain is a
comma-separated string or an array of model strings (``provider/model``,
another ``@role``, ``:level`` suffixes), its name with or without the ``@``.
A file that cannot be read, or a ``subagent.roles`` that is not such a map, is
a warning naming the file and the key, and no role of it is used (a pi agent
naming one then fails before its run: an undefined role is never a silent
swap to the parent's model). The pi adapter copies the chains its routes name
into the contract (:attr:`policies.contract.ModelRoute.roles`); the user's
corral config ``[roles]`` wins over them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.discovery import Environment
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.common import json_document, key_line

__all__ = ["SETTINGS_FILE", "read_pi_roles"]

SETTINGS_FILE = "settings.json"
_ROLE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def read_pi_roles(env: Environment) -> tuple[dict[str, tuple[str, ...]], list[Diagnostic]]:
    """The ``subagent.roles`` of pi's settings file (empty when there is none), and the
    warnings about it."""
    path = env.pi_dir / SETTINGS_FILE
    if not (path.exists() or path.is_symlink()):
        return {}, []
    display = env.display(path)
    try:
        text = decode_text(read_bounded(path))
        document = json_document(text)
    except DefinitionRejected as exc:
        return {}, [_warn(display, exc.line or 1, "file", f"{exc.reason}; its subagent.roles "
                          "are not used")]
    if not isinstance(document, dict):
        return {}, [_warn(display, 1, "file", "not a JSON object; its subagent.roles are not "
                          "used")]
    subagent = document.get("subagent")
    roles: Any = subagent.get("roles") if isinstance(subagent, dict) else None
    if roles is None:
        return {}, []
    line = key_line(text, "roles")
    if not isinstance(roles, dict):
        return {}, [_warn(display, line, "subagent.roles", "must be a map of role name to "
                          "fallback chain; no role of it is used")]
    chains, problems = _chains(roles)
    if problems:
        return {}, [_warn(display, line, "subagent.roles", "; ".join(problems)
                          + "; no role of it is used")]
    return chains, []


def _chains(roles: Mapping[str, Any]) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    chains: dict[str, tuple[str, ...]] = {}
    problems: list[str] = []
    for raw, value in roles.items():
        name = raw.removeprefix("@")
        if not _ROLE_RE.fullmatch(name):
            problems.append(f"{raw!r} is not a role name")
            continue
        if isinstance(value, str):
            entries = [part.strip() for part in value.split(",")]
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            entries = [item.strip() for item in value]
        else:
            problems.append(f"role {raw!r} must be a comma-separated string or an array of "
                            "model strings")
            continue
        entries = [entry for entry in entries if entry]
        if not entries:
            problems.append(f"role {raw!r} is empty")
            continue
        chains[name] = tuple(entries)
    return chains, problems


def _warn(file: str, line: int, field: str, reason: str) -> Diagnostic:
    return Diagnostic(file=file, line=line, field=field, severity=Severity.WARNING,
                      reason=reason, code="pi_settings")
