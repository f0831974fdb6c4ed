"""The ledger at campaign scale: what `corral runs -n 20`, `show last`, a filtered listing,
`gc`, the web view's runs page, MCP's `list_runs` and a full `corral runs` cost at N
records against the same at 20 (issue 30).

It makes one real run (`corral run` with a scripted model on the host backend, in a git
repository under a directory this script owns), clones its directory N times with new
ids and start times (the real on-disk layout: record, transcript, journal, diff; the
files other than the record hard-linked in bulk), builds the index once (timed: what the
first reader after an upgrade pays), then times each probe at 20 records and at N
records, interleaved (one at 20, one at N, repeat), and reports for each size the median,
wall-clock and CPU (user + system: what load from other processes inflates least), and
its spread (p25-p75), the ratio of the medians (goal <= 1.2x) and the median of the
paired ratios with its spread and a 95% bootstrap interval of that median, against the
interpreter floor (`python -c pass`, and importing the CLI). The web page and `list_runs`
are asked of one `corral serve` and one `corral mcp` per size, started before and warmed.
The full `corral runs` (and `--json`) reports its time to the first row (stdout
unbuffered), its total time and its peak RSS.

    .venv/bin/python scripts/bench_ledger.py --sizes 1000 10000 100000 --repeat 30
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

PYTHON = sys.executable
AGENTS = ("coder", "reviewer", "tester", "fixer")
#: Hard links one source file gets before a fresh copy takes over (ext4 allows 65000).
LINKS_PER_SOURCE = 60000


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _env(state: Path, **extra: str) -> dict[str, str]:
    return os.environ | {"XDG_STATE_HOME": str(state), "HOME": str(state.parent / "home"),
                         "XDG_CONFIG_HOME": str(state.parent / "home" / ".config")} | extra


def _corral(args: list[str], state: Path, *, check: bool = True
            ) -> tuple[float, int, str, float]:
    """Seconds, max RSS (KiB), stdout and CPU seconds (user + system) of one `corral`
    process."""
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
    return seconds, usage.ru_maxrss, text, usage.ru_utime + usage.ru_stime


def _streamed(args: list[str], state: Path) -> dict[str, float]:
    """One full listing read as it comes (stdout unbuffered): seconds to its first row,
    seconds in all, lines, peak RSS (MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen([PYTHON, "-m", "executor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_env(state, PYTHONUNBUFFERED="1"))
    first, lines = None, 0
    for _line in _pipe(proc.stdout):  # the header (or "[") comes first; then the first row
        lines += 1
        if lines == 2:
            first = time.perf_counter() - start
    _, status, usage = os.wait4(proc.pid, 0)
    total = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"corral {' '.join(args)} exited {proc.returncode}")
    return {"first_row": first if first is not None else total, "seconds": total,
            "lines": lines, "peak_mib": usage.ru_maxrss / 1024}


def _pipe(stream: IO[Any] | None) -> IO[Any]:
    if stream is None:
        raise SystemExit("a child's pipe is missing")
    return stream


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
    time, agent (one of four) and status (one in ten failed): the record is the template's
    text with those fields substituted, every other file a hard link (a fresh copy of the
    file every :data:`LINKS_PER_SOURCE` links)."""
    ledger = template.parent
    record = json.loads((template / "record.json").read_text())
    text = json.dumps(record | {"run_id": "\0ID", "started_at": "\0AT",
                                "finished_at": "\0AT", "agent": "\0AGENT", "owner": None,
                                "status": "\0STATUS"}, indent=2)
    head, rest = text.split('"\\u0000ID"', 1)
    parts = re.split(r'"\\u0000(AT|AGENT|STATUS)"', rest)
    sources = ledger.parent / f".bench-sources-{ledger.name}"
    sources.mkdir(exist_ok=True)
    names = [p.name for p in template.iterdir() if p.is_file() and p.name != "record.json"]
    links, batch = LINKS_PER_SOURCE, 0
    base = time.time() - count - 3600
    for n in range(count):
        if links >= LINKS_PER_SOURCE:
            batch += 1
            source = sources / str(batch)
            source.mkdir()
            for name in names:
                shutil.copyfile(template / name, source / name)
            links = 0
        when = time.gmtime(base + n)
        run_id = time.strftime("%Y%m%d-%H%M%S-", when) + f"{n:06x}"[-6:]
        target = f"{ledger}/{run_id}"
        os.mkdir(target)  # noqa: PTH102 - 100k of them: no Path objects
        for name in names:
            os.link(f"{source}/{name}", f"{target}/{name}")
        links += 1
        values = {"AT": time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", when),
                  "AGENT": AGENTS[n % len(AGENTS)],
                  "STATUS": "failed" if n % 10 == 7 else record["status"]}
        data = [head, json.dumps(run_id)]
        for i, part in enumerate(parts):
            data.append(json.dumps(values[part]) if i % 2 else part)
        fd = os.open(f"{target}/record.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, "".join(data).encode())
        finally:
            os.close(fd)


#: Requests one sample of a server's probe sends back to back (its time: their mean).
BATCH = 10


class _Web:
    """One `corral serve` of a repository: its runs page, fetched whole."""

    def __init__(self, repo: Path, state: Path) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "executor", "serve", "--root", str(repo),
                                      "--backend", "host"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=_env(state), text=True)
        stderr = _pipe(self.proc.stderr)
        for line in stderr:
            found = re.search(r"at (http://127\.0\.0\.1:\d+/\S+/) ", line)
            if found:
                self.url = found.group(1) + "runs"
                break
        else:
            raise SystemExit("corral serve did not print its URL")
        stderr.close()
        self()

    def once(self) -> None:
        with urllib.request.urlopen(self.url, timeout=300) as answer:  # noqa: S310 - our loopback URL
            answer.read()

    def __call__(self) -> tuple[float, float]:
        return _batched(self.proc.pid, self.once)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


class _Mcp:
    """One `corral mcp` of a repository over stdio: `list_runs` (its default page)."""

    def __init__(self, repo: Path, state: Path) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "executor", "mcp", "--root", str(repo),
                                      "--backend", "host"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=_env(state))
        self.next_id = 0
        self._ask("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "0"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self()

    def _send(self, message: dict[str, Any]) -> None:
        stdin = _pipe(self.proc.stdin)
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        for line in _pipe(self.proc.stdout):
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                if "error" in answer or answer.get("result", {}).get("isError"):
                    raise SystemExit(f"corral mcp: {method} failed: {line[:2000]!r}")
                return dict(answer["result"])
        raise SystemExit("corral mcp ended")

    def once(self) -> None:
        self._ask("tools/call", {"name": "list_runs", "arguments": {}})

    def __call__(self) -> tuple[float, float]:
        return _batched(self.proc.pid, self.once)

    def close(self) -> None:
        _pipe(self.proc.stdin).close()
        self.proc.wait(timeout=60)


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` used so far, every thread's, ended ones
    too (``/proc/PID/stat``, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _batched(pid: int, once: Callable[[], None]) -> tuple[float, float]:
    """The mean (wall, CPU) seconds of :data:`BATCH` requests to server ``pid``."""
    cpu, start = _cpu_of(pid), time.perf_counter()
    for _ in range(BATCH):
        once()
    return (time.perf_counter() - start) / BATCH, (_cpu_of(pid) - cpu) / BATCH


COMMANDS: dict[str, list[str]] = {
    "runs -n 20": ["runs", "-n", "20"],
    "show last": ["show", "last"],
    "runs --agent tester -n 20": ["runs", "--agent", "tester", "-n", "20"],
    "gc": ["gc"],
}
#: The web runs page shows this many entries: its small ledger holds as many (at 20
#: records it would show fewer, and cost less for that alone).
WEB_PAGE = 50


def _stats(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return {"median": statistics.median(values), "p25": q[0], "p75": q[2]}


def _median_ci(values: list[float], *, rounds: int = 2000) -> tuple[float, float]:
    """A 95% bootstrap interval of the median of ``values`` (a fixed seed: the same
    samples give the same interval)."""
    pick = random.Random(30)  # noqa: S311 - resampling, not secrets
    medians = sorted(statistics.median(pick.choices(values, k=len(values)))
                     for _ in range(rounds))
    return medians[int(rounds * 0.025)], medians[int(rounds * 0.975) - 1]


Probe = Callable[[], tuple[float, float]]


def _command(args: list[str], state: Path) -> Probe:
    """One `corral` process: its (wall, CPU) seconds."""
    def probe() -> tuple[float, float]:
        seconds, _, _, cpu = _corral(args, state)
        return seconds, cpu
    return probe


def _measure(places: dict[int, tuple[Path, Path]], size: int, repeat: int
             ) -> dict[str, Any]:
    """Each probe at its small ledger and at ``size``, interleaved, ``repeat`` times."""
    probes: dict[str, tuple[int, dict[int, Probe]]] = {}
    for name, args in COMMANDS.items():
        by_size: dict[int, Probe] = {}
        for n in (20, size):
            repo, state = places[n]
            by_size[n] = _command([*args, "--root", str(repo)] if args[0] != "gc" else args,
                                  state)
        probes[name] = (20, by_size)
    servers: list[_Web | _Mcp] = []
    try:
        for name, kind, small in (("web runs page", _Web, WEB_PAGE),
                                  ("mcp list_runs", _Mcp, 20)):
            servers += [kind(*places[small]), kind(*places[size])]
            probes[name] = (small, {small: servers[-2], size: servers[-1]})
        samples: dict[str, dict[int, list[tuple[float, float]]]] = {
            name: {n: [] for n in by_size} for name, (_, by_size) in probes.items()}
        for _ in range(repeat):
            for name, (_, by_size) in probes.items():
                for n, probe in by_size.items():  # interleaved
                    samples[name][n].append(probe())
    finally:
        for server in servers:
            server.close()
    found: dict[str, Any] = {}
    for name, (small, _) in probes.items():
        times = samples[name]
        found[name] = {"small": small}
        for clock, column in (("wall", 0), ("cpu", 1)):
            a = [t[column] for t in times[small]]
            b = [t[column] for t in times[size]]
            paired = [y / x for x, y in zip(a, b, strict=True) if x > 0]
            at_small, at_large = _stats(a), _stats(b)
            low, high = _median_ci(paired)
            found[name][clock] = {"at_small": at_small, "at_n": at_large,
                                  "ratio": at_large["median"] / at_small["median"],
                                  "paired_ratio": _stats(paired) | {"ci95_low": low,
                                                                    "ci95_high": high}}
    return found


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--keep", action="store_true", help="keep the ledgers made")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    owned = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    report: dict[str, Any] = {"floor": {
        "python -c pass": statistics.median(_floor(["-c", "pass"]) for _ in range(5)),
        "import the CLI": statistics.median(
            _floor(["-c", "import executor.cli.app"]) for _ in range(5))}, "sizes": {}}
    try:
        places: dict[int, tuple[Path, Path]] = {}
        for small in (20, WEB_PAGE):
            repo, state, template = _one_run(owned / f"n{small}")
            _clone(template, small - 1)
            _corral(["runs", "-n", "1", "--root", str(repo)], state)  # its index made
            places[small] = (repo, state)
        for size in options.sizes:
            repo, state, template = _one_run(owned / f"n{size}")
            start = time.perf_counter()
            _clone(template, size - 1)
            made = time.perf_counter() - start
            build, _, _, _ = _corral(["runs", "-n", "1", "--root", str(repo)], state)
            places[size] = (repo, state)
            measured = _measure(places, size, options.repeat)
            full = {}
            for label, extra in (("runs", []), ("runs --json", ["--json"])):
                full[label] = {str(n): _streamed(["runs", *extra, "--root", str(places[n][0])],
                                                 places[n][1]) for n in (20, size)}
            report["sizes"][size] = _rounded({
                "made_seconds": made, "first_read_builds_index": build,
                "probes": measured, "full": full})
            del places[size]
            if not options.keep:
                shutil.rmtree(owned / f"n{size}")
    finally:
        if not options.keep:
            shutil.rmtree(owned, ignore_errors=True)
    if options.json:
        print(json.dumps(report, indent=2))
        return
    _print(report, options.repeat)


def _print(report: dict[str, Any], repeat: int) -> None:
    floor = report["floor"]
    print(f"interpreter floor: python -c pass {floor['python -c pass']:.3f}s, "
          f"import the CLI {floor['import the CLI']:.3f}s")

    def spread(s: dict[str, float]) -> str:
        return f"{s['median']:.3f} [{s['p25']:.3f}-{s['p75']:.3f}]"

    for size, found in report["sizes"].items():
        print(f"\n{size} records (made in {found['made_seconds']:.1f}s; the first read built "
              f"the index in {found['first_read_builds_index']:.1f}s); medians of {repeat} "
              f"[p25-p75], seconds (a server's: the mean of {BATCH} requests)")
        print(f"  {'probe':26} {'clock':5} {'small':>5} {'at small':>21} {'at N':>21} "
              f"{'ratio':>6}  paired ratio [p25-p75] (95% CI of its median)")
        for name, clocks in found["probes"].items():
            for clock in ("wall", "cpu"):
                m = clocks[clock]
                p = m["paired_ratio"]
                print(f"  {name:26} {clock:5} {clocks['small']:5} {spread(m['at_small']):>21} "
                      f"{spread(m['at_n']):>21} {m['ratio']:5.2f}x  "
                      f"{p['median']:.2f}x [{p['p25']:.2f}-{p['p75']:.2f}] "
                      f"({p['ci95_low']:.2f}-{p['ci95_high']:.2f})")
        for label, by in found["full"].items():
            for where, f in by.items():
                print(f"  {label + ' (all) at ' + where:26} {f['lines']:>7} lines: first row "
                      f"{f['first_row']:.3f}s, all {f['seconds']:.3f}s, peak "
                      f"{f['peak_mib']:.1f} MiB")


if __name__ == "__main__":
    main()
