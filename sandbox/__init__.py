"""Where a child runs: worktrees, bubblewrap and docker backends, supervised processes.

Imports go one way: ``executor -> sandbox -> policies``; nothing here imports
``executor``. The public surface:

- :func:`open_sandbox` builds a :class:`Sandbox` from a backend config
  (:class:`HostConfig`, :class:`BubblewrapConfig`, :class:`DockerConfig`,
  :class:`AutoConfig`; :class:`FakeConfig` for tests) for a repository and a
  :class:`policies.contract.SandboxMode`;
- a :class:`Sandbox` runs commands (:meth:`Sandbox.exec`), offers the confined
  file API (:attr:`Sandbox.files`), and returns the child's diff
  (:meth:`Sandbox.collect_diff`) before :meth:`Sandbox.teardown`;
- :func:`acquire_snapshot` leases one shared snapshot of the parent's current state;
  worktree-mode sandboxes opened on it (``open_sandbox(..., snapshot=ref)``) are
  copy-on-write overlays over its single checkout where overlays work, else plain
  worktrees checked out from it (:attr:`Sandbox.workspace_kind` says which);
  :func:`release_snapshot` drops the lease (the last one removes the snapshot);
- :func:`gc` cleans what crashed runs left, keeping every captured diff.

``docker`` is imported only by :mod:`sandbox.backends.docker`, on first use.
"""

from sandbox.backends.fake import FakeSandbox, FakeScriptError, FakeStep
from sandbox.config import (
    DEFAULT_DOCKER_IMAGE,
    HOST_WARNING,
    AutoConfig,
    BackendConfig,
    BackendName,
    BubblewrapConfig,
    DockerConfig,
    FakeConfig,
    HostConfig,
    Limits,
)
from sandbox.errors import (
    BackendUnavailable,
    CommandTimeout,
    DiffTooLarge,
    OverlayUnavailable,
    PathDenied,
    SandboxConfigError,
    SandboxDenied,
    SandboxError,
    SandboxStateError,
    UnsafeRepository,
)
from sandbox.factory import (
    WorkspaceRequest,
    clear_probe_cache,
    open_sandbox,
    probe,
    resolve_backend,
)
from sandbox.files.confined import ConfinedFiles, DirEntry, EntryKind, FileInfo
from sandbox.gc import gc
from sandbox.protocol import Sandbox
from sandbox.results import (
    ChangedFile,
    DiffResult,
    ExcludedPath,
    ExecResult,
    GcEntry,
    GcReport,
    TeardownReport,
)
from sandbox.state import default_state_root
from sandbox.workspaces.snapshot import SnapshotRef, acquire_snapshot, release_snapshot

__all__ = [
    "DEFAULT_DOCKER_IMAGE",
    "HOST_WARNING",
    "AutoConfig",
    "BackendConfig",
    "BackendName",
    "BackendUnavailable",
    "BubblewrapConfig",
    "ChangedFile",
    "CommandTimeout",
    "ConfinedFiles",
    "DiffResult",
    "DiffTooLarge",
    "DirEntry",
    "DockerConfig",
    "EntryKind",
    "ExcludedPath",
    "ExecResult",
    "FakeConfig",
    "FakeSandbox",
    "FakeScriptError",
    "FakeStep",
    "FileInfo",
    "GcEntry",
    "GcReport",
    "HostConfig",
    "Limits",
    "OverlayUnavailable",
    "PathDenied",
    "Sandbox",
    "SandboxConfigError",
    "SandboxDenied",
    "SandboxError",
    "SandboxStateError",
    "SnapshotRef",
    "TeardownReport",
    "UnsafeRepository",
    "WorkspaceRequest",
    "acquire_snapshot",
    "clear_probe_cache",
    "default_state_root",
    "gc",
    "open_sandbox",
    "probe",
    "release_snapshot",
    "resolve_backend",
]
