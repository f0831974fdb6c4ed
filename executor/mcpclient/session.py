"""One MCP client session over a stream: initialize, list tools, call a tool.

Synchronous JSON-RPC 2.0 over newline-delimited JSON (MCP's stdio transport),
one request at a time: a child's tool calls are serial, and a request with a
deadline that reads until its own answer is the simplest thing that can be
bounded. Every message the server sends is untrusted: one line is at most
:data:`MAX_LINE` bytes, what is not JSON ends the session, and the results are
validated with the official SDK's types (:mod:`mcp.types`, imported here, when
a server is used, never at ``corral --help``).

Requests *from* the server are answered, never obeyed: ``ping`` gets its empty
result; sampling (make corral call a model), elicitation (ask the user) and
roots are refused with "method not found". Notifications are ignored.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from executor.errors import ExecutorError
from executor.version import corral_version
from sandbox.backends.streams import StreamProcess, StreamTimeout
from sandbox.errors import SandboxError

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

__all__ = ["MAX_LINE", "PROTOCOL_VERSIONS", "McpError", "McpSession"]

#: The longest message line corral reads from a server.
MAX_LINE = 8 * 1024 * 1024
#: The handshake revisions corral speaks, newest first (the one it asks for is the first).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
_MAX_PAGES = 16


class McpError(ExecutorError):
    """An MCP server failed, broke the protocol, or refused a request."""

    code = "mcp_error"


class McpSession:
    """A client session with one server over ``stream``."""

    def __init__(self, stream: StreamProcess, *, server: str) -> None:
        self.stream = stream
        self.server = server
        self._ids = itertools.count(1)
        self.protocol_version: str | None = None
        self.server_info: str = ""

    def _fail(self, message: str, *, code: str = "mcp_error", cause: BaseException | None = None
              ) -> McpError:
        context: dict[str, Any] = {"server": self.server}
        tail = self.stream.stderr_tail().strip()
        if tail:
            context["stderr"] = tail[-500:]
        error = McpError(f"MCP server {self.server!r}: {message}", code=code,
                         operation="mcp", context=context)
        if cause is not None:
            error.__cause__ = cause
        return error

    def _send(self, message: Mapping[str, Any], deadline: float) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        try:
            self.stream.send(data, deadline=deadline)
        except SandboxError as exc:
            raise self._fail(f"cannot send {message.get('method', 'a reply')}: {exc.message}",
                             code="mcp_server_gone", cause=exc) from exc

    def request(self, method: str, params: Mapping[str, Any] | None, *, deadline: float
                ) -> Any:
        """Send one request and wait for its answer (serving the server's own requests)."""
        ident = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._send(message, deadline)
        while True:
            try:
                line = self.stream.read_line(deadline=deadline, limit=MAX_LINE)
            except StreamTimeout as exc:
                raise self._fail(f"no answer to {method} in time", code="mcp_timeout",
                                 cause=exc) from exc
            except SandboxError as exc:
                raise self._fail(f"{exc.message} (while waiting for {method})",
                                 code="mcp_server_gone", cause=exc) from exc
            if not line.strip():
                continue
            try:
                reply = json.loads(line)
            except ValueError as exc:
                raise self._fail(f"wrote something that is not JSON-RPC on stdout: "
                                 f"{line[:120]!r}", code="mcp_protocol", cause=exc) from exc
            if not isinstance(reply, dict):
                raise self._fail("wrote a JSON value that is not a message",
                                 code="mcp_protocol")
            if "method" in reply:
                if "id" in reply:
                    self._answer(reply, deadline)
                continue  # a notification: progress, logging, list_changed
            if reply.get("id") != ident:
                continue  # an answer to nothing we are waiting for
            if "error" in reply:
                error = reply["error"] if isinstance(reply["error"], dict) else {}
                raise self._fail(f"{method} failed: {str(error.get('message', error))[:500]}",
                                 code="mcp_refused")
            return reply.get("result")

    def _answer(self, request: Mapping[str, Any], deadline: float) -> None:
        if request.get("method") == "ping":
            self._send({"jsonrpc": "2.0", "id": request["id"], "result": {}}, deadline)
            return
        self._send({"jsonrpc": "2.0", "id": request["id"], "error": {
            "code": -32601, "message": f"corral does not serve {str(request.get('method'))[:80]}"
        }}, deadline)

    def initialize(self, *, deadline: float) -> None:
        """The handshake; refuses a protocol revision corral does not speak."""
        from mcp.types import InitializeResult  # noqa: PLC0415 - only when a server is used

        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {},
            "clientInfo": {"name": "corral", "version": corral_version()}}, deadline=deadline)
        try:
            info = InitializeResult.model_validate(result)
        except ValidationError as exc:
            raise self._fail(f"answered initialize with an invalid result: {exc.errors()[:1]}",
                             code="mcp_protocol", cause=exc) from exc
        if info.protocol_version not in PROTOCOL_VERSIONS:
            raise self._fail(f"speaks protocol {info.protocol_version!r}; corral speaks "
                             + ", ".join(PROTOCOL_VERSIONS), code="mcp_protocol")
        self.protocol_version = info.protocol_version
        self.server_info = f"{info.server_info.name} {info.server_info.version}".strip()
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"}, deadline)

    def list_tools(self, *, deadline: float) -> list[Tool]:
        """Every tool the server lists (following pagination, at most a few pages)."""
        from mcp.types import ListToolsResult  # noqa: PLC0415 - only when a server is used

        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            result = self.request("tools/list", {"cursor": cursor} if cursor else None,
                                  deadline=deadline)
            try:
                page = ListToolsResult.model_validate(result)
            except ValidationError as exc:
                raise self._fail(f"answered tools/list with an invalid result: "
                                 f"{exc.errors()[:1]}", code="mcp_protocol", cause=exc) from exc
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise self._fail(f"lists tools over more than {_MAX_PAGES} pages", code="mcp_protocol")

    def call_tool(self, name: str, arguments: Mapping[str, Any], *, deadline: float
                  ) -> CallToolResult:
        """Call one tool; a result the server marks ``isError`` is returned, not raised."""
        from mcp.types import CallToolResult  # noqa: PLC0415 - only when a server is used

        result = self.request("tools/call", {"name": name, "arguments": dict(arguments)},
                              deadline=deadline)
        try:
            return CallToolResult.model_validate(result)
        except ValidationError as exc:
            raise self._fail(f"answered tools/call with an invalid result: {exc.errors()[:1]}",
                             code="mcp_protocol", cause=exc) from exc


def deadline_in(seconds: float, cap: float | None = None) -> float:
    """``time.monotonic()`` ``seconds`` from now, no later than ``cap``."""
    end = time.monotonic() + seconds
    return end if cap is None else min(end, cap)


__all__ += ["deadline_in"]
