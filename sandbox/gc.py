"""Cleaning what crashed runs left behind, without losing a diff (``corral gc``).

For every ``sandboxes/<id>`` under the state root whose owner process is gone
(pid *and* start time must match, so a reused pid does not keep state alive):

1. stop it: remove its container, kill and remove its cgroup. If that fails (the
   engine does not answer, the cgroup does not empty), it is kept and reported, even
   with ``force``: a child that may still run is neither diffed nor removed. gc goes on
   with the other sandboxes, and the next gc tries again;
2. clear setuid/setgid bits in its writable workspace (:mod:`sandbox.workspaces.setid`),
   then capture its diff unless the latest one was captured already (the meta's
   status is ``captured`` only until the child may have changed something
   again): the same hardened computation as ``collect_diff``, with no cap but
   streamed to ``results/<id>/`` rather than held in memory. If either is
   refused (say the repository's config now names a program), keep everything
   and report it, unless ``force``;
3. remove the worktree, then the private state (with the private git dir).

An overlay workspace (:mod:`sandbox.workspaces.overlay`) is mounted again if it
is not (after a reboot, or a teardown that failed), its diff captured from its
upper layer, then unmounted and removed, and its lease on the shared snapshot
dropped. Whatever happens to a sandbox, gc leaves its overlay unmounted (a kept one is
mounted again by the next gc): one sandbox's failure never leaves a mount behind.

Captured diffs under ``results/`` are never removed. Containers labelled by
corral for this state root, cgroups under ``corral/`` and overlay mounts under
``worktrees/`` that belong to no sandbox dir are removed as orphans. Last, the
leases of shared snapshots whose holders are gone are dropped, and every idle
snapshot unused for ``snapshot_max_idle`` (or of a repository that is gone) is
removed; the others stay for the next run on the same state
(:func:`sandbox.workspaces.snapshot.collect_snapshots`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from policies.contract import SandboxMode
from sandbox.backends.limits import PidsCgroup, cgroup_group, find_hierarchy
from sandbox.config import DockerConfig
from sandbox.errors import BackendUnavailable, SandboxError
from sandbox.results import GcEntry, GcReport
from sandbox.state import SandboxMeta, SandboxState, default_state_root, owner_alive
from sandbox.workspaces.diff import persist_diff, sweep_for_diff
from sandbox.workspaces.held import hold_created
from sandbox.workspaces.model import Workspace
from sandbox.workspaces.overlay import (
    OverlayLayers,
    is_mountpoint,
    mount_overlay,
    overlay_mounts,
    unmount,
)
from sandbox.workspaces.repo import RepoInfo
from sandbox.workspaces.scratch import ScratchLayer, scratch_mounts, unmount_scratch
from sandbox.workspaces.snapshot import DEFAULT_MAX_IDLE, collect_snapshots, drop_lease
from sandbox.workspaces.worktree import remove_tree

__all__ = ["gc"]


def gc(
    state_root: Path | None = None, *, force: bool = False, docker: DockerConfig | None = None,
    snapshot_max_idle: float = DEFAULT_MAX_IDLE,
) -> GcReport:
    """Clean every abandoned sandbox under ``state_root`` (see the module docstring);
    ``snapshot_max_idle``: how long (seconds) an idle shared snapshot stays for reuse."""
    root = state_root or default_state_root()
    entries: list[GcEntry] = []
    alive: set[str] = set()
    base = root / "sandboxes"
    for directory in sorted(base.iterdir()) if base.is_dir() else []:
        state = SandboxState(root, directory.name)
        try:
            meta = state.read_meta()
        except (OSError, ValueError):  # crashed before anything was created
            state.remove_private()
            entries.append(GcEntry(sandbox_id=state.id, action="cleaned", detail="no metadata"))
            continue
        if owner_alive(meta.owner_host, meta.owner_pid, meta.owner_started):
            alive.add(state.id)
            entries.append(GcEntry(sandbox_id=state.id, action="in_use",
                                   detail=f"owned by pid {meta.owner_pid}"))
            continue
        entry = _clean(meta, state, force=force, docker=docker)
        if entry.action == "kept":
            alive.add(state.id)
        entries.append(entry)
    entries += _orphan_containers(root, alive, docker)
    entries += _orphan_cgroups(root, alive)
    entries += _orphan_mounts(root, alive)
    entries += collect_snapshots(root, max_idle=snapshot_max_idle)
    return GcReport(entries=tuple(entries))


def _docker_config(meta: SandboxMeta, docker: DockerConfig | None) -> DockerConfig:
    if meta.docker_base_url:
        return DockerConfig(base_url=meta.docker_base_url)
    return docker or DockerConfig()


def _stop(meta: SandboxMeta, docker: DockerConfig | None) -> str | None:
    """Remove the sandbox's container and cgroup: ``None``, or why they are not gone."""
    try:
        if meta.container:
            from sandbox.backends.docker import remove_container  # noqa: PLC0415 - optional

            remove_container(_docker_config(meta, docker), meta.container)
        for cgroup in (meta.cgroup, meta.memory_cgroup):
            if cgroup is not None and cgroup.exists():
                PidsCgroup.attach(cgroup).remove()
    except SandboxError as exc:
        return f"not stopped ({exc.code}): {exc.message}"
    except OSError as exc:  # the cgroup did not empty in time
        return f"not stopped: {exc}"
    return None


