"""Shared rules of corral's benchmarks: like with like, interleaved, warmed, with spread.

Every ``bench_*.py`` compares corral with the plain operation that does the same
work, in the same run:

- both sides are warmed (:func:`compare` runs each ``warmup`` times first, unmeasured);
- the sides are interleaved, one trial of each per round, and the side that goes
  first alternates from round to round (a slow stretch of a shared machine, or a
  disk's writeback, lands on both);
- each cell is the median with its interquartile range and its min-max;
- each report says where its working directory lives (the filesystem type: tmpfs
  or a disk) and describes the machine (:func:`machine`).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "GIT_ENV",
    "Cell",
    "Row",
    "child_change",
    "compare",
    "filesystem",
    "generate_repo",
    "git",
    "machine",
    "markdown_rows",
    "print_rows",
    "raw_worktree",
    "replay_state",
    "report",
    "scratch",
    "settle",
    "timed",
    "uncommitted_state",
    "warm_clone",
    "warm_index",
]

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(repo: Path, *args: str, data: bytes | None = None,
        env: dict[str, str] | None = None) -> bytes:
    done = subprocess.run(["git", *args], cwd=repo, env={**GIT_ENV, **(env or {})}, input=data,
                          capture_output=True, check=True)
    return done.stdout


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def settle() -> None:
    """Write back what the previous trial left dirty, so it is not billed to the next one."""
    os.sync()


@dataclass(frozen=True)
class Cell:
    """The samples of one side, in seconds."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> tuple[float, float]:
        if len(self.samples) < 4:
            return min(self.samples), max(self.samples)
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]

    def text(self) -> str:
        low, high = self.iqr
        return f"{self.median * 1000:.1f} ms (IQR {low * 1000:.1f}-{high * 1000:.1f})"

    def to_json(self) -> dict[str, Any]:
        low, high = self.iqr
        return {"median_s": self.median, "q1_s": low, "q3_s": high, "min_s": min(self.samples),
                "max_s": max(self.samples), "trials": len(self.samples)}


@dataclass(frozen=True)
class Row:
    """One comparison: corral's side against the plain operation doing the same work."""

    group: str
    operation: str
    plain_what: str
    plain: Cell
    corral: Cell
    where: str = ""
    #: The goal this row is measured against (ratio at most), ``None``: a reference row.
    goal: float | None = None

    @property
    def ratio(self) -> float:
        return self.corral.median / self.plain.median

    @property
    def verdict(self) -> str:
        """``met``/``missed`` against :attr:`goal`, or ``reference``."""
        if self.goal is None:
            return "reference"
        return "met" if self.ratio <= self.goal else "missed"

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "operation": self.operation, "plain": self.plain_what,
                "where": self.where, "ratio": self.ratio, "goal": self.goal,
                "verdict": self.verdict, "plain_times": self.plain.to_json(),
                "corral_times": self.corral.to_json()}


def compare(plain: Callable[[], Any], corral: Callable[[], Any], *, trials: int,
            warmup: int = 1, sync: bool = False,
            before: Callable[[], Any] | None = None) -> tuple[Cell, Cell]:
    """Time both sides ``trials`` times each, interleaved, after ``warmup`` unmeasured runs
    of each; ``before`` runs (untimed) before every trial; ``sync``: :func:`settle` first."""
    sides = [plain, corral]
    for _ in range(warmup):
        for call in sides:
            if before is not None:
                before()
            call()
    samples: list[list[float]] = [[], []]
    for round_ in range(trials):
        order = (0, 1) if round_ % 2 == 0 else (1, 0)
        for index in order:
            if before is not None:
                before()
            if sync:
                settle()
            samples[index].append(timed(sides[index]))
    return Cell(tuple(samples[0])), Cell(tuple(samples[1]))


