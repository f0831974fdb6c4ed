"""``corral agents list|show|check``: JSON shapes, exit codes, diagnostics, --watch."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from executor.cli import cli, main
from executor.cli.watch import watch_definitions
from policies.loader import Environment
from tests.timescale import scaled

SHOW_KEYS = {"name", "description", "format", "source", "scope", "mode", "sandbox", "tools",
             "denied_tools", "delegates", "model", "user_invocable", "subagent_available",
             "steps", "instructions"}
DIAG_KEYS = {"file", "line", "field", "severity", "reason"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / ".ngn/agents/research.md",
          "---\nname: research\ndescription: Find evidence.\ntools: [read_file, search]\n"
          "denied_tools: [search]\nmode: reviewer\n---\nInvestigate.\n")
    write(root / ".claude/agents/fixer.md",
          "---\nname: fixer\ndescription: Fixes things\ntools: Read, Edit, Bash\n"
          "model: inherit\nmaxTurns: 7\n---\nFix it.\n")
    write(root / ".claude/agents/broken.md",
          "---\nname: broken\ndescription: x\nallowedTools: Read\n---\nbody\n")
    write(root / ".gemini/agents/scout.md",
          "---\nname: scout\ndescription: d\ntools: [read_file]\nmax_turns: 3\n---\nb\n")
    return root


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_list_json_shape(repo: Path) -> None:
    code, out = run("agents", "list", "--root", str(repo), "--trust-project", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"agents", "diagnostics", "default_agent"}
    names = [a["name"] for a in data["agents"]]
    assert names == ["fixer", "research", "scout"]
    for agent in data["agents"]:
        assert set(agent) >= SHOW_KEYS
    for diag in data["diagnostics"]:
        assert set(diag) >= DIAG_KEYS
    broken = [d for d in data["diagnostics"] if d["file"] == ".claude/agents/broken.md"]
    assert broken and broken[0]["field"] == "allowedTools" and broken[0]["severity"] == "error"


def test_show_json_applies_denied_tools_and_mode_to_tools(repo: Path) -> None:
    code, out = run("agents", "show", "research", "--root", str(repo), "--trust-project",
                    "--json")
    assert code == 0
    data = json.loads(out)
    assert data["tools"] == ["read_file"]
    assert data["denied_tools"] == ["search"]
    assert data["format"] == "ngn" and data["scope"] == "project"
    assert data["source"] == ".ngn/agents/research.md"
    assert data["mode"] == "reviewer" and data["model"] is None
    assert data["effective"]["sandbox"] == "read-only"


def test_show_json_reviewer_tools_lose_writes(repo: Path) -> None:
    _code, out = run("agents", "show", "fixer", "--root", str(repo), "--trust-project", "--json")
    data = json.loads(out)
    assert data["tools"] == ["edit", "read_file", "shell"]
    assert data["steps"] == 7 and data["format"] == "claude"
    _code, out = run("agents", "show", "scout", "--root", str(repo), "--trust-project", "--json")
    data = json.loads(out)
    assert data["steps"] == 3 and data["delegates"] == []


def test_show_text_is_the_effective_contract(repo: Path) -> None:
    code, out = run("agents", "show", "fixer", "--root", str(repo), "--trust-project")
    assert code == 0
    assert "fixer" in out and "effective" in out and "inherit (the parent's model)" in out


def main_exit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the real entry point (errors are rendered by ``main``): exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    assert isinstance(exited.value.code, int)
    return exited.value.code, out, err


def test_show_unknown_agent_is_a_user_error(repo: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 (a user error: not a crash, a rejection or a denial), naming the agent, the
    agents that exist and how to get the project's ones."""
    code, out, err = main_exit(capsys, "agents", "show", "nope", "--root", str(repo),
                               "--no-personal")
    assert (code, out) == (2, "")
    assert err == ("error: no agent named 'nope'\n  agents loaded: 0\n"
                   "hint: the project defines 3 more agent(s), loaded only with "
                   "--trust-project\n"
                   "      no agent is loaded: `corral agents check` says what was found and "
                   "why not\n")
    code, out, err = main_exit(capsys, "agents", "show", "fixe", "--root", str(repo),
                               "--trust-project", "--no-personal")
    assert (code, out) == (2, "")
    assert err == ("error: no agent named 'fixe'\n  agents loaded: 3\n"
                   "hint: did you mean 'fixer'?\n"
                   "      `corral agents list` lists the 3 agent(s) loaded\n")


def test_check_exits_1_and_prints_file_line_field_reason(repo: Path) -> None:
    code, out = run("agents", "check", "--root", str(repo), "--trust-project")
    assert code == 1
    assert ".claude/agents/broken.md:4: allowedTools: is not a field of this format; " \
           "did you mean 'tools'?" in out


