#!/usr/bin/env python3
"""Run pytest on given folders or files beside CPU burners: the suite must hold on a busy machine.

A burner is a busy-loop process (default: twice the cores). Each round runs pytest once on
the given targets while the burners run, and reports whether it passed, how long it took
and the load average seen during it (sampled each second). The burners are killed on every
way out: the end of the rounds, an exception, Ctrl-C, SIGTERM or SIGHUP; and each burner
also ends by itself when this process is gone (it polls its parent), so a SIGKILLed check
leaves no burner behind.

    .venv/bin/python scripts/load_check.py tests/sandbox tests/models --rounds 3
    .venv/bin/python scripts/load_check.py --burners 4 tests/executor/test_mcp_server.py -- -x

Arguments after ``--`` go to pytest as they are. ``--time-scale`` sets
``CORRAL_TEST_TIME_SCALE`` for the rounds (``tests/timescale.py``). Exit status: 0 when
every round passed; otherwise the exit status of the first round that failed (pytest's own,
or 1); 130 on Ctrl-C; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

#: A burner: spin, and every few million steps check its parent is still the one that
#: started it (a SIGKILLed load check must not leave the machine busy).
BURNER = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(2_000_000):
        pass
"""


@dataclass
class LoadSampler:
    """The 1-minute load average, sampled every ``interval`` seconds while it runs."""

    interval: float = 1.0
    samples: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.samples.append(os.getloadavg()[0])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def describe(self) -> str:
        if not self.samples:
            return "load n/a"
        mean = sum(self.samples) / len(self.samples)
        return f"load 1-min mean {mean:.1f}, max {max(self.samples):.1f}"


class Interrupted(Exception):
    """SIGTERM or SIGHUP arrived: leave the way Ctrl-C does (burners killed)."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` busy-loop processes, each in a session of its own (a Ctrl-C at the
    terminal reaches this process, which kills them; never them first)."""
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            burners.append(subprocess.Popen(
                [sys.executable, "-c", BURNER, str(os.getpid())],
                stdin=subprocess.DEVNULL, start_new_session=True))
    except BaseException:
        stop_burners(burners)
        raise
    return burners


def stop_burners(burners: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGKILL every burner and reap it."""
    for proc in burners:
        if proc.poll() is None:
            proc.kill()
    for proc in burners:
        proc.wait()


@contextmanager
def burning(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Burners for the body; killed however it ends."""
    burners = start_burners(count)
    try:
        yield burners
    finally:
        stop_burners(burners)


@dataclass(frozen=True)
class Round:
    number: int
    code: int
    seconds: float
    load: str

    @property
    def passed(self) -> bool:
        return self.code == 0


#: Seconds pytest has, once interrupted, to tear its fixtures down (servers it started,
#: sandboxes) before it is killed.
TEARDOWN_GRACE = 30.0


def stop_pytest(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT (pytest's own Ctrl-C: it tears its fixtures down), then SIGKILL after the
    grace. At a terminal the SIGINT reached it already; a second one is harmless."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=TEARDOWN_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_round(number: int, argv: Sequence[str], env: dict[str, str]) -> Round:
    """One pytest run; its load sampled. An interruption (Ctrl-C, SIGTERM) stops pytest
    before the burners go (:func:`stop_pytest`)."""
    sampler = LoadSampler()
    sampler.start()
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env)
    try:
        code = proc.wait()
    except BaseException:
        stop_pytest(proc)
        raise
    finally:
        sampler.stop()
    return Round(number, code, time.monotonic() - started, sampler.describe())


def parse(argv: Sequence[str]) -> argparse.Namespace:
    own, extra = list(argv), []
    if "--" in own:
        cut = own.index("--")
        own, extra = own[:cut], own[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("targets", nargs="+", help="pytest folders, files or test ids")
    parser.add_argument("--burners", type=int, default=2 * (os.cpu_count() or 1),
                        help="busy-loop processes beside the tests (default: 2x the cores)")
    parser.add_argument("--rounds", type=int, default=1, help="pytest runs (default 1)")
    parser.add_argument("--time-scale", default=None,
                        help="CORRAL_TEST_TIME_SCALE for the tests (default: as inherited)")
    args = parser.parse_args(own)
    if args.burners < 0:
        parser.error(f"--burners must be 0 or more, got {args.burners}")
    if args.rounds < 1:
        parser.error(f"--rounds must be 1 or more, got {args.rounds}")
    args.pytest_args = extra
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    if args.time_scale is not None:
        env["CORRAL_TEST_TIME_SCALE"] = args.time_scale
    command = [sys.executable, "-m", "pytest", *args.pytest_args, *args.targets]
    rounds: list[Round] = []
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with burning(args.burners) as burners:
            print(f"load check: {len(burners)} burners "
                  f"(pids {' '.join(str(b.pid) for b in burners)}) beside: "
                  f"{' '.join(command[1:])}", flush=True)
            for number in range(1, args.rounds + 1):
                done = run_round(number, command, env)
                rounds.append(done)
                print(f"load check: round {number}/{args.rounds} "
                      f"{'passed' if done.passed else f'FAILED (exit {done.code})'} in "
                      f"{done.seconds:.0f} s, {done.load}", flush=True)
    except (KeyboardInterrupt, Interrupted) as exc:
        print(f"load check: interrupted ({exc or 'SIGINT'}); burners killed", flush=True)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = [r for r in rounds if not r.passed]
    print(f"load check: {len(rounds) - len(failed)}/{len(rounds)} rounds passed", flush=True)
    return (failed[0].code or 1) if failed else 0


if __name__ == "__main__":
    sys.exit(main())
