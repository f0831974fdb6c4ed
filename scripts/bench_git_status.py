#!/usr/bin/env python3
"""``git status`` in a corral child against the same command in a bare bwrap and on the host.

A repository of ``--files`` files (one commit, then staged, unstaged, deleted,
untracked and ignored changes: ``benchlib.generate_repo``; aged like a checkout in
daily use: files an hour old, the index refreshed and written) is opened as a
bubblewrap child in each mode (read-only, workspace-write, worktree, and worktree as
an overlay over a shared snapshot where overlays work), through ``open_sandbox`` and
``Sandbox.exec`` (the warm sandbox: one supervisor per child, a fork and an exec per
command). Right after the child is opened (as a check or a fast child runs), each command is timed:

- ``git status --porcelain``;
- ``git -c core.untrackedCache=false -c core.fsmonitor=false status`` (the long
  format, with git's defaults spelled out);

against, in the same run, interleaved:

- **bare bwrap**: a command loop in one long-lived ``bwrap`` (fork, exec ``sh -c``
  per line, the fair peer of a warm sandbox) with corral's namespace flags and
  read-only system view (``bwrap_base_argv``) and the child's own mounts
  (``Workspace.mounts``: the same checkout, writable or not, the same git dirs
  read-only) and the child's exact environment, but none of corral's own parts:
  no seccomp filter, no rlimits, no cgroups, no supervisor;
- **host, same index**: ``git --no-optional-locks status`` on the host, in the
  same checkout with the same git dir and index (``--no-optional-locks``: git may
  not write the index, as inside the sandbox, where the git dir is read-only);
- **host, warm clone** (reference): the same command in a plain clone of the same
  state whose index git has refreshed and written (what ``git status`` costs in a
  checkout in daily use).

A worktree child (plain or overlay) is also timed against **the same child before
the fix**: opened (in a state dir of its own, so an overlay gets its own snapshot
checkout) with its index as ``read-tree`` left it, i.e. without
:func:`sandbox.workspaces.racy.settle_racy`, interleaved in the same run.

``--bisect`` adds corral's own parts to the bare loop one at a time (its seccomp
filter; its rlimits; a pids and a memory cgroup like the sandbox's), each row
against the bare loop. Per workspace the report also gives the index entries git
must treat as "racily clean" (mtime not in an earlier second than the index file:
git 2.39 is built without ``USE_NSEC``, so it re-reads and hashes each of them on
every ``git status``, and cannot write the index back from a read-only git dir),
and git's own ``refresh index`` time (``GIT_TRACE_PERFORMANCE``) per side.

Usage::

    .venv/bin/python scripts/bench_git_status.py                # 10k files, tmpfs
    .venv/bin/python scripts/bench_git_status.py --bisect       # + corral's parts one by one
    .venv/bin/python scripts/bench_git_status.py --quick        # 2k files, fewer trials
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import (
    GIT_ENV,
    Row,
    compare,
    filesystem,
    generate_repo,
    git,
    machine,
    replay_state,
    report,
    scratch,
    uncommitted_state,
)

from policies.contract import SandboxMode
from sandbox.backends.bwrap import bwrap_base_argv, seccomp_program
from sandbox.backends.limits import MemoryCgroup, PidsCgroup, cgroup_group, prlimit_argv
from sandbox.backends.seccomp import program_fd
from sandbox.base import BaseSandbox
from sandbox.config import BubblewrapConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import WorkspaceRequest, open_sandbox, overlays_unusable, probe
from sandbox.workspaces import worktree as worktree_module

PORCELAIN = ("git", "status", "--porcelain")
LONG = ("git", "-c", "core.untrackedCache=false", "-c", "core.fsmonitor=false", "status")
#: (label, mode, workspace kind asked for)
MODES: tuple[tuple[str, SandboxMode, WorkspaceRequest], ...] = (
    ("read-only", SandboxMode.READ_ONLY, "auto"),
    ("workspace-write", SandboxMode.WORKSPACE_WRITE, "auto"),
    ("worktree", SandboxMode.WORKTREE, "worktree"),
    ("worktree (overlay)", SandboxMode.WORKTREE, "overlay"),
)


class CommandLoop:
    """One long-lived shell in one process (a bwrap) that runs each command line it reads
    (fork, exec ``sh -c``) and answers with its exit code; the output is discarded."""

    LOOP = 'while read -r line; do sh -c "$line" >/dev/null 2>&1; echo "$?"; done'

    def __init__(self, argv: list[str], *, pass_fds: Sequence[int] = ()) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
            pass_fds=tuple(pass_fds), env={"PATH": os.defpath})

    def run(self, line: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None  # noqa: S101
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if answer != "0":
            raise RuntimeError(f"{line!r} failed in the command loop: {answer or 'loop gone'}")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.kill()
        self.process.wait()


@dataclass
class Parts:
    """Which of corral's own parts a bare loop gets (``--bisect``)."""

    seccomp: bool = False
    rlimits: bool = False
    cgroups: bool = False

    def label(self) -> str:
        added = [name for name, on in (("seccomp filter", self.seccomp),
                                       ("rlimits", self.rlimits),
                                       ("pids+memory cgroups", self.cgroups)) if on]
        return "bare bwrap loop" + "".join(f" + {name}" for name in added)


