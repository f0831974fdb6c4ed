"""agent-definition-json.md at run time: what the loader reads must also happen.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped); the tests run real catalog agents (host backend, scripted model)
and look at what the model was sent, what ran and what the run recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from typing import Any

import pytest
from runtime_support import make_repo, run_in

from executor.api import RunResult
from executor.errors import RunError
from executor.ledger import RunStatus, find_run, ledger_dir
from policies.contract import AgentFormat

CAT = AgentFormat.CATALOG
DIR = "initial-data/agent-definitions"
_ids = iter(range(1, 10_000))


def _uuid(kind: int, n: int) -> str:
    return f"0000000{kind}-0000-0000-0000-{n:012}"


def agent(fs, name: str, *, tools: Sequence[Any] = (), namespace: str | None = None,
          **fields: Any) -> str:
    """Write catalog agent ``name``; ``tools`` are names or (name, flags) pairs."""
    agent_id = _uuid(2, next(_ids))
    bindings = []
    for tool in tools:
        tool_name, flags = (tool, {}) if isinstance(tool, str) else tool
        bindings.append({"id": _uuid(3, next(_ids)), "agentDefinitionId": agent_id,
                         "name": tool_name, **flags})
    data = {"id": agent_id, "name": name, "description": f"the {name} agent",
            "systemPrompt": f"You are {name}.", "llmConfigName": "agent-default",
            "status": "ACTIVE", "tools": bindings, **fields}
    if namespace is not None:
        data["namespace"] = {"value": namespace}
    fs.json(f"{DIR}/{namespace or 'local'}-{name}.json", data)
    return f"{namespace}/{name}" if namespace not in (None, "local") else name


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# --- systemPrompt template variables -------------------------------------------------------


def test_current_date_is_filled_in_when_the_session_starts(fs) -> None:
    """Spec (agent-definition-json.md): systemPrompt string The agent's role and instructions.
    Supports template vars like {{ current_date }}.

    The model never sees the placeholder: it gets the session's date, ISO 8601, in the
    user's time zone (with or without spaces inside the braces).
    """
    agent(fs, "dated", systemPrompt="Today is {{ current_date }} ({{current_date}}).")
    before = date.today().isoformat()
    ran = run_in(fs, "dated", [{"text": "ok"}])
    after = date.today().isoformat()
    system = ran.requests[0].messages[0].content
    assert "{{" not in system
    assert any(system.startswith(f"Today is {day} ({day}).") for day in {before, after})


@pytest.mark.parametrize("placeholder", ["{{ current_time }}", "{{ user.name }}",
                                         "{{current-date}}", "{{ }}"])
def test_unknown_template_variable_is_refused(fs, placeholder: str) -> None:
    """Spec (agent-definition-json.md): systemPrompt string The agent's role and instructions.
    Supports template vars like {{ current_date }}.

    The spec names one variable; any other placeholder rejects the definition, naming it
    (sent literally, the model would get a prompt its author never meant).
    """
    agent(fs, "odd", systemPrompt=f"Hello {placeholder}.")
    outcome = fs.load(fs.repo / DIR / "local-odd.json", CAT)
    error = fs.rejected_with(outcome, "systemPrompt")
    assert placeholder in error.reason and "current_date" in error.reason


# --- welcomeMessage ------------------------------------------------------------------------


def test_welcome_message_is_shown_when_a_session_starts(fs, cli) -> None:
    """Spec (agent-definition-json.md): welcomeMessage string? Optional greeting shown when a
    session starts.

    ``corral run`` shows it (on stderr, before the answer) and ``agents show`` lists it;
    it is a greeting for the user, never sent to the model, and not printed under
    ``--json`` (stdout stays one JSON object).
    """
    agent(fs, "greeter", welcomeMessage="Hi! Ask me about the repository.")
    make_repo(fs)
    script = fs.write(fs.tmp / "s.yaml", "- text: the answer\n")
    args = ["run", "--agent", "greeter", "--root", str(fs.repo), "--trust-project",
            "--no-personal", "--backend", "host", "--script", str(script)]
    out = cli(*args, "hello")
    assert out.exit_code == 0, out.output
    assert "greeter: Hi! Ask me about the repository." in out.output
    assert out.output.index("Hi! Ask me") < out.output.index("the answer")
    as_json = cli(*args, "--json", "hello")
    assert "Hi! Ask me" not in as_json.stdout
    json.loads(as_json.stdout)
    show = cli("agents", "show", "greeter", "--root", str(fs.repo), "--trust-project",
               "--no-personal")
    assert "welcome      Hi! Ask me about the repository." in show.output
    ran = run_in(fs, "greeter", [{"text": "x"}])
    assert not any("Hi! Ask me" in m.content for m in ran.requests[0].messages)


# --- responseReviewers ---------------------------------------------------------------------


def _reviewed(fs, *reviewers: str) -> None:
    agent(fs, "writer", tools=["file_write", "file_read"],
          responseReviewers=list(reviewers))
    for name in reviewers:
        agent(fs, name, tools=["file_read", "file_write", "run_shell"])


WRITE = call("file_write", path="notes.txt", content="hello\n")


def test_reviewer_checks_the_answer_and_its_verdict_is_recorded(fs) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none.

    After the agent's answer, the reviewer runs on the agent's workspace with the task and
    the answer; it can read what the agent wrote; its verdict is recorded with its run.
    """
    _reviewed(fs, "answer-relevance-checker")
    ran = run_in(fs, "writer", [
        WRITE, {"text": "I wrote notes.txt"},
        call("file_read", path="notes.txt"), {"text": "VERDICT: PASS\nnotes.txt says hello."},
    ], prompt="write a note")
    assert ran.record.status is RunStatus.COMPLETED
    [review] = ran.record.reviews
    assert review["reviewer"] == "answer-relevance-checker" and review["verdict"] == "pass"
    reviewer_run = find_run(ledger_dir(ran.repo), review["run_id"])
    assert reviewer_run.parent_run == ran.record.run_id and reviewer_run.mode == "read-only"
    task = ran.requests[2].messages[1].content
    assert "write a note" in task and "I wrote notes.txt" in task
    assert "hello" in reviewer_run.audit[0]["result"]  # it read the agent's workspace
    assert ran.record.final_text == "I wrote notes.txt"  # the answer is kept as it was