def filesystem(path: Path) -> str:
    """The filesystem type ``path`` lives on (the longest mountpoint above it), e.g.
    ``tmpfs``, ``ext4``, ``overlay``."""
    best, kind = "", "unknown"
    resolved = str(path.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        mountpoint, fstype = fields[4], fields[fields.index("-") + 1]
        if (resolved == mountpoint or resolved.startswith(mountpoint.rstrip("/") + "/")) \
                and len(mountpoint) >= len(best):
            best, kind = mountpoint, fstype
    return kind


def machine() -> str:
    """One line describing the machine: cores, CPU model, memory, kernel, python, git."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split()[1])
        memory = f", {kib / (1 << 20):.1f} GiB RAM"
    try:
        git_version = subprocess.run(["git", "--version"], capture_output=True, text=True,
                                     check=True).stdout.split()[-1]
    except (OSError, subprocess.CalledProcessError):
        git_version = "none"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{os.cpu_count()} cores ({model or platform.machine()}){memory}; "
            f"{platform.system()} {platform.release()}; Python {platform.python_version()}; "
            f"git {git_version}; load average {load:.2f} at start")


def print_rows(rows: Sequence[Row], *, out: Any = None) -> None:
    """The rows as one table: plain and corral medians with IQR, and the ratio."""
    out = out or sys.stdout
    print(f"{'operation':<54} {'plain: median (IQR)':>30} {'corral: median (IQR)':>30} "
          f"{'ratio':>7}", file=out)
    group = None
    for row in rows:
        if row.group != group:
            group = row.group
            print(f"-- {group}", file=out)
        label = row.operation + (f" [{row.where}]" if row.where else "")
        goal = f"  goal <= {row.goal:g}x: {row.verdict}" if row.goal is not None else ""
        print(f"{label:<54} {row.plain.text():>30} {row.corral.text():>30} "
              f"{row.ratio:>6.2f}x{goal}", file=out)
        print(f"   plain: {row.plain_what}", file=out)


def report(rows: Sequence[Row], json_path: Path | None) -> None:
    """Print the rows (:func:`print_rows`) and, with ``json_path``, write them there too."""
    print_rows(rows)
    if json_path is not None:
        json_path.write_text(json.dumps([row.to_json() for row in rows], indent=2) + "\n")


def markdown_rows(rows: Sequence[Row], *, machine_line: str, after: str = "") -> str:
    """The rows as docs/benchmarks.md's table (one run, copied whole): operation, the plain
    operation it is compared with, both medians with their IQR, the ratio, and the goal
    with met/missed; the machine line (and ``after``, e.g. the load at the end) above it."""
    def cell(side: Cell) -> str:
        low, high = side.iqr
        return f"{side.median * 1e3:.1f} ms ({low * 1e3:.1f}-{high * 1e3:.1f})"

    lines = [f"Machine: {machine_line}{after}.", "",
             "| operation | plain (same work) | plain: median (IQR) | corral: median (IQR) "
             "| ratio | goal |", "|---|---|---|---|---|---|"]
    for row in rows:
        where = f" [{row.where}]" if row.where else ""
        goal = f"<= {row.goal:g}x: **{row.verdict}**" if row.goal is not None else "reference"
        lines.append(f"| {row.operation}{where} | {row.plain_what} | {cell(row.plain)} | "
                     f"{cell(row.corral)} | {row.ratio:.2f}x | {goal} |")
    return "\n".join(lines) + "\n"


def generate_repo(root: Path, files: int, *, name: str | None = None) -> Path:
    """``files`` small files, 100 per directory, one commit; then uncommitted state: staged
    and unstaged edits, a deletion, untracked files (some in a new directory) and ignored
    build output."""
    repo = root / (name or f"repo-{files}")
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for i in range(files):
        directory = repo / f"d{i // 1000:03d}" / f"s{(i // 100) % 10}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{i:06d}.txt").write_text(
            f"file {i}\n" + "lorem ipsum dolor sit amet\n" * 6)
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "generated")
    tracked = sorted((repo / "d000" / "s0").glob("*.txt"))
    for path in tracked[:20]:
        path.write_text(path.read_text() + "uncommitted\n")
    git(repo, "add", *[str(p.relative_to(repo)) for p in tracked[:5]])
    tracked[-1].unlink()
    (repo / "untracked").mkdir()
    for i in range(30):
        (repo / "untracked" / f"u{i}.txt").write_text(f"untracked {i}\n")
    (repo / "build").mkdir()
    for i in range(50):
        (repo / "build" / f"o{i}.o").write_text("ignored\n")
    return repo


def uncommitted_state(repo: Path) -> tuple[bytes, list[str]]:
    """``repo``'s uncommitted state: ``git diff HEAD --binary`` and its untracked files."""
    patch = git(repo, "diff", "HEAD", "--binary")
    untracked = [p for p in git(repo, "ls-files", "--others", "--exclude-standard",
                                "-z").decode().split("\0") if p]
    return patch, untracked


def replay_state(repo: Path, tree: Path, state: tuple[bytes, list[str]]) -> None:
    """Replay ``state`` (:func:`uncommitted_state` of ``repo``) in the checkout ``tree``: the
    patch applied to its index and files, the untracked files copied from ``repo``."""
    patch, untracked = state
    if patch:
        git(tree, "apply", "--binary", "--index", "-", data=patch)
    for rel in untracked:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, tree / rel)


def raw_worktree(repo: Path, tree: Path) -> None:
    """What corral's worktree workspace does, by hand: ``git worktree add`` of HEAD, then the
    parent's uncommitted state replayed (``git diff HEAD --binary`` applied to the new index
    and tree, untracked files copied), so the new tree has the same files."""
    state = uncommitted_state(repo)
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "HEAD")
    replay_state(repo, tree, state)


def child_change(tree: Path, k: int) -> None:
    """The same k changes in any checkout: edits spread over directories, one new file,
    one deletion."""
    paths = sorted(tree.glob("d*/s*/f*0.txt"))
    step = max(1, len(paths) // max(k, 1))
    chosen = paths[::step][:k]
    for path in chosen[:-2] if k > 2 else chosen:
        path.write_text(path.read_text() + "changed by the child\n")
    if k > 2:
        (tree / "new-by-child.txt").write_text("new\n")
        chosen[-1].unlink()


def warm_index(tree: Path) -> None:
    """Give ``tree``'s index valid stat data, as a checkout in daily use has: its files are
    dated an hour back and the index refreshed (right after a checkout or a commit every
    entry is "racily clean", and each ``git diff``, or corral's staging, would hash every
    file again)."""
    past = time.time() - 3600
    for path in tree.rglob("*"):
        if ".git" not in path.relative_to(tree).parts and path.is_file():
            os.utime(path, (past, past))
    git(tree, "update-index", "-q", "--really-refresh")


def warm_clone(repo: Path, clone: Path) -> None:
    """A plain clone of ``repo`` with a warm index (:func:`warm_index`)."""
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    warm_index(clone)


@contextmanager
def scratch(workdir: Path, prefix: str) -> Iterator[Path]:
    """A new directory in ``workdir`` for a benchmark's repositories, removed after."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
