#!/usr/bin/env python3
"""Benchmark corral's sandbox against the plain operations it wraps, in the same run.

Reports medians and the ratio corral / plain for:

- child workspace creation (snapshot of the parent's state + hardened worktree)
  vs ``git worktree add --detach``, on generated repositories (10k and 50k
  files by default);
- one sandboxed command (``true``) vs a plain ``subprocess.run``, per backend
  (host, bubblewrap, docker exec);
- diff collection (stop, scan, private index, ``diff-index --binary``) vs
  ``git diff`` with a temporary index (``read-tree HEAD; add -A;
  diff --cached --binary``).

Usage::

    .venv/bin/python scripts/bench_sandbox.py                 # 10k and 50k files
    .venv/bin/python scripts/bench_sandbox.py --sizes 2000 --repeat 2 --exec-runs 10  # quick
    .venv/bin/python scripts/bench_sandbox.py --json bench-results/sandbox.json

Repositories are generated in a temporary directory (``--workdir`` to choose
where: worktree creation is I/O-bound, so the filesystem matters).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policies.contract import SandboxMode
from sandbox.config import BubblewrapConfig, DockerConfig, HostConfig, Limits
from sandbox.errors import BackendUnavailable
from sandbox.factory import open_sandbox, probe

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
EDITS = 20


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> bytes:
    done = subprocess.run(["git", *args], cwd=repo, env={**GIT_ENV, **(env or {})},
                          capture_output=True, check=True)
    return done.stdout


def generate_repo(root: Path, files: int) -> Path:
    """``files`` small text files, 100 per directory, in one commit."""
    repo = root / f"repo-{files}"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for i in range(files):
        directory = repo / f"d{i // 1000:03d}" / f"s{(i // 100) % 10}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{i:06d}.txt").write_text(
            f"file {i}\n" + "lorem ipsum dolor sit amet\n" * 6)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "generated")
    return repo


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def edit(tree: Path) -> None:
    """The same small change in any checkout: modify, add, delete."""
    texts = sorted(tree.glob("d000/s0/*.txt"))
    for path in texts[:EDITS]:
        path.write_text(path.read_text() + "edited\n")
    for i in range(EDITS // 2):
        (tree / f"new-{i}.txt").write_text(f"new file {i}\n")
    texts[-1].unlink()


def _round(repo: Path, work: Path, i: int, state: Path) -> tuple[float, float, float, float]:
    """One repetition: (plain create, corral create, plain diff, corral diff)."""
    plain_wt = work / f"plain-{i}"
    index = work / f"plain-{i}.index"
    sandbox: Any = None

    def plain_create() -> None:
        git(repo, "worktree", "add", "-q", "--detach", str(plain_wt), "HEAD")

    def corral_create() -> None:
        nonlocal sandbox
        sandbox = open_sandbox(HostConfig(limits=Limits(max_diff_bytes=1 << 30)),
                               repo=repo, mode=SandboxMode.WORKTREE, state_root=state)

    def plain_diff() -> None:
        env = {"GIT_INDEX_FILE": str(index)}
        git(plain_wt, "read-tree", "HEAD", env=env)
        git(plain_wt, "add", "-A", env=env)
        git(plain_wt, "diff", "--cached", "--binary", "-M", "HEAD", env=env)

    # Alternate which goes first: this VM's disk slows down over consecutive checkouts.
    if i % 2:
        t_corral, t_plain = timed(corral_create), timed(plain_create)
    else:
        t_plain, t_corral = timed(plain_create), timed(corral_create)
    edit(plain_wt)
    edit(sandbox.root)
    d_plain, d_corral = timed(plain_diff), timed(sandbox.collect_diff)
    sandbox.teardown()
    git(repo, "worktree", "remove", "--force", str(plain_wt))
    return t_plain, t_corral, d_plain, d_corral


def bench_workspace(repo: Path, work: Path, repeat: int, state: Path) -> list[dict[str, Any]]:
    rounds = [_round(repo, work, i, state) for i in range(repeat)]
    create_plain, create_corral, diff_plain, diff_corral = (list(c) for c in zip(*rounds,
                                                                                 strict=True))
    return [row("workspace creation", create_plain, create_corral,
                "git worktree add --detach", "open_sandbox(worktree), host backend"),
            row("diff collection", diff_plain, diff_corral,
                "read-tree; add -A; diff --cached --binary", "collect_diff()")]


def bench_exec(repo: Path, state: Path, runs: int, backends: list[str]) -> list[dict[str, Any]]:
    rows = []
    configs: dict[str, Any] = {"host": HostConfig(), "bubblewrap": BubblewrapConfig(),
                               "docker": DockerConfig()}
    for name in backends:
        config = configs[name]
        try:
            probe(config)
        except BackendUnavailable as exc:
            print(f"skipping {name}: {exc.message}", file=sys.stderr)
            continue
        plain = [timed(lambda: subprocess.run(["true"], check=True)) for _ in range(runs)]
        with open_sandbox(config, repo=repo, mode=SandboxMode.READ_ONLY,
                          state_root=state) as sb:
            sb.exec(["true"])  # warm up
            corral = [timed(lambda sb=sb: sb.exec(["true"]).check()) for _ in range(runs)]
        rows.append(row(f"one command ({name})", plain, corral, "subprocess.run(['true'])",
                        f"Sandbox.exec(['true']) on {name}"))
    return rows


def row(operation: str, plain: list[float], corral: list[float], plain_what: str,
        corral_what: str) -> dict[str, Any]:
    p, c = statistics.median(plain), statistics.median(corral)
    return {"operation": operation, "plain_s": p, "corral_s": c, "ratio": c / p if p else None,
            "runs": len(plain), "plain": plain_what, "corral": corral_what}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,50000",
                        help="comma-separated repository sizes in files (default 10000,50000)")
    parser.add_argument("--repeat", type=int, default=3, help="workspace/diff repetitions")
    parser.add_argument("--exec-runs", type=int, default=30, help="commands per backend")
    parser.add_argument("--backends", default="host,bubblewrap,docker")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="corral-bench-", dir=args.workdir))
    results: list[dict[str, Any]] = []
    try:
        for size in (int(s) for s in args.sizes.split(",") if s):
            started = time.perf_counter()
            repo = generate_repo(base, size)
            print(f"generated {size} files in {time.perf_counter() - started:.1f}s",
                  file=sys.stderr)
            for entry in bench_workspace(repo, base, args.repeat, base / f"state-{size}"):
                results.append({**entry, "files": size})
        small = generate_repo(base / "exec", 10)
        results += [{**entry, "files": 10}
                    for entry in bench_exec(small, base / "state-exec", args.exec_runs,
                                            args.backends.split(","))]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{'operation':<26}{'files':>7}{'plain':>12}{'corral':>12}{'ratio':>8}  runs")
    for entry in results:
        print(f"{entry['operation']:<26}{entry['files']:>7}{entry['plain_s'] * 1000:>10.1f}ms"
              f"{entry['corral_s'] * 1000:>10.1f}ms{entry['ratio']:>7.2f}x  {entry['runs']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
