"""Start-up structure: each command imports what it needs and nothing heavier.

Every check runs the real entry point (:func:`executor.cli.main`) in a fresh
interpreter and reads ``sys.modules`` afterwards: no timing asserts (the
figures live in ``scripts/bench_startup.py``), only which modules a command
loaded. httpx (and the rich and pygments it pulls in) is for a real provider,
rich for a live display on a terminal, pydantic and the loader for commands that
read definitions, the run machinery for runs.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import click
import pytest
from rich.console import Console

from executor.cli import LAZY_COMMANDS, cli
from executor.cli.progress import Progress
from executor.run.session import ProgressEvent
from policies.contract import AgentFormat
from policies.loader.formats import ADAPTER_CLASSES, adapter_for
from tests.timescale import scaled

REPO = Path(__file__).resolve().parent.parent

#: Loaded only by a real HTTP provider (httpx imports rich and pygments for its own CLI;
#: the providers' wire models are pydantic models built at import).
HTTP = {"httpx", "pygments", "executor.models.anthropic", "executor.models.openai",
        "executor.models._wire"}
#: Loaded only to draw on a terminal.
DISPLAY = {"rich"}
#: Optional engines: docker for the docker backend, watchdog for `agents check --watch`.
ENGINES = {"docker", "watchdog"}
#: What reading definitions needs.
LOADER = {"pydantic", "yaml", "policies.loader"}
#: The run machinery: sandboxes, the agent loop, the tools, merges.
RUNS = {"sandbox", "executor.run.agent", "executor.run.session", "executor.tools",
        "executor.apply"}
#: The Python API every command goes through (its module of calls, not its light names).
API = {"executor.api.corral"}
#: One module per definition format, imported when a file of that format is loaded.
FORMATS = {f"policies.loader.formats.{module}" for module, _ in ADAPTER_CLASSES.values()}
#: Loaded only for what a repository holds: zuno layers, ngn JSON configs; close names
#: (difflib) only for a name that matches no agent.
ON_DEMAND = {"policies.loader.zuno_layers", "policies.loader.ngnjson", "executor.agents.suggest",
             "difflib"}
WATCHED = sorted(HTTP | DISPLAY | ENGINES | LOADER | RUNS | FORMATS | ON_DEMAND | API
                 | {"executor.cli.agents", "executor.cli.runs", "executor.agents.offer",
                    "executor.mcpserver.command"})
#: Models a clean listing validates none of: their schemas are built on first use
#: (``defer_build``).
DEFERRED = {"policies.capability": "Capability", "policies.loader.diagnostics": "Diagnostic"}

_PROBE = """
import json, sys
code = 0
try:
    if sys.argv[1] == "--import-only":
        import executor.cli
    else:
        from executor.cli import main
        main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
built = [f"{m}.{c}" for m, c in DEFERRED.items()
         if m in sys.modules and getattr(sys.modules[m], c).__pydantic_complete__]
with open(sys.argv[0] + ".json", "w") as out:
    json.dump({"exit": code, "loaded": [m for m in WATCHED if m in sys.modules],
               "built": built}, out)
