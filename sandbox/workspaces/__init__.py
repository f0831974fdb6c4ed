"""Where a child works, and how what it changed becomes a diff.

- :mod:`~sandbox.workspaces.repo`: the parent's repository as git reports it;
- :mod:`~sandbox.workspaces.staging`: the parent's current state as a commit in a
  private object store (:mod:`~sandbox.workspaces.privategit`);
- :mod:`~sandbox.workspaces.snapshot`: that snapshot shared: made once per state,
  leased by every child of it, checked out once per owner;
- :mod:`~sandbox.workspaces.worktree`: worktree mode's own checkout of a snapshot;
- :mod:`~sandbox.workspaces.overlay`: a copy-on-write overlay over a shared checkout;
- :mod:`~sandbox.workspaces.create`: the workspace of each mode and kind
  (:class:`~sandbox.workspaces.model.Workspace`);
- :mod:`~sandbox.workspaces.diff`: the child's diff, computed on the host, over a full
  index (:mod:`~sandbox.workspaces.diffcore`) or, for an overlay, from its upper layer
  (:mod:`~sandbox.workspaces.upper`, :mod:`~sandbox.workspaces.diffupper`,
  :mod:`~sandbox.workspaces.trees`);
- :mod:`~sandbox.workspaces.scan`, :mod:`~sandbox.workspaces.changes`,
  :mod:`~sandbox.workspaces.setid`: walks of a child-written tree that never follow a
  symlink (exclusions, the workspace-write manifest, the setuid sweep).

Nothing is re-exported here: import the module you need.
"""

__all__: list[str] = []
