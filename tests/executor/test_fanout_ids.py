"""Issue 19: "Fanout ids everywhere: `show`, `logs`, `diff` (side by side or one child),
`discard` accept a fanout id; `corral apply FANOUT --pick N`." Before, each refused a
fanout id, so a fanout's comparison could never be shown again. (`logs` is the journal's.)
Driven through the real CLI, errors through its entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from exec_support import agent_file, git

from executor.ledger import ledger_dir, load_patch
from tests.timescale import scaled


def entry(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True,
                          text=True, timeout=scaled(300), check=False)
    return done.returncode, done.stdout, done.stderr


def _script(tmp_path: Path, name: str, content: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": f"{name}.txt",
                                                              "content": content}}]},
        {"text": name}]))
    return str(path)


def _fanout(repo: Path, tmp_path: Path) -> dict[str, Any]:
    agent_file(repo, "w", "tools: [write_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    code, out, err = entry("fanout", "--root", str(repo), "--trust-project", "--no-personal",
                           "--backend", "host", "--agent", "w", "--json",
                           "--script", _script(tmp_path, "one", "ok\n"),
                           "--script", _script(tmp_path, "two", "bad\n"),
                           "--check-cmd", "! grep -q bad two.txt 2>/dev/null", "go")
    assert code == 1, err  # child 2's check fails, as planned
    return json.loads(out)  # type: ignore[no-any-return]


def test_show_and_diff_take_a_fanout_id(repo: Path, tmp_path: Path) -> None:
    result = _fanout(repo, tmp_path)
    fid, (one, two) = result["fanout_id"], [r["run_id"] for r in result["runs"]]
    for given in (fid, fid[:14]):  # the id, or an unambiguous start of it
        code, out, err = entry("show", given, "--root", str(repo))
        assert code == 0, err
        assert out.startswith(f"fanout {fid}: 2 child(ren), completed")
        assert one in out and two in out and "passed" in out and "failed" in out
    code, out, _ = entry("show", fid, "--root", str(repo), "--json")
    assert code == 0 and json.loads(out)["fanout_id"] == fid
    code, out, _ = entry("diff", fid, "--root", str(repo))
    assert code == 0
    assert f"# child #1: run {one}, w, completed, check passed\n" in out
    assert f"# child #2: run {two}, w, completed, check failed\n" in out
    assert "+ok" in out and "+bad" in out
    code, out, _ = entry("diff", fid, "--pick", "2", "--root", str(repo))
    assert code == 0 and out.encode() == load_patch(ledger_dir(repo), two)


def test_apply_picks_a_child_and_discard_takes_the_rest(repo: Path, tmp_path: Path) -> None:
    result = _fanout(repo, tmp_path)
    fid, (one, two) = result["fanout_id"], [r["run_id"] for r in result["runs"]]
    code, _, err = entry("apply", fid, "--root", str(repo))
    assert code == 2 and "--pick N" in err and not (repo / "one.txt").exists()
    code, _, err = entry("apply", fid, "--pick", "3", "--root", str(repo))
    assert code == 2 and "has no child #3" in err and "pick one of 1..2" in err
    code, _, err = entry("apply", one, "--pick", "1", "--root", str(repo))
    assert code == 2 and "--pick takes a fanout id" in err
    code, _, err = entry("apply", fid, "--pick", "1", "--root", str(repo))
    assert code == 0, err
    assert (repo / "one.txt").read_text() == "ok\n" and not (repo / "two.txt").exists()
    code, _, err = entry("discard", fid, "--root", str(repo))
    assert code == 0 and "discarded 1 pending diff(s)" in err
    code, out, _ = entry("runs", "--root", str(repo), "--json")
    states = {r["run_id"]: r["state"] for r in json.loads(out) if "run_id" in r}
    assert states == {one: "applied", two: "discarded"}