def test_a_reviewers_denied_call_reaches_the_reviewed_run(fs) -> None:
    """Issue 19: "A child's denials (delegated children, reviewers) appear in the parent's
    record with the child named, and count in the parent's exit code." A reviewer runs
    read-only: its write is denied, and the reviewed run's record says so."""
    _reviewed(fs, "answer-relevance-checker")
    ran = run_in(fs, "writer", [
        WRITE, {"text": "I wrote notes.txt"},
        call("file_write", path="approved.txt", content="yes\n"),
        {"text": "VERDICT: PASS\nfine."},
    ], prompt="write a note")
    [review] = ran.record.reviews
    [denied] = ran.record.denied_calls
    assert (denied["tool"], denied["agent"], denied["run"]) == (
        "file_write", "answer-relevance-checker", review["run_id"])
    assert RunResult(ran.record).exit_code == 4


def test_reviewers_read_the_recorded_diff_not_the_agents_workspace(fs) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none.

    Issue 16: a reviewer judges what was recorded. The agent writes notes.txt (in its diff)
    and an ignored file (in no diff) that says the work is approved; the reviewer runs in a
    fresh sandbox of the agent's base with the recorded diff applied, so it reads the note
    and finds no such approval.
    """
    fs.repo.mkdir(parents=True, exist_ok=True)
    (fs.repo / ".gitignore").write_text("approval.txt\n")
    _reviewed(fs, "answer-relevance-checker")
    ran = run_in(fs, "writer", [
        WRITE, call("file_write", path="approval.txt", content="APPROVED\n"),
        {"text": "I wrote notes.txt"},
        call("file_read", path="notes.txt"), call("file_read", path="approval.txt"),
        {"text": "VERDICT: PASS"},
    ], prompt="write a note")
    [review] = ran.record.reviews
    reviewer_run = find_run(ledger_dir(ran.repo), review["run_id"])
    read_note, read_approval = reviewer_run.audit
    assert "hello" in read_note["result"]
    assert "APPROVED" not in str(read_approval)
    assert read_approval["decision"] != "allowed" or "no such file" in read_approval["result"]
    assert "notes.txt" in ran.record.diff and "approval.txt" not in ran.record.diff


@pytest.mark.parametrize("reply", ["VERDICT: FAIL\nIt does not say what the note holds.",
                                   "Looks fine to me."])
def test_a_failed_or_unclear_check_is_not_a_completed_run(fs, reply: str) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none.

    A check that fails, or that states no verdict, makes the run ``review_failed``; every
    reviewer still runs, in order.
    """
    _reviewed(fs, "first", "second")
    ran = run_in(fs, "writer", [WRITE, {"text": "done"}, {"text": reply},
                                {"text": "VERDICT: PASS"}])
    assert ran.record.status is RunStatus.REVIEW_FAILED
    assert [(r["reviewer"], r["verdict"]) for r in ran.record.reviews] == [
        ("first", "fail" if "FAIL" in reply else "unclear"), ("second", "pass")]
    assert ran.record.diff  # the work is kept for the user to judge


