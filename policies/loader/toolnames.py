"""Map a definition's tool names onto native names, exactly.

Order of resolution for each name: an explicit ``tool_map`` entry (trusted,
from the user's import), the format's ``*``, the format's alias table, the
format's MCP syntax, an installed custom tool by exact name. Anything else is
an error, and a name that differs only by case from a table name says so.

Claude-style argument specifiers are understood where the format documents
them: ``Bash(git diff:*)`` in an allowlist grants ``shell`` for matching
commands only; in a deny list it denies matching commands; ``Agent(a, b)``
grants ``delegate`` to those agents only; ``Read(src/**)`` and friends restrict
paths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from policies.aliases import TABLES, lookup, mcp_canonical
from policies.contract import AgentFormat
from policies.errors import ToolNameError
from policies.globs import GLOB_HINT, glob_problem
from policies.loader.base import NAME_RE, Reader, normalize_name
from policies.permissions import Action, PermissionRule
from policies.tools import NATIVE_TOOLS, check_tool_name

__all__ = ["ToolSet", "delegate_target", "readable_pattern", "resolve_tools"]

_SPEC_RE = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9_]*)\((?P<arg>.*)\)$", re.DOTALL)
_SPEC_FORMATS = frozenset({AgentFormat.CLAUDE, AgentFormat.CURSOR})
_PATH_BASES = {"Read": "read_file", "Edit": "edit", "Write": "write_file", "Glob": "find",
               "Grep": "search", "MultiEdit": "edit", "LS": "list_files"}


@dataclass
class ToolSet:
    """The result of resolving one tool list."""

    tools: set[str] = field(default_factory=set)
    #: The list said "every tool" (``*``): no allowlist at all.
    everything: bool = False
    #: Argument rules: an allowlist's restrictions or a deny list's patterns.
    rules: list[PermissionRule] = field(default_factory=list)
    #: Delegation targets from ``Agent(a, b)`` (allowlists only).
    delegates: set[str] | None = None


def resolve_tools(reader: Reader, key: str, names: Sequence[str], fmt: AgentFormat,
                  *, deny: bool = False) -> ToolSet:
    """Resolve ``names`` (the value of field ``key``) for format ``fmt``.

    Errors go to ``reader``; the returned set holds what did resolve.
    """
    options = reader.ctx.options
    result = ToolSet()
    restricted: dict[str, list[str]] = {}
    plain: set[str] = set()
    for name in names:
        if name in options.tool_map:
            targets = _mapped(reader, key, name, options.tool_map[name],
                              options.custom_tools)
            plain |= targets
            continue
        if name == "*" and TABLES[fmt].star_means_all:
            result.everything = True
            continue
        spec = _SPEC_RE.fullmatch(name) if fmt in _SPEC_FORMATS else None
        if spec:
            _specifier(reader, key, name, spec.group("base"), spec.group("arg"), fmt, deny,
                       restricted, result)
            continue
        found = lookup(fmt, name)
        if found is not None:
            if not found:
                reader.warn(key, f"{fmt.value} tool {name!r} has no corral equivalent; "
                            + ("nothing to deny" if deny else "it is not granted"),
                            code="tool_without_equivalent")
            plain |= found
            continue
        canonical = mcp_canonical(fmt, name)
        if canonical is not None:
            plain.add(canonical)
            continue
        if name in options.custom_tools or (fmt is AgentFormat.NGN and name in NATIVE_TOOLS):
            plain.add(name)
            continue
        reader.error(key, _unknown(fmt, name), hint=_unknown_hint(fmt))
    result.tools |= plain
    if deny:
        return result
    for tool, patterns in restricted.items():
        if tool in plain:
            continue  # the plain name grants every call; patterns add nothing
        result.tools.add(tool)
        result.rules.append(PermissionRule(tool=tool, action=Action.DENY))
        result.rules.extend(PermissionRule(tool=tool, pattern=p, action=Action.ALLOW)
                            for p in patterns)
    if "delegate" in plain:
        result.delegates = None
    return result


def _mapped(reader: Reader, key: str, name: str, targets: Sequence[str],
            custom: frozenset[str]) -> set[str]:
    out: set[str] = set()
    for target in targets:
        if target in NATIVE_TOOLS or target in custom:
            out.add(target)
        else:
            reader.error(key, f"tool_map maps {name!r} to {target!r}, which is neither a native "
                         "tool nor an installed custom tool",
                         hint="native tools: " + ", ".join(NATIVE_TOOLS))
    return out


def _specifier(reader: Reader, key: str, name: str, base: str, arg: str, fmt: AgentFormat,
               deny: bool, restricted: dict[str, list[str]], result: ToolSet) -> None:
    arg = arg.strip()
    if base in {"Agent", "Task"}:
        if deny:
            reader.error(key, f"{name!r}: agent specifiers are not supported in a deny list")
            return
        # A target named as the harness tolerates ("Code Reviewer") is the identity its
        # definition gets ("code-reviewer"): the same documented normalisation.
        agents = {delegate_target(part.strip()) for part in arg.split(",") if part.strip()}
        result.tools.add("delegate")
        result.delegates = (result.delegates or set()) | agents
        return
    pattern: str | None
    if base in {"Bash", "PowerShell"}:
        tool, pattern = "shell", _command_pattern(arg)
    elif base in _PATH_BASES:
        tool = _PATH_BASES[base]
        pattern = _path_pattern(reader, key, name, arg)
        if pattern is None:
            return
    else:
        reader.error(key, f"{name!r}: argument specifiers are not supported for {base}")
        return
    if not arg:
        reader.error(key, f"{name!r}: empty argument specifier")
        return
    if not readable_pattern(reader, key, name, pattern):
        return
    if deny:
        result.rules.append(PermissionRule(tool=tool, pattern=pattern, action=Action.DENY))
    else:
        restricted.setdefault(tool, []).append(pattern)


def readable_pattern(reader: Reader, key: str, where: str, pattern: str | None) -> bool:
    """Whether ``pattern`` is a glob corral reads (:mod:`policies.globs`); else an error
    on field ``key`` naming ``where`` and why: a rule corral cannot read is never kept as
    one that matches nothing."""
    problem = None if pattern is None else glob_problem(pattern)
    if problem is not None:
        reader.error(key, f"{where!r}: the pattern cannot be read: {problem}", hint=GLOB_HINT)
    return problem is None


def delegate_target(name: str) -> str:
    """A delegation target as the identity of the agent it names: a name corral's rules
    refuse but :func:`~policies.loader.base.normalize_name` can normalise is normalised,
    anything else is kept as written (and matches no agent)."""
    if NAME_RE.fullmatch(name):
        return name
    return normalize_name(name) or name


def _command_pattern(arg: str) -> str:
    """Claude's ``git diff:*`` prefix form becomes the glob ``git diff *``."""
    if arg.endswith(":*"):
        return arg[:-2].rstrip() + " *"
    return arg


def _path_pattern(reader: Reader, key: str, name: str, arg: str) -> str | None:
    if arg.startswith(("~", "//")) or ".." in arg.split("/"):
        reader.error(key, f"{name!r}: paths outside the workspace cannot be granted")
        return None
    return arg.removeprefix("./").lstrip("/") or "**"


def _unknown(fmt: AgentFormat, name: str) -> str:
    try:
        check_tool_name(name)
    except ToolNameError as exc:
        if "case" in exc.message or "ASCII" in exc.message or "NFKC" in exc.message:
            return exc.message
    folded = name.casefold()
    for known in TABLES[fmt].names:
        if known.casefold() == folded:
            return f"unknown {fmt.value} tool {name!r}: it differs only by case from {known!r}"
    return f"unknown {fmt.value} tool {name!r}"


def _unknown_hint(fmt: AgentFormat) -> str:
    known = ", ".join(sorted(n for n, v in TABLES[fmt].names.items() if v)[:24])
    return (f"known {fmt.value} tools include: {known}; map other names with tool_map in an "
            "agent_imports entry, or declare installed tools under custom_tools in your corral "
            "config")
