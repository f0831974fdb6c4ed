#!/usr/bin/env python3
"""How a trivial ``corral run`` child scales with the repository: 50k files against 1k.

Issue 21's goal: every child as root is an overlay over the shared snapshot of
the checkout's state, so once that snapshot exists (a second run on the same
state reuses it) a child's set-up and diff cost what it changed. Measured:
``corral run --script`` of the trivial child of ``bench_e2e`` (one write, then
its answer), started as a fresh process as a user runs it, on bubblewrap, on
a 50k-file repository against the same run on a 1k-file one, both generated
alike (``benchlib.generate_repo``: staged, unstaged, deleted, untracked and
ignored files; dated an hour back with the index refreshed, so no entry is racily
clean, as in a checkout you work in). The warm-up run of each side makes its snapshot; every timed
run is a second run on the same state. Goal: at most 1.2x.

``--before DIR`` also times the same pair with the corral of another checkout
(``DIR/.venv/bin/corral``, e.g. ``/work/main`` before this change), with its
own state dir, in the same run: its 50k/1k ratio, and each size after against
before.

Rules as every benchmark here (``scripts/benchlib.py``): warmed, interleaved,
median and IQR, the workdir's filesystem and the machine printed. Run as root
(overlays need it; a normal user gets worktrees, and says so here).

Usage::

    .venv/bin/python scripts/bench_run_scaling.py [--quick] [--before /work/main]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_e2e import SCRIPT
from benchlib import (
    Row,
    compare,
    filesystem,
    generate_repo,
    machine,
    report,
    warm_index,
)

from sandbox.config import BubblewrapConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import overlays_unusable, probe

SIZES = (1000, 50000)
GROUP = "run scaling: a trivial corral run child, second run on the same state"


def _repo(base: Path, files: int) -> Path:
    """A generated repository whose index is not racy, as a checkout you work in is
    (``benchlib.warm_index``)."""
    repo = generate_repo(base, files)
    agents = repo / ".ngn" / "agents"
    agents.mkdir(parents=True)
    (agents / "w.md").write_text("---\nname: w\ndescription: writes\n"
                                 "tools: [read_file, write_file]\n---\nWrite it.\n")
    warm_index(repo)
    return repo


def _runner(entry: list[str], repo: Path, script: Path, env: dict[str, str],
            cwd: Path) -> Callable[[], None]:
    argv = [*entry, "run", "--root", str(repo), "--trust-project", "--no-personal", "--agent",
            "w", "--backend", "bubblewrap", "--json", "--script", str(script), "write n.txt"]

    def run() -> None:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"corral run failed: {done.stderr.decode()[-2000:]}")
        if json.loads(done.stdout)["status"] != "completed":
            raise RuntimeError(f"corral run did not complete: {done.stdout.decode()[:2000]}")
    return run


def _env(base: Path, name: str) -> dict[str, str]:
    home = base / f"home-{name}"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                  "CORRAL_CONFIG": str(home / "none.toml"),
                  "CORRAL_STATE_DIR": str(base / f"state-{name}")}


def _entry(checkout: Path) -> list[str]:
    corral = checkout / ".venv" / "bin" / "corral"
    if corral.exists():
        return [str(corral)]
    return [str(checkout / ".venv" / "bin" / "python"), "-m", "executor"]


def run_bench(*, trials: int, workdir: Path | None, before: Path | None = None) -> list[Row]:
    try:
        probe(BubblewrapConfig())
    except BackendUnavailable as exc:
        print(f"skipping run scaling: {exc.message}", file=sys.stderr)
        return []
    base = Path(tempfile.mkdtemp(prefix="corral-bench-scaling-", dir=workdir))
    where = filesystem(base)
    why_not = overlays_unusable(base / "state-after")
    if why_not is not None:
        print(f"note: children are worktrees here, not overlays: {why_not}", file=sys.stderr)
    rows: list[Row] = []
    try:
        repos = {files: _repo(base, files) for files in SIZES}
        script = base / "script.yaml"
        script.write_text(SCRIPT)
        small, large = SIZES
        sides = {"after": _entry(Path(__file__).resolve().parent.parent)}
        if before is not None:
            sides["before"] = _entry(before)
        runs = {(name, files): _runner(entry, repos[files], script, env, base)
                for name, entry in sides.items() for env in [_env(base, name)]
                for files in SIZES}
        label = f"corral run --script on bubblewrap, {large // 1000}k files"
        plain, corral = compare(runs["after", small], runs["after", large], trials=trials,
                                warmup=1, sync=True)
        rows.append(Row(GROUP, label, f"the same run on {small // 1000}k files", plain, corral,
                        where, goal=1.2))
        if before is not None:
            plain, corral = compare(runs["before", small], runs["before", large],
                                    trials=trials, warmup=1, sync=True)
            rows.append(Row(GROUP, f"{label}, before ({before})",
                            f"the same run on {small // 1000}k files, before", plain, corral,
                            where))
            for files in SIZES:
                plain, corral = compare(runs["before", files], runs["after", files],
                                        trials=trials, warmup=1, sync=True)
                rows.append(Row(GROUP, f"after against before, {files // 1000}k files",
                                f"the same run, before ({before})", plain, corral, where))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="4 trials")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout whose corral to time too (DIR/.venv)")
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm"),  # noqa: S108 - mkdtemp
                        help="where the repositories live (default tmpfs)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows = run_bench(trials=4 if args.quick else args.trials, workdir=args.workdir,
                     before=args.before)
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
