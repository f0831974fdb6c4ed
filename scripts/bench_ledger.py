"""The ledger at campaign scale: what `corral runs -n 20`, `show last`, a filtered listing,
`gc` and a full `corral runs` cost at N records against the same at 20 (issue 30).

It makes one real run (`corral run` with a scripted model on the host backend, in a git
repository under a directory this script owns), clones its directory N times with new
ids and start times (the real on-disk layout: record, transcript, journal, diff), builds
the index once (timed: what the first reader after an upgrade pays), then times each
command at 20 records and at N records, interleaved, and reports medians, the ratio to
20 records (goal <= 1.2x) and the interpreter floor (`python -c pass`, and importing the
CLI). Peak memory is the full `corral runs`'s max RSS.

    .venv/bin/python scripts/bench_ledger.py --sizes 1000 10000 --repeat 5
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
from pathlib import Path
from typing import Any

PYTHON = sys.executable
AGENTS = ("coder", "reviewer", "tester", "fixer")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _env(state: Path) -> dict[str, str]:
    return os.environ | {"XDG_STATE_HOME": str(state), "HOME": str(state.parent / "home"),
                         "XDG_CONFIG_HOME": str(state.parent / "home" / ".config")}


def _corral(args: list[str], state: Path, *, check: bool = True) -> tuple[float, int, str]:
    """Seconds, max RSS (KiB) and stdout of one `corral` process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([PYTHON, "-m", "executor", *args], stdout=out,
                                stderr=subprocess.DEVNULL, env=_env(state))
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if check and proc.returncode not in (0, 1, 3, 4):
        raise SystemExit(f"corral {' '.join(args)} exited {proc.returncode}")
    return seconds, usage.ru_maxrss, text


def _floor(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([PYTHON, *args], check=True, capture_output=True)
    return time.perf_counter() - start


def _one_run(place: Path) -> tuple[Path, Path, Path]:
    """A repository with one real recorded run; (repo, state dir, that run's directory)."""
    repo, state = place / "repo", place / "state"
    repo.mkdir(parents=True)
    (place / "home" / ".config").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "user.name", "bench")
    (repo / "app.py").write_text("print('hello')\n")
    agents = repo / ".ngn" / "agents"
    agents.mkdir(parents=True)
    (agents / "coder.md").write_text("---\nname: coder\ndescription: bench agent\n"
                                     "tools: [read_file, write_file]\n---\nDo the task.\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    script = place / "script.json"
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "app.py"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "app.py", "content": "print('hello, world')\n"}}]},
        {"text": "Changed the greeting."}]))
    done = subprocess.run([PYTHON, "-m", "executor", "run", "--agent", "coder", "Change it",
                           "--root", str(repo), "--trust-project", "--no-personal",
                           "--backend", "host", "--script", str(script), "--json"],
                          capture_output=True, text=True, env=_env(state), check=False)
    if done.returncode not in (0, 4):
        raise SystemExit(f"the real run failed: {done.stderr[-2000:]}")
    run_id = json.loads(done.stdout)["run_id"]
    [run_dir] = list((state / "corral" / "runs").glob(f"*/{run_id}"))
    return repo, state, run_dir


def _clone(template: Path, count: int) -> None:
    """``count`` copies of the run at ``template`` beside it, each with its own id, start
    time, agent (one of four) and status (one in ten failed)."""
    ledger = template.parent
    record = json.loads((template / "record.json").read_text())
    files = [p for p in template.iterdir() if p.is_file() and p.name != "record.json"]
    base = time.time() - count - 3600
    for n in range(count):
        when = time.gmtime(base + n)
        run_id = time.strftime("%Y%m%d-%H%M%S-", when) + f"{n:06x}"[-6:]
        target = ledger / run_id
        target.mkdir()
        for path in files:
            try:
                os.link(path, target / path.name)
            except OSError:  # a file system's limit of links to one file (65000 on ext4)
                shutil.copyfile(path, target / path.name)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", when)
        data = record | {"run_id": run_id, "started_at": stamp, "finished_at": stamp,
                         "agent": AGENTS[n % len(AGENTS)], "owner": None,
                         "status": "failed" if n % 10 == 7 else record["status"]}
        (target / "record.json").write_text(json.dumps(data, indent=2))


