"""Building a sandbox from its configuration; ``auto`` resolution; availability probes.

Backends are probed for real, once per process and configuration: bubblewrap
runs ``/bin/true`` under the exact namespace flags commands use; docker must
answer a ping and have the image. ``auto`` takes bubblewrap, else docker, and
otherwise fails closed with :class:`BackendUnavailable` naming both reasons;
it never falls back to ``host``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from policies.contract import SandboxMode
from sandbox.backends.bwrap import BubblewrapSandbox, bwrap_base_argv
from sandbox.backends.fake import FakeSandbox
from sandbox.backends.host import HostSandbox
from sandbox.base import BaseSandbox
from sandbox.config import (
    AutoConfig,
    BackendConfig,
    BubblewrapConfig,
    DockerConfig,
    FakeConfig,
    HostConfig,
)
from sandbox.errors import BackendUnavailable
from sandbox.state import (
    SandboxMeta,
    SandboxState,
    check_state_dir,
    default_state_root,
    new_sandbox_id,
)
from sandbox.workspaces.create import create_workspace
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.repo import inspect_repo
from sandbox.workspaces.worktree import remove_tree

__all__ = ["ConcreteConfig", "clear_probe_cache", "open_sandbox", "probe", "resolve_backend"]

ConcreteConfig = HostConfig | BubblewrapConfig | DockerConfig | FakeConfig
_PROBE_TIMEOUT = 20.0
_probes: dict[ConcreteConfig, BackendUnavailable | None] = {}


def clear_probe_cache() -> None:
    """Forget earlier probe results (tests, or after installing a backend)."""
    _probes.clear()


def _probe_bwrap(config: BubblewrapConfig) -> None:
    argv = [*bwrap_base_argv(config.bwrap, tmp_size=1 << 20, extra_ro=config.extra_ro_paths),
            "--remount-ro", "/", "--", "/bin/true"]
    try:
        done = subprocess.run(  # noqa: S603 - the real sandbox flags around /bin/true
            argv, capture_output=True, env={"PATH": os.defpath}, timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailable(f"bwrap did not run: {exc}", code="bwrap_unavailable",
                                 operation="probe") from exc
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise BackendUnavailable(
            f"bwrap failed its probe (exit {done.returncode}): {stderr[:300] or 'no output'}",
            code="bwrap_unavailable", operation="probe",
            hint="user namespaces may be disabled (kernel.unprivileged_userns_clone, AppArmor)",
        )


def probe(config: ConcreteConfig) -> None:
    """Raise :class:`BackendUnavailable` unless the backend works here (cached)."""
    if config not in _probes:
        try:
            if isinstance(config, BubblewrapConfig):
                _probe_bwrap(config)
            elif isinstance(config, DockerConfig):
                from sandbox.backends.docker import probe_docker  # noqa: PLC0415 - optional engine

                probe_docker(config)
            _probes[config] = None
        except BackendUnavailable as exc:
            _probes[config] = exc
    failure = _probes[config]
    if failure is not None:
        raise failure


def resolve_backend(config: BackendConfig | FakeConfig) -> ConcreteConfig:
    """The concrete backend ``config`` selects, probed; ``auto`` fails closed."""
    if not isinstance(config, AutoConfig):
        probe(config)
        return config
    reasons: dict[str, str] = {}
    candidates: list[ConcreteConfig] = [config.bubblewrap, config.docker]
    for candidate in candidates:
        chosen = candidate.model_copy(update={"limits": config.limits})
        try:
            probe(chosen)
        except BackendUnavailable as exc:  # each reason keeps its own fix
            reasons[chosen.type] = exc.message + (f" ({exc.hint})" if exc.hint else "")
            continue
        return chosen
    raise BackendUnavailable(
        "no isolating backend works here (tried bubblewrap, then docker)",
        code="no_isolation_backend", operation="resolve_backend", context=reasons,
        hint="install bubblewrap, or start docker and run scripts/build_sandbox_image.sh; "
        "'--backend host' runs without process isolation",
    )


def open_sandbox(
    config: BackendConfig | FakeConfig,
    *,
    repo: Path,
    mode: SandboxMode,
    state_root: Path | None = None,
) -> BaseSandbox:
    """Create a child's sandbox for ``repo`` in ``mode`` from the parent's current state.

    Everything created is recorded in the state dir before it is created, so a
    crash at any point leaves state :func:`sandbox.gc.gc` can clean. A state dir
    the child could reach (inside the repository, any git working tree or git
    dir, or the child's writable workspace) is refused first
    (:func:`sandbox.state.check_state_dir`).
    """
    chosen = resolve_backend(config)
    info = inspect_repo(repo)
    root = state_root or default_state_root()
    # A state dir the child could write would let it rewrite other runs' diffs: refused
    # before anything is created (the workspace is the repository, or a worktree in it).
    check_state_dir(root, repositories=[info.top, info.git_dir, info.common_dir])
    state = SandboxState(root, new_sandbox_id())
    state.create()
    worktree = state.worktree if mode is SandboxMode.WORKTREE else None
    meta = state.new_meta(
        backend=chosen.type, mode=mode, repo_top=info.top, git_dir=info.git_dir,
        common_dir=info.common_dir, workspace=worktree or info.top, worktree=worktree,
        private_git=state.private_git if mode is not SandboxMode.READ_ONLY else None,
    )
    state.write_meta(meta)
    sandbox: BaseSandbox | None = None
    try:
        user: tuple[int, int] | None = None
        chown = None
        if isinstance(chosen, DockerConfig):
            from sandbox.backends.docker import plan_users  # noqa: PLC0415 - optional engine

            owner = info.top.stat()
            user, chown = plan_users(chosen, (owner.st_uid, owner.st_gid), mode)
        workspace = create_workspace(info, mode, state, chown=chown)
        check_state_dir(root, workspaces=[m.path for m in workspace.mounts() if m.writable])
        meta = meta.model_copy(update={
            "base_commit": workspace.base_commit, "git_files": workspace.git_files,
            "worktree_owner": chown, "status": "active",
        })
        state.write_meta(meta)
        sandbox = _build(chosen, workspace=workspace, state=state, meta=meta, user=user)
        sandbox._start()
    except BaseException:
        if sandbox is not None:
            sandbox._close()
        if worktree is not None:
            remove_tree(worktree)
        state.remove_private()
        raise
    return sandbox


def _build(
    config: ConcreteConfig, *, workspace: Workspace, state: SandboxState, meta: SandboxMeta,
    user: tuple[int, int] | None,
) -> BaseSandbox:
    if isinstance(config, HostConfig):
        return HostSandbox(config=config, workspace=workspace, state=state, meta=meta)
    if isinstance(config, BubblewrapConfig):
        return BubblewrapSandbox(config=config, workspace=workspace, state=state, meta=meta)
    if isinstance(config, FakeConfig):
        return FakeSandbox(config=config, workspace=workspace, state=state, meta=meta)
    from sandbox.backends.docker import DockerSandbox  # noqa: PLC0415 - optional engine

    return DockerSandbox(config=config, workspace=workspace, state=state, meta=meta,
                         user=user or (0, 0))