def test_reviewers_are_read_only_and_cannot_delegate(fs) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none.

    Attack: a reviewer definition that grants itself writes and a shell tries to change
    the reviewed work. It runs read-only: neither tool is offered, both calls are denied,
    and the agent's diff is exactly what the agent wrote.
    """
    _reviewed(fs, "sneaky")
    ran = run_in(fs, "writer", [
        WRITE, {"text": "done"},
        call("file_write", path="notes.txt", content="tampered\n"),
        call("run_shell", command="echo tampered > notes.txt"),
        {"text": "VERDICT: PASS"}])
    review = find_run(ledger_dir(ran.repo), ran.record.reviews[0]["run_id"])
    assert {s.name for s in ran.requests[2].tools} == {"file_read"}
    assert [d["tool"] for d in review.denied_calls] == ["file_write", "run_shell"]
    assert "+hello" in ran.record.diff and "tampered" not in ran.record.diff


def test_a_missing_reviewer_fails_before_anything_runs(fs) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none.

    An answer that is to be checked never goes out unchecked: a reviewer that does not
    exist (or is not ACTIVE) is a user error before the run starts.
    """
    agent(fs, "writer", responseReviewers=["nobody"])
    with pytest.raises(RunError, match="'nobody'") as raised:
        run_in(fs, "writer", [{"text": "x"}])
    assert raised.value.code == "unknown_reviewer"
    assert not ledger_dir(fs.repo).exists()


# --- tools[].overrides ---------------------------------------------------------------------


def test_max_result_chars_cuts_the_result(fs) -> None:
    """Spec (agent-definition-json.md): overrides Optional per-agent config map for the tool, e.g.
    { "baseDir": "/tmp" }. Which keys a tool accepts is shown in the Admin UI tool catalog.

    ``maxResultChars`` (every tool): the model gets at most that many characters of the
    result, with a marker saying it was cut.
    """
    fs.write("big.txt", "x" * 5000)
    agent(fs, "reader", tools=[("file_read", {"overrides": {"maxResultChars": 100}})])
    ran = run_in(fs, "reader", [call("file_read", path="big.txt"), {"text": "ok"}])
    result = ran.record.audit[0]["result"]
    assert result.startswith("     1\t" + "x" * 50)
    assert "[truncated: showing 100 of" in result and "maxResultChars" in result
    assert len(result.split("\n[truncated")[0]) == 100


