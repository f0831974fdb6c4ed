"""A fanout as a person and another scheduler see it: live lines, Ctrl-C, the seam.

- On a terminal, one line per child (its step, current tool, elapsed), drawn in
  place, with everything a child chose escaped; through a pipe, not one byte
  of it.
- Ctrl-C (a real SIGINT) cancels every child: each ends ``cancelled`` with its
  diff recorded, the table is printed, exit 130.
- The code above the scheduling seam runs unchanged under another scheduler:
  one that runs jobs inline, and one that pickles each job into another
  process, as a distributed engine would.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from exec_support import agent_file, call, script
from tty_support import on_terminal, raw_controls

from executor.fanout import FanoutRequest, run_fanout
from executor.fanout.plan import plan_children
from executor.ledger import RunStatus, find_run, ledger_dir
from executor.models import ScriptedModel
from executor.run import RunSettings
from executor.scheduling import Cancellation, Deadline, Job, JobContext, JobNotRun, Outcome
from policies.config import UserConfig
from policies.loader import Environment, discover
from sandbox.config import HostConfig
from tests.timescale import scaled

T = TypeVar("T")
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"


def test_a_terminal_shows_one_line_per_child_and_a_pipe_nothing(repo: Path,
                                                                 tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file, shell]")
    first = script(tmp_path, "first", call("write_file", path=f"[link=x]{OSC8}.txt",
                                           content="x\n"), {"text": "one"})
    second = script(tmp_path, "second", call("shell", command="echo [bold]two[/bold]"),
                    {"text": "two"})
    args = ("fanout", "--root", str(repo), "--trust-project", "--no-personal", "--backend",
            "host", "--agent", "w", "--script", first, "--script", second)
    shown = on_terminal(*args, "go")
    assert shown.code == 0, shown.text
    screen = shown.text
    ids = [line.split()[1] for line in screen.splitlines() if line.startswith(("   1", "   2"))]
    assert len(ids) == 2
    assert f"[1/2] w {ids[0]}: step 1: write_file" in screen  # one line per child
    assert f"[2/2] w {ids[1]}: step 1: shell " in screen
    assert '"command": "echo [bold]two[/bold]"' in screen  # markup shown as written
    assert '"path": "[link=x]\\u001b]8;;https://evil.example/' in screen  # escaped
    assert b"\x1b]8;" not in shown.screen and raw_controls(
        shown.screen.replace(b"\x1b[", b"").replace(b"\r", b"")) == []
    assert f"[2/2] w {ids[1]}: completed, 0 file(s)" in screen  # a finished line stays
    piped = subprocess.run([sys.executable, "-m", "executor", *args, "again"],
                           capture_output=True, timeout=scaled(120), check=False)
    assert piped.returncode == 0
    assert b"\x1b" not in piped.stderr and b"waiting" not in piped.stderr
    assert b"step 1" not in piped.stderr + piped.stdout


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["ctrl-c", "sigterm", "sighup"])
def test_ctrl_c_cancels_every_child_and_keeps_every_diff(repo: Path, tmp_path: Path,
                                                         stop: signal.Signals) -> None:
    """Ctrl-C, and (issue 19: "SIGTERM and SIGHUP end runs as Ctrl-C does") a SIGTERM from
    ``timeout`` or CI and a SIGHUP from a closed terminal: never ``crashed``."""
    agent_file(repo, "w", "tools: [write_file, shell]")
    ups = [tmp_path / f"up-{n}" for n in (1, 2)]
    never = tmp_path / "never"
    for fifo in (*ups, never):
        os.mkfifo(fifo)
    scripts = [script(tmp_path, f"s{n}", call("write_file", path=f"f{n}.txt", content="x\n"),
                      call("shell", command=f"echo up > {up}; cat {never}"), {"text": "no"})
               for n, up in enumerate(ups, 1)]
    process = subprocess.Popen(
        [sys.executable, "-m", "executor", "fanout", "--root", str(repo), "--trust-project",
         "--no-personal", "--backend", "host", "--agent", "w", "--script", scripts[0],
         "--script", scripts[1], "--json", "go"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        for up in ups:  # both children are inside their blocking command
            with up.open() as handle:
                assert handle.read() == "up\n"
        process.send_signal(stop)
        out, _ = process.communicate(timeout=scaled(120))
    finally:
        process.kill()
        process.wait(scaled(60))
    assert process.returncode == 130
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert [r["status"] for r in result["runs"]] == ["cancelled", "cancelled"]
    assert [[c["path"] for c in r["changed_files"]] for r in result["runs"]] == [
        ["f1.txt"], ["f2.txt"]]


class InlineScheduler:
    """Runs each job when it is submitted, in the caller's thread."""

    def __init__(self) -> None:
        self.deadline = Deadline()
        self.cancellation = Cancellation()

    def submit(self, job: Job[T], *, report: Callable[[Any], None] | None = None) -> Any:
        return _Done(job.key, job.run(JobContext(job.key, self.deadline, self.cancellation,
                                                 report or (lambda event: None))))

    def as_completed(self, handles: Iterable[Any]) -> Iterator[Any]:
        yield from handles

    def cancel(self, reason: str) -> None:
        self.cancellation.cancel(reason)

    def close(self) -> None:
        pass


