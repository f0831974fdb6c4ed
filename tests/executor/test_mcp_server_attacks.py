"""Attacks on ``corral mcp`` from its client: a parent model (maybe prompt-injected) asking
for more than the user started the server to allow.

Each test performs the attack against the real server over stdio and checks the
checkout (``.git`` included) is byte-identical afterwards, or the error that
refused it; each has a control showing the same call does what it says when the
user did allow it, so the test can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_support import agent_file, tree_digest
from mcp_support import call, data, error, replay, run, stdio_client

from executor.ledger import ledger_dir, scan_runs

HOST = ("--backend", "host")
WRITE = replay(call("write_file", path="n.txt", content="n\n"), {"text": "wrote n.txt"})


@pytest.fixture
def project(repo: Path) -> Path:
    agent_file(repo, "w", "tools: [read_file, write_file, shell]")
    return repo


def test_apply_run_without_allow_apply_only_validates(project: Path) -> None:
    async def main(*options: str) -> tuple[str, dict[str, object], str, str]:
        async with stdio_client(project, *HOST, *options) as client:
            run_id = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE}))["run_id"]
            before = tree_digest(project)
            result = data(await client.call_tool("apply_run", {"run_id": run_id,
                                                               "three_way": True}))
            state = data(await client.call_tool("show_run", {"run_id": run_id,
                                                             "transcript": False}))["state"]
            return before, result, tree_digest(project), str(state)

    outcome: list[tuple[str, dict[str, object], str, str]] = []
    run(lambda: _keep(outcome, main()))
    before, result, after, state = outcome[0]
    assert after == before  # byte-identical, .git included
    assert result["status"] == "checked" and result["applied"] is False
    assert state == "pending"
    # The command is the plain one: the person adds flags after reading the review list.
    assert result["command"] == f"corral apply --root {project.resolve()} {result['run_id']}"
    assert "started without --allow-apply" in str(result["message"])
    assert not (project / "n.txt").exists()

    outcome.clear()  # control: the user allowed it
    run(lambda: _keep(outcome, main("--allow-apply")))
    before, result, after, state = outcome[0]
    assert result["status"] == "applied" and result["applied"] is True
    assert "command" not in result and state == "applied"
    assert (project / "n.txt").read_text() == "n\n" and after != before


CI = replay(call("write_file", path=".github/workflows/ci.yml",
                 content="on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: env}]}}\n"),
            {"text": "added CI"})
WIDENING = ("yes", "allow_git_dirs", "allow_symlinks", "allow_binary", "allow_unverified")


def _plain(refused: dict[str, object], project: Path, run_id: str) -> None:
    """The refusal names the plain command a person runs, and no flag the client asked for."""
    command = f"corral apply --root {project.resolve()} {run_id}"
    context = refused["context"]
    assert isinstance(context, dict) and context["command"] == command
    assert command in str(refused["hint"]) and "after reading" in str(refused["hint"])
    assert "--yes" not in command and "--allow-" not in command


def test_only_a_person_widens_apply(project: Path) -> None:
    """Issue 16: with --allow-apply a client passed yes=true and merged a child's
    .github/workflows/ci.yml (flagged for review) with no person involved; without it, the
    command the server suggested repeated the client's --yes --allow-git-dirs."""

    async def main(*options: str) -> None:
        async with stdio_client(project, *HOST, *options) as client:
            schema = next(t for t in (await client.list_tools()).tools
                          if t.name == "apply_run").input_schema
            assert set(schema["properties"]) == {"run_id", "check", "three_way"}
            run_id = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": CI}))["run_id"]
            before = tree_digest(project)
            for widening in WIDENING:
                refused = error(await client.call_tool("apply_run", {
                    "run_id": run_id, widening: True}))
                assert refused["code"] == "needs_a_person", refused
                assert refused["exit_code"] == 4 and widening in refused["message"]
                _plain(refused, project, run_id)
            asked = error(await client.call_tool("apply_run", {
                "run_id": run_id, "yes": True, "allow_git_dirs": True, "three_way": True}))
            _plain(asked, project, run_id)
            if "--allow-apply" in options:  # a plain apply of a flagged run: refused too
                flagged = error(await client.call_tool("apply_run", {"run_id": run_id}))
                assert flagged["code"] == "review_required"
                assert ".github/workflows/ci.yml" in str(flagged["context"]["flagged"])
                _plain(flagged, project, run_id)
            else:  # validated, and the person's plain command to merge it after reading
                checked = data(await client.call_tool("apply_run", {"run_id": run_id}))
                assert checked["status"] == "checked" and checked["applied"] is False
                assert checked["command"] == f"corral apply --root {project.resolve()} {run_id}"
                assert "after reading" in str(checked["note"])
            assert tree_digest(project) == before  # byte-identical, .git included
            state = data(await client.call_tool("show_run", {"run_id": run_id,
                                                             "transcript": False}))["state"]
            assert state == "pending"
            # Control: a run whose review list is empty applies on a server that may apply.
            clean = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE}))["run_id"]
            applied = data(await client.call_tool("apply_run", {"run_id": clean}))
            assert applied["applied"] is ("--allow-apply" in options)

    run(lambda: main("--allow-apply"))
    assert not (project / ".github").exists() and (project / "n.txt").read_text() == "n\n"
    (project / "n.txt").unlink()
    run(main)
    assert not (project / ".github").exists() and not (project / "n.txt").exists()


