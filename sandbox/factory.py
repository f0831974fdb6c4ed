"""Building a sandbox from its configuration; ``auto`` resolution; availability probes.

Backends are probed for real, once per process and configuration: bubblewrap
runs ``/bin/true`` under the exact namespace flags commands use; docker must
answer a ping and have the image. ``auto`` takes bubblewrap, else docker, and
otherwise fails closed with :class:`BackendUnavailable` naming both reasons;
it never falls back to ``host``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import (
    AutoConfig,
    BackendConfig,
    BubblewrapConfig,
    DockerConfig,
    FakeConfig,
    HostConfig,
)
from sandbox.egress.proxy import EgressProxy
from sandbox.environment import (
    EnvironmentRef,
    environment_mounts,
    require_layer,
    verify_layer,
)
from sandbox.errors import BackendUnavailable, OverlayUnavailable, SandboxConfigError, SandboxError
from sandbox.interpreters import (
    Carried,
    find_carried,
    interpreter_mounts,
    verify_interpreters,
)
from sandbox.state import (
    SandboxMeta,
    SandboxState,
    check_state_dir,
    default_state_root,
    new_sandbox_id,
)
from sandbox.workspaces.create import (
    create_workspace,
    overlay_layers,
    overlay_workspace,
    worktree_from_snapshot,
)
from sandbox.workspaces.model import Workspace, WorkspaceKind
from sandbox.workspaces.overlay import (
    OverlayLayers,
    is_mountpoint,
    overlay_unsupported,
    unmount,
)
from sandbox.workspaces.repo import RepoInfo, inspect_repo
from sandbox.workspaces.scratch import (
    ScratchLayer,
    mount_scratch,
    scratch_unsupported,
    unmount_scratch,
)
from sandbox.workspaces.snapshot import (
    SnapshotRef,
    acquire_snapshot,
    drop_lease,
    lease_snapshot,
    release_snapshot,
    snapshot_checkout,
)
from sandbox.workspaces.worktree import remove_tree

__all__ = [
    "ConcreteConfig",
    "WorkspaceRequest",
    "clear_probe_cache",
    "open_sandbox",
    "overlays_unusable",
    "probe",
    "resolve_backend",
    "scratch_unusable",
]

ConcreteConfig = HostConfig | BubblewrapConfig | DockerConfig | FakeConfig
_PROBE_TIMEOUT = 20.0
_probes: dict[ConcreteConfig, BackendUnavailable | None] = {}


def clear_probe_cache() -> None:
    """Forget earlier probe results (tests, or after installing a backend)."""
    _probes.clear()


def _probe_bwrap(config: BubblewrapConfig) -> None:
    from sandbox.backends.bwrap import (  # noqa: PLC0415 - each backend on use
        bwrap_base_argv,
        seccomp_program,
    )
    from sandbox.backends.seccomp import program_fd  # noqa: PLC0415

    # The seccomp filter too: a kernel or bwrap that cannot install it fails here.
    program = seccomp_program(config)
    seccomp_fd = None if program is None else program_fd(program)
    argv = [*bwrap_base_argv(config.bwrap, tmp_size=1 << 20, seccomp_fd=seccomp_fd,
                             extra_ro=config.extra_ro_paths),
            "--remount-ro", "/", "--", "/bin/true"]
    try:
        done = subprocess.run(  # noqa: S603 - the real sandbox flags around /bin/true
            argv, capture_output=True, env={"PATH": os.defpath}, timeout=_PROBE_TIMEOUT,
            check=False, pass_fds=() if seccomp_fd is None else (seccomp_fd,),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailable(f"bwrap did not run: {exc}", code="bwrap_unavailable",
                                 operation="probe") from exc
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
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
        if not isinstance(config, DockerConfig):
            probe(config)
        # docker, asked for by name: opening the sandbox reports the same two failures (no
        # engine, no image) with the same hints, so a probe would only cost the run its time.
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
        hint="install bubblewrap, or start docker and run `corral image build`; "
        "'--backend host' runs without process isolation",
    )


WorkspaceRequest = Literal["auto", "overlay", "worktree"]


def overlays_unusable(state_root: Path | None = None) -> str | None:
    """Why a worktree-mode child opened on a shared snapshot under ``state_root`` would not be
    an overlay here (``None``: it would, unless the kernel refuses the mount, which
    :func:`open_sandbox` reports as the child's ``workspace_fallback``)."""
    return overlay_unsupported(state_root or default_state_root())


def scratch_unusable(config: BackendConfig | FakeConfig, repo: Path,
                     state_root: Path | None = None) -> str | None:
    """Why a read-only child of ``repo`` could not get a throwaway layer here (review
    commands, :mod:`sandbox.workspaces.scratch`): ``None`` when it could, unless the kernel
    refuses the mount."""
    if config.type == "host":
        return ("the host backend runs commands on your checkout itself: review commands "
                "need bubblewrap or docker")
    return scratch_unsupported(repo, state_root or default_state_root())


def open_sandbox(
    config: BackendConfig | FakeConfig,
    *,
    repo: Path,
    mode: SandboxMode,
    state_root: Path | None = None,
    snapshot: SnapshotRef | None = None,
    workspace: WorkspaceRequest = "auto",
    disposable: bool = False,
    environment: EnvironmentRef | None = None,
    denied: Mapping[str, str] | None = None,
    scratch_size: int | None = None,
    egress: EgressProxy | None = None,
) -> BaseSandbox:
    """Create a child's sandbox for ``repo`` in ``mode`` from the parent's current state.

    Everything created is recorded in the state dir before it is created, so a
    crash at any point leaves state :func:`sandbox.gc.gc` can clean. A state dir
    the child could reach (inside the repository, any git working tree or git
    dir, or the child's writable workspace) is refused first
    (:func:`sandbox.state.check_state_dir`).

    In worktree mode, ``snapshot`` (a lease from
    :func:`sandbox.workspaces.snapshot.acquire_snapshot` on the same repository and
    state root) makes the child start from that shared state: an overlay over the
    snapshot's checkout where overlays work (corral runs as root), else a plain
    worktree checked out from it; :attr:`Sandbox.workspace_kind` says which and
    :attr:`Sandbox.workspace_fallback` why not an overlay. The sandbox holds its own
    lease until teardown. Without ``snapshot`` a worktree child snapshots the
    parent itself, as before. ``workspace`` forces a kind: ``"overlay"`` fails
    (:class:`sandbox.errors.OverlayUnavailable`) instead of falling back, and
    snapshots the parent first when no ``snapshot`` is given; ``"worktree"`` never
    mounts. Other modes work on the parent's checkout and ignore both. ``disposable``:
    nothing in the sandbox is anyone's work (a check's or a reviewer's replay,
    :mod:`sandbox.replay`): ``gc`` removes it without capturing a diff.
    ``environment`` (:func:`sandbox.environment.prepare_environment`) puts a project's
    environment under the child: its variables in every command, its docker image or
    read-only host paths, and in worktree mode its setup layer and carried paths.
    ``denied`` (program name -> the pattern that denies it,
    :func:`policies.permissions.denied_programs`): programs covered by a stand-in in
    bubblewrap and docker (:mod:`sandbox.denials`; :attr:`BaseSandbox.denials` says where).
    ``scratch_size`` (read-only mode; review commands): the child's commands write a
    throwaway layer of that size over the checkout (:mod:`sandbox.workspaces.scratch`),
    never the checkout; ``scratch_unavailable`` where it cannot be mounted.
    ``egress`` (``--net allow``, :mod:`sandbox.egress`): commands reach that proxy, and
    nothing else, on their own loopback (bubblewrap and docker only: ``egress_unavailable``).
    """
    chosen = _with_environment(resolve_backend(config), environment)
    if egress is not None and chosen.type not in ("bubblewrap", "docker"):
        raise SandboxConfigError(
            f"--net allow needs a sandbox with a network namespace of its own; the {chosen.type} "
            "backend has none", code="egress_unavailable", operation="open_sandbox",
            hint="use --backend bubblewrap or docker, or leave --net allow out")
    info = inspect_repo(repo)
    root = state_root or default_state_root()
    # A state dir the child could write would let it rewrite other runs' diffs: refused
    # before anything is created (the workspace is the repository, or a worktree in it).
    check_state_dir(root, repositories=[info.top, info.git_dir, info.common_dir])
    worktree_mode = mode is SandboxMode.WORKTREE
    if worktree_mode and snapshot is not None:
        _check_snapshot(snapshot, info, root)
    kind: WorkspaceKind = "worktree" if worktree_mode else "checkout"
    fallback: str | None = None
    if worktree_mode and workspace != "worktree" and (snapshot or workspace == "overlay"):
        fallback = overlay_unsupported(root)
        if fallback is None:
            kind = "overlay"
        elif workspace == "overlay":
            raise OverlayUnavailable(fallback, operation="open_sandbox",
                                     hint="open it with workspace='auto' or 'worktree'")
    state = SandboxState(root, new_sandbox_id())
    state.create()
    worktree = state.worktree if worktree_mode else None
    meta = state.new_meta(
        backend=chosen.type, mode=mode, repo_top=info.top, git_dir=info.git_dir,
        common_dir=info.common_dir, workspace=worktree or info.top, worktree=worktree,
        private_git=state.private_git if mode is not SandboxMode.READ_ONLY else None,
        workspace_kind=kind, workspace_fallback=fallback, disposable=disposable,
        environment=environment.key if environment is not None else None,
    )
    state.write_meta(meta)
    opening = _Opening(chosen, info, mode, state, meta, forced=workspace == "overlay",
                       environment=environment, denied=denied,
                       scratch_size=scratch_size if mode is SandboxMode.READ_ONLY else None)
    opening.egress = egress
    own: SnapshotRef | None = None
    try:
        opening.plan_users()
        ref = snapshot if worktree_mode else None
        if kind == "overlay" and ref is None:
            ref = own = acquire_snapshot(info, state_root=root)
        if ref is not None:
            opening.record(snapshot_id=ref.id, snapshot_lease=lease_snapshot(ref, state.id))
        return opening.open(kind, ref, fallback)
    except BaseException:
        opening.abandon()
        raise
    finally:
        if own is not None:
            release_snapshot(own)  # the sandbox holds its own lease


def _check_snapshot(ref: SnapshotRef, info: RepoInfo, root: Path) -> None:
    if ref.repo.top != info.top or ref.state_root.resolve() != root.resolve():
        raise SandboxConfigError(
            f"snapshot {ref.id} is of {ref.repo.top} under the state dir {ref.state_root}, "
            f"not of {info.top} under {root}", code="snapshot_mismatch",
            operation="open_sandbox",
            hint="acquire the snapshot from the repository and state dir the child runs on",
        )


class _Opening:
    """One sandbox being opened: what it made so far, so a failure undoes all of it."""

    def __init__(self, config: ConcreteConfig, info: RepoInfo, mode: SandboxMode,
                 state: SandboxState, meta: SandboxMeta, *, forced: bool,
                 environment: EnvironmentRef | None = None,
                 denied: Mapping[str, str] | None = None,
                 scratch_size: int | None = None) -> None:
        self.config, self.info, self.mode, self.state, self.meta = (
            config, info, mode, state, meta)
        self.forced = forced
        self.denied = dict(denied or {})
        self.environment = environment
        self.scratch_size = scratch_size
        self.scratch: ScratchLayer | None = None
        self.sandbox: BaseSandbox | None = None
        self.layers: OverlayLayers | None = None
        self.user: tuple[int, int] | None = None
        self.chown: tuple[int, int] | None = None
        self.egress: EgressProxy | None = None

    def plan_users(self) -> None:
        """Docker: the uid commands run as, and the uid a new checkout is given to."""
        if isinstance(self.config, DockerConfig):
            from sandbox.backends.docker import plan_users  # noqa: PLC0415 - optional engine

            owner = self.info.top.stat()
            self.user, self.chown = plan_users(self.config, (owner.st_uid, owner.st_gid),
                                               self.mode, scratch=self.scratch_size is not None)

    def record(self, **fields: object) -> None:
        self.meta = self.meta.model_copy(update=fields)
        self.state.write_meta(self.meta)

    def open(self, kind: WorkspaceKind, ref: SnapshotRef | None,
             fallback: str | None) -> BaseSandbox:
        if (self.environment is not None and self.config.type != "host"
                and kind in ("overlay", "worktree")):
            require_layer(self.environment)  # before anything is mounted over it
        if kind == "overlay" and ref is not None:
            try:
                return self._start(self._overlay(ref))
            except OverlayUnavailable as exc:
                if self.forced:
                    raise
                self._undo_overlay()
                kind, fallback = "worktree", exc.message
                self.record(workspace_kind=kind, workspace_fallback=fallback)
        if ref is not None:
            workspace = worktree_from_snapshot(ref, self.state, chown=self.chown,
                                               fallback=fallback)
        else:
            workspace = create_workspace(self.info, self.mode, self.state, chown=self.chown)
        if self.scratch_size is not None:
            if self.config.type == "host":  # its commands run on the checkout itself
                raise SandboxConfigError(
                    "review commands need an isolating backend: on the host backend a "
                    "read-only agent's commands would write your checkout",
                    code="scratch_unavailable", operation="open_sandbox",
                    hint="use --backend bubblewrap or docker, or leave out review commands")
            self.record(scratch=self.state.worktree)
            self.scratch = workspace.scratch = mount_scratch(
                self.info.top, self.state.worktree, size=self.scratch_size)
        return self._start(workspace)

    def _overlay(self, ref: SnapshotRef) -> Workspace:
        checkout = snapshot_checkout(ref, self.chown or (os.geteuid(), os.getegid()))
        env = self.environment
        below = (env.layer,) if env is not None and env.layer is not None else ()
        self.layers = overlay_layers(checkout, self.state, below)
        self.record(overlay_lower=self.layers.lower, overlay_upper=self.layers.upper,
                    overlay_work=self.layers.work, overlay_below=below)
        return overlay_workspace(ref, self.state, checkout, self.layers)

    def _start(self, workspace: Workspace) -> BaseSandbox:
        env = self.environment
        if env is not None and workspace.kind in ("worktree", "overlay"):
            if env.alias is not None and self.config.type != "host":
                workspace.aliases = (env.alias,)
            if self.config.type != "host":
                workspace.extra_mounts += tuple(environment_mounts(
                    env, root=workspace.root, overlay=workspace.overlay is not None))
        carried = self._carried(workspace)
        check_state_dir(self.state.root,
                        workspaces=[m.origin for m in workspace.mounts() if m.writable])
        self.record(base_commit=workspace.base_commit, git_files=workspace.git_files,
                    worktree_owner=self.chown, shared_objects=workspace.shared_objects,
                    attributes=workspace.attributes, status="active")
        self.sandbox = _build(self.config, workspace=workspace, state=self.state,
                              meta=self.meta, user=self.user)
        if env is not None:
            self.sandbox._env_vars = env.env
        self.sandbox._denied = self.denied
        self.sandbox.egress = self.egress
        self.sandbox._start()
        if (env is not None and env.layer is not None and self.config.type != "host"
                and workspace.kind in ("worktree", "overlay")):
            layers = workspace.overlay
            verify_layer(self.sandbox, env, base=layers.lower if layers else workspace.root)
        if carried:
            verify_interpreters(self.sandbox, carried, backend=self.config.type,
                                image=getattr(self.config, "image", None))
        return self.sandbox

    def _carried(self, workspace: Workspace) -> list[Carried]:
        """The carried paths' interpreters from outside them (:mod:`sandbox.interpreters`),
        their installations added to ``workspace``'s read-only binds (not on host)."""
        env = self.environment
        if env is None or not env.spec.carry or self.config.type == "host":
            return []
        carried = find_carried(env.repo, env.spec.carry, guarded=(self.state.root,))
        visible = (workspace.root,) if workspace.kind == "checkout" else ()
        workspace.extra_mounts += tuple(interpreter_mounts(carried, visible=visible))
        return carried

    def _undo_overlay(self) -> None:
        """Take back an overlay that could not be used (the worktree replaces it)."""
        if self.sandbox is not None:
            self.sandbox._close()
            self.sandbox = None
        if self.layers is not None:
            unmount(self.layers.merged)
            remove_tree(self.layers.merged)
            remove_tree(self.layers.upper.parent)
            self.layers = None
        remove_tree(self.state.private_git)
        self.record(overlay_lower=None, overlay_upper=None, overlay_work=None)

    def abandon(self) -> None:
        """Undo everything (the open failed): nothing mounted, nothing left but gc-able state."""
        with contextlib.suppress(SandboxError):
            if self.sandbox is not None:
                self.sandbox._close()
        if self.layers is not None:
            with contextlib.suppress(SandboxError):
                unmount(self.layers.merged)
        if self.scratch is not None:
            with contextlib.suppress(SandboxError, OSError):
                unmount_scratch(self.scratch)
        if self.state.worktree.exists() and not is_mountpoint(self.state.worktree):
            remove_tree(self.state.worktree)
        self.state.remove_private()
        snapshot, lease = self.meta.snapshot_id, self.meta.snapshot_lease
        if snapshot and lease:
            drop_lease(self.state.root, snapshot, lease)


def _with_environment(config: ConcreteConfig, environment: EnvironmentRef | None
                      ) -> ConcreteConfig:
    """The backend config a child of ``environment`` runs with: its image (docker), its
    read-only host paths (bubblewrap)."""
    if environment is None:
        return config
    if isinstance(config, DockerConfig) and environment.image:
        return config.model_copy(update={"image": environment.image})
    if isinstance(config, BubblewrapConfig) and environment.ro_paths:
        return config.model_copy(update={
            "extra_ro_paths": (*config.extra_ro_paths, *environment.ro_paths)})
    return config


def _build(
    config: ConcreteConfig, *, workspace: Workspace, state: SandboxState, meta: SandboxMeta,
    user: tuple[int, int] | None,
) -> BaseSandbox:
    # Each backend's module is imported when a sandbox of it is built, never before.
    if isinstance(config, HostConfig):
        from sandbox.backends.host import HostSandbox  # noqa: PLC0415

        return HostSandbox(config=config, workspace=workspace, state=state, meta=meta)
    if isinstance(config, BubblewrapConfig):
        from sandbox.backends.bwrap import BubblewrapSandbox  # noqa: PLC0415

        return BubblewrapSandbox(config=config, workspace=workspace, state=state, meta=meta)
    if isinstance(config, FakeConfig):
        from sandbox.backends.fake import FakeSandbox  # noqa: PLC0415

        return FakeSandbox(config=config, workspace=workspace, state=state, meta=meta)
    from sandbox.backends.docker import DockerSandbox  # noqa: PLC0415 - optional engine

    return DockerSandbox(config=config, workspace=workspace, state=state, meta=meta,
                         user=user or (0, 0))
