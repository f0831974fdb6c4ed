"""Where installed MCP servers meet tool names and the rules: pure data, no processes.

A server you install in your corral config (``[mcp_servers.NAME]``) offers its
tools to children under one **wire id**, the canonical ``mcp__NAME__tool``
(the form :func:`policies.aliases.mcp_canonical` gives every harness's MCP
spelling: Claude's ``mcp__s__t``, Gemini's ``mcp_s_t``, VS Code's ``s/t``).
That id is what the model is offered and calls, what allowlists, deny lists
and permission rules name, and what the audit records. The issue's
``NAME__tool`` is the same id without the ``mcp__`` prefix; the prefix stays,
because it keeps every MCP tool out of the native namespace: a server cannot
name itself into ``shell`` or ``read_file``.

A custom tool (``custom_tools = ["github_search"]``) runs when a server
``provides`` it (``provides = { github_search = "search_issues" }``); one no
server provides is a load-time warning and never offered.

Rules (zuno's capability ceiling): an MCP tool is side-effecting unless *you*
list it in the server's ``read_only_tools``; a server's own ``readOnlyHint``
annotation is the server's claim about itself, and the server is exactly the
party the sandbox does not trust, so it grants nothing. A read-only agent
holds an MCP tool only when you vouched for it *and* its definition grants it
by exact wire id (an allowlist entry or a pattern-free ``allow`` rule): a
pattern such as ``mcp__github__*`` never opts a read-only agent into a tool.

Names a server lists are untrusted bytes: :func:`check_listed_name` accepts
ASCII letters, digits, ``_ - .`` only, at most 64 characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from policies.tools import CUSTOM_TOOL_RE, NATIVE_TOOLS

__all__ = [
    "DEFINITION_SERVERS",
    "MAX_TOOL_NAME",
    "McpServerConfig",
    "ToolProvider",
    "check_listed_name",
    "check_provided",
    "check_server_name",
    "could_hold",
    "explicitly_granted",
    "parse_wire_id",
    "providers",
    "read_only_ids",
    "wire_id",
]

#: A server name never contains ``__`` (the separator), so ``mcp__s__t`` parses one way.
_SERVER_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")
#: What a server may call a tool: plain ASCII, no separators a harness would split on.
_LISTED_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TOOL_NAME = 64
#: What the loader says about MCP servers a definition declares inline.
DEFINITION_SERVERS = (
    "MCP servers declared in an agent definition are not started: a definition (often a "
    "repository's) must never choose what runs; install the server in your corral config "
    "as [mcp_servers.NAME] (command, args; it runs confined in the child's sandbox) and grant "
    "its tools by wire id, mcp__NAME__tool")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class McpServerConfig(BaseModel):
    """One ``[mcp_servers.NAME]`` table of the user config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The program (looked up on the sandbox's PATH when confined, on yours when not).
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    #: Names of environment variables passed from corral's environment (never values).
    env: tuple[str, ...] = ()
    #: Run inside the child's sandbox, with its namespaces, mounts and limits.
    confine: bool = True
    #: The server's tools you vouch never change anything (by the server's own names).
    read_only_tools: tuple[str, ...] = ()
    #: custom tool name (``custom_tools``) -> the server's tool that implements it.
    provides: dict[str, str] = Field(default_factory=dict)
    #: How long starting and listing may take, and one call (capped by the run's deadline).
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    call_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    #: The most of a call's result the model is shown.
    max_result_bytes: int = Field(default=64 * 1024, ge=1024, le=4 * 1024 * 1024)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        if "\0" in value or value != value.strip():
            raise ValueError("command must be a program name or path, without NUL or "
                             "surrounding spaces (arguments go in args)")
        return value

    @field_validator("args")
    @classmethod
    def _args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any("\0" in arg for arg in value):
            raise ValueError("an argument contains a NUL byte")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _ENV_RE.fullmatch(name):
                raise ValueError(f"env lists variable NAMES to pass from your environment; "
                                 f"{name!r} is not one (write the value in your environment, "
                                 "not in this file)")
        return value

    @field_validator("read_only_tools")
    @classmethod
    def _read_only(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            check_listed_name(name)
        return value

    @field_validator("provides")
    @classmethod
    def _provides(cls, value: dict[str, str]) -> dict[str, str]:
        for custom, tool in value.items():
            _check_custom(custom)
            check_listed_name(tool)
        return value


def check_server_name(name: str) -> str:
    """``name`` if it can name a server in a wire id, else :class:`ValueError`."""
    if not _SERVER_RE.fullmatch(name):
        raise ValueError(f"MCP server name {name!r} must be ASCII letters, digits, '-' and "
                         "single '_' (no '__', the wire id's separator), at most 32 characters")
    return name


def check_listed_name(name: str) -> str:
    """A tool name a server lists (or the config names), else :class:`ValueError`."""
    if not isinstance(name, str) or not _LISTED_RE.fullmatch(name):
        raise ValueError(f"MCP tool name {name!r} must be 1-{MAX_TOOL_NAME} ASCII letters, "
                         "digits, '_', '-' or '.', starting with a letter or digit")
    return name


def _check_custom(name: str) -> None:
    if name in NATIVE_TOOLS or name.casefold() in {n.casefold() for n in NATIVE_TOOLS}:
        raise ValueError(f"provides: {name!r} is a native tool; a server cannot replace it")
    if name.startswith("mcp__") or not CUSTOM_TOOL_RE.fullmatch(name):
        raise ValueError(f"provides: {name!r} must be a custom tool name (as in custom_tools), "
                         "not an mcp__ wire id")


def check_provided(servers: Mapping[str, McpServerConfig]) -> None:
    """No custom tool is provided by two servers."""
    seen: dict[str, str] = {}
    for server, config in servers.items():
        for custom in config.provides:
            if custom in seen:
                raise ValueError(f"custom tool {custom!r} is provided by both {seen[custom]!r} "
                                 f"and {server!r}; keep one")
            seen[custom] = server


def wire_id(server: str, tool: str) -> str:
    """The one name an MCP tool has everywhere: ``mcp__server__tool``."""
    return f"mcp__{server}__{tool}"


def parse_wire_id(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of a wire id, ``None`` for any other name or a pattern."""
    if not name.startswith("mcp__") or name.endswith("*"):
        return None
    server, sep, tool = name[5:].partition("__")
    if not sep or not _SERVER_RE.fullmatch(server) or not _LISTED_RE.fullmatch(tool):
        return None
    return server, tool


#: tool name a child may hold -> (server, the server's own tool name)
ToolProvider = tuple[str, str]


def providers(servers: Mapping[str, McpServerConfig], tools: Iterable[str]
              ) -> dict[str, ToolProvider]:
    """Which configured server runs each of ``tools`` (wire ids and provided custom names);
    tools no server provides are left out."""
    provided = {custom: (server, tool) for server, config in servers.items()
                for custom, tool in config.provides.items()}
    found: dict[str, ToolProvider] = {}
    for name in tools:
        parsed = parse_wire_id(name)
        if parsed is not None and parsed[0] in servers:
            found[name] = parsed
        elif name in provided:
            found[name] = provided[name]
    return found


def read_only_ids(servers: Mapping[str, McpServerConfig]) -> frozenset[str]:
    """Every tool name you vouched for: wire ids, and custom names provided by one."""
    ids = {wire_id(server, tool) for server, config in servers.items()
           for tool in config.read_only_tools}
    ids |= {custom for config in servers.values() for custom, tool in config.provides.items()
            if tool in config.read_only_tools}
    return frozenset(ids)


def explicitly_granted(tool: str, allowlist: frozenset[str] | None,
                       allow_rules: Iterable[str]) -> bool:
    """An exact grant: the allowlist names ``tool`` itself, or a pattern-free allow rule does."""
    return (allowlist is not None and tool in allowlist) or tool in set(allow_rules)


def could_hold(server: str, held: Iterable[str], config: McpServerConfig) -> bool:
    """Whether a capability holding ``held`` (exact names and patterns) could hold a tool
    of ``server``: decided before the server runs, so no process starts for an agent
    that can never call it."""
    prefix = f"mcp__{server}__"
    for name in held:
        if name in config.provides:
            return True
        if name.endswith("*"):
            stem = name[:-1]
            if prefix.startswith(stem) or stem.startswith(prefix):
                return True
        elif name.startswith(prefix):
            return True
    return False
