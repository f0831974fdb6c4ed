"""Where a child works, and how what it changed becomes a diff.

- :mod:`~sandbox.workspaces.repo`: the parent's repository as git reports it;
- :mod:`~sandbox.workspaces.snapshot`: the parent's current state as a commit in a
  private object store (:mod:`~sandbox.workspaces.privategit`);
- :mod:`~sandbox.workspaces.worktree`: worktree mode's checkout of that commit;
- :mod:`~sandbox.workspaces.create`: the workspace of each mode
  (:class:`~sandbox.workspaces.model.Workspace`);
- :mod:`~sandbox.workspaces.diff`: the child's diff, computed on the host;
- :mod:`~sandbox.workspaces.scan`, :mod:`~sandbox.workspaces.changes`,
  :mod:`~sandbox.workspaces.setid`: walks of a child-written tree that never follow a
  symlink (exclusions, the workspace-write manifest, the setuid sweep).

Nothing is re-exported here: import the module you need.
"""

__all__: list[str] = []