def child_env(sb: BaseSandbox) -> dict[str, str]:
    """The environment a command of ``sb`` gets (asked from inside: exactly the same)."""
    out = sb.exec(["env", "-0"]).check().stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def loop_argv(sb: BaseSandbox, env: Mapping[str, str], config: BubblewrapConfig,
              parts: Parts, made: list[Any]) -> tuple[list[str], list[int]]:
    """A bare bwrap with ``sb``'s namespace flags, system view and workspace mounts, plus
    the corral ``parts`` asked for, running :attr:`CommandLoop.LOOP`; the fds to pass."""
    bwrap = shutil.which(config.bwrap) or config.bwrap
    fds: list[int] = []
    if parts.seccomp:
        program = seccomp_program(config)
        if program is not None:
            fds.append(program_fd(program))
    prefix: list[str] = []
    limits = config.limits
    if parts.cgroups:
        group, name = cgroup_group(sb.state.root), f"bench-{uuid.uuid4().hex[:12]}"
        pids = PidsCgroup.create(group, name, limits.pids or 4096)
        if pids is not None:
            made.append(pids)
            prefix += pids.join_argv()
        if limits.memory_bytes is not None:
            memory = MemoryCgroup.create_memory(group, name, limits.memory_bytes, pids=pids)
            if memory is not None:
                made.append(memory)
                prefix += memory.join_argv()
    if parts.rlimits:
        prefix += prlimit_argv(shutil.which("prlimit") or "prlimit", memory=None,
                               file_size=limits.file_size_bytes, nproc=None)
    args = [*prefix, *bwrap_base_argv(bwrap, tmp_size=limits.tmp_size_bytes,
                                      seccomp_fd=fds[0] if fds else None)]
    for key, value in env.items():
        args += ["--setenv", key, value]
    for mount in sb.workspace.mounts():
        args += ["--bind" if mount.writable else "--ro-bind", str(mount.origin),
                 str(mount.path)]
    args += ["--chdir", str(sb.root), "--remount-ro", "/", "--", "/bin/sh", "-c",
             CommandLoop.LOOP]
    return args, fds


def start_loop(sb: BaseSandbox, env: Mapping[str, str], config: BubblewrapConfig,
               parts: Parts, made: list[Any]) -> CommandLoop:
    argv, fds = loop_argv(sb, env, config, parts, made)
    try:
        return CommandLoop(argv, pass_fds=fds)
    finally:
        for fd in fds:
            os.close(fd)


def git_dir_of(sb: BaseSandbox) -> tuple[Path, Path]:
    """The git dir and index the child's git uses."""
    ws = sb.workspace
    if ws.worktree is not None and ws.private_git is not None:
        gd = ws.child_git or ws.private_git
        return gd, gd / "index"
    return ws.repo.git_dir, ws.repo.git_dir / "index"


def racy_entries(git_dir: Path, index: Path, work_tree: Path) -> tuple[int, int]:
    """(entries git treats as racily clean in ``index``, all entries)."""
    listing = git(work_tree, "--git-dir", str(git_dir), "ls-files", "--debug",
                  env={"GIT_INDEX_FILE": str(index)}).decode("utf-8", "surrogateescape")
    seconds = [int(m) for m in re.findall(r"^  mtime: (\d+):", listing, re.MULTILINE)]
    fence = index.stat().st_mtime_ns // 1_000_000_000
    return sum(1 for s in seconds if s >= fence), len(seconds)


def refresh_ms(stderr: bytes) -> str:
    """git's own ``refresh index`` time from a ``GIT_TRACE_PERFORMANCE`` trace."""
    found = re.search(rb"performance: ([0-9.]+) s:\s+refresh index", stderr)
    return f"{float(found.group(1)) * 1000:.1f} ms" if found else "?"