class _Done:
    def __init__(self, key: str, value: Any = None, future: Future[Any] | None = None) -> None:
        self.key, self._value, self._future = key, value, future

    def done(self) -> bool:
        return self._future is None or self._future.done()

    def outcome(self) -> Outcome | None:
        if not self.done():
            return None
        return "failed" if self._future and self._future.exception() else "done"

    def result(self, timeout: float | None = None) -> Any:
        if self._future is None:
            return self._value
        return self._future.result(timeout)


def _remote(job: Job[Any], deadline: Deadline) -> Any:
    """In the other process: only what pickled along with the job."""
    return job.run(JobContext(job.key, deadline, Cancellation()))


class ProcessScheduler(InlineScheduler):
    """Pickles every portable job into a process of its own (spawned, not forked: it
    inherits nothing of this process but the environment), as a cluster would."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, job: Job[T], *, report: Callable[[Any], None] | None = None) -> Any:
        if not job.portable:
            raise JobNotRun(f"{job.key} is not portable")
        return _Done(job.key, future=self.pool.submit(_remote, job, self.deadline))

    def as_completed(self, handles: Iterable[Any]) -> Iterator[Any]:
        for handle in handles:
            handle.result()
            yield handle

    def close(self) -> None:
        self.pool.shutdown()


@pytest.mark.parametrize("make", [InlineScheduler, ProcessScheduler], ids=["inline", "process"])
@pytest.mark.timeout(300)
def test_the_fanout_runs_unchanged_under_another_scheduler(
        repo: Path, tmp_path: Path, make: Callable[[], Any]) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    paths = [Path(script(tmp_path, name, call("write_file", path=f"{name}.txt", content="x\n"),
                         {"text": name})) for name in ("one", "two")]
    env = Environment.from_env()
    registry = discover(repo, trust_project=True, personal=False, env=env)
    settings = RunSettings(root=repo, backend=HostConfig(), config=UserConfig(),
                           registry=registry, ledger=ledger_dir(repo), env=env,
                           trust_project=True)
    plans = plan_children(count=None, agents=["w"], models=[], scripts=paths)
    replays = {str(p): yaml.safe_load(p.read_text()) for p in paths}
    for turns in replays.values():
        ScriptedModel(turns)
    scheduler = make()
    try:
        record = run_fanout(FanoutRequest(settings=settings, prompt="go", plans=plans,
                                          replays=replays), scheduler=scheduler)
    finally:
        scheduler.close()
    assert record.status == "completed" and record.conflicts == []
    for plan, name in zip(plans, ("one", "two"), strict=True):
        run = find_run(ledger_dir(repo), plan.run_id)
        assert run.status is RunStatus.COMPLETED and run.fanout == record.fanout_id
        assert [c["path"] for c in run.changed_files] == [f"{name}.txt"]
