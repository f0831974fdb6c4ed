"""``corral``, the command line: one module per command group, over :mod:`executor.api`.

- :mod:`executor.cli.app`: the group, its lazy command table, the one error
  renderer and :func:`main` (the ``corral`` entry point);
- commands: :mod:`~executor.cli.agents`, :mod:`~executor.cli.run`,
  :mod:`~executor.cli.fanout`, :mod:`~executor.cli.runs` (runs, show, diff,
  discard, gc), :mod:`~executor.cli.apply`, :mod:`~executor.cli.env`
  (``corral mcp`` is :mod:`executor.mcpserver.command`'s);
- views: :mod:`~executor.cli.agent_views`, :mod:`~executor.cli.run_views`,
  :mod:`~executor.cli.fanout_views` (text, every value escaped), and the live
  progress (:mod:`~executor.cli.progress`, drawn by :mod:`~executor.cli.live`).

Every command calls the API and renders what it returns; none imports the
run machinery itself.
"""

from executor.cli.app import LAZY_COMMANDS, LazyGroup, cli, main, render_error

__all__ = ["LAZY_COMMANDS", "LazyGroup", "cli", "main", "render_error"]