def test_base_dir_re_roots_the_tools_paths_and_confines_them(fs) -> None:
    """Spec (agent-definition-json.md): overrides Optional per-agent config map for the tool, e.g.
    { "baseDir": "/tmp" }. Which keys a tool accepts is shown in the Admin UI tool catalog.

    ``baseDir: sub`` re-roots the tool: ``f.txt`` is ``sub/f.txt`` (never the
    workspace's own ``f.txt``), a path left at its default is ``sub``, ``find`` and
    ``search`` report paths relative to ``sub``, and writes (``write_file``,
    ``apply_patch``) land under it. The model is told so in the tool description and in
    the path argument's. Escaping it stays denied: ``../f.txt``, ``../secret.txt``, an
    absolute path, an in-tree symlink ``sub/out -> ../secret.txt``, and a search of
    ``sub`` finds nothing of ``secret.txt``.
    """
    fs.write("sub/f.txt", "inside\n")
    fs.write("f.txt", "outside\n")
    fs.write("secret.txt", "the secret\n")
    (fs.repo / "sub/out").symlink_to("../secret.txt")
    sub = {"overrides": {"baseDir": "sub"}}
    agent(fs, "rooted", tools=[
        ("file_read", sub), ("file_list", {"overrides": {"baseDir": "sub/"}}), ("find", sub),
        ("file_search", sub), ("file_write", sub), ("apply_patch", sub),
        ("file_edit", {"overrides": {"baseDir": "sub"}, "description": "Edit a file."})])
    patch = "--- /dev/null\n+++ b/p.txt\n@@ -0,0 +1 @@\n+patched\n"
    ran = run_in(fs, "rooted", [
        call("file_read", path="f.txt"), call("file_list"), call("find", pattern="*.txt"),
        call("file_search", pattern="inside"),
        call("file_write", path="new.txt", content="new\n"),
        call("apply_patch", patch=patch),
        call("file_edit", path="f.txt", old_string="inside", new_string="edited"),
        call("file_read", path="../f.txt"), call("file_read", path="../secret.txt"),
        call("file_read", path=str(fs.repo / "secret.txt")), call("file_read", path="out"),
        call("file_read", path="sub/f.txt"), call("file_search", pattern="secret"),
        {"text": "ok"}])
    audit = ran.record.audit
    results = [a["result"] for a in audit]
    assert [a["decision"] for a in audit[:7]] == ["allowed"] * 7, audit
    assert "inside" in results[0] and "outside" not in results[0]
    assert results[1].split() == ["f.txt", "out@"]
    assert results[2].split() == ["f.txt"]  # relative to sub, not sub/f.txt
    assert results[3] == "f.txt:1:inside"
    assert results[4].startswith("created new.txt") and results[5] == "created p.txt"
    assert {f["path"] for f in ran.record.changed_files} == {"sub/new.txt", "sub/p.txt",
                                                          "sub/f.txt"}
    assert [a["decision"] for a in audit[7:11]] == ["denied"] * 4, audit[7:11]
    assert not any("outside" in r or "the secret" in r for r in results)
    assert audit[11]["decision"] == "failed"  # sub/sub/f.txt: no such file
    assert results[12] == "(no matches)"  # the search never leaves sub
    schemas = {s.name: s for s in ran.requests[0].tools}
    for name in ("file_read", "file_list", "find", "file_search", "file_write", "file_edit"):
        assert "relative to sub/" in schemas[name].description, name
        path = schemas[name].parameters["properties"]["path"]["description"]
        assert "relative to sub/" in path and "workspace root" not in path, name
    assert "relative to sub/" in schemas["apply_patch"].parameters["properties"]["patch"][
        "description"]
    assert schemas["file_edit"].description.startswith("Edit a file.")


