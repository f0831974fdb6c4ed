"""``corral gc --older-than``: what finished runs left goes; a diff no record holds stays."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file

from executor.cli import cli
from executor.ledger import find_run, ledger_dir, parse_duration
from policies.contract import SandboxMode
from sandbox.config import HostConfig
from sandbox.factory import open_sandbox
from sandbox.state import default_state_root
from tests.timescale import scaled


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def fanout(repo: Path, tmp_path: Path, count: int) -> list[str]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt",
                                                             "content": "a\n"}}]},
        {"text": "a"}]
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump(turns))
    code, out, err = corral("fanout", "--root", str(repo), "--trust-project", "--no-personal",
                            "--backend", "host", "--agent", "w", "--script", str(path), "-n",
                            str(count), "--json", "go")
    assert code == 0, err
    return [run["run_id"] for run in json.loads(out)["runs"]]


def results() -> list[str]:
    directory = default_state_root() / "results"
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def test_finished_runs_lose_their_diff_copies_once_old_and_keep_their_records(
        repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    first, second = fanout(repo, tmp_path, 2)
    ledger = ledger_dir(repo)
    sandboxes = {find_run(ledger, run).sandbox_id for run in (first, second)}
    assert set(results()) == sandboxes
    code, out, _ = corral("gc", "--older-than", "1h")
    assert code == 0 and out == "nothing to clean\n" and set(results()) == sandboxes
    code, out, _ = corral("gc", "--older-than", "0", "--json")
    pruned = json.loads(out)["pruned"]
    assert sorted(p["run_id"] for p in pruned) == sorted([first, second])
    assert {p["action"] for p in pruned} == {"removed"} and results() == []
    code, patch, _ = corral("diff", first, "--root", str(repo))
    assert "+a" in patch  # the record still has the diff
    code, _, err = corral("apply", second, "--root", str(repo), "--check")
    assert code == 0, err


def test_a_diff_no_record_holds_is_never_removed(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    [tampered] = fanout(repo, tmp_path, 1)
    ledger = ledger_dir(repo)
    (ledger / tampered / "diff.patch").write_text("not the diff it stored\n")
    with open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE) as sandbox:
        sandbox.files.write_text("orphan.txt", "made outside any run\n")
    orphan = sandbox.id  # a sandbox opened by the library: a diff no run record holds
    code, out, _ = corral("gc", "--older-than", "0")
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("kept") and orphan in line and "no run record holds this "
               "diff" in line for line in lines), out
    assert any(line.startswith("kept") and f"run {tampered}: its record does not hold a diff "
               "that verifies" in line for line in lines), out
    assert orphan in results() and find_run(ledger, tampered).sandbox_id in results()
    assert "+made outside any run" in (default_state_root() / "results" / orphan /
                                       "diff.patch").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="shared snapshots stay idle only behind overlays")
def test_idle_snapshots_go_after_the_configured_hours_or_with_older_than(
        repo: Path, tmp_path: Path) -> None:
    """A fanout's snapshot stays idle for the next run on the same state; gc removes it once
    unused for the config's snapshots.prune_after_hours, or --older-than, never sooner."""
    agent_file(repo, "w", "tools: [write_file]")
    fanout(repo, tmp_path, 1)
    [snapshot] = [p for p in (default_state_root() / "snapshots").iterdir() if p.is_dir()]
    code, out, _ = corral("gc", "--older-than", "1h")
    assert code == 0 and out == "nothing to clean\n" and snapshot.is_dir()
    (snapshot / "used").write_text(f"{time.time() - 3 * 3600}\n")  # idle for three hours
    config = Path(os.environ["CORRAL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[snapshots]\nprune_after_hours = 4\n")
    code, out, _ = corral("gc")
    assert code == 0 and out == "nothing to clean\n" and snapshot.is_dir()
    config.write_text("[snapshots]\nprune_after_hours = 2\n")
    code, out, _ = corral("gc", "--json")
    [entry] = json.loads(out)["entries"]
    assert entry["sandbox_id"] == snapshot.name and entry["action"] == "cleaned"
    assert "unused for 3.0 h" in entry["detail"] and not snapshot.exists()
    fanout(repo, tmp_path, 1)
    code, out, _ = corral("gc", "--older-than", "0")
    assert code == 0 and f"cleaned        {snapshot.name}" in out and not snapshot.exists()


def test_a_running_run_is_never_touched(repo: Path, tmp_path: Path) -> None:
    agent_file(repo, "w", "tools: [write_file]")
    [run_id] = fanout(repo, tmp_path, 1)
    record_file = ledger_dir(repo) / run_id / "record.json"
    data = json.loads(record_file.read_text())
    owner = {"host": os.uname().nodename, "pid": os.getpid(),
             "started": __import__("psutil").Process().create_time()}
    record_file.write_text(json.dumps(data | {"status": "running", "owner": owner}))
    code, out, _ = corral("gc", "--older-than", "0")
    assert code == 0 and data["sandbox_id"] in results() and run_id not in out


@pytest.mark.parametrize(("text", "seconds"), [("0", 0), ("30s", 30), ("10m", 600),
                                               ("1h30m", 5400), ("7d", 604800),
                                               ("2w", 1209600), ("1.5h", 5400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_is_a_user_error_saying_what_a_duration_is() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "executor", "gc", "--older-than", "5x"],
                          capture_output=True, text=True, timeout=scaled(60), check=False)
    assert done.returncode == 2
    assert "--older-than: '5x' is not a duration" in done.stderr
    assert "30s, 10m, 12h, 7d, 2w" in done.stderr
