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
  :func:`release_snapshot` drops the lease (after the last one the snapshot stays
  idle for the next run on the same state, a few per repository; gc ages them out);
- :func:`gc` cleans what crashed runs left, keeping every captured diff.

``docker`` is imported only by :mod:`sandbox.backends.docker`, on first use, and every
name here is imported from its module on first use (``import sandbox.config`` does not
load every backend).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Where each public name lives (imported on first use).
_WHERE = {
    "AutoConfig": "sandbox.config",
    "BackendConfig": "sandbox.config",
    "BackendName": "sandbox.config",
    "BackendUnavailable": "sandbox.errors",
    "BubblewrapConfig": "sandbox.config",
    "ChangedFile": "sandbox.results",
    "CommandTimeout": "sandbox.errors",
    "ConfinedFiles": "sandbox.files.confined",
    "DEFAULT_DOCKER_IMAGE": "sandbox.config",
    "DiffResult": "sandbox.results",
    "DiffTooLarge": "sandbox.errors",
    "DirEntry": "sandbox.files.confined",
    "DockerConfig": "sandbox.config",
    "EntryKind": "sandbox.files.confined",
    "ExcludedPath": "sandbox.results",
    "ExecResult": "sandbox.results",
    "FakeConfig": "sandbox.config",
    "FakeSandbox": "sandbox.backends.fake",
    "FakeScriptError": "sandbox.backends.fake",
    "FakeStep": "sandbox.backends.fake",
    "FileInfo": "sandbox.files.confined",
    "GcEntry": "sandbox.results",
    "GcReport": "sandbox.results",
    "HOST_WARNING": "sandbox.config",
    "HostConfig": "sandbox.config",
    "Limits": "sandbox.config",
    "OverlayUnavailable": "sandbox.errors",
    "PathDenied": "sandbox.errors",
    "Sandbox": "sandbox.protocol",
    "SandboxConfigError": "sandbox.errors",
    "SandboxDenied": "sandbox.errors",
    "SandboxError": "sandbox.errors",
    "SandboxStateError": "sandbox.errors",
    "SnapshotRef": "sandbox.workspaces.snapshot",
    "TeardownReport": "sandbox.results",
    "UnsafeRepository": "sandbox.errors",
    "WorkspaceRequest": "sandbox.factory",
    "acquire_snapshot": "sandbox.workspaces.snapshot",
    "clear_probe_cache": "sandbox.factory",
    "default_state_root": "sandbox.state",
    "gc": "sandbox.gc",
    "open_sandbox": "sandbox.factory",
    "probe": "sandbox.factory",
    "release_snapshot": "sandbox.workspaces.snapshot",
    "resolve_backend": "sandbox.factory",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
