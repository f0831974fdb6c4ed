"""``corral mcp``: corral as an MCP server, so any harness can delegate into it.

- :mod:`executor.mcpserver.arguments`: each tool's arguments (its input schema);
- :mod:`executor.mcpserver.handlers`: what each tool does (the CLI's library calls,
  bounded by how the server was started: :class:`~executor.mcpserver.handlers.ServerOptions`);
- :mod:`executor.mcpserver.bridge`: a child in a thread, its progress and cancellation;
- :mod:`executor.mcpserver.server`: the SDK server, stdio and streamable HTTP.

Only :mod:`executor.mcpserver.server` imports the ``mcp`` SDK, and only ``corral
mcp`` imports it: ``corral --help`` and every other command never load it.
"""

__all__: list[str] = []
