#!/usr/bin/env python3
"""Benchmark a project's environment: what a checked fanout costs with and without one.

Issue 17's benchmark. A Python project whose tests need pytest (a test
dependency, not in the checkout); a fanout of N scripted children (default 8,
one correct) checked by its own test command, through the real CLI, on one
backend. It prints side by side, in one run, with :mod:`benchlib`'s rules
(interleaved, warmed, medians with spread):

- **the environment's cost**: a fanout of N with a prepared (cached) environment
  against the same fanout with none (``--no-env``), both checking with a command
  that needs nothing installed (``python3 -c pass``): what the layer under every
  child and every check costs, everything else equal;
- **setup once against setup per child**: the fanout checked by
  ``.venv/bin/python -m pytest -q`` with the environment (setup ran once, cached)
  against the same fanout whose check makes the venv and installs pytest itself
  in every child (what a user without an environment has to do);
- **setup itself**: one ``corral env build --rebuild`` (the cold cost a key pays
  once), against the same two commands run by hand on the host.

setup_network is granted (pip installs from the package index), so the figures
include the network. Usage::

    .venv/bin/python scripts/bench_env.py                  # bubblewrap, N = 8, 3 rounds
    .venv/bin/python scripts/bench_env.py --backend docker --children 4 --repeat 2
    .venv/bin/python scripts/bench_env.py --json bench-results/env.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib
from benchlib import Row, compare, machine, print_rows

REPO = Path(__file__).resolve().parent.parent
SETUP = ("python3 -m venv .venv",
         ".venv/bin/pip install -q --disable-pip-version-check pytest")
PER_CHILD = " && ".join(SETUP) + " && .venv/bin/python -m pytest -q -p no:cacheprovider"


def _project(root: Path) -> Path:
    repo = root / "project"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\n')
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n.pytest_cache/\n")
    benchlib.git(repo, "init", "-q")
    benchlib.git(repo, "add", "-A")
    benchlib.git(repo, "commit", "-qm", "project")
    agent = root / "defs" / "w.md"
    agent.parent.mkdir()
    agent.write_text("---\nname: w\ndescription: bench\ntools: [write_file]\n---\nFix it.\n")
    (root / "ngn.json").write_text(json.dumps(
        {"agent_imports": [{"format": "native", "path": str(agent)}]}))
    right = root / "right.yaml"
    right.write_text(json.dumps([
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}}]},
        {"text": "fixed"}]))
    idle = root / "idle.yaml"
    idle.write_text(json.dumps([{"text": "nothing"}]))
    return repo


def _corral(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "executor", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"corral {' '.join(args[:2])} failed ({done.returncode}):\n"
                         f"{done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="bubblewrap", choices=("bubblewrap", "docker"))
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="corral-bench-env-"))
    try:
        repo = _project(scratch)
        home = scratch / "home"
        config = home / ".config" / "corral" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text('[environment]\nsetup = ["' + '", "'.join(SETUP) + '"]\n'
                          'inputs = ["pyproject.toml"]\nsetup_network = true\n')
        env = {**os.environ, "HOME": str(home), "CORRAL_CONFIG": str(config),
               "XDG_CONFIG_HOME": str(home / ".config")}
        n = args.children
        base = ["fanout", "--root", str(repo), "--no-personal", "--config",
                str(scratch / "ngn.json"), "--backend", args.backend, "--agent", "w",
                "--json", "--check-timeout", "600",
                "--script", str(scratch / "right.yaml"),
                *(["--script", str(scratch / "idle.yaml")] * (n - 1)), "go"]

        def fanout(*extra: str) -> None:
            _corral(env, *base[:-1], *extra, base[-1])

        print(machine())
        print(f"backend {args.backend}, {n} children, {args.repeat} rounds, "
              f"state under {benchlib.filesystem(scratch)}")
        _corral(env, "env", "build", "--root", str(repo), "--backend", args.backend)
        rows = []
        plain, ours = compare(lambda: fanout("--no-env", "--check-cmd", "python3 -c pass"),
                              lambda: fanout("--check-cmd", "python3 -c pass"),
                              trials=args.repeat)
        rows.append(Row("environment", f"fanout of {n}, trivial check", "the same with "
                        "--no-env (no layer under children and checks)", plain, ours,
                        args.backend))
        plain, ours = compare(
            lambda: fanout("--no-env", "--check-cmd", PER_CHILD),
            lambda: fanout("--check-cmd", ".venv/bin/python -m pytest -q -p no:cacheprovider"),
            trials=args.repeat, warmup=0)
        rows.append(Row("environment", f"fanout of {n}, pytest check, setup once (cached)",
                        "the same, every child's check making the venv and installing "
                        "pytest itself", plain, ours, args.backend))
        work = scratch / "by-hand"

        def by_hand() -> None:
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(repo, work, ignore=shutil.ignore_patterns(".git"))
            for command in SETUP:
                subprocess.run(["sh", "-c", command], cwd=work, check=True,
                               capture_output=True)

        plain, ours = compare(by_hand, lambda: _corral(
            env, "env", "build", "--root", str(repo), "--backend", args.backend, "--rebuild"),
            trials=args.repeat, warmup=0)
        rows.append(Row("environment", "setup, cold (once per key)", "the same two commands "
                        "by hand on the host, in a copy of the checkout", plain, ours,
                        args.backend))
        print_rows(rows)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps([r.to_json() for r in rows], indent=2))
    finally:
        subprocess.run([sys.executable, "-m", "executor", "env", "prune", "--all"], cwd=REPO,
                       env={**os.environ, "HOME": str(scratch / "home")}, capture_output=True,
                       check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
