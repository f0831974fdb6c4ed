#!/usr/bin/env python3
"""Benchmark N children from one snapshot against N raw ``git worktree add``, in one run.

Issue 8's benchmark. On generated repositories (10k and 50k files by default)
with uncommitted (staged, unstaged, deleted) and untracked state, for each
working directory given (by default one on tmpfs and one on disk), it prints
side by side:

- **workspace setup** for N = 1, 2, 4, 8 children: corral (one
  ``acquire_snapshot`` of the parent's current state, then N overlay sandboxes
  on it, host backend) against N raw ``git worktree add --detach`` each with the
  same uncommitted state replayed (``git diff HEAD --binary`` taken once, then
  ``git apply`` and a copy of the untracked files in every worktree). The goal:
  8 corral children cost at most 2x ONE raw worktree add;
- **diff** for k = 1 and 100 changed files: corral's ``collect_diff`` of an
  overlay child (and, for reference, of a plain worktree child) against ``git
  diff HEAD`` in a plain clone with the same k changes. The goal: corral's
  overlay diff does not grow with the repository.

Both sides are warmed once, then measured interleaved (the side that goes first
alternates) ``--repeat`` times, each measurement after a ``sync`` (so one side's
writeback is never billed to the other); each cell is the median with its
spread (min-max). Where each working directory lives (tmpfs or disk) is printed.
The plain clone's index is refreshed with its files dated back, so ``git diff``
does not re-hash "racily clean" files.

Usage::

    .venv/bin/python scripts/bench_fanout.py                       # 10k and 50k, tmpfs + disk
    .venv/bin/python scripts/bench_fanout.py --sizes 2000 --repeat 2 --workdirs /dev/shm
    .venv/bin/python scripts/bench_fanout.py --json bench-results/fanout.json
    .venv/bin/python scripts/bench_fanout.py --before   # also corral without shared snapshots
    .venv/bin/python scripts/bench_fanout.py --quick    # 2k files, tmpfs, 3 rounds

Overlays need root (CI runs as root); as a normal user corral falls back to
worktrees and the script says so in every corral row.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    child_change,
    filesystem,
    generate_repo,
    git,
    machine,
    settle,
    timed,
    warm_clone,
    warm_index,
)

from policies.contract import SandboxMode
from sandbox.base import BaseSandbox
from sandbox.config import HostConfig, Limits
from sandbox.factory import open_sandbox
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot

CONFIG = HostConfig(limits=Limits(max_diff_bytes=1 << 30))


def stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


# -- setup -------------------------------------------------------------------------------


class Fanout:
    """One side of the setup benchmark for one repository."""

    def __init__(self, repo: Path, work: Path) -> None:
        self.repo, self.work, self.kind = repo, work, ""
        self._round = 0

    def corral(self, n: int) -> float:
        state = self.work / "state"
        children: list[BaseSandbox] = []
        start = time.perf_counter()
        ref = acquire_snapshot(self.repo, state_root=state)
        for _ in range(n):
            children.append(open_sandbox(CONFIG, repo=self.repo, mode=SandboxMode.WORKTREE,
                                         state_root=state, snapshot=ref))
        elapsed = time.perf_counter() - start
        self.kind = children[0].workspace_kind + (
            f" (fallback: {children[0].workspace_fallback})"
            if children[0].workspace_fallback else "")
        for child in children:
            child.teardown(discard=True)
        release_snapshot(ref)
        return elapsed

    def before(self, n: int) -> float:
        """corral without a shared snapshot (as before issue 8): each child snapshots the
        parent and checks out a worktree of its own."""
        state = self.work / "state"
        start = time.perf_counter()
        children = [open_sandbox(CONFIG, repo=self.repo, mode=SandboxMode.WORKTREE,
                                 state_root=state) for _ in range(n)]
        elapsed = time.perf_counter() - start
        for child in children:
            child.teardown(discard=True)
        return elapsed

    def raw(self, n: int) -> float:
        self._round += 1
        trees = [self.work / f"raw-{self._round}-{i}" for i in range(n)]
        start = time.perf_counter()
        patch = git(self.repo, "diff", "HEAD", "--binary")
        untracked = [p for p in git(self.repo, "ls-files", "--others", "--exclude-standard",
                                    "-z").decode().split("\0") if p]
        for tree in trees:
            git(self.repo, "worktree", "add", "-q", "--detach", str(tree), "HEAD")
            if patch:
                git(tree, "apply", "--binary", "--index", "-", data=patch)
            for rel in untracked:
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.repo / rel, tree / rel)
        elapsed = time.perf_counter() - start
        for tree in trees:
            git(self.repo, "worktree", "remove", "--force", str(tree))
        return elapsed


def bench_setup(repo: Path, work: Path, counts: list[int], repeat: int, *,
                before: bool) -> list[dict[str, Any]]:
    work.mkdir(parents=True)
    fanout = Fanout(repo, work)
    sides: list[tuple[str, Callable[[int], float]]] = [("corral", fanout.corral),
                                                      ("raw", fanout.raw)]
    if before:
        sides.append(("before", fanout.before))
    for _, run in sides:  # warm every side
        run(1)
    samples: dict[tuple[str, int], list[float]] = {}
    for r in range(repeat):
        for n in counts:
            for name, run in sides if (r + n) % 2 else reversed(sides):
                settle()
                samples.setdefault((name, n), []).append(run(n))
    return [{"n": n, "corral_kind": fanout.kind,
             **{name: stats(samples[name, n]) for name, _ in sides}} for n in counts]


# -- diff --------------------------------------------------------------------------------



def bench_diff(repo: Path, work: Path, ks: list[int], repeat: int) -> list[dict[str, Any]]:
    work.mkdir(parents=True)
    state = work / "state"
    ref = acquire_snapshot(repo, state_root=state)
    clone = work / "clone"
    warm_clone(repo, clone)
    rows = []
    try:
        for k in ks:
            child_change(clone, k)
            samples: dict[str, list[float]] = {"overlay": [], "worktree": [], "git": []}
            for r in range(repeat + 1):  # round 0 warms every side and is not counted
                children = {kind: open_sandbox(
                    CONFIG, repo=repo, mode=SandboxMode.WORKTREE, state_root=state, snapshot=ref,
                    workspace="auto" if kind == "overlay" else "worktree")
                    for kind in ("overlay", "worktree")}
                for child in children.values():
                    child_change(child.root, k)
                calls: list[tuple[str, Callable[[], Any]]] = [
                    ("git", lambda: git(clone, "diff", "HEAD", "--binary")),
                    *((kind, child.collect_diff) for kind, child in children.items())]
                for name, call in calls if r % 2 else reversed(calls):
                    settle()
                    elapsed = timed(call)
                    if r:
                        samples[name].append(elapsed)
                for child in children.values():
                    child.teardown()
            git(clone, "checkout", "-q", "--", ".")
            git(clone, "clean", "-qfd")
            warm_index(clone)
            rows.append({"k": k, **{name: stats(values) for name, values in samples.items()}})
    finally:
        release_snapshot(ref)
    return rows


# -- report ------------------------------------------------------------------------------


def ms(cell: dict[str, float]) -> str:
    return f"{cell['median'] * 1000:8.1f} ({cell['min'] * 1000:.0f}-{cell['max'] * 1000:.0f})"


def report(results: list[dict[str, Any]]) -> None:
    for place in results:
        print(f"\n== {place['workdir']} ({place['filesystem']}) ==")
        for size in place["sizes"]:
            setup, diff = size["setup"], size["diff"]
            print(f"\n{size['files']} files; corral children: {setup[0]['corral_kind']}")
            before = "before" in setup[0]
            print(f"{'setup, N children':<20}{'corral ms (range)':>26}"
                  f"{'raw worktree add ms (range)':>32}{'ratio':>8}"
                  + (f"{'before issue 8 ms (range)':>30}" if before else ""))
            for row in setup:
                ratio = row["corral"]["median"] / row["raw"]["median"]
                print(f"{'N = ' + str(row['n']):<20}{ms(row['corral']):>26}"
                      f"{ms(row['raw']):>32}{ratio:>7.2f}x"
                      + (f"{ms(row['before']):>30}" if before else ""))
            one_raw = next(r["raw"]["median"] for r in setup if r["n"] == 1)
            eight = next((r["corral"]["median"] for r in setup if r["n"] == 8), None)
            if eight is not None:
                factor = eight / one_raw
                verdict = "met" if factor <= 2 else "MISSED"
                print(f"goal 8 children <= 2x one raw worktree add: {factor:.2f}x ({verdict})")
            print(f"{'diff, k files':<20}{'overlay ms (range)':>26}{'worktree ms':>24}"
                  f"{'git diff HEAD ms':>24}")
            for row in diff:
                print(f"{'k = ' + str(row['k']):<20}{ms(row['overlay']):>26}"
                      f"{ms(row['worktree']):>24}{ms(row['git']):>24}")
        sizes = place["sizes"]
        if len(sizes) > 1:
            small, large = sizes[0], sizes[-1]
            for a, b in zip(small["diff"], large["diff"], strict=True):
                growth = b["overlay"]["median"] / a["overlay"]["median"]
                git_growth = b["git"]["median"] / a["git"]["median"]
                print(f"diff k = {a['k']}: {small['files']} -> {large['files']} files: overlay "
                      f"{growth:.2f}x, git diff HEAD {git_growth:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,50000", help="repository sizes in files")
    parser.add_argument("--children", default="1,2,4,8", help="N values")
    parser.add_argument("--changed", default="1,100", help="k values (changed files)")
    parser.add_argument("--repeat", type=int, default=5, help="measured rounds per cell")
    parser.add_argument("--workdirs", default="/dev/shm,/var/tmp",  # noqa: S108 - mkdtemp in each
                        help="where repositories and state live (default: tmpfs, disk)")
    parser.add_argument("--before", action="store_true",
                        help="also time N children each with a snapshot and worktree of its "
                        "own (corral before issue 8)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--quick", action="store_true",
                        help="2k files, N = 1 and 8, 3 rounds, tmpfs only")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.children, args.repeat, args.workdirs = "2000", "1,8", 3, "/dev/shm"  # noqa: S108
    print(f"machine: {machine()}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    counts = [int(n) for n in args.children.split(",") if n]
    ks = [int(k) for k in args.changed.split(",") if k]
    results: list[dict[str, Any]] = []
    for workdir in (Path(w) for w in args.workdirs.split(",") if w):
        base = Path(tempfile.mkdtemp(prefix="corral-bench-fanout-", dir=workdir))
        place: dict[str, Any] = {"workdir": str(workdir), "filesystem": filesystem(base),
                                 "sizes": []}
        try:
            for size in sizes:
                started = time.perf_counter()
                repo = generate_repo(base, size)
                print(f"[{place['filesystem']}] generated {size} files in "
                      f"{time.perf_counter() - started:.1f}s", file=sys.stderr)
                setup = bench_setup(repo, base / f"setup-{size}", counts, args.repeat,
                                    before=args.before)
                diff = bench_diff(repo, base / f"diff-{size}", ks, args.repeat)
                place["sizes"].append({"files": size, "setup": setup, "diff": diff})
        finally:
            shutil.rmtree(base, ignore_errors=True)
        results.append(place)
    report(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
