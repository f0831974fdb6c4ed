"""``corral mcp`` over stdio, driven by the MCP SDK's own client against the real server.

The server is a subprocess (``python -m executor mcp``), as a harness starts it;
children are scripted replays (no model key), on the host backend unless a test
names another. Every result must match what the CLI says about the same run
(same ledger, same codes).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from exec_support import agent_file, git, tree_digest
from mcp_support import (
    REPO,
    call,
    data,
    error,
    replay,
    run,
    stdio_client,
    wait_until,
)

from executor.cli import cli
from executor.ledger import ledger_dir, scan_runs
from tests.timescale import scaled

TOOLS = {"list_agents", "list_runs", "run_agent", "fanout", "show_run", "diff_run", "apply_run",
         "discard_run"}
RUN_KEYS = {"run_id", "status", "final_text", "diff", "changed_files", "denied_calls"}
WRITE = replay(call("write_file", path="n.txt", content="n\n"), call("shell", command="id"),
               {"text": "wrote n.txt"})
HOST = ("--backend", "host")


def corral(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


@pytest.fixture
def project(repo: Path) -> Path:
    agent_file(repo, "w", "tools: [read_file, write_file, shell]")
    agent_file(repo, "r", "tools: [read_file]")
    return repo


def test_the_tools_and_their_schemas(project: Path) -> None:
    async def main() -> None:
        async with stdio_client(project) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        run_agent = listed["run_agent"].input_schema
        assert run_agent["type"] == "object" and run_agent["required"] == ["prompt"]
        assert run_agent["additionalProperties"] is False
        assert {"agent", "prompt", "backend", "mode", "script", "script_text", "model",
                "timeout", "net"} == set(run_agent["properties"])
        assert "approve" not in run_agent["properties"]  # approvals are the server's
        apply_hints = listed["apply_run"].annotations
        assert apply_hints is not None and apply_hints.destructive_hint is True
        show_hints = listed["show_run"].annotations
        assert show_hints is not None and show_hints.read_only_hint is True

    run(main)


def test_list_agents_says_what_the_cli_lists(project: Path) -> None:
    async def main() -> None:
        async with stdio_client(project) as client:
            listed = data(await client.call_tool("list_agents", {"details": True}))
        assert listed["root"] == str(project.resolve())
        assert [a["name"] for a in listed["agents"]] == ["r", "w"]
        w = listed["agents"][1]
        assert {k: w[k] for k in ("name", "description", "format", "mode", "sandbox")} == {
            "name": "w", "description": "test agent w", "format": "ngn", "mode": "build",
            "sandbox": None}
        code, out = corral("agents", "list", "--root", str(project), "--trust-project",
                           "--no-personal", "--json")
        assert code == 0
        assert [a["name"] for a in json.loads(out)["agents"]] == ["r", "w"]

    run(main)


def test_untrusted_project_agents_stay_out_without_trust_project(project: Path) -> None:
    async def main() -> None:
        async with stdio_client(project, trust=False) as client:
            listed = data(await client.call_tool("list_agents", {"diagnostics": True}))
            refused = error(await client.call_tool("run_agent", {"agent": "w",
                                                                 "prompt": "go"}))
        assert listed["agents"] == []
        assert any(d["code"] == "untrusted_project" for d in listed["diagnostics"])
        assert refused["code"] == "unknown_agent" and "--trust-project" in refused["hint"]

    run(main)


def test_a_scripted_child_runs_and_its_record_is_the_clis(project: Path) -> None:
    (project / "replays").mkdir()
    (project / "replays" / "write.yaml").write_text(WRITE)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "replay")
    before = tree_digest(project)
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(str(message))

    async def main() -> None:
        async with stdio_client(project, *HOST) as client:
            result = data(await client.call_tool(
                "run_agent", {"agent": "w", "prompt": "write a note",
                              "script": "replays/write.yaml"}, progress_callback=on_progress))
            assert set(result) >= RUN_KEYS
            assert result["status"] == "completed" and result["final_text"] == "wrote n.txt"
            assert result["exit_code"] == 0
            assert result["denied_calls"] == []
            assert [f["path"] for f in result["changed_files"]] == ["n.txt"]
            assert result["diff"].startswith("diff --git a/n.txt b/n.txt")
            assert "isolates changes, not processes" in result["warnings"][0]
            run_id = result["run_id"]

            shown = data(await client.call_tool("show_run", {"run_id": run_id[:15]}))
            assert shown["run_id"] == run_id and shown["status"] == "completed"
            assert [a["decision"] for a in shown["audit"]] == ["allowed", "allowed"]
            assert shown["transcript"][2]["tool_calls"][0]["name"] == "write_file"
            brief = data(await client.call_tool("show_run", {"run_id": run_id,
                                                             "transcript": False}))
            assert "transcript" not in brief

            diff = data(await client.call_tool("diff_run", {"run_id": run_id}))
            code, patch = corral("diff", run_id, "--root", str(project))
            assert code == 0 and diff["diff"] == patch == result["diff"]
            assert "diff_base64" not in diff and diff["empty"] is False

            discarded = data(await client.call_tool("discard_run", {"run_id": run_id}))
            assert discarded["state"] == "discarded"
            again = data(await client.call_tool("discard_run", {"run_id": run_id}))
            assert again["already_discarded"] is True

        assert tree_digest(project) == before  # the child wrote its own worktree only
        code, out = corral("runs", "--root", str(project), "--json")
        [listed] = [r for r in json.loads(out) if r.get("run_id") == run_id]
        assert listed["state"] == "discarded"  # the same ledger as the CLI's
        assert "w: step 1: write_file {\"content\": \"n\\n\", \"path\": \"n.txt\"}" in progress
        assert "w: step 1: write_file: allowed" in progress
        assert progress.index("w: opening its sandbox") < progress.index(
            "w: answered after 3 step(s)")

    run(main)


def test_failures_are_tool_errors_with_corrals_codes(project: Path) -> None:
    async def main() -> None:
        async with stdio_client(project, *HOST) as client:
            unknown = error(await client.call_tool("run_agent", {"agent": "ww",
                                                                 "prompt": "go"}))
            assert unknown["code"] == "unknown_agent" and unknown["exit_code"] == 2
            assert "did you mean 'w'" in unknown["hint"]
            missing = error(await client.call_tool("run_agent", {"agent": "w"}))
            assert missing["code"] == "bad_arguments" and "prompt" in missing["message"]
            extra = error(await client.call_tool("run_agent", {"prompt": "go",
                                                               "approve": "always-for=shell"}))
            assert extra["code"] == "bad_arguments" and "approve" in extra["message"]
            assert "takes: prompt, agent" in extra["hint"]
            bad = error(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": "- {text: a, tool_calls: []}"}))
            assert bad["code"] == "bad_script" and "script_text" in bad["message"]
            both = error(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE, "model": "x/y"}))
            assert both["code"] == "usage_error"
            nothing = error(await client.call_tool("show_run", {"run_id": "nope"}))
            assert nothing["code"] == "unknown_run" and nothing["hint"]
            tool = error(await client.call_tool("rm_rf", {}))
            assert tool["code"] == "unknown_tool" and "run_agent" in tool["hint"]
            # The server survived every one of them.
            assert data(await client.call_tool("list_agents", {}))["agents"]
        assert scan_runs(ledger_dir(project))[0] == []  # nothing ran

    run(main)


def test_a_fanout_compares_children_and_applies_nothing(project: Path) -> None:
    before = tree_digest(project)
    short = replay(call("write_file", path="CHANGES.md", content="# Changes\n"),
                   {"text": "short"})
    long = replay(call("write_file", path="CHANGES.md", content="# Changes\n\n- more\n"),
                  {"text": "long"})

    async def main() -> None:
        async with stdio_client(project, *HOST) as client:
            result = data(await client.call_tool("fanout", {
                "agents": ["w"], "prompt": "add a changelog", "script_texts": [short, long],
                "check_cmd": "grep -q more CHANGES.md"}))
        assert result["status"] == "completed" and len(result["runs"]) == 2
        assert [r["status"] for r in result["runs"]] == ["completed", "completed"]
        assert [r["check"]["exit_code"] for r in result["runs"]] == [1, 0]
        assert result["exit_code"] == 1  # a check failed, as `corral fanout` exits
        first, second = (r["run_id"] for r in result["runs"])
        assert result["conflicts"] == [[first, second, ["CHANGES.md"]]]
        _code, out = corral("runs", "--root", str(project), "--json")
        [fanout] = [entry for entry in json.loads(out) if "fanout_id" in entry]
        assert fanout["fanout_id"] == result["fanout_id"]
        assert fanout["children"] == [first, second]

    run(main)
    assert tree_digest(project) == before


def test_cancelling_a_run_stops_the_child_and_keeps_its_diff(project: Path,
                                                             tmp_path: Path) -> None:
    up, never = tmp_path / "up", tmp_path / "never"
    os.mkfifo(up)
    os.mkfifo(never)
    blocking = replay(call("write_file", path="half.txt", content="half\n"),
                      call("shell", command=f"echo up > {up}; cat {never}"),
                      {"text": "never said"})
    ledger = ledger_dir(project)

    async def main() -> None:
        async with stdio_client(project, *HOST) as client:
            async with anyio.create_task_group() as group:

                async def start() -> None:
                    await client.call_tool("run_agent", {"agent": "w", "prompt": "go",
                                                         "script_text": blocking})

                group.start_soon(start)
                # Wait on state: the child's command is running (it opened the FIFO).
                await anyio.to_thread.run_sync(up.read_text)
                [record], _ = scan_runs(ledger)
                assert record.status.value == "running"
                group.cancel_scope.cancel()  # the client gives up: notifications/cancelled

            async def ended() -> bool:
                shown = data(await client.call_tool("show_run", {"run_id": record.run_id}))
                return bool(shown["status"] != "running")

            await wait_until(ended, "the cancelled run's record")
            shown = data(await client.call_tool("show_run", {"run_id": record.run_id}))
            assert shown["status"] == "cancelled"
            assert "the MCP client cancelled the request" in shown["error"]["message"]
            assert [f["path"] for f in shown["changed_files"]] == ["half.txt"]
            assert "+half" in data(await client.call_tool("diff_run", {
                "run_id": record.run_id}))["diff"]
            # The server serves on after a cancel.
            assert data(await client.call_tool("list_agents", {}))["agents"]

    run(main)


def test_corral_help_never_imports_the_sdk() -> None:
    probe = ("import sys\nfrom executor.cli import main\ntry:\n    main(['--help'])\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('mcp', 'mcp_types', 'uvicorn', 'starlette') or m == 'executor.mcpserver.server'"
             "))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=REPO, check=True, timeout=scaled(120))
    assert done.stdout.strip().splitlines()[-1] == "[]"
    helped = subprocess.run([sys.executable, "-m", "executor", "mcp", "--help"],
                            capture_output=True, text=True, cwd=REPO, check=True,
                            timeout=scaled(120))
    assert "--allow-apply" in helped.stdout and "--http PORT" in helped.stdout


def test_a_client_that_goes_away_mid_run_leaves_a_cancelled_record(project: Path,
                                                                   tmp_path: Path) -> None:
    """The harness closes the connection (its session ends) while a child runs: the server
    cancels the child, records it with its diff, then exits; no `running` record is left."""
    up, never = tmp_path / "up", tmp_path / "never"
    os.mkfifo(up)
    os.mkfifo(never)
    blocking = replay(call("write_file", path="half.txt", content="half\n"),
                      call("shell", command=f"echo up > {up}; cat {never}"),
                      {"text": "never said"})
    ledger = ledger_dir(project)

    async def main() -> None:
        async with stdio_client(project, *HOST) as client, anyio.create_task_group() as group:

            async def start() -> None:
                await client.call_tool("run_agent", {"agent": "w", "prompt": "go",
                                                     "script_text": blocking})

            group.start_soon(start)
            await anyio.to_thread.run_sync(up.read_text)
            group.cancel_scope.cancel()  # leaves both blocks: the connection closes

    run(main)
    [record], broken = scan_runs(ledger)
    assert broken == []
    assert record.status.value == "cancelled"
    assert [c["path"] for c in record.changed_files] == ["half.txt"]


def test_sigterm_mid_run_records_the_child_cancelled(project: Path, tmp_path: Path) -> None:
    """A client stopping its server (SIGTERM, after it closed stdin) while a child runs: the
    child is cancelled and recorded with its diff before the server exits."""
    up, never = tmp_path / "up", tmp_path / "never"
    os.mkfifo(up)
    os.mkfifo(never)
    blocking = replay(call("write_file", path="half.txt", content="half\n"),
                      call("shell", command=f"echo up > {up}; cat {never}"),
                      {"text": "never said"})
    ledger = ledger_dir(project)

    async def main() -> None:
        async with stdio_client(project, *HOST) as client, anyio.create_task_group() as group:

            async def start() -> None:
                with contextlib.suppress(Exception):  # the server goes away under the call
                    await client.call_tool("run_agent", {"agent": "w", "prompt": "go",
                                                         "script_text": blocking})

            group.start_soon(start)
            await anyio.to_thread.run_sync(up.read_text)
            [running], _ = scan_runs(ledger)
            assert running.owner is not None
            os.kill(int(running.owner["pid"]), signal.SIGTERM)

            async def recorded() -> bool:
                [record], _ = scan_runs(ledger)
                return record.status.value != "running"

            await wait_until(recorded, "the record of the child the SIGTERM cancelled")
            group.cancel_scope.cancel()

    run(main)
    [record], _ = scan_runs(ledger)
    assert record.status.value == "cancelled"
    assert [c["path"] for c in record.changed_files] == ["half.txt"]


@pytest.mark.parametrize("backend", [
    pytest.param("bubblewrap", marks=pytest.mark.bubblewrap),
    pytest.param("docker", marks=pytest.mark.docker)], indirect=True)
def test_a_child_runs_in_a_real_sandbox(project: Path, backend: str) -> None:
    """The server's default backend isolates: a call names bubblewrap or docker and the
    child's shell runs there, its writes reaching its own worktree only."""
    before = tree_digest(project)
    script = replay(call("write_file", path="n.txt", content="n\n"),
                    call("shell", command="cat n.txt > copy.txt && echo $HOME"),
                    {"text": "done"})

    async def main() -> None:
        async with stdio_client(project) as client:
            result = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": script, "backend": backend}))
            assert result["status"] == "completed" and result["backend"] == backend
            assert result["warnings"] == []
            assert sorted(f["path"] for f in result["changed_files"]) == ["copy.txt", "n.txt"]
            shown = data(await client.call_tool("show_run", {"run_id": result["run_id"]}))
            assert shown["audit"][1]["decision"] == "allowed"

    run(main)
    assert tree_digest(project) == before