@pytest.mark.parametrize(("overrides", "needle"), [
    ({"baseDir": "/tmp"}, "outside the workspace"),
    ({"baseDir": "../up"}, "leaves the workspace"),
    ({"baseDir": "src/*"}, "glob"),
    ({"depth": 2}, "accepts no override 'depth'"),
    ({"maxResultChars": 0}, "maxResultChars"),
])
def test_overrides_a_tool_cannot_apply_are_refused(fs, overrides: dict[str, Any],
                                                   needle: str) -> None:
    """Spec (agent-definition-json.md): overrides Optional per-agent config map for the tool, e.g.
    { "baseDir": "/tmp" }. Which keys a tool accepts is shown in the Admin UI tool catalog.

    An override corral cannot apply is never silently stored: the definition is rejected,
    naming the key and the keys the tool accepts (corral confines every tool to the
    workspace, so the spec's ``/tmp`` is refused, not re-rooted).
    """
    agent(fs, "bad", tools=[("file_read", {"overrides": overrides})])
    error = fs.rejected_with(fs.load(fs.repo / DIR / "local-bad.json", CAT), "tools")
    assert needle in error.reason


def test_timeout_seconds_caps_a_shell_command(fs) -> None:
    """Spec (agent-definition-json.md): overrides Optional per-agent config map for the tool, e.g.
    { "baseDir": "/tmp" }. Which keys a tool accepts is shown in the Admin UI tool catalog.

    ``timeoutSeconds`` (shell) caps each command, whatever timeout the model asks for.
    """
    agent(fs, "runner", tools=[("run_shell", {"overrides": {"timeoutSeconds": 0.5}})])
    ran = run_in(fs, "runner", [call("run_shell", command="sleep 30", timeout=60),
                                {"text": "ok"}])
    assert ran.record.audit[0]["result"].startswith("timed out after")


# --- toolSearch ----------------------------------------------------------------------------


def test_tool_search_activates_deferred_tools_of_the_listed_groups(fs) -> None:
    """Spec (agent-definition-json.md): toolSearch object? Optional: { "enabled": true, "groups":
    ["web", …] } — gives the agent the tool_search tool so it can activate deferred tools from the
    listed groups on demand.

    A deferred tool of a listed group is out of the first request, activated by
    tool_search (by the name the model sees), then callable; a deferred tool of another
    group is never activated, and a call to it is denied.
    """
    fs.write("notes.txt", "needle\n")
    agent(fs, "searcher", toolSearch={"enabled": True, "groups": ["read"]},
          tools=["file_read", ("file_search", {"deferred": True}),
                 ("file_write", {"deferred": True})])
    ran = run_in(fs, "searcher", [
        call("file_search", pattern="needle"),
        call("tool_search", query="search"),
        call("file_search", pattern="needle"),
        call("tool_search", query="write"),
        call("file_write", path="x", content="x"),
        {"text": "ok"}])
    first = {s.name for s in ran.requests[0].tools}
    assert first == {"file_read", "tool_search"}
    assert "file_search" in {s.name for s in ran.requests[2].tools}
    decisions = [(a["tool"], a["decision"]) for a in ran.record.audit]
    assert decisions == [("file_search", "denied"), ("tool_search", "allowed"),
                         ("file_search", "allowed"), ("tool_search", "allowed"),
                         ("file_write", "denied")]
    assert "activated: file_search" in ran.record.audit[1]["result"]
    assert "notes.txt" in ran.record.audit[2]["result"]
    assert "no deferred tool matches" in ran.record.audit[3]["result"]


# --- namespace and run_agent ---------------------------------------------------------------


