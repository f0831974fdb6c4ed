#!/usr/bin/env python3
"""corral's sandbox against the plain operations that do the same work, in the same run.

- **workspace**: ``open_sandbox`` of a worktree-mode child (host backend: the
  workspace alone) against ``git worktree add`` of the same repository WITH the
  same uncommitted state reproduced in the new tree (staged, unstaged, deleted,
  untracked: ``git diff HEAD --binary`` applied to the new index and tree, the
  untracked files copied; ``benchlib.raw_worktree``). Teardown is not timed.
- **diff**: ``collect_diff`` of a child that made k changes against ``git diff
  HEAD --binary`` in a plain clone with a warm index (valid stat data) and the
  same k changes.
- **one command** (``true``), per backend, through the public Sandbox API
  (``Sandbox.exec``) against the bare equivalent started from Python: host, a
  ``subprocess.run``; bubblewrap, one bare ``bwrap --unshare-all --unshare-user
  --die-with-parent --new-session --ro-bind /usr /usr ... true`` binding the
  same workspace; docker, one API exec (``exec_create``/``exec_start``/
  ``exec_inspect``) in an already running container of the same image.

Rules (``scripts/benchlib.py``): both sides warmed, trials interleaved with the
first side alternating, median and IQR, a ``sync`` before each workspace and
diff trial, the machine and each workdir's filesystem printed.

Usage::

    .venv/bin/python scripts/bench_sandbox.py                     # 10k files, tmpfs
    .venv/bin/python scripts/bench_sandbox.py --quick             # 2k files, fewer trials
    .venv/bin/python scripts/bench_sandbox.py --sizes 10000,50000 --workdirs /dev/shm,/var/tmp
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import (
    Row,
    child_change,
    compare,
    filesystem,
    generate_repo,
    git,
    machine,
    raw_worktree,
    report,
    scratch,
    warm_clone,
)

from policies.contract import SandboxMode
from sandbox.config import BubblewrapConfig, DockerConfig, HostConfig, Limits
from sandbox.errors import BackendUnavailable
from sandbox.factory import open_sandbox, probe

HOST = HostConfig(limits=Limits(max_diff_bytes=1 << 30))
CHANGED = 20


def bench_workspace(repo: Path, work: Path, trials: int) -> Row:
    state = work / "state"
    made: list[Any] = []
    trees: list[Path] = []

    def cleanup() -> None:
        while made:
            made.pop().teardown(discard=True)
        while trees:
            git(repo, "worktree", "remove", "--force", str(trees.pop()))

    def plain() -> None:
        tree = work / f"raw-{len(list(work.glob('raw-*')))}"
        trees.append(tree)
        raw_worktree(repo, tree)

    def corral() -> None:
        made.append(open_sandbox(HOST, repo=repo, mode=SandboxMode.WORKTREE, state_root=state))

    plain_cell, corral_cell = compare(plain, corral, trials=trials, sync=True, before=cleanup)
    kind = "worktree"
    probe_child = open_sandbox(HOST, repo=repo, mode=SandboxMode.WORKTREE, state_root=state)
    kind = probe_child.workspace_kind
    probe_child.teardown(discard=True)
    cleanup()
    return Row("workspace", f"child workspace ({kind}), {count_files(repo)} files",
               "git worktree add + the same staged/unstaged/untracked state replayed",
               plain_cell, corral_cell, filesystem(work))


def bench_diff(repo: Path, work: Path, trials: int, k: int) -> Row:
    state = work / "state"
    clone = work / "clone"
    warm_clone(repo, clone)
    child_change(clone, k)
    children: list[Any] = []

    def fresh_child() -> None:
        while children:
            children.pop().teardown(discard=True)
        child = open_sandbox(HOST, repo=repo, mode=SandboxMode.WORKTREE, state_root=state)
        child_change(child.root, k)
        children.append(child)

    def plain() -> None:
        git(clone, "diff", "HEAD", "--binary")

    def corral() -> None:
        children[-1].collect_diff()

    plain_cell, corral_cell = compare(plain, corral, trials=trials, sync=True,
                                      before=fresh_child)
    kind = children[-1].workspace_kind
    while children:
        children.pop().teardown(discard=True)
    return Row("diff", f"diff of {k} changed files ({kind} child), {count_files(repo)} files",
               "git diff HEAD --binary in a plain clone, warm index, same changes",
               plain_cell, corral_cell, filesystem(work))


def count_files(repo: Path) -> str:
    n = len(git(repo, "ls-files", "-z").split(b"\0")) - 1
    return f"{n // 1000}k" if n >= 1000 else str(n)


# -- one command -----------------------------------------------------------------------------


def bare_bwrap(workspace: Path) -> list[str]:
    """The least a bubblewrap command needs: new namespaces, /usr read-only (and the
    /bin, /lib... links or binds into it), /proc, /dev, the workspace, then ``true``."""
    args = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--bind", str(workspace), str(workspace),
            "--chdir", str(workspace), "--", "true"]


class CommandLoop:
    """The fair peer of a warm sandbox: one long-lived shell (in one bwrap, or behind one
    ``docker exec -i``) that runs each command line it reads (fork and exec, as corral's
    supervisor does) and answers with its exit code."""

    LOOP = 'while read -r line; do sh -c "$line"; echo "$?"; done'

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, bufsize=1)

    def __call__(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None  # noqa: S101
        self.process.stdin.write("true\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "0":
            raise RuntimeError("the command loop's true failed")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.kill()
        self.process.wait()


class DockerExec:
    """One API exec in an already running container of the sandbox image (the plain side)."""

    def __init__(self, image: str) -> None:
        import docker  # noqa: PLC0415 - only when the docker row runs

        self.client = docker.from_env()
        self.container = self.client.containers.run(
            image, ["sleep", "infinity"], detach=True, network_mode="none", auto_remove=False,
            labels={"corral.bench": "1"})

    def __call__(self) -> None:
        api = self.client.api
        exec_id = api.exec_create(self.container.id, ["true"])["Id"]
        api.exec_start(exec_id)
        if api.exec_inspect(exec_id)["ExitCode"] != 0:
            raise RuntimeError("true failed in the container")

    def close(self) -> None:
        self.container.remove(force=True)
        self.client.close()


def bench_commands(repo: Path, work: Path, trials: int, backends: list[str]) -> list[Row]:
    rows = []
    configs: dict[str, Any] = {"host": HostConfig(), "bubblewrap": BubblewrapConfig(),
                               "docker": DockerConfig()}
    for name in backends:
        config = configs[name]
        try:
            probe(config)
        except BackendUnavailable as exc:
            print(f"skipping {name}: {exc.message}", file=sys.stderr)
            continue
        with open_sandbox(config, repo=repo, mode=SandboxMode.WORKTREE,
                          state_root=work / "state-exec") as sb:
            peers: list[tuple[str, Callable[[], Any], Callable[[], None] | None, float | None]]
            shell: Callable[[], Any] = lambda: subprocess.run(  # noqa: E731
                ["sh", "-c", "true"], check=True)
            peers = [("subprocess.run(['sh', '-c', 'true']) on the host", shell, None,
                      None if name != "host" else 2.0)]
            if name == "bubblewrap":
                loop = CommandLoop([*bare_bwrap(Path(sb.root))[:-2], "--", "sh", "-c",
                                    CommandLoop.LOOP])
                peers.insert(0, ("a command loop in one long-lived bwrap (each line: fork, "
                                 "exec sh -c)", loop, loop.close, 1.2))
                argv = bare_bwrap(Path(sb.root))
                peers.append(("(flattering) a new bare bwrap per command running true",
                              lambda argv=argv: subprocess.run(argv, check=True), None, None))
            elif name == "docker":
                container = DockerExec(config.image)
                loop = CommandLoop(["docker", "exec", "-i", container.container.id, "sh", "-c",
                                    CommandLoop.LOOP])
                peers.insert(0, ("a command loop behind one `docker exec -i` (each line: "
                                 "fork, exec sh -c)", loop, loop.close, 1.2))
                peers.append(("(flattering) a new docker API exec per command", container,
                              container.close, None))
            try:
                for what, plain, _closing, goal in peers:
                    plain_cell, corral_cell = compare(
                        plain, lambda sb=sb: sb.exec(["true"]).check(), trials=trials,
                        warmup=3)
                    rows.append(Row("one command (true)", f"Sandbox.exec on {name}", what,
                                    plain_cell, corral_cell, filesystem(work), goal=goal))
            finally:
                for _what, _plain, closing, _goal in peers:
                    if closing is not None:
                        closing()
    return rows


def run_bench(*, sizes: list[int], workdirs: list[Path], trials: int, exec_trials: int,
              backends: list[str], k: int = CHANGED) -> list[Row]:
    rows: list[Row] = []
    for workdir in workdirs:
        with scratch(workdir, "corral-bench-sandbox-") as base:
            for size in sizes:
                repo = generate_repo(base, size)
                rows.append(bench_workspace(repo, base / f"ws-{size}", trials))
                (base / f"diff-{size}").mkdir()
                rows.append(bench_diff(repo, base / f"diff-{size}", trials, k))
    with scratch(workdirs[0], "corral-bench-exec-") as base:
        small = generate_repo(base, 10)
        rows += bench_commands(small, base, exec_trials, backends)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000", help="repository sizes in files")
    parser.add_argument("--trials", type=int, default=9, help="workspace and diff trials")
    parser.add_argument("--exec-trials", type=int, default=40, help="commands per backend")
    parser.add_argument("--backends", default="host,bubblewrap,docker")
    parser.add_argument("--workdirs", default="/dev/shm",  # noqa: S108 - mkdtemp inside
                        help="where repositories live, comma-separated (e.g. /dev/shm,/var/tmp)")
    parser.add_argument("--quick", action="store_true", help="2k files, 5 trials, 15 commands")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows = run_bench(sizes=[2000] if args.quick else [int(s) for s in args.sizes.split(",")],
                     workdirs=[Path(w) for w in args.workdirs.split(",") if w],
                     trials=5 if args.quick else args.trials,
                     exec_trials=15 if args.quick else args.exec_trials,
                     backends=args.backends.split(","))
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