def test_a_script_path_outside_the_root_is_refused_before_it_is_read(project: Path,
                                                                     tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(WRITE)
    (project / "replays").mkdir()
    (project / "replays" / "link.yaml").symlink_to(outside)
    (project / "replays" / "passwd.yaml").symlink_to("/etc/passwd")
    (project / "replays" / "ok.yaml").write_text(WRITE)
    before = tree_digest(project)

    async def main() -> None:
        async with stdio_client(project, *HOST) as client:
            for given in ("../../etc/passwd", "/etc/passwd", str(outside), "../outside.yaml",
                          "replays/link.yaml", "replays/passwd.yaml"):
                refused = error(await client.call_tool("run_agent", {
                    "agent": "w", "prompt": "go", "script": given}))
                assert refused["code"] == "path_outside_root", given
                assert refused["message"] == f"script {given!r} lies outside the server's root"
                assert refused["context"]["root"] == str(project.resolve())
                assert "script_text" in refused["hint"]
                assert "root:x:" not in str(refused)  # nothing of the file was read
                fanned = error(await client.call_tool("fanout", {
                    "agents": ["w"], "prompt": "go", "scripts": [given, given]}))
                assert fanned["code"] == "path_outside_root", given
            # control: a replay under the root runs
            ran = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script": str(project / "replays" / "ok.yaml")}))
            assert ran["status"] == "completed"
            missing = error(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script": "replays/none.yaml"}))
            assert missing["code"] == "script_not_found"

    run(main)
    assert tree_digest(project) == before


def test_workspace_write_needs_its_own_flag(project: Path) -> None:
    """A workspace-write child writes flagged files (CI, hooks) straight into the checkout:
    ``--allow-apply`` (which merges only unflagged diffs) must not allow it; only
    ``--allow-workspace-write`` does."""
    before = tree_digest(project)

    async def main(*options: str) -> dict[str, object]:
        async with stdio_client(project, *HOST, *options) as client:
            result = await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE,
                "mode": "workspace-write"})
            return error(result) if result.is_error else data(result)

    for options in ((), ("--allow-apply",)):
        refused: list[dict[str, object]] = []
        run(lambda options=options, refused=refused: _keep(refused, main(*options)))
        assert refused[0]["code"] == "mode_not_allowed" and refused[0]["exit_code"] == 4
        assert "--allow-workspace-write" in str(refused[0]["hint"])
        assert tree_digest(project) == before and not (project / "n.txt").exists()

    allowed: list[dict[str, object]] = []  # control: the user allowed it
    run(lambda: _keep(allowed, main("--allow-workspace-write")))
    assert allowed[0]["status"] == "completed" and allowed[0]["mode"] == "workspace-write"
    assert (project / "n.txt").read_text() == "n\n"


def test_the_host_backend_needs_the_server_to_allow_it(project: Path) -> None:
    before = tree_digest(project)

    async def main() -> None:
        async with stdio_client(project) as client:  # the default: isolating backends only
            refused = error(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE, "backend": "host"}))
            assert refused["code"] == "backend_not_allowed"
            assert "--backend host" in refused["hint"]
            fanned = error(await client.call_tool("fanout", {
                "agents": ["w"], "prompt": "go", "script_texts": [WRITE], "n": 2,
                "backend": "host"}))
            assert fanned["code"] == "backend_not_allowed"
        async with stdio_client(project, *HOST) as client:  # control: the user chose host
            ran = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE, "backend": "host"}))
            assert ran["status"] == "completed" and ran["backend"] == "host"

    run(main)
    assert tree_digest(project) == before


