#!/usr/bin/env python3
"""Benchmark: what the run journal costs on a run with many tool calls.

``corral run --script`` of a child making ``--calls`` (default 200) ``read_file``
calls, one per step, on the host backend, started as a fresh process (as a user
runs it): this tree against the same command from a tree *before* the journal
(``--before DIR``: an export of that commit, e.g. ``git archive main | tar -x -C
DIR``), each with the same interpreter and dependencies (``PYTHONPATH`` picks
the tree). Rules as every benchmark here (``scripts/benchlib.py``): warmed,
interleaved, median and IQR, the state dir's filesystem and the machine printed.

Usage::

    .venv/bin/python scripts/bench_journal.py --before /tmp/corral-before [--calls 200]
        [--trials 15] [--workdir /tmp] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Row, compare, filesystem, git, machine, print_rows

HERE = Path(__file__).resolve().parent.parent


def setup(work: Path, calls: int) -> tuple[Path, Path]:
    repo = work / "repo"
    (repo / ".ngn" / "agents").mkdir(parents=True)
    (repo / "a.txt").write_text("hello\n")
    (repo / ".ngn" / "agents" / "r.md").write_text(
        "---\nname: r\ndescription: reads\ntools: [read_file]\n---\nRead.\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    turns = "".join("- tool_calls:\n  - name: read_file\n    arguments: {path: a.txt}\n"
                    for _ in range(calls)) + "- text: done\n"
    script = work / "script.yaml"
    script.write_text(turns)
    return repo, script


def runner(tree: Path, repo: Path, script: Path, state: Path) -> Callable[[], None]:
    env = {**os.environ, "PYTHONPATH": str(tree), "CORRAL_STATE_DIR": str(state)}
    where = subprocess.run([sys.executable, "-c", "import executor; print(executor.__file__)"],
                           env=env, cwd=repo, capture_output=True, text=True,
                           check=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"{tree}: python imports executor from {where} instead")
    command = [sys.executable, "-m", "executor", "run", "--root", str(repo), "--trust-project",
               "--no-personal", "--agent", "r", "--backend", "host", "--script", str(script),
               "go"]

    def run() -> None:
        subprocess.run(command, env=env, cwd=repo, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench-journal-") as tmp:
        work = Path(tmp)
        repo, script = setup(work, args.calls)
        before = runner(args.before.resolve(), repo, script, work / "state-before")
        after = runner(HERE, repo, script, work / "state-after")
        plain, corral = compare(before, after, trials=args.trials, warmup=2)
        journal = next((work / "state-after" / "runs").glob("*/*/journal.jsonl"))
        row = Row("journal", f"corral run, {args.calls} read_file calls, host",
                  "the same run before the journal", plain, corral,
                  where=filesystem(work))
        per_call = (corral.median - plain.median) / args.calls * 1e6
        if args.json:
            print(json.dumps({"machine": machine(), "row": row.to_json(),
                              "per_call_us": per_call,
                              "journal_bytes": journal.stat().st_size}, indent=2))
            return
        print(machine())
        print_rows([row])
        print(f"journal: {journal.stat().st_size} bytes, {per_call:+.0f} us per call "
              "(median difference / calls)")


if __name__ == "__main__":
    main()
