"""The MCP tool adapter: one tool an installed MCP server listed, as a tool of a child.

It goes through the same dispatch as a native tool (exact wire id, capability,
permission rules, approval, audit). What differs:

- its schema is the server's own ``inputSchema``, shown to the model exactly
  (:attr:`McpTool.parameters`); the arguments must be a JSON object, and the
  server validates them against its schema;
- permission rules judge the tool as a whole (its subject is ``None``): a
  rule names ``mcp__server__tool`` or a pattern such as ``mcp__server__*``;
- its result is untrusted: text content is passed on, everything else
  (images, audio, binary resources) is named and not shown, and the whole is
  cut at the server's ``max_result_bytes`` with a marker saying so (terminal
  escaping happens where it is shown, as for every tool result).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from executor.mcpclient import ListedTool, McpError, McpServers
from executor.tools.context import ToolContext, truncate
from executor.tools.dispatch import Tool, ToolFailure, ToolOutput
from policies.mcp import McpServerConfig

if TYPE_CHECKING:
    from mcp.types import CallToolResult

__all__ = ["McpArguments", "McpTool", "mcp_tools", "render_result"]


class McpArguments(BaseModel):
    """Any JSON object: the server's schema is the contract, and the server checks it."""

    model_config = ConfigDict(extra="allow", frozen=True)


class McpTool:
    """A tool of an installed MCP server (see the module docstring)."""

    args = McpArguments

    def __init__(self, listed: ListedTool, servers: McpServers, *, max_result_bytes: int,
                 call_timeout: float) -> None:
        self.listed = listed
        self.servers = servers
        self.name = listed.name
        self.description = (listed.description
                            or f"Tool {listed.tool!r} of the MCP server {listed.server!r}.")
        #: The exact schema the server listed: what the model is shown.
        self.parameters: dict[str, Any] = dict(listed.schema)
        self.max_result_bytes = max_result_bytes
        self.call_timeout = call_timeout

    def subjects(self, args: McpArguments) -> list[str | None]:
        """Rules judge the tool as a whole."""
        return [None]

    def run(self, args: McpArguments, context: ToolContext) -> ToolOutput:
        """Call the server; its failure is a tool error the model sees."""
        arguments = dict(args.model_extra or {})
        try:
            result = self.servers.call(self.name, arguments,
                                       timeout=context.time_left(self.call_timeout))
        except McpError as exc:
            raise ToolFailure(exc.message, code=exc.code) from exc
        text = truncate(render_result(result), self.max_result_bytes,
                        what=f"the result of {self.name}")
        return ToolOutput(text, is_error=bool(result.is_error),
                          data={"server": self.listed.server, "tool": self.listed.tool})


def render_result(result: CallToolResult) -> str:
    """The text of a tool result: text content as is, other content named, not shown."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "unknown")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind in {"image", "audio"}:
            data = str(getattr(block, "data", ""))
            parts.append(f"[{kind} content ({getattr(block, 'mime_type', '?')}, about "
                         f"{len(data) * 3 // 4} bytes) not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            uri = getattr(resource, "uri", "")
            parts.append(str(text) if text is not None else
                         f"[binary resource {uri} not shown]")
        else:
            parts.append(f"[{kind} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts) if parts else "(no content)"


def mcp_tools(listing: McpServers | None, configs: Mapping[str, McpServerConfig]
              ) -> dict[str, Tool[Any, ToolContext]]:
    """A tool for every name the run's servers listed (the offer picks the held ones)."""
    if listing is None:
        return {}
    return {name: McpTool(listed, listing,
                          max_result_bytes=configs[listed.server].max_result_bytes,
                          call_timeout=configs[listed.server].call_timeout_seconds)
            for name, listed in listing.listed.items()}
