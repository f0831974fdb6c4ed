#!/usr/bin/env python3
"""Start-up: `corral --help` and `corral agents list`, each against its fair peer.

Issue 21's goals, each against the plain program that does the same work: ``--help``
within 2x of a plain click program printing the same command table's help, ``agents
list`` within 2x of reading the same three files with the same YAML parser (PyYAML's
pure-Python loader, which corral's strict reader builds on) and printing each name and
description. The earlier peer, ``import pydantic, yaml``, is kept beside them as a
reference: ``--help`` never imports either, so it flattered. Each
side is a fresh interpreter started from this process (``subprocess.run``),
interleaved and warmed (see ``scripts/benchlib.py``). Bytecode caching is on
for both sides (``PYTHONDONTWRITEBYTECODE`` is dropped, and the warm-up writes
the caches): a user's installed corral runs from bytecode, and compiling
corral's sources on every start would bill the compiler, not the imports.
``agents list`` reads a small repository (three Claude Code agents, trusted,
personal definitions off, ``HOME`` empty).

Usage::

    .venv/bin/python scripts/bench_startup.py [--quick] [--trials 30] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Row, compare, filesystem, git, machine, report

GROUP = "start-up (fresh interpreter each)"

#: A click program with corral's command table (names and one-line helps), printing --help.
_HELP_PEER = """
import click
group = click.Group("corral", help="corral: run coding-harness sub-agents.")
for name in ("agents", "apply", "diff", "discard", "env", "fanout", "gc", "mcp", "run", "runs",
             "show"):
    group.add_command(click.Command(name, help=f"The {name} command."))
group.main(["--help"], standalone_mode=False)
"""

#: The same definition files read with PyYAML's pure-Python loader (corral's strict reader is
#: built on it), front matter split off, name and description printed.
_LIST_PEER = """
import pathlib, sys, yaml
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.md")):
    front = path.read_text().split("---", 2)[1]
    data = yaml.load(front, Loader=yaml.SafeLoader)
    print(data["name"], data.get("description", ""))
"""


def small_repo(root: Path) -> Path:
    repo = root / "small"
    agents = repo / ".claude" / "agents"
    agents.mkdir(parents=True)
    for name in ("reviewer", "writer", "tester"):
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: the {name}\ntools: Read, Grep, Glob\n---\n"
            f"You are the {name}.\n")
    git(repo, "init", "-q")
    return repo


def run_bench(*, trials: int, workdir: Path | None = None) -> list[Row]:
    base = Path(tempfile.mkdtemp(prefix="corral-bench-startup-", dir=workdir))
    try:
        repo = small_repo(base)
        home = base / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                "CORRAL_CONFIG": str(home / "none.toml")}
        python = sys.executable
        corral = shutil.which("corral", path=str(Path(python).parent))
        entry = [corral] if corral else [python, "-m", "executor"]

        def call(argv: list[str]) -> None:
            subprocess.run(argv, env=env, cwd=base, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)

        agents = repo / ".claude" / "agents"
        help_peer = [python, "-c", _HELP_PEER]
        list_peer = [python, "-c", _LIST_PEER, str(agents)]
        libraries = [python, "-c", "import pydantic, yaml"]
        where = f"{filesystem(base)}"
        cases = [
            ("corral --help", [*entry, "--help"], help_peer,
             "a plain click program printing the same command table's help", 2.0),
            ("corral agents list (3 agents)", [*entry, "agents", "list", "--root", str(repo),
                                               "--trust-project", "--no-personal"],
             list_peer, "the same 3 files read with the same YAML parser, name and "
             "description printed", 2.0),
            ("corral agents list --json (3 agents)",
             [*entry, "agents", "list", "--json", "--root", str(repo), "--trust-project",
              "--no-personal"], list_peer, "the same 3 files read with the same YAML "
             "parser, name and description printed", None),
            ("(reference, flattering) corral --help", [*entry, "--help"], libraries,
             "python -c 'import pydantic, yaml' (which --help never imports)", None),
            ("(reference) python -c 'import executor.cli'", [python, "-c",
                                                             "import executor.cli"],
             [python, "-c", "pass"], "python -c pass", None),
            # The floor of any command that reads definitions: the contract's models (what
            # every format becomes) and what the CLI prints with; the rest of a listing is
            # the loader, the user config and the files themselves.
            ("(reference) import corral's contract models, yaml, click, json",
             [python, "-c", "import policies.contract, yaml, click, json"], list_peer,
             "the same 3 files read with the same YAML parser", None),
        ]
        rows = []
        for name, argv, peer, what, goal in cases:
            plain_cell, corral_cell = compare(lambda peer=peer: call(peer),
                                              lambda argv=argv: call(argv),
                                              trials=trials, warmup=2)
            rows.append(Row(GROUP, name, what, plain_cell, corral_cell, where, goal=goal))
        return rows
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="8 trials")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows = run_bench(trials=8 if args.quick else args.trials, workdir=args.workdir)
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