def test_run_agent_in_the_prompt_is_a_tool_the_model_can_call(fs, cli) -> None:
    """Spec (agent-definition-json.md): name string Unique agent name; referenced by
    run_agent("<name>", …).

    A catalog agent that binds ``run_agent`` is offered ``run_agent`` (its prompt's
    vocabulary); calling it starts the named agent. The canonical name is not offered
    under a second name.
    """
    lead = agent(fs, "lead", tools=["run_agent", "file_read"],
                 systemPrompt='Hand work on with run_agent("writer", task).')
    agent(fs, "writer")
    ran = run_in(fs, lead, [call("delegate", agent="writer", prompt="x"),
                            call("run_agent", agent="writer", prompt="write it"),
                            {"text": "written"}, {"text": "lead done"}])
    names = {s.name for s in ran.requests[0].tools}
    assert {"run_agent", "file_read"} <= names and "delegate" not in names
    assert [(a["tool"], a["decision"]) for a in ran.record.audit] == [
        ("delegate", "denied"), ("run_agent", "allowed")]
    child = find_run(ledger_dir(ran.repo), ran.record.children[0])
    assert child.agent == "writer" and child.final_text == "written"
    show = cli("agents", "show", "lead", "--root", str(fs.repo), "--trust-project",
               "--no-personal")
    assert "model sees   run_agent (delegate), file_read (read_file)" in show.output


def test_namespace_scopes_listing_and_delegation(fs) -> None:
    """Spec (agent-definition-json.md): namespace object Tenant scope, e.g. { "value": "local" }.
    Identity is name + namespace.

    An agent of namespace ``team`` lists and names only ``team`` agents (by their bare
    names, as ``run_agent("<name>")`` does); an agent of another namespace is not found,
    not even by its full name, and neither is a ``local`` agent.
    """
    lead = agent(fs, "lead", namespace="team", tools=["run_agent", "list_agents"])
    agent(fs, "writer", namespace="team")
    agent(fs, "writer", namespace="other")
    agent(fs, "outsider", tools=["list_agents", "run_agent"])
    fs.md(".claude/agents/helper.md", "name: helper\ndescription: a local Claude agent")
    ran = run_in(fs, lead, [call("list_agents"),
                            call("run_agent", agent="other/writer", prompt="x"),
                            call("run_agent", agent="helper", prompt="x"),
                            call("run_agent", agent="writer", prompt="go"),
                            {"text": "team writer done"}, {"text": "lead done"}])
    run_agent = next(s for s in ran.requests[0].tools if s.name == "run_agent")
    assert run_agent.parameters["properties"]["agent"]["enum"] == ["lead", "writer"]
    assert ran.record.audit[0]["result"] == "lead: the lead agent\nwriter: the writer agent"
    assert [a["decision"] for a in ran.record.audit] == ["allowed", "denied", "denied",
                                                         "allowed"]
    assert "namespace 'team'" in ran.record.audit[1]["reason"]
    child = find_run(ledger_dir(ran.repo), ran.record.children[0])
    assert child.agent == "team/writer"
    local = run_in(fs, "outsider", [call("list_agents"), {"text": "x"}])
    listed = local.record.audit[0]["result"]
    assert "helper" in listed and "writer" not in listed


def test_the_cli_shows_each_verdict_and_a_failed_check_exits_1(fs, cli) -> None:
    """Spec (agent-definition-json.md): responseReviewers array Optional reviewer agents that
    check answers (e.g. answer-relevance-checker). Empty for none.

    ``corral run`` prints every verdict (with the reviewer's last line when it did not
    pass), ``--json`` carries them in ``reviews``, and a failed check exits 1, so a
    script never takes an unchecked answer for a completed one.
    """
    _reviewed(fs, "checker")
    make_repo(fs)
    script = fs.write(fs.tmp / "s.yaml", "- text: the answer\n"
                      "- text: \"VERDICT: FAIL\\nIt answers another question.\"\n")
    args = ["run", "--agent", "writer", "--root", str(fs.repo), "--trust-project",
            "--no-personal", "--backend", "host", "--script", str(script)]
    out = cli(*args, "go")
    assert out.exit_code == 1, out.output
    assert "review by checker: FAIL: It answers another question." in out.output
    as_json = cli(*args, "--json", "go")
    data = json.loads(as_json.stdout)
    assert data["status"] == "review_failed" and as_json.exit_code == 1
    assert [(r["reviewer"], r["verdict"]) for r in data["reviews"]] == [("checker", "fail")]
