"""``corral mcp``: corral as an MCP server, so any harness can delegate into it.

A front door over the Python API (:mod:`executor.api`), beside the CLI; the two
never import each other.

- :mod:`executor.mcpserver.command`: the ``corral mcp`` command (its options,
  its start);
- :mod:`executor.mcpserver.arguments`: each tool's arguments (its input schema);
- :mod:`executor.mcpserver.handlers`: what each tool does (a call of the API,
  bounded by how the server was started: :class:`~executor.mcpserver.handlers.ServerOptions`);
- :mod:`executor.mcpserver.progress`: a run's progress as notification lines;
- :mod:`executor.mcpserver.server`: the SDK server, stdio and streamable HTTP.

Only :mod:`executor.mcpserver.server` imports the ``mcp`` SDK, and only ``corral
mcp`` imports it: ``corral --help`` and every other command never load it.
"""

__all__: list[str] = []