def test_approvals_are_the_servers_never_the_callers(project: Path) -> None:
    """An ``ask`` rule is the user's question: the parent model cannot answer it."""
    zuno = project / ".zuno" / "zuno.json"
    zuno.parent.mkdir()
    zuno.write_text(json.dumps({"agents": {"asker": {"permission": {"rules": {"shell": "ask"}}}}}))
    shell = replay(call("shell", command="echo hi > asked.txt"), {"text": "done"})

    async def main(*options: str) -> list[dict[str, str]]:
        async with stdio_client(project, *HOST, *options) as client:
            result = data(await client.call_tool("run_agent", {
                "agent": "asker", "prompt": "go", "script_text": shell}))
            return list(result["denied_calls"])

    denied: list[list[dict[str, str]]] = []
    run(lambda: _keep(denied, main()))
    assert [d["tool"] for d in denied[0]] == ["shell"]
    assert denied[0][0]["reason"].endswith("this run has no approver")
    denied.clear()  # control: the user started the server with the approval
    run(lambda: _keep(denied, main("--approve", "always-for=shell")))
    assert denied[0] == []


async def _keep(into: list[object], coroutine: object) -> None:
    into.append(await coroutine)  # type: ignore[misc]


def test_run_ids_are_ids_never_patterns(project: Path) -> None:
    """Issue 16: a run id was a glob pattern: '*' named any run, '**' was an internal error."""

    async def main() -> None:
        async with stdio_client(project, *HOST) as client:
            run_id = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE}))["run_id"]
            for tool in ("show_run", "diff_run", "apply_run", "discard_run"):
                for given in ("*", "**", "?", "2*", f"{run_id[:4]}*", "[0-9]*", "../x", "..",
                              "a/b", ".", f"{run_id}/", "x" * 65):
                    refused = error(await client.call_tool(tool, {"run_id": given}))
                    assert refused["code"] == "bad_arguments", (tool, given, refused)
                    assert "run_id" in refused["message"] and "pattern" in refused["message"]
            # An exact id and a unique prefix of one still name the run.
            for given in (run_id, run_id[:15]):
                shown = data(await client.call_tool("show_run", {"run_id": given,
                                                                 "transcript": False}))
                assert shown["run_id"] == run_id and shown["state"] == "pending"

    run(main)


def test_jobs_children_and_timeouts_have_the_servers_ceilings(project: Path) -> None:
    """Issue 16: jobs, n and timeout had no upper bound; the server's owner sets them."""

    async def main() -> None:
        async with stdio_client(project, *HOST, "--max-jobs", "2", "--max-children", "3",
                                "--max-timeout", "60") as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            fan = tools["fanout"]["properties"]
            assert _maximum(fan["jobs"]) == 2 and _maximum(fan["n"]) == 3
            assert _maximum(fan["timeout"]) == 60 and _maximum(fan["check_timeout"]) == 60
            assert fan["agents"]["maxItems"] == fan["script_texts"]["maxItems"] == 3
            assert _maximum(tools["run_agent"]["properties"]["timeout"]) == 60
            over = [("fanout", {"jobs": 3}, "jobs", "2", "--max-jobs"),
                    ("fanout", {"n": 4}, "n", "3", "--max-children"),
                    ("fanout", {"n": 1000000}, "n", "3", "--max-children"),
                    ("fanout", {"script_texts": [WRITE] * 4}, "script_texts", "3",
                     "--max-children"),
                    ("fanout", {"agents": ["w"] * 4}, "agents", "3", "--max-children"),
                    ("fanout", {"timeout": 61}, "timeout", "60", "--max-timeout"),
                    ("fanout", {"check_timeout": 1e9}, "check_timeout", "60", "--max-timeout"),
                    ("run_agent", {"timeout": 60.5}, "timeout", "60", "--max-timeout")]
            base = {"fanout": {"agents": ["w"], "prompt": "go", "script_texts": [WRITE]},
                    "run_agent": {"agent": "w", "prompt": "go", "script_text": WRITE}}
            for tool, arguments, name, ceiling, flag in over:
                refused = error(await client.call_tool(tool, base[tool] | arguments))
                assert refused["code"] == "above_ceiling", (arguments, refused)
                assert name in refused["message"] and ceiling in refused["message"]
                assert flag in refused["hint"]
            assert scan_runs(ledger_dir(project))[0] == []  # nothing ran
            # At the ceiling: runs.
            ran = data(await client.call_tool("run_agent", {
                "agent": "w", "prompt": "go", "script_text": WRITE, "timeout": 60}))
            assert ran["status"] == "completed"
        async with stdio_client(project, *HOST) as client:  # the defaults are ceilings too
            fan = next(t for t in (await client.list_tools()).tools
                       if t.name == "fanout").input_schema["properties"]
            assert _maximum(fan["jobs"]) >= 4 and _maximum(fan["n"]) >= 2
            assert _maximum(fan["timeout"]) >= 600

    run(main)


def _maximum(schema: dict[str, object]) -> object:
    """The ``maximum`` of a number property (optional ones are ``anyOf [number, null]``)."""
    if "maximum" in schema:
        return schema["maximum"]
    branches = schema.get("anyOf")
    assert isinstance(branches, list)
    [found] = [b["maximum"] for b in branches if "maximum" in b]
    return found
