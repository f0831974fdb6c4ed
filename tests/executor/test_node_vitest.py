"""A real Node tool chain under every isolating backend (issue 29, item 1 and its acceptance).

A tiny Node package built here, its test runner vitest installed from the npm
registry (once per session into an npm cache; each test's repository then runs
``npm ci --offline`` from the lock file and that cache, so nothing is
downloaded twice), ``node_modules`` ignored by git and carried into every child
(``carry = ["node_modules"]``). Through the CLI:

- ``corral fanout --check-cmd "npm test"`` with a right, a wrong and an idle
  candidate says passed, failed, failed, and the wrong one fails on its own
  assertion (the check's output names the test);
- a child can make a wasm memory (V8 reserves ~10 GiB of address space for it,
  which the old 2 GiB ``RLIMIT_AS`` refused: vitest died of it);
- a child that allocates past ``--memory`` is killed by the kernel inside its
  sandbox, recorded ``oom_killed``, and a fresh run after it works; a check that
  does is reported as out of memory, never as a failed test;
- ``vitest run`` starts one worker per CPU but one, at once, ~12 threads each: the
  sandbox's default pids limit scales with the machine (a fixed 512 killed it on 48
  CPUs), shown here with the default of a 48-CPU machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from exec_support import agent_file, call, git, invoke, script, write_config

from executor.api import Corral
from sandbox.config import BubblewrapConfig, DockerConfig, Limits, default_pids
from tests.timescale import scaled

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

#: A carried node_modules runs under the sandbox's own Node: this machine's on bubblewrap,
#: the image's on docker (Debian bookworm's Node 18). vitest 3 with vite 6 run on both;
#: vitest 4 (vite 7+) needs Node 20 and dies on the image at startup (``SyntaxError: ...
#: 'node:util' does not provide an export named 'styleText'``).
PACKAGE = {
    "name": "demo", "version": "1.0.0", "private": True,
    "scripts": {"test": "vitest run"},
    "devDependencies": {"vitest": "3.2.4", "vite": "6.3.5"},
}
SUM_WRONG = "exports.sum = (a, b) => a - b;\n"
SUM_RIGHT = "exports.sum = (a, b) => a + b;\n"
SUM_OTHER_WRONG = "exports.sum = (a, b) => a * b;\n"
SUM_TEST = """import { test, expect } from 'vitest';
import { sum } from './sum.js';

