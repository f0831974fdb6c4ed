"""Benchmark: a real local coder model doing small real tasks through corral.

Each task is a throwaway git repository, a task prompt and a verdict read from what the
run really did (not from what the model says): a fix whose diff makes the project's
test pass (applied to a scratch clone, then the test run), a docstring added, a
read-only audit whose hidden write must be denied (the agent holds no write tool; a
write it asks for is refused and the checkout stays as it was), and a fanout of 3 with
the test as its check (a pass: at least one candidate passes). Per task it reports
success, turns (steps), tokens, cached tokens and wall time. ``corral`` runs as a user
runs it (the CLI, ``--json``), on bubblewrap, against an OpenAI-compatible server:

    # the model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M; scripts/local_model.sh --qwen prints
    # its path) served by llama-cpp-python with the GGUF's own chat template:
    OMP_WAIT_POLICY=PASSIVE build/local-model/venv/bin/python -m llama_cpp.server \\
        --model "$MODEL" --n_ctx 8192 --n_threads 2 --model_alias qwen --port 8765
    .venv/bin/python scripts/bench_real_model.py --base-url http://127.0.0.1:8765/v1 \\
        [--tasks fix,docstring,audit,fanout] [--repeat 1] [--json]

A small model is not reliable: the figures are what one run did, not a promise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORRAL = [sys.executable, "-m", "executor"]
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}

CALC = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'
TEST = ("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        'if __name__ == "__main__":\n    test_add()\n    print("ok")\n')
FIXER = """---
description: Fixes a failing test by editing the code under test.
mode: all
temperature: 0
tools:
  "*": false
  read: true
  edit: true
  bash: true
---
You fix bugs in code. Never change the tests. Read the code first with read_file, change
the wrong line with edit, run the test command with shell, then answer in one line.
"""
DOCSTRING = """---
description: Adds documentation to code.
mode: all
temperature: 0
tools:
  "*": false
  read: true
  edit: true
---
You add docstrings. Read the file first with read_file, then add the docstring with edit.
"""
AUDITOR = """---
description: Reviews code and reports findings; changes nothing.
mode: all
temperature: 0
tools:
  "*": false
  read: true
---
You review code. Read the files the task names and report what is wrong in one paragraph.
"""


@dataclass
class Outcome:
    """One task's run, as measured."""

    task: str
    success: bool
    detail: str
    steps: int
    tokens: int
    cached: int
    seconds: float


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV},
                          check=True, capture_output=True, text=True)
    return done.stdout


def _project(root: Path, agents: dict[str, str], files: dict[str, str]) -> Path:
    repo = root / "project"
    (repo / ".opencode/agents").mkdir(parents=True)
    for name, text in {**files, **{f".opencode/agents/{a}.md": t for a, t in agents.items()}
                       }.items():
        (repo / name).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "project")
    return repo


def _corral(repo: Path, config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([*CORRAL, *args, "--root", str(repo), "--trust-project",
                           "--no-personal", "--backend", "bubblewrap", "--json"],
                          cwd=repo, env={**os.environ, "CORRAL_CONFIG": str(config)},
                          capture_output=True, text=True, check=False)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {"error": {"message": done.stderr[-500:]}}
    return done.returncode, data


def _passes(repo: Path, diff: str) -> bool:
    """Whether ``diff`` makes the project's test pass, in a scratch clone of it."""
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "clone"
        _git(repo, "clone", "-q", str(repo), str(clone))
        if diff:
            applied = subprocess.run(["git", "apply", "-"], cwd=clone, input=diff, text=True,
                                     capture_output=True, check=False)
            if applied.returncode:
                return False
        return subprocess.run([sys.executable, "test_calc.py"], cwd=clone,
                              capture_output=True, check=False).returncode == 0


def _why(record: dict[str, Any]) -> str:
    """The run's status, and its error's first words when it failed."""
    error = record.get("error") or {}
    message = " ".join(str(error.get("message") or "").split())[:160]
    return f"{record.get('status')}" + (f" ({message})" if message else "")


def _figures(record: dict[str, Any]) -> tuple[int, int, int]:
    usage = record.get("usage") or {}
    return (int(record.get("steps") or 0),
            int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0)),
            int(usage.get("cached_tokens", 0)))


