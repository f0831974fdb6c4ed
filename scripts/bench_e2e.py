#!/usr/bin/env python3
"""A trivial scripted child end to end (``corral run``) against the same operations by hand.

On a 1k-file repository with uncommitted state (aged: its index not racy, as a checkout in
daily use; ``benchlib.warm_index``), per backend (host, bubblewrap,
docker): ``corral run --script`` of a child that writes one file and answers,
started as a fresh process (start-up included, as a user runs it), against the
same work done by hand from this process: ``git worktree add`` with the
parent's staged/unstaged/untracked state replayed (``benchlib.raw_worktree``),
the snapshot tree written (``git add -A; git write-tree``), the file written,
the diff against the snapshot taken (``git add -A; git diff --cached --binary
<tree>``) and saved, the worktree removed; plus, for bubblewrap, one bare
``bwrap ... true`` in the tree, and for docker, a container of the sandbox
image started with the tree mounted, one exec, and the container removed.

Rules as every benchmark here (``scripts/benchlib.py``): warmed, interleaved,
median and IQR, the workdir's filesystem and the machine printed.

Usage::

    .venv/bin/python scripts/bench_e2e.py [--quick] [--trials 9] [--workdir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_sandbox import bare_bwrap
from benchlib import (
    Row,
    compare,
    filesystem,
    generate_repo,
    git,
    machine,
    raw_worktree,
    report,
    warm_index,
)

from sandbox.config import BubblewrapConfig, DockerConfig, HostConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import probe

SCRIPT = ("- tool_calls:\n  - name: write_file\n    arguments: {path: n.txt, content: \"n\\n\"}\n"
          "- text: wrote n.txt\n")


def by_hand(repo: Path, work: Path, backend: str, image: str, *,
            check: bool = False) -> Callable[[], None]:
    """The child's work by hand; ``check``: then a check (``true``) in a bare bwrap of the
    tree, as a fanout's ``--check-cmd true`` runs one in a sandbox."""
    counter = [0]

    def run() -> None:
        counter[0] += 1
        tree = work / f"hand-{counter[0]}"
        raw_worktree(repo, tree)
        git(tree, "add", "-A")
        snapshot = git(tree, "write-tree").decode().strip()
        if backend == "bubblewrap":
            subprocess.run(bare_bwrap(tree), check=True)
        container = None
        if backend == "docker":
            container = _docker().containers.run(
                image, ["sleep", "infinity"], detach=True, network_mode="none",
                volumes={str(tree): {"bind": "/work", "mode": "rw"}}, labels={"corral.bench": "1"})
            api = _docker().api
            exec_id = api.exec_create(container.id, ["true"])["Id"]
            api.exec_start(exec_id)
        (tree / "n.txt").write_text("n\n")
        if check:
            subprocess.run(bare_bwrap(tree), check=True)
        git(tree, "add", "-A")
        (work / f"hand-{counter[0]}.patch").write_bytes(
            git(tree, "diff", "--cached", "--binary", snapshot))
        if container is not None:
            container.remove(force=True)
        git(repo, "worktree", "remove", "--force", str(tree))

    return run


def _fanouts(entry: list[str], repo: Path, script: Path, env: dict[str, str], base: Path,
             trials: int, hand_dir: Path) -> list[Row]:
    """Whole fanouts (issue 21): one child against the same child by hand, and 16 children
    against one (bubblewrap, each child the trivial scripted one, check ``true``)."""

    def fanout(n: int) -> Callable[[], None]:
        argv = [*entry, "fanout", "--root", str(repo), "--trust-project", "--no-personal",
                "--agent", "w", "--backend", "bubblewrap", "--json", "--script", str(script),
                "-n", str(n), "--jobs", str(n), "--check-cmd", "true", "write n.txt"]

        def run() -> None:
            done = subprocess.run(argv, env=env, cwd=base, capture_output=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"corral fanout failed: {done.stderr.decode()[-2000:]}")
        return run

    group = "end to end: whole fanouts of the trivial child, 1k files"
    rows = []
    plain_cell, corral_cell = compare(by_hand(repo, hand_dir, "bubblewrap", "", check=True),
                                      fanout(1),
                                      trials=trials, warmup=1, sync=True)
    rows.append(Row(group, "corral fanout -n 1 on bubblewrap", "the same child by hand "
                    "(worktree, bare bwrap, write, its check in a bare bwrap, diff, remove)",
                    plain_cell, corral_cell, filesystem(base), goal=1.0))
    plain_cell, corral_cell = compare(fanout(1), fanout(16), trials=max(3, trials // 2),
                                      warmup=1, sync=True)
    rows.append(Row(group, "corral fanout -n 16 on bubblewrap", "corral fanout -n 1 (the "
                    "scaling: 16 children at once against one)", plain_cell, corral_cell,
                    filesystem(base), goal=2.0))
    return rows


def _floor(argv: list[str], env: dict[str, str], base: Path, trials: int) -> Row:
    """What a trivial run pays before any work: the interpreter's start and every module the
    run imports (read from one ``python -X importtime`` run of ``argv``, a ``corral run``
    command line after the interpreter), imported and nothing else, against ``python -c
    pass``."""
    traced = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, cwd=base,
                            capture_output=True, check=True)
    modules = []
    for line in traced.stderr.decode().splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3:
            name = parts[2].rstrip()
            top = name.startswith(" ") and not name.startswith("  ")  # at top level
            if top and name.strip() != "imported package":
                modules.append(name.strip())
    code = "import " + ", ".join(dict.fromkeys(modules))

    def call(command: list[str]) -> Callable[[], None]:
        return lambda: subprocess.run(command, env=env, cwd=base, capture_output=True,
                                      check=True)

    plain_cell, corral_cell = compare(call([sys.executable, "-c", "pass"]),
                                      call([sys.executable, "-c", code]), trials=trials,
                                      warmup=1)
    return Row("end to end: a trivial scripted child, 1k files",
               f"(reference) start and the {len(modules)} imports of that run on bubblewrap",
               "python -c pass", plain_cell, corral_cell, filesystem(base))