test('sum adds two numbers', () => {
  expect(sum(2, 3)).toBe(5);
});
"""
WASM = "new WebAssembly.Memory({initial: 1}); console.log('wasm ok')"
#: 1 GiB of Buffers, each filled (so every page is touched); off V8's heap, so only the
#: sandbox's memory cap can stop it.
HOG = ("const kept = []; for (let i = 0; i < 64; i++) kept.push(Buffer.alloc(16 << 20, 1)); "
       "console.log('allocated ' + kept.length * 16 + ' MiB')")
#: A candidate whose module allocates 1 GiB when the test imports it.
SUM_HOG = ("const kept = []; for (let i = 0; i < 64; i++) kept.push(Buffer.alloc(16 << 20, 1));\n"
           "exports.sum = (a, b) => a + b;\n")


corral = invoke


def npm(cwd: Path, cache: Path, *args: str) -> None:
    """``npm ARGS`` in ``cwd`` with its own cache and no user configuration."""
    tool = shutil.which("npm")
    assert tool is not None, "npm is needed on the host to install the project's packages"
    rc = cache.parent / "npmrc"
    rc.touch()
    env = {**os.environ, "npm_config_cache": str(cache), "npm_config_userconfig": str(rc),
           "npm_config_update_notifier": "false", "npm_config_audit": "false",
           "npm_config_fund": "false"}
    done = subprocess.run([tool, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="session")
def npm_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """vitest from the registry, once per session: (npm's cache, the lock file)."""
    work = tmp_path_factory.mktemp("npm")
    cache = work / "cache"
    (work / "package.json").write_text(json.dumps(PACKAGE, indent=2) + "\n")
    npm(work, cache, "install")
    return cache, (work / "package-lock.json").read_text()


@pytest.fixture
def project(repo: Path, npm_cache: tuple[Path, str]) -> Path:
    """The Node package (``sum`` has a bug), committed; ``node_modules`` from ``npm ci`` of
    the lock file (offline from the session's cache), ignored and carried."""
    cache, lock = npm_cache
    (repo / "package.json").write_text(json.dumps(PACKAGE, indent=2) + "\n")
    (repo / "package-lock.json").write_text(lock)
    (repo / "sum.js").write_text(SUM_WRONG)
    (repo / "sum.test.js").write_text(SUM_TEST)
    (repo / ".gitignore").write_text("node_modules/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "node project")
    npm(repo, cache, "ci", "--offline")  # from the session's cache: nothing downloaded
    assert (repo / "node_modules" / ".bin" / "vitest").exists()
    home = repo.parent / "defs"
    agent_file(home, "w", "tools: [write_file, read_file, shell]")
    (repo.parent / "ngn.json").write_text(json.dumps({"agent_imports": [
        {"format": "native", "path": str(home / ".ngn" / "agents" / "w.md")}]}))
    write_config('[environment]\ncarry = ["node_modules"]\n')
    return repo


def common(repo: Path, backend: str) -> list[str]:
    return ["--root", str(repo), "--no-personal", "--config", str(repo.parent / "ngn.json"),
            "--backend", backend]


def fanout(repo: Path, backend: str, scripts: list[str], *extra: str,
           ) -> tuple[int, dict[str, Any], str]:
    args = ["fanout", *common(repo, backend), "--json", "--agent", "w", "--check-cmd",
            "npm test", "--check-timeout", "120", *extra]
    for path in scripts:
        args += ["--script", path]
    code, out, err = corral(*args, "Fix the bug in sum")
    assert out, err
    return code, json.loads(out), err


def run_shell(repo: Path, tmp_path: Path, backend: str, name: str, *commands: str,
              extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any], str]:
    """``corral run`` of a child running each of ``commands``; the run's exit code, its
    record as ``corral show --json`` gives it, and what the run printed (stderr)."""
    turns = script(tmp_path, name, *(call("shell", command=c) for c in commands),
                   {"text": "done"})
    code, _, err = corral("run", *common(repo, backend), "--agent", "w", "--script", turns,
                          *extra, "Use node")
    shown_code, shown, shown_err = corral("show", "last", "--root", str(repo), "--json")
    assert shown_code == 0, shown_err
    return code, json.loads(shown), err


def shell_results(record: dict[str, Any]) -> list[str]:
    """What each shell command of the run gave its agent (exit code and output)."""
    return [entry["result"] for entry in record["audit"] if entry["tool"] == "shell"]


def verdicts(result: dict[str, Any]) -> list[str]:
    return ["passed" if r["check"]["exit_code"] == 0 else "failed" for r in result["runs"]]


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(300)
def test_npm_test_tells_the_right_candidate_from_the_wrong_ones(
        project: Path, tmp_path: Path, backend: str) -> None:
    """vitest from the carried node_modules is the check: the right candidate passes, the
    wrong one fails on its assertion, the idle one on the bug it left."""
    scripts = [
        script(tmp_path, "right", call("write_file", path="sum.js", content=SUM_RIGHT),
               {"text": "fixed"}),
        script(tmp_path, "wrong", call("write_file", path="sum.js", content=SUM_OTHER_WRONG),
               {"text": "fixed?"}),
        script(tmp_path, "idle", {"text": "nothing to do"}),
    ]
    _code, result, err = fanout(project, backend, scripts)
    checks = [row["check"] for row in result["runs"]]
    assert verdicts(result) == ["passed", "failed", "failed"], (err, checks)
    right, wrong, idle = checks
    assert "1 passed" in right["output_tail"], right
    for failed, received in ((wrong, "expected 6 to be 5"), (idle, "expected -1 to be 5")):
        tail = failed["output_tail"]
        assert "FAIL" in tail and "sum adds two numbers" in tail and received in tail, failed
        assert failed["oom_killed"] is False and not failed.get("error"), failed
    assert not any(row["oom_killed"] for row in result["runs"])


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(180)
def test_a_child_makes_a_wasm_memory(project: Path, tmp_path: Path, backend: str) -> None:
    """Under a 2 GiB cap, what the old 2 GiB RLIMIT_AS refused (V8 reserves ~10 GiB of
    address space per wasm memory): the cap bounds memory used, not address space."""
    code, record, err = run_shell(project, tmp_path, backend, "wasm", f'node -e "{WASM}"',
                                  extra=("--memory", "2G"))
    assert code == 0 and record["status"] == "completed", err
    assert "RLIMIT_AS" not in err  # a memory cgroup, not the address-space fallback
    [result] = shell_results(record)
    assert result.startswith("exit code 0") and result.splitlines()[-1] == "wasm ok", result
    assert record["oom_killed"] is False


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(180)
def test_a_child_past_its_memory_is_oom_killed_and_the_next_run_works(
        project: Path, tmp_path: Path, backend: str) -> None:
    """``--memory 128M`` and 1 GiB of Buffers: the kernel kills node inside the sandbox, the
    agent is told, the record says ``oom_killed``; a fresh run after it runs node."""
    code, record, err = run_shell(project, tmp_path, backend, "hog", f'node -e "{HOG}"',
                                  "echo still here", extra=("--memory", "128M"))
    assert code == 0 and record["status"] == "completed", err
    assert "a command ran out of memory" in err
    assert record["oom_killed"] is True
    hog, echo = shell_results(record)
    assert "exit code 137 (out of memory: the sandbox's cap of 128M" in hog, hog
    assert "allocated 1024 MiB" not in hog and "still here" in echo
    text = corral("show", record["run_id"], "--root", str(project))[1]
    assert "exit code 137 (out of memory" in text, text
    code, after, err = run_shell(project, tmp_path, backend, "after",
                                 "node -e \"console.log('node after ' + (40 + 2))\"")
    assert code == 0 and after["oom_killed"] is False, err
    assert "node after 42" in shell_results(after)[0]


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(240)
def test_an_oom_killed_npm_test_is_out_of_memory_not_a_failure(
        project: Path, tmp_path: Path, backend: str) -> None:
    """A candidate whose module allocates 1 GiB when vitest imports it, under ``--memory
    256M``: its check is an ``oom_killed`` error, and the fanout says so (exit code 3);
    the right candidate beside it still passes under the same cap."""
    scripts = [
        script(tmp_path, "right", call("write_file", path="sum.js", content=SUM_RIGHT),
               {"text": "fixed"}),
        script(tmp_path, "hog", call("write_file", path="sum.js", content=SUM_HOG),
               {"text": "fixed, heavily"}),
    ]
    code, result, err = fanout(project, backend, scripts, "--memory", "256M")
    right, hog = (row["check"] for row in result["runs"])
    assert right["exit_code"] == 0 and right["oom_killed"] is False, right
    assert hog["oom_killed"] is True, hog
    assert hog["error"]["code"] == "oom_killed" and "256M" in hog["error"]["message"]
    assert code == 3, err  # a check that could not run as asked, not findings (1)
    table = corral("show", "--root", str(project), result["fanout_id"])[1]
    assert "out of memory" in table, table


@pytest.mark.parametrize("backend", ISOLATING[:1], indirect=True)
@pytest.mark.timeout(240)
def test_vitest_starts_one_worker_per_cpu_under_the_default_pids(
        project: Path, tmp_path: Path, backend: str) -> None:
    """47 workers at once (``vitest run`` on 48 CPUs) under the pids default of a 48-CPU
    machine: all start and the test passes. Under the old fixed 512 tasks node died
    creating its threads (``pthread_create: Resource temporarily unavailable``, or
    ``Assertion failed: (0) == (uv_thread_create(...))``). Bubblewrap only: docker takes
    the same ``Limits.pids`` (its ``pids_limit``) and passes too, in ~60 s on 2 CPUs."""
    configs = {"bubblewrap": BubblewrapConfig, "docker": DockerConfig}
    limits = Limits(pids=default_pids(cpus=48))
    turns = script(tmp_path, "workers", call("write_file", path="sum.js", content=SUM_RIGHT),
                   call("shell", command="node_modules/.bin/vitest run --pool=forks "
                        "--maxWorkers=47 --minWorkers=47 >/tmp/out 2>&1; rc=$?; "
                        "tail -c 3000 /tmp/out; exit $rc"),
                   {"text": "done"})
    Corral(project, config_file=project.parent / "ngn.json", personal=False,
           backend=configs[backend](limits=limits)).run("Run the tests", agent="w",
                                                        script=turns)
    code, shown, err = corral("show", "last", "--root", str(project), "--json")
    assert code == 0, err
    [result] = shell_results(json.loads(shown))
    assert "pthread_create" not in result and "uv_thread_create" not in result, result
    assert result.startswith("exit code 0") and "1 passed" in result, result