def host_run(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> bytes:
    done = subprocess.run([argv[0], "--no-optional-locks", *argv[1:]], cwd=cwd,
                          env=dict(env), capture_output=True, check=True)
    return done.stderr


def age(tree: Path) -> None:
    """``benchlib.warm_index`` without walking ``.git`` (where git's own gc may be at work):
    files dated an hour back, the index refreshed and written."""
    past = time.time() - 3600
    for dirpath, dirnames, filenames in os.walk(tree):
        if Path(dirpath) == tree and ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            os.utime(Path(dirpath, name), (past, past))
    git(tree, "update-index", "-q", "--really-refresh")


def quiet_repo(repo: Path) -> None:
    """No automatic gc from now on, and none still at work (the first commit of 10k loose
    objects starts one in the background): it would run beside the trials."""
    git(repo, "config", "gc.auto", "0")
    deadline = time.monotonic() + 300
    while (repo / ".git" / "gc.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def warm_state_clone(repo: Path, clone: Path) -> None:
    """A plain clone of ``repo`` with the same uncommitted state and a warm index."""
    state = uncommitted_state(repo)
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    git(clone, "config", "gc.auto", "0")
    age(clone)
    replay_state(repo, clone, state)
    git(clone, "status", "--porcelain")  # writes the refreshed index, as daily use does


def bench_mode(label: str, mode: SandboxMode, kind: WorkspaceRequest, *, repo: Path,
               clone: Path, state: Path, config: BubblewrapConfig, trials: int,
               bisect: bool) -> list[Row]:
    rows: list[Row] = []
    sb = open_sandbox(config, repo=repo, mode=mode, state_root=state, workspace=kind)
    loops: list[CommandLoop] = []
    made: list[Any] = []
    try:
        git_dir, index = git_dir_of(sb)
        racy, entries = racy_entries(git_dir, index, sb.root)
        env = child_env(sb)
        host_env = {**GIT_ENV, **env, "PATH": os.environ.get("PATH", os.defpath)}
        host_env.pop("GIT_CEILING_DIRECTORIES", None)
        where = f"{sb.workspace_kind}, {filesystem(sb.root)}"

        def child(argv: Sequence[str]) -> None:
            sb.exec(list(argv)).check()

        bare = start_loop(sb, env, config, Parts(), made)
        loops.append(bare)
        for argv in (PORCELAIN, LONG):
            line = " ".join(argv)
            plain_cell, corral_cell = compare(partial(bare.run, line), partial(child, argv),
                                              trials=trials, warmup=2)
            rows.append(Row(f"{label}: {line}", f"Sandbox.exec ({label})",
                            "the same command in a bare bwrap loop, same mounts and env",
                            plain_cell, corral_cell, where, goal=1.2))
        plain_cell, corral_cell = compare(
            lambda: host_run(PORCELAIN, sb.root, host_env),
            lambda: sb.exec(list(PORCELAIN)).check(), trials=trials, warmup=2)
        rows.append(Row(f"{label}: git status --porcelain", f"Sandbox.exec ({label})",
                        "git --no-optional-locks status on the host, same checkout and index",
                        plain_cell, corral_cell, where))
        plain_cell, corral_cell = compare(
            lambda: host_run(PORCELAIN, clone, GIT_ENV),
            lambda: sb.exec(list(PORCELAIN)).check(), trials=trials, warmup=2)
        rows.append(Row(f"{label}: git status --porcelain", f"Sandbox.exec ({label})",
                        "(reference) the same on the host in a clone with a warm index",
                        plain_cell, corral_cell, where))
        if sb.workspace.worktree is not None:
            rows.append(before_fix_row(label, mode, kind, sb, repo=repo, config=config,
                                       state=state.parent / "state-unsettled", trials=trials,
                                       where=where))
        if bisect:
            rows += bisect_rows(label, sb, env, config, bare, made, loops, trials, where)
        traced = {"GIT_TRACE_PERFORMANCE": "2"}
        corral_trace = sb.exec(list(PORCELAIN), env=traced).check().stderr
        host_trace = host_run(PORCELAIN, sb.root, {**host_env, **traced})
        clone_trace = host_run(PORCELAIN, clone, {**GIT_ENV, **traced})
        print(f"{label} ({sb.workspace_kind}): {racy} of {entries} index entries racily "
              f"clean; git's refresh index: corral {refresh_ms(corral_trace)}, host same "
              f"index {refresh_ms(host_trace)}, warm clone {refresh_ms(clone_trace)}",
              file=sys.stderr)
    finally:
        for loop in loops:
            loop.close()
        for cgroup in made:
            cgroup.remove()
        sb.teardown(discard=True)
    return rows


_SETTLE = "settle_racy"  # the name checkout_worktree calls


@contextmanager
def unsettled() -> Iterator[None]:
    """Checkouts made meanwhile keep their index as ``read-tree`` left it: corral before
    :mod:`sandbox.workspaces.racy` (its racy entries not re-dated)."""
    kept = getattr(worktree_module, _SETTLE)
    setattr(worktree_module, _SETTLE, lambda index, work_tree: 0)
    try:
        yield
    finally:
        setattr(worktree_module, _SETTLE, kept)


def before_fix_row(label: str, mode: SandboxMode, kind: WorkspaceRequest, sb: BaseSandbox, *,
                   repo: Path, config: BubblewrapConfig, state: Path, trials: int,
                   where: str) -> Row:
    """The child against the same child opened without the fix (its own state dir, so an
    overlay gets its own snapshot checkout), interleaved in the same run."""
    with unsettled():
        before = open_sandbox(config, repo=repo, mode=mode, state_root=state, workspace=kind)
    try:
        git_dir, index = git_dir_of(before)
        racy, entries = racy_entries(git_dir, index, before.root)
        plain_cell, corral_cell = compare(
            lambda: before.exec(list(PORCELAIN)).check(),
            lambda: sb.exec(list(PORCELAIN)).check(), trials=trials, warmup=2)
        trace = before.exec(list(PORCELAIN), env={"GIT_TRACE_PERFORMANCE": "2"}).check().stderr
        print(f"{label} before the fix ({before.workspace_kind}): {racy} of {entries} index "
              f"entries racily clean; git's refresh index {refresh_ms(trace)}", file=sys.stderr)
    finally:
        before.teardown(discard=True)
    return Row(f"{label}: git status --porcelain, before/after the fix",
               f"Sandbox.exec ({label}), index settled",
               f"the same child, its index as read-tree left it ({racy} of {entries} racy)",
               plain_cell, corral_cell, where)


def bisect_rows(label: str, sb: BaseSandbox, env: Mapping[str, str], config: BubblewrapConfig,
                bare: CommandLoop, made: list[Any], loops: list[CommandLoop], trials: int,
                where: str) -> list[Row]:
    """Each of corral's own parts added to the bare loop, against the bare loop."""
    rows = []
    line = " ".join(PORCELAIN)
    for parts in (Parts(seccomp=True), Parts(rlimits=True), Parts(cgroups=True),
                  Parts(seccomp=True, rlimits=True, cgroups=True)):
        loop = start_loop(sb, env, config, parts, made)
        loops.append(loop)
        plain_cell, with_cell = compare(partial(bare.run, line), partial(loop.run, line),
                                        trials=trials, warmup=2)
        rows.append(Row(f"bisect ({label}): {line}", parts.label(), "the bare bwrap loop",
                        plain_cell, with_cell, where))
    return rows


def run_bench(*, files: int, workdir: Path, trials: int, bisect: bool,
              modes: Sequence[str]) -> list[Row]:
    config = BubblewrapConfig()
    probe(config)
    rows: list[Row] = []
    with scratch(workdir, "corral-bench-status-") as base:
        repo = generate_repo(base, files, name="repo")
        quiet_repo(repo)
        age(repo)
        clone = base / "clone"
        warm_state_clone(repo, clone)
        state = base / "state"
        for label, mode, kind in MODES:
            if label not in modes:
                continue
            if kind == "overlay" and (why := overlays_unusable(state)) is not None:
                print(f"skipping {label}: {why}", file=sys.stderr)
                continue
            rows += bench_mode(label, mode, kind, repo=repo, clone=clone, state=state,
                               config=config, trials=trials, bisect=bisect)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10000, help="repository size in files")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm"),  # noqa: S108 - mkdtemp
                        help="where the repository and the state dir live")
    parser.add_argument("--modes", default=",".join(label for label, _m, _k in MODES),
                        help="comma-separated, of: " + ", ".join(m[0] for m in MODES))
    parser.add_argument("--bisect", action="store_true",
                        help="add corral's seccomp filter, rlimits and cgroups to the bare "
                        "loop one at a time")
    parser.add_argument("--quick", action="store_true", help="2k files, 5 trials")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    try:
        rows = run_bench(files=2000 if args.quick else args.files, workdir=args.workdir,
                         trials=5 if args.quick else args.trials, bisect=args.bisect,
                         modes=[m.strip() for m in args.modes.split(",")])
    except BackendUnavailable as exc:
        print(f"bubblewrap unavailable: {exc.message}", file=sys.stderr)
        return 1
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
