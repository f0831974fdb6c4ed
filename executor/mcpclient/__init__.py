"""corral as an MCP client: the MCP servers a user installed become tools of children.

:mod:`executor.mcpclient.session` speaks the protocol to one server;
:mod:`executor.mcpclient.servers` starts, lists, calls and stops the servers of one
child run. Nothing here imports the ``mcp`` SDK until a server is actually used.
"""

from executor.mcpclient.servers import ListedTool, McpServers
from executor.mcpclient.session import McpError, McpSession

__all__ = ["ListedTool", "McpError", "McpServers", "McpSession"]