def test_list_agents_is_compact_paged_and_filtered_for_a_models_context(repo: Path) -> None:
    """Issue 19: "MCP `list_agents`: compact by default (name, description, can it run),
    filter and paging arguments, diagnostics on request" (156 agents were 177K characters,
    half of it diagnostics)."""
    for n in range(150):
        path = repo / ".ngn" / "agents" / f"agent-{n:03}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        language = "python" if n % 3 else "rust"
        long = "Very long. " * 40
        path.write_text(f"---\nname: agent-{n:03}\ndescription: |\n  reviews {language} "
                        f"code. {long}\n  second line\ntools: [read_file]\n---\nReview.\n")
    bad = repo / ".ngn" / "agents" / "broken.md"
    bad.write_text("---\nname: broken\ntools: [no_such_tool]\n---\nx\n")

    async def main() -> None:
        async with stdio_client(repo) as client:
            first = data(await client.call_tool("list_agents", {}))
            rest = data(await client.call_tool("list_agents", {"offset": 50, "limit": 200}))
            rust = data(await client.call_tool("list_agents", {"match": "RUST", "limit": 500}))
            full = data(await client.call_tool("list_agents", {"details": True,
                                                               "diagnostics": True}))
        assert first["total"] == 150 and len(first["agents"]) == 50
        assert first["next_offset"] == 50 and rest["next_offset"] is None
        assert [a["name"] for a in first["agents"] + rest["agents"]] == [
            f"agent-{n:03}" for n in range(150)]
        row = first["agents"][1]
        assert set(row) == {"name", "description", "runnable"} and row["runnable"] is True
        assert len(row["description"]) <= 163 and "second line" not in row["description"]
        assert "diagnostics" not in first and first["diagnostic_counts"]["error"] >= 1
        assert len(json.dumps(first)) < 50 * 260  # about 200 characters an agent
        assert rust["total"] == 50 and all("rust" in a["description"] for a in rust["agents"])
        assert {"format", "source", "mode"} <= set(full["agents"][0])
        assert any(d["file"].endswith("broken.md") for d in full["diagnostics"])

    run(main)
