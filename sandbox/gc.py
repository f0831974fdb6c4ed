"""Cleaning what crashed runs left behind, without losing a diff (``corral gc``).

For every ``sandboxes/<id>`` under the state root whose owner process is gone
(pid *and* start time must match, so a reused pid does not keep state alive):

1. stop it: remove its container, kill and remove its cgroup;
2. capture its diff if it had a writable workspace and none was captured yet
   (the same hardened computation as ``collect_diff``, persisted under
   ``results/<id>/``); if that is refused (say the repository's config now
   names a program), keep everything and report it, unless ``force``;
3. remove the worktree, then the private state (with the private git dir).

Captured diffs under ``results/`` are never removed. Containers labelled by
corral for this state root and cgroups under ``corral/`` that belong to no
sandbox dir are removed as orphans.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from policies.contract import SandboxMode
from sandbox.config import DockerConfig
from sandbox.diff import compute_diff
from sandbox.errors import BackendUnavailable, SandboxError
from sandbox.limits import PidsCgroup, cgroup_group, find_pids_hierarchy
from sandbox.results import GcEntry, GcReport
from sandbox.state import SandboxMeta, SandboxState, default_state_root, owner_alive
from sandbox.workspace import RepoInfo, Workspace, remove_tree

__all__ = ["gc"]

_GC_MAX_DIFF = 1 << 40  # gc keeps whatever the child made: no cap


def gc(
    state_root: Path | None = None, *, force: bool = False, docker: DockerConfig | None = None
) -> GcReport:
    """Clean every abandoned sandbox under ``state_root`` (see the module docstring)."""
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
    return GcReport(entries=tuple(entries))


def _docker_config(meta: SandboxMeta, docker: DockerConfig | None) -> DockerConfig:
    if meta.docker_base_url:
        return DockerConfig(base_url=meta.docker_base_url)
    return docker or DockerConfig()


def _clean(
    meta: SandboxMeta, state: SandboxState, *, force: bool, docker: DockerConfig | None
) -> GcEntry:
    if meta.container:
        from sandbox.docker_backend import remove_container  # noqa: PLC0415 - optional engine

        remove_container(_docker_config(meta, docker), meta.container)
    if meta.cgroup is not None and meta.cgroup.exists():
        PidsCgroup.attach(meta.cgroup).remove()
    result = state.load_result()
    detail = ""
    writable = meta.mode is not SandboxMode.READ_ONLY
    baseline = state.dir / "baseline.index"
    if result is None and writable and meta.base_commit and baseline.is_file():
        workspace = Workspace(
            repo=RepoInfo(top=meta.repo_top, git_dir=meta.git_dir, common_dir=meta.common_dir,
                          head=None),
            mode=meta.mode, root=meta.workspace, base_commit=meta.base_commit,
            baseline_index=baseline, worktree=meta.worktree, private_git=meta.private_git,
            git_files=meta.git_files,
        )
        try:
            result = compute_diff(workspace, state, max_bytes=_GC_MAX_DIFF)
        except SandboxError as exc:
            if not force:
                return GcEntry(sandbox_id=state.id, action="kept",
                               detail=f"diff not captured ({exc.code}): {exc.message}")
            detail = f"removed without its diff ({exc.code})"
    if meta.worktree is not None:
        remove_tree(meta.worktree)
    state.remove_private()
    return GcEntry(sandbox_id=state.id, action="cleaned",
                   patch_path=result.patch_path if result else None, detail=detail)


def _orphan_containers(root: Path, alive: set[str], docker: DockerConfig | None) -> list[GcEntry]:
    from sandbox.docker_backend import list_corral_containers, remove_container  # noqa: PLC0415

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
    found = find_pids_hierarchy()
    parent = found[1] / "corral" / cgroup_group(root) if found else None
    if parent is None or not parent.is_dir():
        return []
    entries = []
    for path in sorted(p for p in parent.iterdir() if p.is_dir()):
        if path.name.startswith("corral-") and path.name not in alive:
            with contextlib.suppress(OSError):
                PidsCgroup.attach(path).remove()
                entries.append(GcEntry(sandbox_id=path.name, action="orphan_removed",
                                       detail=f"cgroup {path}"))
    return entries