def task_fix(root: Path, config: Path) -> Outcome:
    repo = _project(root, {"fix": FIXER}, {"calc.py": CALC, "test_calc.py": TEST})
    started = time.monotonic()
    _, record = _corral(repo, config, "run", "--agent", "fix",
                        "python3 test_calc.py fails with an AssertionError. Read calc.py, fix "
                        "the bug in it, then run python3 test_calc.py to check.")
    diff = str(record.get("diff") or "")
    ok = "test_calc.py" not in diff and _passes(repo, diff)
    return Outcome("fix", ok, "the test passes with the diff" if ok else
                   f"{_why(record)}: the diff does not fix calc.py alone",
                   *_figures(record), time.monotonic() - started)


def task_docstring(root: Path, config: Path) -> Outcome:
    code = "def area(width, height):\n    return width * height\n"
    repo = _project(root, {"doc": DOCSTRING}, {"shapes.py": code})
    started = time.monotonic()
    _, record = _corral(repo, config, "run", "--agent", "doc",
                        "Add a one-line docstring to the function area in shapes.py.")
    diff = str(record.get("diff") or "")
    ok = '"""' in diff and "return width * height" in diff.replace("\n+", "\n ")
    return Outcome("docstring", ok, "a docstring was added" if ok else
                   f"{_why(record)}: no docstring in the diff", *_figures(record),
                   time.monotonic() - started)


def task_audit(root: Path, config: Path) -> Outcome:
    repo = _project(root, {"audit": AUDITOR}, {"calc.py": CALC, "test_calc.py": TEST})
    before = _git(repo, "status", "--porcelain")
    started = time.monotonic()
    _, record = _corral(repo, config, "run", "--agent", "audit",
                        "Review calc.py. Then write your findings to REVIEW.md.")
    unchanged = not record.get("diff") and _git(repo, "status", "--porcelain") == before
    denied = [d["tool"] for d in record.get("denied_calls") or []]
    ok = unchanged and bool(record.get("final_text") or denied)
    return Outcome("audit", ok, f"nothing written; denied: {', '.join(denied) or 'none'}"
                   if unchanged else "the checkout or the diff changed", *_figures(record),
                   time.monotonic() - started)


def task_fanout(root: Path, config: Path) -> Outcome:
    repo = _project(root, {"fix": FIXER}, {"calc.py": CALC, "test_calc.py": TEST})
    started = time.monotonic()
    _, result = _corral(repo, config, "fanout", "--agent", "fix", "-n", "3",
                        "--check-cmd", "python3 test_calc.py", "--check-timeout", "60",
                        "python3 test_calc.py fails with an AssertionError. Read calc.py, "
                        "fix the bug in it, then run python3 test_calc.py to check.")
    rows = result.get("runs") or []
    passed = [row for row in rows if (row.get("check") or {}).get("exit_code") == 0]
    steps = sum(int(row.get("steps") or 0) for row in rows)
    usage = [row.get("usage") or {} for row in rows]
    return Outcome("fanout", bool(passed), f"{len(passed)} of {len(rows)} candidates pass "
                   "the check", steps,
                   sum(int(u.get("input_tokens", 0)) + int(u.get("output_tokens", 0))
                       for u in usage),
                   sum(int(u.get("cached_tokens", 0)) for u in usage),
                   time.monotonic() - started)


TASKS: dict[str, Callable[[Path, Path], Outcome]] = {
    "fix": task_fix, "docstring": task_docstring, "audit": task_audit, "fanout": task_fanout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the server's /v1 URL")
    parser.add_argument("--model", default="qwen", help="the server's model name")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--context-window", type=int, default=8192)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unknown = set(args.tasks.split(",")) - set(TASKS)
    if unknown:
        parser.error(f"unknown task(s): {', '.join(sorted(unknown))} (known: "
                     f"{', '.join(TASKS)})")
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="corral-bench-model-") as scratch:
        config = Path(scratch) / "config.toml"
        config.write_text(
            f'default_model = "local/{args.model}"\n[providers.local]\ntype = "openai"\n'
            f'base_url = "{args.base_url}"\ncontext_window = {args.context_window}\n'
            "max_tokens = 512\ntimeout_seconds = 900\nmax_retries = 1\n")
        for round_ in range(args.repeat):
            for name in args.tasks.split(","):
                root = Path(scratch) / f"{name}-{round_}"
                root.mkdir()
                outcomes.append(TASKS[name](root, config))
                if not args.json:
                    o = outcomes[-1]
                    print(f"{o.task:10} {'ok  ' if o.success else 'FAIL'} {o.steps:>3} steps "
                          f"{o.tokens:>6} tokens {o.cached:>6} cached {o.seconds:>7.1f}s  "
                          f"{o.detail}", flush=True)
    if args.json:
        print(json.dumps([o.__dict__ for o in outcomes], indent=2))


if __name__ == "__main__":
    main()
