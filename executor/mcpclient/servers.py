"""The MCP servers of one child run: started when its offer needs their schemas, listed,
called, restarted when the sandbox stopped them, and stopped with the child.

When a server starts: only for a run whose capability could hold one of its
tools (:func:`policies.mcp.could_hold`, decided before anything runs), and then
when the run opens, because the model's first request must show each tool's
exact schema and only the server's own listing has it. Nothing starts during
discovery, ``agents list/check/show``, or for an agent that cannot call it.

Where: a ``confine = true`` server runs inside the child's sandbox
(:meth:`sandbox.base.BaseSandbox.open_stream`: the child's namespaces, mounts,
environment allowlist and limits; the host backend refuses, it confines
nothing); a ``confine = false`` server runs on the host, as the user, in the
child's workspace directory. Its environment is the sandbox's allowlist (or,
on the host, ``PATH``, ``HOME`` and ``LANG``) plus the variables the config
names, read from corral's own environment.

A server is one of the child's processes: a shell command's cleanup (docker
reaps every process of the child's uid), a command timeout (bubblewrap kills
the child's cgroup) or a diff collection may stop it. The next call starts it
again and checks the tool is still listed with the schema the model was shown.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from executor.mcpclient.session import McpError, McpSession, deadline_in
from policies.mcp import McpServerConfig, check_listed_name, wire_id
from sandbox.backends.streams import StreamProcess, start_host_stream
from sandbox.errors import SandboxError
from sandbox.protocol import Sandbox

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

__all__ = ["ListedTool", "McpServers"]

#: Bounds on what one server may put in front of the model.
MAX_TOOLS_PER_SERVER = 128
MAX_SCHEMA_BYTES = 64 * 1024
MAX_DESCRIPTION = 4000
_HOST_ENV = ("PATH", "HOME", "LANG")


@dataclass(frozen=True)
class ListedTool:
    """One tool a server listed, under the name a child holds it by."""

    #: ``mcp__server__tool``, or the custom tool name a server ``provides``.
    name: str
    server: str
    #: The server's own name for it.
    tool: str
    description: str
    #: The exact input schema the server listed (what the model is shown).
    schema: Mapping[str, Any]
    #: The server's own annotations (a claim, recorded, granting nothing).
    annotations: Mapping[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """What must not change between the offer and a call: the schema, as JSON."""
        return json.dumps(self.schema, sort_keys=True, separators=(",", ":"))


@dataclass
class _Server:
    name: str
    config: McpServerConfig
    stream: StreamProcess | None = None
    session: McpSession | None = None
    starts: int = 0


class McpServers:
    """The MCP servers one child run may call (see the module docstring)."""

    def __init__(self, servers: Mapping[str, McpServerConfig], *, sandbox: Sandbox,
                 deadline: float | None = None, environ: Mapping[str, str] | None = None
                 ) -> None:
        self.configs = dict(servers)
        self.sandbox = sandbox
        self.deadline = deadline
        self.environ = dict(os.environ if environ is None else environ)
        self._servers: dict[str, _Server] = {}
        #: name a child may hold -> the tool
        self.listed: dict[str, ListedTool] = {}
        #: server -> why it is not running (start failed), for the offer and the record
        self.failures: dict[str, str] = {}
        #: tool names a server listed that corral refused -> why
        self.rejected: dict[str, str] = {}

    # -- starting ----------------------------------------------------------------------

    def start(self, names: Iterable[str]) -> None:
        """Start and list each named server; a failure is recorded, never raised."""
        for name in sorted(set(names)):
            config = self.configs[name]
            server = self._servers.setdefault(name, _Server(name, config))
            try:
                tools = self._connect(server)
            except (McpError, SandboxError) as exc:
                self.failures[name] = _reason(exc)
                self._kill(server)
                continue
            self._admit(server, tools)

    def _spawn(self, server: _Server) -> StreamProcess:
        config = server.config
        argv = [config.command, *config.args]
        missing = [var for var in config.env if var not in self.environ]
        if missing:
            raise McpError(f"MCP server {server.name!r}: the variables its config passes "
                           f"({', '.join(missing)}) are not set in corral's environment",
                           code="mcp_env_missing", operation="mcp_start",
                           hint=f"set them, or remove them from [mcp_servers.{server.name}].env")
        env = {var: self.environ[var] for var in config.env}
        if config.confine:
            opener = getattr(self.sandbox, "open_stream", None)
            if opener is None:
                raise McpError(f"the {self.sandbox.backend} sandbox cannot run a server",
                               code="mcp_unconfinable", operation="mcp_start")
            stream: StreamProcess = opener(argv, env=env)
            return stream
        host = {var: self.environ[var] for var in _HOST_ENV if var in self.environ}
        return start_host_stream(argv, env={**host, **env}, cwd=self.sandbox.root)

    def _connect(self, server: _Server) -> list[Tool]:
        deadline = deadline_in(server.config.startup_timeout_seconds, self.deadline)
        server.stream = self._spawn(server)
        server.starts += 1
        session = McpSession(server.stream, server=server.name)
        session.initialize(deadline=deadline)
        tools = session.list_tools(deadline=deadline)
        server.session = session
        return tools

    def _admit(self, server: _Server, tools: list[Tool]) -> None:
        """Validate the listing (untrusted names, sizes, duplicates) and record what holds."""
        config = server.config
        counts: dict[str, int] = {}
        for tool in tools:
            counts[tool.name] = counts.get(tool.name, 0) + 1
        aliases = {tool: custom for custom, tool in config.provides.items()}
        kept = 0
        for tool in tools:
            label = wire_id(server.name, tool.name) if _plain(tool.name) else \
                f"mcp__{server.name}__{tool.name!r}"
            why = _refuse(tool, counts)
            if why is None and kept >= MAX_TOOLS_PER_SERVER:
                why = f"the server lists more than {MAX_TOOLS_PER_SERVER} tools"
            if why is not None:
                self.rejected[label] = why
                continue
            kept += 1
            listed = ListedTool(
                name=label, server=server.name, tool=tool.name,
                description=(tool.description or tool.title or "")[:MAX_DESCRIPTION],
                schema=dict(tool.input_schema),
                annotations=tool.annotations.model_dump(exclude_none=True, by_alias=True)
                if tool.annotations is not None else {})
            self.listed[label] = listed
            if tool.name in aliases:
                self.listed[aliases[tool.name]] = ListedTool(
                    name=aliases[tool.name], server=server.name, tool=tool.name,
                    description=listed.description, schema=listed.schema,
                    annotations=listed.annotations)

    # -- calling -----------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any], *, timeout: float | None = None
             ) -> CallToolResult:
        """Call tool ``name`` (as the child holds it); restarts a server the sandbox
        stopped, and refuses a tool whose schema changed since it was offered."""
        listed = self.listed[name]
        server = self._servers[listed.server]
        limit = server.config.call_timeout_seconds if timeout is None else timeout
        if server.session is None or server.stream is None or not server.stream.alive:
            self._kill(server)
            tools = self._connect(server)
            again = next((t for t in tools if t.name == listed.tool), None)
            if again is None or json.dumps(dict(again.input_schema), sort_keys=True,
                                           separators=(",", ":")) != listed.fingerprint():
                raise McpError(f"MCP server {server.name!r} no longer lists {listed.tool!r} "
                               "with the schema this agent was shown", code="mcp_tool_changed",
                               operation="mcp_call")
        assert server.session is not None  # noqa: S101 - _connect set it
        try:
            return server.session.call_tool(listed.tool, arguments,
                                            deadline=deadline_in(limit, self.deadline))
        except McpError as exc:
            if exc.code in {"mcp_timeout", "mcp_protocol", "mcp_server_gone"}:
                self._kill(server)  # a hung or broken server is never reused
            raise

    def running(self) -> dict[str, bool]:
        """Server -> whether its process is up (for tests and the record)."""
        return {name: bool(s.stream is not None and s.stream.alive)
                for name, s in self._servers.items()}

    def starts(self) -> dict[str, int]:
        """Server -> how many times it was started."""
        return {name: s.starts for name, s in self._servers.items()}

    # -- stopping ----------------------------------------------------------------------

    def _kill(self, server: _Server) -> None:
        if server.stream is not None:
            with contextlib.suppress(SandboxError, OSError):
                server.stream.kill()
        server.stream = None
        server.session = None

    def close(self) -> None:
        """Stop every server (and whatever it started)."""
        for server in self._servers.values():
            self._kill(server)


def _plain(name: str) -> bool:
    try:
        check_listed_name(name)
    except ValueError:
        return False
    return True


def _refuse(tool: Tool, counts: Mapping[str, int]) -> str | None:
    if not _plain(tool.name):
        return ("its name is not 1-64 ASCII letters, digits, '_', '-' or '.' (names a server "
                "lists are untrusted)")
    if counts[tool.name] > 1:
        return "the server lists this name more than once"
    schema = tool.input_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not a JSON object schema"
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"its input schema is larger than {MAX_SCHEMA_BYTES} bytes"
    return None


def _reason(exc: McpError | SandboxError) -> str:
    text = exc.message
    if exc.hint:
        text += f" ({exc.hint})"
    stderr = exc.context.get("stderr") if isinstance(exc.context, dict) else None
    if stderr:
        text += f"; its stderr ends: {str(stderr)[-300:]}"
    return text