COMMANDS: dict[str, list[str]] = {
    "runs -n 20": ["runs", "-n", "20"],
    "show last": ["show", "last"],
    "runs --agent tester -n 20": ["runs", "--agent", "tester", "-n", "20"],
    "gc": ["gc"],
}


def _measure(places: dict[int, tuple[Path, Path]], repeat: int) -> dict[str, dict[int, float]]:
    samples: dict[str, dict[int, list[float]]] = {c: {n: [] for n in places} for c in COMMANDS}
    for _ in range(repeat):
        for name, args in COMMANDS.items():
            for size, (repo, state) in places.items():  # interleaved
                full = [*args, "--root", str(repo)] if args[0] != "gc" else args
                samples[name][size].append(_corral(full, state)[0])
    return {c: {n: statistics.median(v) for n, v in by.items()} for c, by in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the ledgers made")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    owned = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    report: dict[str, Any] = {"floor": {
        "python -c pass": statistics.median(_floor(["-c", "pass"]) for _ in range(3)),
        "import the CLI": statistics.median(
            _floor(["-c", "import executor.cli.app"]) for _ in range(3))}, "sizes": {}}
    try:
        small_repo, small_state, template = _one_run(owned / "n20")
        _clone(template, 19)
        for size in options.sizes:
            repo, state, template = _one_run(owned / f"n{size}")
            start = time.perf_counter()
            _clone(template, size - 1)
            made = time.perf_counter() - start
            build, _, _ = _corral(["runs", "-n", "1", "--root", str(repo)], state)
            _corral(["runs", "-n", "1", "--root", str(small_repo)], small_state)
            medians = _measure({20: (small_repo, small_state), size: (repo, state)},
                               options.repeat)
            full_small = _corral(["runs", "--root", str(small_repo)], small_state)
            full = _corral(["runs", "--root", str(repo)], state)
            lines = full[2].count("\n")
            report["sizes"][size] = {
                "made_seconds": round(made, 2), "first_read_builds_index": round(build, 3),
                "commands": {c: {"at_20": round(m[20], 3), "at_n": round(m[size], 3),
                                 "ratio": round(m[size] / m[20], 3)}
                             for c, m in medians.items()},
                "full_runs": {"seconds": round(full[0], 3), "at_20": round(full_small[0], 3),
                              "peak_mib": round(full[1] / 1024, 1),
                              "peak_mib_at_20": round(full_small[1] / 1024, 1),
                              "lines": lines}}
            if not options.keep:
                shutil.rmtree(owned / f"n{size}")
    finally:
        if not options.keep:
            shutil.rmtree(owned, ignore_errors=True)
    if options.json:
        print(json.dumps(report, indent=2))
        return
    floor = report["floor"]
    print(f"interpreter floor: python -c pass {floor['python -c pass']:.3f}s, "
          f"import the CLI {floor['import the CLI']:.3f}s")
    for size, found in report["sizes"].items():
        print(f"\n{size} records (made in {found['made_seconds']}s; the first read built "
              f"the index in {found['first_read_builds_index']}s)")
        print(f"  {'command':28} {'at 20':>8} {'at N':>8} {'ratio':>7}")
        for name, m in found["commands"].items():
            print(f"  {name:28} {m['at_20']:8.3f} {m['at_n']:8.3f} {m['ratio']:7.2f}x")
        full = found["full_runs"]
        print(f"  {'runs (all, ' + str(full['lines']) + ' lines)':28} {full['at_20']:8.3f} "
              f"{full['seconds']:8.3f}   peak {full['peak_mib']} MiB "
              f"(at 20: {full['peak_mib_at_20']} MiB)")


if __name__ == "__main__":
    main()