_CLIENT: list[Any] = []


def _docker() -> Any:
    if not _CLIENT:
        import docker  # noqa: PLC0415 - only when the docker row runs

        _CLIENT.append(docker.from_env())
    return _CLIENT[0]


def run_bench(*, trials: int, workdir: Path | None, backends: list[str]) -> list[Row]:
    base = Path(tempfile.mkdtemp(prefix="corral-bench-e2e-", dir=workdir))
    rows = []
    try:
        repo = generate_repo(base, 1000)
        agents = repo / ".ngn" / "agents"
        agents.mkdir(parents=True)
        (agents / "w.md").write_text("---\nname: w\ndescription: writes\n"
                                     "tools: [read_file, write_file]\n---\nWrite it.\n")
        warm_index(repo)  # a checkout in daily use: its index is not racy
        script = base / "script.yaml"
        script.write_text(SCRIPT)
        home = base / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                "CORRAL_CONFIG": str(home / "none.toml"), "CORRAL_STATE_DIR": str(base / "state")}
        python = sys.executable
        corral_bin = shutil.which("corral", path=str(Path(python).parent))
        entry = [corral_bin] if corral_bin else [python, "-m", "executor"]
        configs: dict[str, Any] = {"host": HostConfig(), "bubblewrap": BubblewrapConfig(),
                                   "docker": DockerConfig()}
        for backend in backends:
            try:
                probe(configs[backend])
            except BackendUnavailable as exc:
                print(f"skipping {backend}: {exc.message}", file=sys.stderr)
                continue
            argv = [*entry, "run", "--root", str(repo), "--trust-project", "--no-personal",
                    "--agent", "w", "--backend", backend, "--json", "--script", str(script),
                    "write n.txt"]

            def corral(argv: list[str] = argv) -> None:
                done = subprocess.run(argv, env=env, cwd=base, capture_output=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"corral run failed: {done.stderr.decode()[-2000:]}")

            image = getattr(configs[backend], "image", "")
            hand_dir = base / f"hand-{backend}"
            hand_dir.mkdir()
            plain_cell, corral_cell = compare(by_hand(repo, hand_dir, backend, image), corral,
                                              trials=trials, warmup=1, sync=True)
            extra = {"host": "", "bubblewrap": " + a bare bwrap true",
                     "docker": " + container run, one exec, remove"}[backend]
            rows.append(Row("end to end: a trivial scripted child, 1k files",
                            f"corral run --script on {backend}",
                            "worktree add + state replayed, write, diff vs snapshot, remove"
                            + extra, plain_cell, corral_cell, filesystem(base), goal=2.0))
            if backend == "bubblewrap":
                rows.append(_floor(["-m", "executor", *argv[len(entry):]], env, base, trials))
                rows += _fanouts(entry, repo, script, env, base, trials, hand_dir)
    finally:
        for client in _CLIENT:
            client.close()
        _CLIENT.clear()
        shutil.rmtree(base, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="4 trials")
    parser.add_argument("--backends", default="host,bubblewrap,docker")
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm"),  # noqa: S108 - mkdtemp
                        help="where the repository lives (default tmpfs)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows = run_bench(trials=4 if args.quick else args.trials, workdir=args.workdir,
                     backends=args.backends.split(","))
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
