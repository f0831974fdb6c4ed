"""The host-side file API of a sandbox, confined to its workspace.

- :mod:`~sandbox.files.confined`: :class:`~sandbox.files.confined.ConfinedFiles`, the
  read, write, list, stat and glob operations the executor's file tools use;
- :mod:`~sandbox.files.resolver`: the one place a tool's path becomes a directory
  descriptor and a name (``openat``, ``O_NOFOLLOW`` at every step);
- :mod:`~sandbox.files.globbing`: glob patterns and a bounded walk that never enters ``.git``.

Nothing is re-exported here: import the module you need (or the names ``sandbox`` exports).
"""

__all__: list[str] = []
