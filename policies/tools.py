"""The native tool catalog: one table of canonical tool names.

Every layer uses this one table: the loader maps foreign names onto it, the
capability rules derive mode restrictions from the groups, and the executor
builds the model-visible schemas from it. Custom tools (installed MCP or
extension tools) are allowed by exact name and always belong to the ``custom``
group, which counts as side-effecting.

Some tools are named by definitions but cannot run in corral: ``web_fetch``
without a network grant from the user (:mod:`policies.network`; it runs on the
host side, the sandbox keeps no network), ``web_search`` (no search provider
is supported), and every custom or MCP tool
no installed MCP server provides (``[mcp_servers.NAME]`` in the user config,
see :mod:`policies.mcp`). :func:`why_unrunnable` says why; the loader warns
when a definition grants one, and the model is never offered one.

Matching is exact. :func:`check_tool_name` rejects a name that is not ASCII,
not NFKC-stable, contains whitespace or control characters, or differs only by
case from a native name; nothing here ever does a fuzzy match, because a fuzzy
match is how a misspelled deny grants access.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from policies.errors import ToolNameError
from policies.network import NO_GRANT

__all__ = [
    "CUSTOM_TOOL_RE",
    "NATIVE_TOOLS",
    "SEARCH_GROUPS",
    "SideEffect",
    "ToolGroup",
    "ToolSpec",
    "check_tool_name",
    "group_of",
    "in_search_group",
    "is_native",
    "is_side_effecting",
    "is_tool_pattern",
    "tool_matches",
    "why_unrunnable",
]


class ToolGroup(StrEnum):
    """What a tool touches; mode restrictions are expressed over groups."""

    READ = "read"
    WRITE = "write"
    EXEC = "exec"
    DELEGATE = "delegate"
    NETWORK = "network"
    CUSTOM = "custom"


class SideEffect(StrEnum):
    """The strongest effect a call can have outside the model's context."""

    NONE = "none"  # reads the workspace or session state only
    WORKSPACE = "workspace"  # writes files in the workspace
    PROCESS = "process"  # runs programs
    CHILD = "child"  # starts another agent (which has its own capability)
    EXTERNAL = "external"  # reaches outside the machine or an unknown tool


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One native tool: its canonical name, group and side-effect class."""

    name: str
    group: ToolGroup
    side_effect: SideEffect
    summary: str


_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("read_file", ToolGroup.READ, SideEffect.NONE, "Read a file of the workspace."),
    ToolSpec("list_files", ToolGroup.READ, SideEffect.NONE, "List a directory of the workspace."),
    ToolSpec("find", ToolGroup.READ, SideEffect.NONE, "Find files by glob pattern."),
    ToolSpec("search", ToolGroup.READ, SideEffect.NONE, "Search file contents by regex."),
    ToolSpec("edit", ToolGroup.WRITE, SideEffect.WORKSPACE, "Replace one exact string in a file."),
    ToolSpec("write_file", ToolGroup.WRITE, SideEffect.WORKSPACE, "Create or overwrite a file."),
    ToolSpec("apply_patch", ToolGroup.WRITE, SideEffect.WORKSPACE, "Apply a unified diff."),
    ToolSpec("shell", ToolGroup.EXEC, SideEffect.PROCESS, "Run a command in the sandbox."),
    ToolSpec("delegate", ToolGroup.DELEGATE, SideEffect.CHILD, "Run a named sub-agent."),
    ToolSpec("list_agents", ToolGroup.READ, SideEffect.NONE, "List agents it may delegate to."),
    ToolSpec("tool_search", ToolGroup.READ, SideEffect.NONE, "Activate deferred tools by search."),
    ToolSpec("web_fetch", ToolGroup.NETWORK, SideEffect.EXTERNAL, "Fetch a URL."),
    ToolSpec("web_search", ToolGroup.NETWORK, SideEffect.EXTERNAL, "Search the web."),
    ToolSpec("todo", ToolGroup.READ, SideEffect.NONE, "Keep a task list in the session."),
)

#: Canonical name -> spec. The insertion order is the catalog's display order.
NATIVE_TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}
_NATIVE_BY_FOLDED = {name.casefold(): name for name in NATIVE_TOOLS}

#: Custom tool names: ASCII letters, digits and ``_ - . : /``, starting with a
#: letter or digit, at most 128 characters. MCP tools use the canonical
#: ``mcp__<server>__<tool>`` form; a trailing ``*`` makes a prefix pattern,
#: allowed only in allow/deny lists, never in a call.
CUSTOM_TOOL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$")
_PATTERN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,126}\*$")


def check_tool_name(name: object, *, allow_pattern: bool = False) -> str:
    """Return ``name`` if it is an exact, well-formed tool name, else raise.

    Accepts a native name or a custom name matching :data:`CUSTOM_TOOL_RE`
    (and, with ``allow_pattern``, a prefix pattern ending in ``*``). Rejects
    non-strings, non-ASCII, non-NFKC-stable text, whitespace and control
    characters, and any case variant of a native name (``Read_File``).
    """
    if not isinstance(name, str):
        raise ToolNameError(f"tool name must be a string, got {type(name).__name__}")
    if unicodedata.normalize("NFKC", name) != name:
        raise ToolNameError(
            f"tool name {name!r} is not NFKC-stable (it contains a compatibility character)",
            hint="write the name in plain ASCII",
        )
    if not name.isascii():
        raise ToolNameError(
            f"tool name {name!r} is not ASCII (homoglyphs are never matched)",
            hint="write the name in plain ASCII",
        )
    if name in NATIVE_TOOLS:
        return name
    folded = _NATIVE_BY_FOLDED.get(name.casefold())
    if folded is not None:
        raise ToolNameError(
            f"tool name {name!r} differs only by case from {folded!r}",
            hint=f"tool names are exact: write {folded!r}",
        )
    if allow_pattern and _PATTERN_RE.fullmatch(name):
        return name
    if not CUSTOM_TOOL_RE.fullmatch(name):
        raise ToolNameError(
            f"tool name {name!r} is not a native tool and not a well-formed custom tool name",
            hint="native tools: " + ", ".join(NATIVE_TOOLS),
        )
    return name


def is_native(name: str) -> bool:
    """Whether ``name`` is exactly one of the native tools."""
    return name in NATIVE_TOOLS


def is_tool_pattern(name: str) -> bool:
    """Whether ``name`` is a prefix pattern (``mcp__srv__*``) rather than a tool."""
    return name.endswith("*")


def tool_matches(selector: str, tool: str) -> bool:
    """Whether an allow/deny list entry selects ``tool`` (exact or prefix pattern)."""
    if selector.endswith("*"):
        return tool.startswith(selector[:-1])
    return selector == tool


def group_of(name: str) -> ToolGroup:
    """The group of a native tool; every other tool is ``custom``."""
    spec = NATIVE_TOOLS.get(name)
    return spec.group if spec is not None else ToolGroup.CUSTOM


def is_side_effecting(name: str) -> bool:
    """Custom tools are side-effecting by default: nothing proves otherwise."""
    spec = NATIVE_TOOLS.get(name)
    return spec is None or spec.side_effect is not SideEffect.NONE


#: Native tools no run can call, and why.
_UNRUNNABLE = {
    "web_search": "sandboxes have no network and no search provider is configured, so "
                  "corral never offers it",
}


def why_unrunnable(name: str, *, servers: frozenset[str] = frozenset(),
                   provided: frozenset[str] = frozenset(), network: bool = False) -> str | None:
    """Why no run can call tool ``name``, or ``None``.

    ``servers`` are the MCP servers installed in the user config, ``provided`` the
    custom tool names one of them ``provides``; ``network`` whether the user granted
    any host (``web_fetch`` runs only then). A pattern is runnable when some
    installed server's tools could match it.
    """
    if name == "web_fetch":
        return None if network else NO_GRANT
    if name in _UNRUNNABLE:
        return _UNRUNNABLE[name]
    if name in NATIVE_TOOLS:
        return None
    if name.startswith("mcp__"):
        server = name[5:].split("__", 1)[0]
        if "*" in server:
            if any(s.startswith(server.rstrip("*")) for s in servers):
                return None
            return ("no MCP server it could match is installed: add [mcp_servers.NAME] "
                    "(command, args) to your corral config; until then it is never offered")
        if server in servers:
            return None
        return (f"no MCP server {server!r} is installed: add [mcp_servers.{server}] (command, "
                "args) to your corral config; until then it is never offered")
    prefix = name[:-1] if name.endswith("*") else None
    if name in provided or (prefix is not None and any(p.startswith(prefix) for p in provided)):
        return None
    return ("no installed MCP server provides this custom tool: add it to a server's `provides` "
            f"in your corral config ([mcp_servers.NAME] provides = {{ {name.rstrip('*')} = "
            "\"the server's tool\" }); until then it is never offered")


#: The groups a catalog ``toolSearch`` may list: corral's tool groups, ``web`` (the
#: catalog spec's name for the network group) and ``*``; any other name is an MCP
#: server (``github`` selects ``mcp__github__*``).
SEARCH_GROUPS = frozenset({*(g.value for g in ToolGroup), "web", "*"})


def in_search_group(group: str, tool: str) -> bool:
    """Whether ``tool`` belongs to the ``toolSearch`` group ``group``."""
    if group == "*":
        return True
    if group == "web":
        group = ToolGroup.NETWORK.value
    if group in {g.value for g in ToolGroup}:
        return group_of(tool).value == group
    return tool.startswith(f"mcp__{group}__")