def test_check_exits_0_when_clean(repo: Path) -> None:
    (repo / ".claude/agents/broken.md").unlink()
    code, _ = run("agents", "check", "--root", str(repo), "--trust-project")
    assert code == 0


def test_project_agents_need_trust(repo: Path) -> None:
    _code, out = run("agents", "list", "--root", str(repo), "--json")
    data = json.loads(out)
    assert data["agents"] == []
    assert any(d["field"] == "trust" for d in data["diagnostics"])


def test_strict_turns_warnings_into_rejections(repo: Path) -> None:
    write(repo / ".claude/agents/extra.md",
          "---\nname: extra\ndescription: d\nvibe: chill\n---\nb\n")
    (repo / ".claude/agents/broken.md").unlink()
    assert run("agents", "check", "--root", str(repo), "--trust-project")[0] == 0
    code, out = run("agents", "check", "--root", str(repo), "--trust-project", "--strict")
    assert code == 1 and "vibe" in out and "(--strict)" in out


def test_python_m_executor_is_the_same_cli(repo: Path) -> None:
    env = {**os.environ, "HOME": str(repo.parent / "h")}
    out = subprocess.run(
        [sys.executable, "-m", "executor", "agents", "list", "--root", str(repo),
         "--trust-project", "--json"],
        capture_output=True, text=True, env=env, check=True, timeout=scaled(60),
    ).stdout
    assert [a["name"] for a in json.loads(out)["agents"]] == ["fixer", "research", "scout"]


def test_watch_rechecks_after_a_definition_changes(repo: Path, tmp_path: Path) -> None:
    """watchdog sees the edit; the check runs again (waits on state, not sleeps)."""
    env = Environment(home=tmp_path / "h", xdg_config=tmp_path / "h/.config",
                      pi_dir=tmp_path / "h/.pi/agent")
    runs: list[int] = []
    ran = threading.Condition()
    stop = threading.Event()

    def check() -> None:
        with ran:
            runs.append(len(runs))
            ran.notify_all()

    thread = threading.Thread(target=watch_definitions, args=(repo, env, check),
                              kwargs={"stop": stop, "personal": False}, daemon=True)
    thread.start()
    with ran:
        assert ran.wait_for(lambda: len(runs) >= 1, timeout=scaled(10))
    write(repo / ".claude/agents/new.md", "---\nname: new\ndescription: d\n---\nb\n")
    with ran:
        assert ran.wait_for(lambda: len(runs) >= 2, timeout=scaled(10))
    stop.set()
    thread.join(timeout=scaled(10))
    assert not thread.is_alive()


def test_check_watch_command_prints_and_stops_on_interrupt(repo: Path) -> None:
    """The real command: start it, wait for its first report, edit a file, wait for the
    second report, interrupt it."""
    env = {**os.environ, "HOME": str(repo.parent / "h"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "executor", "agents", "check", "--watch", "--root", str(repo),
         "--trust-project", "--no-personal"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        while "agent(s) loaded" not in line:
            line = proc.stdout.readline()
        assert "3 agent(s) loaded, 1 definition(s) rejected" in line
        write(repo / ".claude/agents/broken.md",
              "---\nname: broken\ndescription: x\ntools: Read\n---\nbody\n")
        line = proc.stdout.readline()
        while "agent(s) loaded" not in line:
            line = proc.stdout.readline()
        assert "4 agent(s) loaded, 0 definition(s) rejected" in line
    finally:
        proc.send_signal(2)
        proc.wait(timeout=scaled(20))
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode in (0, 130)


def test_the_listings_footer_names_the_check_that_sees_the_same_definitions(
        repo: Path) -> None:
    """Issue 19: "the footer hint after `agents list --trust-project` drops it, and
    following the hint reports `0 rejected`". The hint carries the loader's options, and
    following it finds the rejected definition."""
    done = subprocess.run([sys.executable, "-m", "executor", "agents", "list", "--root",
                           str(repo), "--trust-project", "--no-personal"],
                          capture_output=True, text=True, timeout=scaled(60), check=False)
    hint = re.search(r"run `(corral agents check[^`]*)` for details", done.stderr)
    assert hint is not None, done.stderr
    words = shlex.split(hint.group(1))
    assert "--trust-project" in words and "--no-personal" in words
    followed = subprocess.run([sys.executable, "-m", "executor", *words[1:]],
                              capture_output=True, text=True, timeout=scaled(60), check=False)
    assert followed.returncode == 1
    assert "1 definition(s) rejected" in followed.stdout.splitlines()[0]
