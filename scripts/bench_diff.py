#!/usr/bin/env python3
"""A worktree child's diff collection against ``git diff HEAD`` on the same tree.

Issue 21's goal: where overlays cannot be used (a normal user), a worktree child's
diff is one pass over the tree, at most 2x ``git diff HEAD`` at 10k and 100k files.

- **corral**: ``collect_diff`` of a worktree child (forced: no overlay, as for a
  normal user) that changed one file: the setuid/setgid sweep, the scan for
  special files and nested repositories, the stat cache, ``git add``, the
  comparison and the patch, and the result persisted; everything a child's diff
  costs after its processes are stopped.
- **plain**: ``git diff HEAD --binary`` in a plain clone holding the same tree
  (the parent's uncommitted state replayed and committed, as corral's snapshot
  commits it), with a warm index (its files dated an hour back and refreshed:
  git's best case) and the same one change.

A reference row gives the floor of any diff that must ``lstat`` every file from
Python (the setuid sweep, and the stat cache's nanosecond ctime, which git 2.39
cannot give): one bare walk of the child's tree (``os.scandir`` and one
``lstat`` per entry, nothing checked) against the same ``git diff HEAD``.

Both sides are warmed and interleaved, one child collected again in every
trial (``scripts/benchlib.py``). The report names the code it measured.

Usage::

    .venv/bin/python scripts/bench_diff.py                   # 10k and 100k files, tmpfs
    .venv/bin/python scripts/bench_diff.py --quick           # 2k files, 5 trials
    .venv/bin/python scripts/bench_diff.py --sizes 10000 --workdir /var/tmp
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import (
    Row,
    child_change,
    compare,
    filesystem,
    generate_repo,
    git,
    machine,
    replay_state,
    report,
    scratch,
    uncommitted_state,
    warm_index,
)

import sandbox
from policies.contract import SandboxMode
from sandbox.config import HostConfig, Limits
from sandbox.factory import open_sandbox

GROUP = "worktree diff (no overlay)"
GOAL = 2.0
HOST = HostConfig(limits=Limits(max_diff_bytes=1 << 30))


def same_tree_clone(repo: Path, work: Path) -> Path:
    """A clone whose HEAD holds what corral's snapshot of ``repo`` holds (its uncommitted
    state replayed and committed), with a warm index: its files dated an hour back and
    refreshed (right after a checkout every entry is racily clean, and each ``git diff``
    would hash every file again)."""
    clone = work / "clone"
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    replay_state(repo, clone, uncommitted_state(repo))
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "the parent's uncommitted state")
    warm_index(clone)
    return clone


def bare_walk(root: Path) -> int:
    """One ``lstat`` per entry under ``root`` (not its ``.git``), nothing else; entries."""
    count = 0
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as listing:
            for entry in listing:
                if entry.name == ".git" and entry.path == f"{root}/.git":
                    continue
                entry.stat(follow_symlinks=False)
                count += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return count


def bench_size(repo: Path, work: Path, trials: int, files: int) -> list[Row]:
    clone = same_tree_clone(repo, work)
    child_change(clone, 1)
    child: Any = open_sandbox(HOST, repo=repo, mode=SandboxMode.WORKTREE,
                              state_root=work / "state", workspace="worktree")
    try:
        child_change(child.root, 1)
        plain_cell, corral_cell = compare(
            lambda: git(clone, "diff", "HEAD", "--binary"), child.collect_diff,
            trials=trials, sync=True)
        floor_plain, floor_cell = compare(
            lambda: git(clone, "diff", "HEAD", "--binary"), lambda: bare_walk(child.root),
            trials=trials, sync=True)
        diff = child.collect_diff()
        changed = len(diff.changed)
        plain_changed = len(git(clone, "diff", "HEAD", "--name-only", "-z").split(b"\0")) - 1
        kind = child.workspace_kind
    finally:
        child.teardown(discard=True)
    if (changed, plain_changed) != (1, 1):
        raise SystemExit(f"both sides must see one changed file: corral {changed}, "
                         f"git {plain_changed}")
    label = f"{files // 1000}k" if files >= 1000 else str(files)
    plain_what = "git diff HEAD --binary in a clone of the same tree, warm index, same change"
    return [Row(GROUP, f"diff of 1 changed file ({kind} child), {label} files", plain_what,
                plain_cell, corral_cell, filesystem(work), goal=GOAL),
            Row(GROUP, f"(reference: a bare Python lstat walk of it), {label} files",
                plain_what, floor_plain, floor_cell, filesystem(work))]


def run_bench(*, sizes: list[int], workdir: Path, trials: int) -> list[Row]:
    rows: list[Row] = []
    with scratch(workdir, "corral-bench-diff-") as base:
        for size in sizes:
            repo = generate_repo(base, size)
            work = base / f"work-{size}"
            work.mkdir()
            rows += bench_size(repo, work, trials, size)
            shutil.rmtree(repo.parent / repo.name)
            shutil.rmtree(work)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="repository sizes in files")
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm"),  # noqa: S108 - mkdtemp
                        help="where generated repositories live (default tmpfs)")
    parser.add_argument("--quick", action="store_true", help="2k files, 5 trials")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"code: {Path(sandbox.__file__).parent.parent}")
    rows = run_bench(sizes=[2000] if args.quick else [int(s) for s in args.sizes.split(",")],
                     workdir=args.workdir, trials=5 if args.quick else args.trials)
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