"""


def _probe(tmp_path: Path, *args: str, tty: bool = False,
           env: dict[str, str] | None = None) -> tuple[object, set[str]]:
    """Run the CLI with ``args`` in a fresh interpreter: (exit code, watched modules loaded).

    ``tty``: stderr is a terminal (a pseudo-terminal), as for a person at the CLI.
    """
    code, loaded, _ = _probe_built(tmp_path, *args, tty=tty, env=env)
    return code, loaded


def _probe_built(tmp_path: Path, *args: str, tty: bool = False,
                 env: dict[str, str] | None = None) -> tuple[object, set[str], set[str]]:
    """:func:`_probe`, and which of the :data:`DEFERRED` models had their schema built."""
    script = tmp_path / "probe.py"
    script.write_text(f"WATCHED = {WATCHED!r}\nDEFERRED = {DEFERRED!r}\n{_PROBE}")
    master = slave = None
    if tty:
        master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, str(script), *args], cwd=REPO,
                              env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                              stderr=slave if slave is not None else subprocess.PIPE,
                              timeout=scaled(60), check=False)
    finally:
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
    report = script.with_name("probe.py.json")
    assert report.exists(), proc.stderr
    data = json.loads(report.read_text())
    report.unlink()
    return data["exit"], set(data["loaded"]), set(data["built"])


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    """A git repository with one trusted agent that may read and write files."""
    repo = tmp_path / "repo"
    (repo / ".ngn" / "agents").mkdir(parents=True)
    (repo / "a.txt").write_text("a\n")
    (repo / ".ngn" / "agents" / "w.md").write_text(
        "---\nname: w\ndescription: writes\ntools: [read_file, write_file]\n---\nDo it.\n")
    for command in (["init", "-q"], ["add", "-A"],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, timeout=scaled(30))
    return repo


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text("- tool_calls:\n  - name: write_file\n    arguments: {path: n.txt, "
                    "content: x}\n- text: done\n")
    return path


def test_importing_the_cli_loads_no_command(tmp_path: Path) -> None:
    _, loaded = _probe(tmp_path, "--import-only")
    assert loaded == set()


def test_help_loads_click_only(tmp_path: Path) -> None:
    code, loaded = _probe(tmp_path, "--help")
    assert code == 0
    assert loaded == set(), "corral --help lists its commands from LAZY_COMMANDS"


def test_agents_list_loads_the_loader_and_nothing_of_runs(tmp_path: Path,
                                                          small_repo: Path) -> None:
    code, loaded = _probe(tmp_path, "agents", "list", "--json", "--root", str(small_repo),
                          "--trust-project", "--no-personal")
    assert code == 0
    assert loaded >= LOADER | API  # through the Python API, like every command
    assert loaded & (HTTP | DISPLAY | ENGINES | RUNS) == set()
    # and as text on a terminal: nothing is drawn live, so rich stays out too
    code, loaded = _probe(tmp_path, "agents", "list", "--root", str(small_repo),
                          "--trust-project", "--no-personal", tty=True)
    assert code == 0 and loaded & (HTTP | DISPLAY | ENGINES | RUNS) == set()


def _repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "-C", str(root), "init", "-q"], check=True, timeout=scaled(30))
    return root


CLAUDE_AGENT = "---\nname: {0}\ndescription: the {0}\ntools: Read, Grep\n---\nReview.\n"
CODEX_ROLE = 'name = "c"\ndescription = "d"\ndeveloper_instructions = "Do it."\n'


def _formats(loaded: set[str]) -> set[str]:
    return {m.rsplit(".", 1)[1] for m in loaded & FORMATS}


def test_agents_list_imports_only_the_adapters_of_the_formats_found(tmp_path: Path) -> None:
    """A repository of Claude Code agents reads no other format's adapter, no zuno or
    ngn JSON layer code, and builds no model a listing does not validate; a Codex role
    next to them brings the Codex adapter, and only it (so the check can fail)."""
    claude = _repo(tmp_path / "claude", {f".claude/agents/{n}.md": CLAUDE_AGENT.format(n)
                                         for n in ("reviewer", "writer")})
    args = ("agents", "list", "--json", "--trust-project", "--no-personal", "--root")
    code, loaded, built = _probe_built(tmp_path, *args, str(claude))
    assert code == 0
    assert _formats(loaded) == {"claude"}
    assert loaded & ON_DEMAND == set()
    assert built == set(), "a clean listing validates no Capability and no Diagnostic"
    code, loaded = _probe(tmp_path, "agents", "list", "--trust-project", "--no-personal",
                          "--root", str(claude), tty=True)
    assert code == 0 and _formats(loaded) == {"claude"} and loaded & ON_DEMAND == set()

    mixed = _repo(tmp_path / "mixed", {".claude/agents/r.md": CLAUDE_AGENT.format("r"),
                                       ".codex/agents/c.toml": CODEX_ROLE})
    code, loaded = _probe(tmp_path, *args, str(mixed))
    assert code == 0
    assert _formats(loaded) == {"claude", "codex"}


def test_a_codex_config_and_zuno_layers_load_their_code_where_found(tmp_path: Path) -> None:
    """The Codex adapter is read for a ``.codex/config.toml`` (its declared roles) and the
    zuno layers for a ``zuno.json`` (its top-level keys), each only there."""
    codex = _repo(tmp_path / "codex", {".codex/config.toml": "model = \"o3\"\n"})
    args = ("agents", "list", "--json", "--trust-project", "--no-personal", "--root")
    code, loaded = _probe(tmp_path, *args, str(codex))
    assert code == 0 and "policies.loader.formats.codex" in loaded
    zuno = _repo(tmp_path / "zuno", {".zuno/zuno.json": '{"default_agent": "nobody"}\n'})
    code, loaded = _probe(tmp_path, *args, str(zuno))
    assert code == 0 and "policies.loader.zuno_layers" in loaded


def test_an_unknown_agent_loads_the_close_names_it_suggests(tmp_path: Path) -> None:
    claude = _repo(tmp_path / "claude", {".claude/agents/reviewer.md":
                                         CLAUDE_AGENT.format("reviewer")})
    code, loaded = _probe(tmp_path, "agents", "show", "reviewr", "--trust-project",
                          "--no-personal", "--root", str(claude))
    assert code == 2
    assert {"executor.agents.suggest", "difflib"} <= loaded


def test_every_format_has_one_adapter_module_that_adapts_it() -> None:
    """The lazy registry names a module and class for every format, and that class adapts
    exactly the format it is registered for (one instance, reused)."""
    assert set(ADAPTER_CLASSES) == set(AgentFormat)
    for fmt in AgentFormat:
        adapter = adapter_for(fmt)
        assert adapter.format is fmt
        assert type(adapter).__module__ == f"policies.loader.formats.{ADAPTER_CLASSES[fmt][0]}"
        assert adapter_for(fmt) is adapter


def test_agents_show_loads_the_tools_not_the_http_client(tmp_path: Path,
                                                        small_repo: Path) -> None:
    code, loaded = _probe(tmp_path, "agents", "show", "w", "--json", "--root", str(small_repo),
                          "--trust-project", "--no-personal")
    assert code == 0
    assert "executor.tools" in loaded  # the offer names the implemented tools
    assert loaded & (HTTP | DISPLAY | ENGINES) == set()


def test_scripted_run_loads_no_http_client_and_no_rich_for_json(
        tmp_path: Path, small_repo: Path, script: Path) -> None:
    code, loaded = _probe(tmp_path, "run", "--root", str(small_repo), "--trust-project",
                          "--no-personal", "--agent", "w", "--backend", "host", "--json",
                          "--script", str(script), "write n.txt")
    assert code == 0
    assert {"executor.run.agent", "sandbox"} | API <= loaded
    assert loaded & (HTTP | DISPLAY | ENGINES) == set()


def test_scripted_run_on_a_terminal_loads_rich_for_its_live_lines(
        tmp_path: Path, small_repo: Path, script: Path) -> None:
    code, loaded = _probe(tmp_path, "run", "--root", str(small_repo), "--trust-project",
                          "--no-personal", "--agent", "w", "--backend", "host",
                          "--script", str(script), "write n.txt", tty=True)
    assert code == 0
    assert "rich" in loaded
    assert loaded & (HTTP | ENGINES) == set()


def test_a_run_with_an_openai_route_builds_the_http_client(
        tmp_path: Path, small_repo: Path) -> None:
    config = tmp_path / "config.toml"
    # Port 9 (discard) is closed here: the request fails at once, after the client is built.
    config.write_text('[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      "max_retries = 0\n")
    code, loaded = _probe(tmp_path, "run", "--root", str(small_repo), "--trust-project",
                          "--no-personal", "--agent", "w", "--backend", "host", "--json",
                          "--model", "local/m", "write n.txt", env={"CORRAL_CONFIG": str(config)})
    assert code == 3  # the run failed: no model answered
    assert {"httpx", "executor.models.openai"} <= loaded


#: The modules that define ``corral``'s commands: the CLI's, and ``corral mcp``'s own.
COMMAND_MODULES = [*(f"executor.cli.{path.stem}"
                     for path in sorted((REPO / "executor" / "cli").glob("*.py"))
                     if path.stem not in ("__init__", "app")),
                   "executor.mcpserver.command", "executor.web.command"]


def test_lazy_command_table_matches_the_commands_modules_define() -> None:
    """Every top-level command a command module defines is in LAZY_COMMANDS, under the
    module and name that define it, and shows the table's line once loaded (one text, not
    two)."""
    defined: dict[str, tuple[str, str]] = {}
    for module in COMMAND_MODULES:
        found = {attribute: value for attribute, value in
                 vars(importlib.import_module(module)).items()
                 if isinstance(value, click.Command) and value.callback is not None
                 and value.callback.__module__ == module}
        nested = {id(sub) for value in found.values() if isinstance(value, click.Group)
                  for sub in value.commands.values()}
        defined |= {str(value.name): (module, attribute) for attribute, value in found.items()
                    if id(value) not in nested}
    assert defined == {name: entry[:2] for name, entry in LAZY_COMMANDS.items()}, (
        "add the command to LAZY_COMMANDS in executor/cli/app.py (name -> module, "
        "attribute, summary)")
    ctx = click.Context(cli)
    for name, (module, _, summary) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.callback is not None
        assert command.callback.__module__ == module, name
        assert command.get_short_help_str(200) == summary
    assert set(cli.commands) == set(LAZY_COMMANDS)
    assert cli.list_commands(ctx) == sorted(LAZY_COMMANDS)


def test_help_listing_is_the_same_before_and_after_the_commands_load() -> None:
    """``corral --help`` from the table equals the listing of the loaded commands."""
    before = subprocess.run([sys.executable, "-m", "executor", "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=scaled(60), check=True).stdout
    for name in LAZY_COMMANDS:
        cli.get_command(click.Context(cli), name)
    with click.Context(cli, info_name="corral", **cli.context_settings) as ctx:
        after = cli.get_help(ctx)
    assert before.strip() == after.strip()
    assert all(f"  {name} " in before for name in LAZY_COMMANDS)


def test_live_progress_draws_escaped_lines_once_enabled() -> None:
    """The live display (rich, loaded on enable) draws each run's line and the finished
    calls as plain text: markup a child chose is shown, never interpreted."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    progress = Progress(enabled=True, console=console)
    with progress:
        progress(ProgressEvent("step", "w", 1, "", 0, (), "run-1"))
        progress(ProgressEvent("tool_done", "w", 1, "write_file: [link=https://x]y[/link]", 0,
                               ("n.txt",), "run-1"))
        assert progress.live is not None
        progress.live.refresh()
    text = out.getvalue()
    assert "w [1] write_file: [link=https://x]y[/link] (1 file(s) changed)" in text
    assert "w: step 1" in text
    assert progress.live is None  # stopped on exit
    disabled = Progress(enabled=False)
    with disabled:
        disabled(ProgressEvent("step", "w", 1, "", 0, (), "run-1"))
    assert disabled.live is None and disabled.console is None