def _clean(
    meta: SandboxMeta, state: SandboxState, *, force: bool, docker: DockerConfig | None
) -> GcEntry:
    baseline = state.dir / "baseline.index"
    workspace = _workspace(meta, baseline)
    layers = workspace.overlay
    try:
        return _clean_stopped(meta, state, workspace, force=force, docker=docker)
    finally:
        # A failure (an error, or the entry kept) leaves no mount: the next gc mounts it
        # again. A cleaned sandbox was unmounted already: this finds nothing.
        if layers is not None:
            with contextlib.suppress(SandboxError):
                unmount(layers.merged)


def _clean_stopped(meta: SandboxMeta, state: SandboxState, workspace: Workspace, *,
                   force: bool, docker: DockerConfig | None) -> GcEntry:
    why = _stop(meta, docker)
    if why is not None:
        return GcEntry(sandbox_id=state.id, action="kept", detail=f"{why}; run gc again")
    patch_path = state.patch_path if state.has_result() else None
    detail = ""
    cleared: list[str] = []
    writable = meta.mode is not SandboxMode.READ_ONLY
    baseline = state.dir / "baseline.index"
    layers = workspace.overlay
    try:
        stale = patch_path is None or meta.status != "captured"
        if meta.disposable:  # a replay: nothing to sweep or capture, only to remove
            stale = writable = False
        elif layers is not None and not layers.upper.is_dir():
            # Killed before its overlay was made: the child never ran, nothing to capture.
            stale = writable = False
            layers = None
        elif layers is not None and not is_mountpoint(layers.merged):
            # Unmounted by a reboot or a failed teardown, or by a teardown killed between
            # its unmount and the state's removal (its empty mount point may be gone too):
            # mount it again to sweep and diff.
            with contextlib.suppress(OSError):  # else the mount says why
                layers.merged.mkdir(mode=0o700, exist_ok=True)
            mount_overlay(layers)
        diffable = baseline.is_file() or layers is not None
        capture = stale and writable and bool(meta.base_commit) and diffable
        if capture:  # the sweep in one pass with the diff's walk, where it has one
            hold_created(workspace, state)  # the crashed child's config: out of the checkout
            swept = sweep_for_diff(workspace)
            cleared = list(swept.cleared)
            patch_path = persist_diff(workspace, state, swept=swept)
        elif writable:
            cleared = workspace.sweep_setid()
    except SandboxError as exc:
        if not force:  # the overlay is unmounted on the way out: mounted again next time
            return GcEntry(sandbox_id=state.id, action="kept", setid_cleared=tuple(cleared),
                           detail=f"diff not captured ({exc.code}): {exc.message}")
        detail = f"removed without its latest diff ({exc.code})"
    if layers is not None:
        unmount(layers.merged)
        if is_mountpoint(layers.merged):
            return GcEntry(sandbox_id=state.id, action="kept", patch_path=patch_path,
                           detail=f"{layers.merged} is still mounted")
    if meta.worktree is not None:
        remove_tree(meta.worktree)
    state.remove_private()
    if meta.snapshot_id and meta.snapshot_lease:
        drop_lease(state.root, meta.snapshot_id, meta.snapshot_lease)
    return GcEntry(sandbox_id=state.id, action="cleaned", patch_path=patch_path,
                   detail=detail, setid_cleared=tuple(cleared))


