"""Per-agent tool overrides: the keys each tool accepts, and what they mean.

The catalog format gives each tool binding "overrides: Optional per-agent
config map for the tool, e.g. { "baseDir": "/tmp" }. Which keys a tool
accepts is shown in the Admin UI tool catalog." This module is corral's tool
catalog for overrides. Every override can only narrow what the tool does:

- ``maxResultChars`` (every tool; an integer >= 1): the tool's result is cut
  at that many characters, with an explicit marker saying so;
- ``baseDir`` (the path tools ``read_file``, ``list_files``, ``find``,
  ``search``, ``edit``, ``write_file``, ``apply_patch``; a directory relative
  to the workspace): the tool may touch only paths under it, and a path left
  at its default (``.``) means that directory. corral confines every tool to
  the workspace, so an absolute path (the spec's ``/tmp``), ``~`` or ``..``
  is refused, never re-rooted;
- ``timeoutSeconds`` (``shell``; a number > 0): each command's timeout is
  capped at it.

Any other key is refused by the loader, naming the keys the tool accepts: an
override corral cannot apply must not be silently stored.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from policies.permissions import PATH_TOOLS, Action, PermissionRule

__all__ = ["accepted_overrides", "base_dir", "check_overrides", "override_rules"]

_EVERY_TOOL = ("maxResultChars",)


def accepted_overrides(tool: str) -> tuple[str, ...]:
    """The override keys ``tool`` accepts, in display order."""
    keys = list(_EVERY_TOOL)
    if tool in PATH_TOOLS:
        keys.append("baseDir")
    if tool == "shell":
        keys.append("timeoutSeconds")
    return tuple(keys)


def check_overrides(tool: str, overrides: Mapping[str, JsonValue]) -> list[str]:
    """What is wrong with ``overrides`` for ``tool`` (empty when they can be applied)."""
    accepted = accepted_overrides(tool)
    problems: list[str] = []
    for key, value in overrides.items():
        if key not in accepted:
            problems.append(f"{tool} accepts no override {key!r} (it accepts "
                            f"{', '.join(accepted)})")
        elif key == "maxResultChars" and not (
                isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            problems.append(f"maxResultChars must be an integer >= 1, got {value!r}")
        elif key == "timeoutSeconds" and not (
                isinstance(value, int | float) and not isinstance(value, bool) and value > 0):
            problems.append(f"timeoutSeconds must be a number > 0, got {value!r}")
        elif key == "baseDir":
            problem = _base_dir_problem(value)
            if problem:
                problems.append(problem)
    return problems


def _base_dir_problem(value: JsonValue) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"baseDir must be a directory path, got {value!r}"
    if value.startswith(("/", "~", "\\")) or ":" in value[:3]:
        return (f"baseDir {value!r} is outside the workspace: corral confines every tool to "
                "the workspace, so baseDir is a directory relative to it (e.g. 'src')")
    parts = value.replace("\\", "/").split("/")
    if ".." in parts:
        return f"baseDir {value!r} leaves the workspace ('..')"
    if any(char in value for char in "*?[]") or not value.isprintable():
        return f"baseDir {value!r} must be a plain path (no glob characters)"
    return None


def base_dir(value: JsonValue) -> str:
    """A valid ``baseDir`` as a normalized workspace-relative path (``.`` for the root)."""
    parts = [p for p in str(value).replace("\\", "/").split("/") if p not in {"", "."}]
    return "/".join(parts) or "."


def override_rules(tool: str, overrides: Mapping[str, JsonValue]) -> list[PermissionRule]:
    """The permission rules a (valid) override set means: ``baseDir`` confines ``tool``."""
    if "baseDir" not in overrides:
        return []
    base = base_dir(overrides["baseDir"])
    if base == ".":
        return []
    return [PermissionRule(tool=tool, action=Action.DENY),
            PermissionRule(tool=tool, pattern=base, action=Action.ALLOW),
            PermissionRule(tool=tool, pattern=f"{base}/**", action=Action.ALLOW)]
