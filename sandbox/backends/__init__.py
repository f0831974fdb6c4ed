"""Where a child's commands run: one module per backend, and what they share.

- :mod:`~sandbox.backends.host`: worktree isolation only (no OS isolation, said so loudly);
- :mod:`~sandbox.backends.bwrap`: Linux namespaces through ``bwrap``;
- :mod:`~sandbox.backends.docker`: one container per child (the only module importing
  ``docker``, loaded on first use);
- :mod:`~sandbox.backends.fake`: scripted commands over a real workspace (tests);
- :mod:`~sandbox.backends.process`: supervised local processes (timeouts, output caps, reaping);
- :mod:`~sandbox.backends.warm`: the host side of a warm sandbox (one supervisor per child);
- :mod:`~sandbox.backends.warm_init`: that supervisor, run inside the sandbox (stdlib only);
- :mod:`~sandbox.backends.limits`: pids cgroups and rlimits;
- :mod:`~sandbox.backends.standins`: docker's stand-ins for image directories a uid cannot enter.

Each backend is a :class:`sandbox.base.BaseSandbox`; :func:`sandbox.factory.open_sandbox`
builds them. Nothing is re-exported here: import the module you need.
"""

__all__: list[str] = []
