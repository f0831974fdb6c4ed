#!/usr/bin/env python3
"""Every like-for-like benchmark in one run, one table: each of issue 9's ratios.

Runs, in order: start-up (``bench_startup``), the end-to-end trivial scripted
child on host / bubblewrap / docker (``bench_e2e``), how that child's run scales
from 1k to 50k files (``bench_run_scaling``), the sandbox's workspace,
diff and one-command rows (``bench_sandbox``), a worktree child's diff against
``git diff HEAD`` at 10k and 100k files (``bench_diff``) and the loader
(``bench_loader``);
prints the machine once, then every row (plain and corral medians with IQR, the
ratio, where the workdir lives). The fanout benchmark has its own report
(``scripts/bench_fanout.py``, ``--with-fanout`` runs it after this table), and
so has the Ray path (``scripts/bench_ray.py``, a local 2-node cluster against
the local pool: ``--with-ray`` runs it after this table; it needs ``corral[ray]``).

Usage::

    .venv/bin/python scripts/bench_all.py            # the figures of docs/benchmarks.md
    .venv/bin/python scripts/bench_all.py --quick    # a minute or two
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_diff
import bench_e2e
import bench_loader
import bench_run_scaling
import bench_sandbox
import bench_startup
from benchlib import Row, filesystem, machine, markdown_rows, print_rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm"),  # noqa: S108 - mkdtemp
                        help="where generated repositories live (default tmpfs)")
    parser.add_argument("--sizes", default="10000", help="workspace/diff repository sizes")
    parser.add_argument("--diff-sizes", default="10000,100000",
                        help="repository sizes of the worktree diff rows (bench_diff)")
    parser.add_argument("--backends", default="host,bubblewrap,docker")
    parser.add_argument("--with-fanout", action="store_true")
    parser.add_argument("--with-ray", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--markdown", type=Path, default=None,
                        help="also write docs/benchmarks.md's table (with the machine) here")
    args = parser.parse_args()
    quick = args.quick
    backends = args.backends.split(",")
    host = machine()
    print(f"machine: {host}", flush=True)
    rows: list[Row] = []
    rows += bench_startup.run_bench(trials=8 if quick else 30, workdir=args.workdir)
    rows += bench_e2e.run_bench(trials=4 if quick else 9, workdir=args.workdir,
                                backends=backends)
    if "bubblewrap" in backends:
        rows += bench_run_scaling.run_bench(trials=4 if quick else 9, workdir=args.workdir)
    rows += bench_sandbox.run_bench(
        sizes=[2000] if quick else [int(s) for s in args.sizes.split(",")],
        workdirs=[args.workdir], trials=5 if quick else 9, exec_trials=15 if quick else 40,
        backends=backends)
    rows += bench_diff.run_bench(
        sizes=[2000] if quick else [int(s) for s in args.diff_sizes.split(",")],
        workdir=args.workdir, trials=5 if quick else 9)
    rows += bench_loader.run_bench(trials=3 if quick else 9)
    print_rows(rows)
    end = os.getloadavg()[0]
    print(f"load average {end:.2f} at the end")
    if args.markdown:
        args.markdown.write_text(markdown_rows(
            rows, machine_line=f"{host}, {end:.2f} at the end",
            after=f"; workdir {filesystem(args.workdir)}"))
    if args.json:
        args.json.write_text(json.dumps({"machine": host,
                                         "rows": [r.to_json() for r in rows]}, indent=2) + "\n")
    if args.with_fanout:
        fanout = [sys.executable, str(Path(__file__).with_name("bench_fanout.py"))]
        subprocess.run([*fanout, "--quick"] if quick else fanout, check=True)
    if args.with_ray:  # its own process: it starts (and stops) a local Ray cluster
        ray = [sys.executable, str(Path(__file__).with_name("bench_ray.py"))]
        subprocess.run([*ray, "--quick"] if quick else ray, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
