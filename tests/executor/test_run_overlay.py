"""A top-level ``corral run`` child is an overlay over the shared snapshot of its state.

As root (where overlays work), a worktree-mode run acquires the snapshot of the
checkout's current state and its child is a copy-on-write overlay over it, as a
fanout's children are; the snapshot stays idle afterwards and the next run on the
same state reuses it (no commit, no checkout). Where overlays do not work (a normal
user) a run is a plain worktree, as before, and takes no snapshot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from exec_support import BACKENDS, agent_file, git

from executor.cli import cli
from sandbox.factory import overlays_unusable
from sandbox.state import default_state_root

TURNS: list[dict[str, object]] = [
    {"tool_calls": [{"name": "shell", "arguments": {
        "command": "stat -f -c %T . > fs.txt && cat README.md >> fs.txt"}}]},
    {"text": "done"},
]


def _run(repo: Path, tmp_path: Path, backend: str) -> dict[str, object]:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(TURNS))
    result = CliRunner().invoke(cli, [
        "run", "--root", str(repo), "--trust-project", "--no-personal", "--agent", "w",
        "--backend", backend, "--json", "--script", str(script), "look"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _snapshots() -> list[Path]:
    base = default_state_root() / "snapshots"
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def _patch(data: dict[str, object]) -> str:
    return str(data["diff"])


@pytest.mark.skipif(overlays_unusable() is not None, reason=str(overlays_unusable()))
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_second_run_on_the_same_state_reuses_the_snapshot_as_its_overlay(
        backend: str, repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [shell]")
    (repo / "README.md").write_text("the parent's unstaged state\n")
    first = _run(repo, tmp_path, backend)
    [snapshot] = _snapshots()
    checkout = next((snapshot / "checkouts").iterdir()) / "tree"
    inode = checkout.stat().st_ino
    assert not any((snapshot / "leases").iterdir())  # idle, kept for the next run
    second = _run(repo, tmp_path, backend)
    assert _snapshots() == [snapshot] and checkout.stat().st_ino == inode
    for data in (first, second):
        assert "+overlayfs" in _patch(data)
        assert "+the parent's unstaged state" in _patch(data)
    assert not (repo / "fs.txt").exists()
    (repo / "README.md").write_text("another state\n")
    third = _run(repo, tmp_path, backend)
    assert "+another state" in _patch(third) and len(_snapshots()) == 2


def test_where_overlays_do_not_work_a_run_is_a_worktree_and_takes_no_snapshot(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("executor.run.opening.overlays_unusable",
                        lambda state_root=None: "overlays need root here")
    agent_file(repo, "w", "tools: [shell]")
    data = _run(repo, tmp_path, "host")
    assert "+overlayfs" not in _patch(data) and "+# Project" in _patch(data)
    assert _snapshots() == []
    assert git(repo, "status", "--porcelain") == "?? .ngn/\n"
