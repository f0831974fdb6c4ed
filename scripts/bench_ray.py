#!/usr/bin/env python3
"""Benchmark ``corral fanout --on ray`` against the local pool: the Ray path's overhead.

Issue 22's benchmark. A local Ray cluster on this machine, bound to 127.0.0.1: a
head node that offers no sandbox and two worker nodes offering
``corral_sandbox`` (bubblewrap), 1 CPU and an 80 MB object store each, no
dashboard. For N = 8, 16, 32 scripted children (each writes one file and
finishes; no model, no check) it times one whole fanout
(``Corral.fanout``: snapshot, children, records, conflict matrix) on the local
pool (``--on local``) and on the cluster (``--on ray``), both with the same
``--jobs`` (4: the cluster's four slots), the same backend and repository.
The cluster keeps ``slots`` idle Ray workers per node (``num_workers_soft_limit``):
with 1 CPU a node would keep one and start a process (Python, corral) again for
the other slot's next child, which a real node with a core per slot does not.

**On one machine the point is overhead, not speed-up**: both sides share the
same two cores, so the Ray path can only cost more (the bundle, the unpacked
repository and a snapshot per node, the task round trips, the records carried
back). The figure that matters is the per-child overhead, ``(ray - local) / N``,
and how it grows with N; on a real cluster each node brings its own cores.

Both sides are warmed (the first Ray fanout of a commit also unpacks its bundle
on each node: that one-time cost is warmed away and reported on its own), then
measured interleaved, the side that goes first alternating; each cell is the
median with its interquartile range.

Usage::

    .venv/bin/python scripts/bench_ray.py
    .venv/bin/python scripts/bench_ray.py --quick          # N = 4, 8; 2 rounds
    .venv/bin/python scripts/bench_ray.py --json bench-results/ray.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Row, compare, filesystem, generate_repo, git, machine, print_rows

from executor.api import Corral
from executor.scheduling.node import node_resources

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
AGENT = "---\nname: w\ndescription: bench writer\ntools: [write_file]\n---\nWrite.\n"


def start_cluster(places: Path, slots: int) -> Any:
    # Read when Ray is imported: keep 127.0.0.1 (see DESIGN.md's measured facts).
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray  # noqa: PLC0415 - the optional extra, after the environment is set
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    resources = node_resources(backend="bubblewrap", slots=slots)
    if not resources:
        sys.exit("bubblewrap does not work here: no node could offer a sandbox")
    small = {"num_cpus": 1, "object_store_memory": 80 * MB, "node_ip_address": "127.0.0.1"}
    # A node keeps as many idle Ray workers as it has CPUs (1 here): the second slot's
    # worker would be killed when idle and started again (Python, corral) for the next
    # child. A real node has at least as many cores as slots; so has this cluster's pool.
    cluster = Cluster(initialize_head=True, head_node_args={
        **small, "include_dashboard": False,
        "_system_config": {"num_workers_soft_limit": slots}})
    ray.init(address=cluster.address, log_to_driver=False, runtime_env={"env_vars": {
        "PYTHONPATH": str(ROOT), "CORRAL_RAY_DIR": str(places)}})
    for _ in range(2):
        cluster.add_node(**small, resources=resources)
    cluster.wait_for_nodes()
    return cluster


def project(work: Path) -> Path:
    repo = generate_repo(work, 500, name="repo")
    agent = repo / ".ngn" / "agents" / "w.md"
    agent.parent.mkdir(parents=True)
    agent.write_text(AGENT)
    git(repo, "add", ".ngn")
    git(repo, "commit", "-qm", "agent")
    return repo


def script(work: Path) -> Path:
    path = work / "child.yaml"
    path.write_text(json.dumps([
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "out.txt", "content": "hello\n"}}]},
        {"text": "done"}]))
    return path


def run_bench(counts: list[int], *, trials: int, jobs: int, work: Path) -> list[Row]:
    repo = project(work)
    replay = script(work)
    corral = Corral(repo, trust_project=True, personal=False, backend="bubblewrap",
                    state_dir=work / "state")

    def fanout(n: int, on: str) -> None:
        result = corral.fanout("go", agents=["w"], scripts=[replay], n=n, jobs=jobs, on=on)
        if [c.status for c in result.children] != ["completed"] * n:
            sys.exit(f"a child did not complete: {json.dumps(result.to_json())[:2000]}")

    start = time.perf_counter()
    fanout(2, "ray")  # the commit's first Ray fanout: bundle, and an unpack on each node
    first = time.perf_counter() - start
    start = time.perf_counter()
    fanout(2, "ray")
    print(f"first Ray fanout of a commit (N=2, bundle + unpack per node): {first:.2f} s; "
          f"the next one: {time.perf_counter() - start:.2f} s", flush=True)
    where = f"{filesystem(work)}, bubblewrap, --jobs {jobs}"
    rows = []
    for n in counts:
        local, ray = compare(lambda n=n: fanout(n, "local"),
                             lambda n=n: fanout(n, "ray"),
                             trials=trials, warmup=1)
        rows.append(Row(group="fanout: local pool vs a 2-node Ray cluster on this machine",
                        operation=f"N={n} scripted children, --on ray", where=where,
                        plain_what=f"the same fanout, --on local ({n} children)",
                        plain=local, corral=ray))
        print(f"N={n}: local {local.text()}, ray {ray.text()}", flush=True)
    return rows


def overhead(rows: list[Row], counts: list[int]) -> list[dict[str, float]]:
    """Per child: (ray - local) / N, from the medians (and its spread from the IQRs)."""
    out = []
    for n, row in zip(counts, rows, strict=True):
        per = (row.corral.median - row.plain.median) / n
        low = (row.corral.iqr[0] - row.plain.iqr[1]) / n
        high = (row.corral.iqr[1] - row.plain.iqr[0]) / n
        out.append({"n": n, "per_child_s": per, "low_s": low, "high_s": high,
                    "local_per_child_s": row.plain.median / n,
                    "ray_per_child_s": row.corral.median / n})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--counts", default="8,16,32")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    counts = [4, 8] if args.quick else [int(c) for c in args.counts.split(",")]
    trials = 2 if args.quick else args.repeat
    print(f"machine: {machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="corral-bench-ray-", dir=args.workdir) as tmp:
        work = Path(tmp)
        cluster = start_cluster(work / "nodes", slots=args.jobs // 2 or 1)
        try:
            rows = run_bench(counts, trials=trials, jobs=args.jobs, work=work)
        finally:
            import ray  # noqa: PLC0415

            ray.shutdown()
            cluster.shutdown()
    print_rows(rows)
    per = overhead(rows, counts)
    print("\nper-child overhead of the Ray path, (ray - local) / N, from the medians:")
    for item in per:
        print(f"  N={item['n']:>3}: {item['per_child_s'] * 1000:7.1f} ms per child "
              f"(spread {item['low_s'] * 1000:.1f} to {item['high_s'] * 1000:.1f}); "
              f"local {item['local_per_child_s'] * 1000:.1f} ms/child, "
              f"ray {item['ray_per_child_s'] * 1000:.1f} ms/child")
    print("one machine: both sides share its cores, so this is overhead, not speed-up")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine(), "rows": [r.to_json() for r in rows],
                                         "per_child_overhead": per,
                                         "cells": {str(n): {"local": r.plain.to_json(),
                                                            "ray": r.corral.to_json()}
                                                   for n, r in zip(counts, rows, strict=True)}},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