def _workspace(meta: SandboxMeta, baseline: Path) -> Workspace:
    """The workspace a meta describes, as far as a diff needs it."""
    layers = None
    if (meta.workspace_kind == "overlay" and meta.worktree and meta.overlay_lower
            and meta.overlay_upper and meta.overlay_work):
        layers = OverlayLayers(lower=meta.overlay_lower, upper=meta.overlay_upper,
                               work=meta.overlay_work, merged=meta.worktree,
                               below=tuple(p for p in meta.overlay_below if p.is_dir()))
    return Workspace(
        repo=RepoInfo(top=meta.repo_top, git_dir=meta.git_dir, common_dir=meta.common_dir,
                      head=None),
        mode=meta.mode, root=meta.workspace, base_commit=meta.base_commit,
        baseline_index=baseline if baseline.is_file() else None, worktree=meta.worktree,
        private_git=meta.private_git, git_files=meta.git_files,
        kind="overlay" if layers is not None else "worktree" if meta.worktree else "checkout",
        overlay=layers, shared_objects=meta.shared_objects, attributes=meta.attributes,
    )


def _orphan_mounts(root: Path, alive: set[str]) -> list[GcEntry]:
    """Overlay mounts under ``worktrees/`` that no live sandbox owns."""
    entries = []
    scratch = scratch_mounts(root / "worktrees")
    for sandbox_id, mountpoints in scratch.items():  # a read-only child's throwaway layer
        if sandbox_id in alive:
            continue
        with contextlib.suppress(SandboxError, OSError):
            unmount_scratch(ScratchLayer(root=mountpoints[-1], lower=Path("/"), size=0))
            entries.append(GcEntry(sandbox_id=sandbox_id, action="orphan_removed",
                                   detail=f"throwaway layer {mountpoints[-1]}"))
    for mountpoint in overlay_mounts(root / "worktrees"):
        if mountpoint.parent == root / "worktrees" and mountpoint.name in alive:
            continue
        if mountpoint.parent.name in scratch and mountpoint.parent.parent == root / "worktrees":
            continue  # a live throwaway layer's overlay (a dead one's went above)
        with contextlib.suppress(SandboxError):
            unmount(mountpoint)
            entries.append(GcEntry(sandbox_id=mountpoint.name, action="orphan_removed",
                                   detail=f"overlay mount {mountpoint}"))
    return entries


def _orphan_containers(root: Path, alive: set[str], docker: DockerConfig | None) -> list[GcEntry]:
    from sandbox.backends.docker import list_corral_containers, remove_container  # noqa: PLC0415

    config = docker or DockerConfig()
    try:
        containers = list_corral_containers(config, state_root=root)
    except BackendUnavailable:
        return []  # no engine, no containers
    entries = []
    for name, sandbox_id in containers.items():
        if sandbox_id not in alive:
            with contextlib.suppress(SandboxError):
                remove_container(config, name)
                entries.append(GcEntry(sandbox_id=sandbox_id, action="orphan_removed",
                                       detail=f"container {name}"))
    return entries


def _orphan_cgroups(root: Path, alive: set[str]) -> list[GcEntry]:
    entries = []
    mounts = {found[1] for found in map(find_hierarchy, ("pids", "memory")) if found}
    for mountpoint in sorted(mounts):  # one hierarchy each on cgroup v1, one on v2
        entries += _orphans_under(mountpoint / "corral" / cgroup_group(root), alive)
    return entries


def _orphans_under(parent: Path, alive: set[str]) -> list[GcEntry]:
    if not parent.is_dir():
        return []
    entries = []
    for path in sorted(p for p in parent.iterdir() if p.is_dir()):
        if path.name.startswith("corral-") and path.name not in alive:
            with contextlib.suppress(OSError):
                PidsCgroup.attach(path).remove()
                entries.append(GcEntry(sandbox_id=path.name, action="orphan_removed",
                                       detail=f"cgroup {path}"))
    return entries
