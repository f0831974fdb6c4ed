"""``corral run --continue RUN PROMPT`` and ``corral shell RUN [-- CMD]`` (issue 19).

Both rebuild a finished run's workspace (the checkout now, the run's verified
diff applied, the run's backend). Everything drives the real ``corral`` in a
process of its own, with scripted models; on the host backend and, where the
sandbox matters, bubblewrap. The parent checkout is hashed (working tree and
``.git``) before and after: neither command may touch it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from exec_support import BACKENDS, agent_file, tree_digest
from tty_support import on_terminal, raw_controls

from executor.api import AsyncCorral, Corral
from executor.ledger import (
    UNANSWERED,
    RunRecord,
    RunStatus,
    conversation,
    find_run,
    ledger_dir,
    new_run_id,
    running_owner,
    set_run_state,
    write_run,
)
from executor.models.base import Message, ToolCall
from executor.run.handwork import BY_HAND
from executor.run.handwork import _record as record_hand
from sandbox.results import DiffResult
from tests.backends import git
from tests.timescale import scaled

SHELL_BACKENDS = [b for b in BACKENDS if b.id in ("host", "bubblewrap")]


def corral(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """The ``corral`` command, in a process of its own."""
    done = subprocess.run([sys.executable, "-m", "executor", *args], input=stdin,
                          capture_output=True, timeout=scaled(120), check=False)
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def script(tmp_path: Path, turns: list[dict[str, Any]]) -> Path:
    path = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.yaml"
    path.write_text(yaml.safe_dump(turns))
    return path


def started(repo: Path, tmp_path: Path, backend: str, turns: list[dict[str, Any]],
            prompt: str = "write notes") -> str:
    """Run agent ``w`` with ``turns``; its run id."""
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "w", "--backend", backend, "--json",
                            "--script", str(script(tmp_path, turns)), prompt)
    assert code == 0, err
    return str(json.loads(out)["run_id"])


def continued(repo: Path, tmp_path: Path, run_id: str, turns: list[dict[str, Any]],
              prompt: str = "more") -> tuple[int, str, str]:
    return corral("run", "--root", str(repo), "--trust-project", "--no-personal", "--json",
                  "--continue", run_id, "--script", str(script(tmp_path, turns)), prompt)


def record(repo: Path, run_id: str) -> dict[str, Any]:
    code, out, err = corral("show", run_id, "--root", str(repo), "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def runs_recorded(repo: Path) -> int:
    ledger = ledger_dir(repo)
    return len([d for d in ledger.iterdir() if (d / "record.json").is_file()])


@pytest.fixture
def w_repo(repo: Path) -> Path:
    agent_file(repo, "w", "tools: [read_file, write_file, shell]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent w")
    return repo


NOTES = [call("write_file", path="notes.txt", content="first\n"), {"text": "wrote notes"}]


# -- corral shell ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend", SHELL_BACKENDS, indirect=True)
def test_shell_change_is_in_the_runs_diff_marked_by_hand_and_the_checkout_untouched(
        w_repo: Path, tmp_path: Path, backend: str) -> None:
    run_id = started(w_repo, tmp_path, backend, NOTES)
    before = tree_digest(w_repo)
    # The acceptance, verbatim.
    code, _, err = corral("shell", "--root", str(w_repo), run_id, "--", "sh", "-c",
                          "echo x >> f")
    assert code == 0, err
    assert f"run {run_id}: 1 file(s) changed by hand, recorded in the run: f" in err
    code, patch, err = corral("diff", run_id, "--root", str(w_repo))
    assert code == 0
    assert "diff --git a/f b/f" in patch and "\n+x\n" in patch
    assert "+first" in patch  # the child's change is still there
    assert "note: changed by hand (corral shell): f" in err
    assert tree_digest(w_repo) == before  # the parent checkout is untouched

    shown = record(w_repo, run_id)
    assert shown["hand_changes"] == ["f"]
    assert shown["audit"][-1]["tool"] == BY_HAND
    assert shown["audit"][-1]["arguments"] == {"command": ["sh", "-c", "echo x >> f"]}
    assert "changed by hand: f" in shown["audit"][-1]["result"]
    code, out, err = corral("show", run_id, "--root", str(w_repo))
    assert "changed by hand (corral shell): f" in err
    assert "  added     f  (by hand)" in out
    assert "  added     notes.txt\n" in out  # the child's file is not marked
    # The rewritten record verifies: apply checks its digest and judges it.
    code, _, err = corral("apply", run_id, "--root", str(w_repo), "--check")
    assert code == 0, err
    code, _, err = corral("apply", run_id, "--root", str(w_repo))
    assert code == 0, err
    assert (w_repo / "f").read_text() == "x\n"
    assert (w_repo / "notes.txt").read_text() == "first\n"


@pytest.mark.parametrize("backend", SHELL_BACKENDS, indirect=True)
def test_shell_command_sees_the_run_and_passes_its_output_and_exit_code_through(
        w_repo: Path, tmp_path: Path, backend: str) -> None:
    run_id = started(w_repo, tmp_path, backend, NOTES)
    sha = record(w_repo, run_id)["diff_sha256"]
    code, out, err = corral("shell", "--root", str(w_repo), run_id, "--", "sh", "-c",
                            "cat notes.txt; echo to-err >&2; exit 7")
    assert code == 7
    assert out == "first\n"
    assert "to-err" in err
    assert f"run {run_id}: nothing changed by hand; its record is as it was" in err
    shown = record(w_repo, run_id)
    assert shown["diff_sha256"] == sha and shown["hand_changes"] == []
    # No network unless the run had it (runs never do): the sandbox's own loopback only.
    if backend == "bubblewrap":
        code, out, _ = corral("shell", "--root", str(w_repo), run_id, "--", "sh", "-c",
                              "cat /proc/net/dev")
        assert code == 0
        assert [line.split(":")[0].strip() for line in out.splitlines()[2:]] == ["lo"]
    # A script on stdin is run by sh -c; it may change files too.
    code, _, err = corral("shell", "--root", str(w_repo), run_id, stdin=b"echo s > s.txt\n")
    assert code == 0, err
    assert record(w_repo, run_id)["hand_changes"] == ["s.txt"]


@pytest.mark.parametrize("backend", SHELL_BACKENDS, indirect=True)
def test_interactive_shell_runs_on_a_terminal_of_its_own(
        w_repo: Path, tmp_path: Path, backend: str) -> None:
    run_id = started(w_repo, tmp_path, backend, NOTES)
    before = tree_digest(w_repo)
    screen = on_terminal("shell", "--root", str(w_repo), run_id, tty_stdin=True, answers={
        f"(corral {run_id}) $ ".encode(): b"echo typed >> notes.txt; tty; stty size\r",
        b"/dev/pts/": b"exit 5\r"})
    assert screen.code == 5, screen.text
    assert "60 1000" in screen.text  # the window's size at the start
    assert "/dev/pts/" in screen.text  # a pseudo-terminal of the sandbox's own
    assert f"run {run_id}: 1 file(s) changed by hand, recorded in the run: notes.txt" \
        in screen.text
    assert record(w_repo, run_id)["hand_changes"] == ["notes.txt"]
    _, patch, _ = corral("diff", run_id, "--root", str(w_repo))
    assert "+first\n+typed\n" in patch
    assert tree_digest(w_repo) == before


def test_shell_escapes_the_names_it_lists(w_repo: Path, tmp_path: Path) -> None:
    name = "evil\u202etxt.exe"  # a bidi override: the name reads differently than it is
    run_id = started(w_repo, tmp_path, "host",
                     [call("write_file", path=name, content="a\n"), {"text": "ok"}])
    code, _, err = corral("shell", "--root", str(w_repo), run_id, "--", "sh", "-c",
                          f"echo b >> '{name}'; printf x > \"$(printf 'esc\\033[31mred')\"")
    assert code == 0, err
    raw = err.encode()
    assert raw_controls(raw) == [], raw
    assert "evil\\u202etxt.exe" in err and "esc\\x1b[31mred" in err
    code, out, err = corral("show", run_id, "--root", str(w_repo))
    assert raw_controls((out + err).encode()) == []
    assert sorted(record(w_repo, run_id)["hand_changes"]) == sorted([name, "esc\x1b[31mred"])


def test_shell_and_continue_refuse_a_diff_that_no_longer_applies(
        w_repo: Path, tmp_path: Path) -> None:
    run_id = started(w_repo, tmp_path, "host", [
        call("write_file", path="README.md", content="# Project\n\nchanged by the child\n"),
        {"text": "edited"}])
    (w_repo / "README.md").write_text("# Project\n\nchanged by you\n")
    before, count = tree_digest(w_repo), runs_recorded(w_repo)
    sha = record(w_repo, run_id)["diff_sha256"]
    for args in (["shell", "--root", str(w_repo), run_id, "--", "sh", "-c", "echo x > f"],
                 ["run", "--root", str(w_repo), "--trust-project", "--no-personal",
                  "--continue", run_id, "--script", str(script(tmp_path, NOTES)), "more"]):
        code, out, err = corral(*args)
        assert code == 4, err
        assert f"error: run {run_id}'s diff no longer applies to your checkout as it is now" \
            in err
        assert "README.md" in err and "corral apply --3way" in err
        assert "Traceback" not in err and out == ""
    code, out, _ = corral("run", "--root", str(w_repo), "--trust-project", "--no-personal",
                          "--continue", run_id, "--script", str(script(tmp_path, NOTES)),
                          "--json", "more")
    assert json.loads(out)["error"]["code"] == "workspace_diverged"
    assert tree_digest(w_repo) == before
    assert runs_recorded(w_repo) == count  # nothing was recorded
    assert record(w_repo, run_id)["diff_sha256"] == sha
    assert record(w_repo, run_id)["state"] == "pending"


def test_shell_refuses_what_is_not_its_to_change(w_repo: Path, tmp_path: Path) -> None:
    applied = started(w_repo, tmp_path, "host", NOTES)
    assert corral("apply", applied, "--root", str(w_repo))[0] == 0
    code, _, err = corral("shell", "--root", str(w_repo), applied, "--", "true")
    assert code == 2 and f"cannot open a shell on run {applied}: it was applied" in err
    git(w_repo, "clean", "-fdq")
    discarded = started(w_repo, tmp_path, "host", NOTES)
    assert corral("discard", discarded, "--root", str(w_repo))[0] == 0
    code, _, err = corral("shell", "--root", str(w_repo), discarded, "--", "true")
    assert code == 2 and "it was discarded" in err
    code, out, err = corral("run", "--root", str(w_repo), "--trust-project", "--no-personal",
                            "--agent", "w", "--backend", "host", "--mode", "workspace-write",
                            "--json", "--script", str(script(tmp_path, NOTES)), "in place")
    code, _, err = corral("shell", "--root", str(w_repo), json.loads(out)["run_id"], "--",
                          "true")
    assert code == 2 and "ran in workspace-write mode" in err


# -- corral run --continue ------------------------------------------------------------------

@pytest.mark.parametrize("backend", SHELL_BACKENDS, indirect=True)
def test_continue_sees_the_previous_changes_and_conversation(
        w_repo: Path, tmp_path: Path, backend: str) -> None:
    first = started(w_repo, tmp_path, backend, NOTES)
    before = tree_digest(w_repo)
    # The acceptance: continued with the previous changes visible to the child.
    code, out, err = continued(w_repo, tmp_path, first, [
        call("read_file", path="notes.txt"),
        call("write_file", path="more.txt", content="second\n"), {"text": "added more"}])
    assert code == 0, err
    result = json.loads(out)
    second = result["run_id"]
    assert second != first and result["backend"] == backend and result["mode"] == "worktree"
    shown = record(w_repo, second)
    read = shown["audit"][0]
    assert read["tool"] == "read_file" and not read["is_error"] and "first" in read["result"]
    assert shown["continues"] == first and shown["agent"] == "w"
    assert shown["prompt"] == "more"
    # The diff is cumulative: the previous changes plus the new.
    assert sorted(c["path"] for c in shown["changed_files"]) == ["more.txt", "notes.txt"]
    # The conversation so far came first: what the model was sent is the transcript.
    transcript = [(m["role"], m["content"], [c["name"] for c in m["tool_calls"]])
                  for m in shown["transcript"]]
    assert transcript[0][0] == "system"
    # Each task opens with where its run works (the continuation's workspace is another).
    tasks = [transcript[1][1], transcript[5][1]]
    assert [t.split("\n\n")[-1] for t in tasks] == ["write notes", "more"]
    assert all(t.startswith("You work in ") for t in tasks) and tasks[0] != tasks[1]
    assert transcript[2:5] == [("assistant", "", ["write_file"]),
                               ("tool", "created notes.txt (6 bytes)", []),
                               ("assistant", "wrote notes", [])]
    assert transcript[5][0] == "user"
    # The earlier run is superseded: shown as continued, never applied by default.
    earlier = record(w_repo, first)
    assert earlier["state"] == "discarded" and earlier["continued_by"] == second
    code, out, _ = corral("runs", "--root", str(w_repo))
    line = next(line for line in out.splitlines() if line.startswith(first))
    assert " continued " in line
    code, _, err = corral("show", second, "--root", str(w_repo))
    assert f"continues: run {first}" in err
    code, _, err = corral("apply", first, "--root", str(w_repo), "--check")
    assert code == 0 and f"was continued by run {second}" in err
    assert tree_digest(w_repo) == before
    # It continues again, from the continuation.
    code, out, err = continued(w_repo, tmp_path, second, [{"text": "nothing more"}], "done?")
    assert code == 0, err
    third = record(w_repo, json.loads(out)["run_id"])
    assert third["continues"] == second and len(third["changed_files"]) == 2
    assert [m["content"].split("\n\n")[-1] for m in third["transcript"]
            if m["role"] == "user"] == ["write notes", "more", "done?"]


def test_continue_refuses_applied_discarded_continued_and_delegated_runs(
        w_repo: Path, tmp_path: Path) -> None:
    applied = started(w_repo, tmp_path, "host", NOTES)
    assert corral("apply", applied, "--root", str(w_repo))[0] == 0
    count = runs_recorded(w_repo)
    code, out, err = continued(w_repo, tmp_path, applied, NOTES)
    assert code == 2 and json.loads(out)["error"]["code"] == "already_applied"
    git(w_repo, "clean", "-fdq")
    discarded = started(w_repo, tmp_path, "host", NOTES)
    assert corral("discard", discarded, "--root", str(w_repo))[0] == 0
    code, out, _ = continued(w_repo, tmp_path, discarded, NOTES)
    assert code == 2 and json.loads(out)["error"]["code"] == "run_discarded"
    assert runs_recorded(w_repo) == count + 1  # only the run that was discarded
    once = started(w_repo, tmp_path, "host", NOTES)
    code, out, err = continued(w_repo, tmp_path, once, [{"text": "ok"}])
    assert code == 0, err
    code, out, _ = continued(w_repo, tmp_path, once, [{"text": "again"}])
    assert code == 2 and json.loads(out)["error"]["code"] == "run_continued"
    code, _, err = corral("run", "--root", str(w_repo), "--agent", "w", "--continue", once,
                          "x")
    assert code == 2 and "--agent cannot be given with --continue" in err
    fresh = started(w_repo, tmp_path, "host", [{"text": "nothing"}])
    code, _, err = corral("run", "--root", str(w_repo), "--backend", "bubblewrap",
                          "--continue", fresh, "x")
    assert code == 2 and f"run {fresh} ran on the host backend" in err  # its isolation
    # A delegated child continues only through its parent.
    zuno = w_repo / ".zuno/zuno.json"
    zuno.parent.mkdir(parents=True)
    zuno.write_text(json.dumps({"agents": {"lead": {"prompt": "lead", "mode": "primary",
                                                    "delegates": ["w"]}}}))
    code, out, err = corral("run", "--root", str(w_repo), "--trust-project", "--no-personal",
                            "--agent", "lead", "--backend", "host", "--json", "--script",
                            str(script(tmp_path, [call("delegate", agent="w", prompt="n"),
                                                  *NOTES, {"text": "done"}])), "go")
    assert code == 0, err
    child = json.loads(out)["children"][0]
    code, out, _ = continued(w_repo, tmp_path, child, NOTES)
    assert code == 2 and "only a run you started can be continued" in \
        json.loads(out)["error"]["message"]


def test_a_workspace_write_run_continues_in_the_checkout_and_stays_as_it_is(
        w_repo: Path, tmp_path: Path) -> None:
    code, out, err = corral("run", "--root", str(w_repo), "--trust-project", "--no-personal",
                            "--agent", "w", "--backend", "host", "--mode", "workspace-write",
                            "--json", "--script", str(script(tmp_path, NOTES)), "in place")
    assert code == 0, err
    first = json.loads(out)["run_id"]
    code, out, err = continued(w_repo, tmp_path, first, [
        call("read_file", path="notes.txt"), {"text": "read it"}])
    assert code == 0, err
    shown = record(w_repo, json.loads(out)["run_id"])
    assert shown["mode"] == "workspace-write" and shown["continues"] == first
    assert "first" in shown["audit"][0]["result"]  # the checkout, where its changes are
    assert shown["changed_files"] == []  # nothing replayed: its diff is its own
    earlier = record(w_repo, first)
    assert earlier["state"] == "pending" and earlier["continued_by"] is None


def test_continue_and_shell_from_python(w_repo: Path, tmp_path: Path) -> None:
    first = started(w_repo, tmp_path, "host", NOTES)
    api = Corral(w_repo, trust_project=True, personal=False)
    seen: list[bytes] = []
    done = api.shell(first, ["sh", "-c", "echo z > z; echo hi"],
                     on_output=lambda stream, data: seen.append(data))
    assert done.exit_code == 0 and done.changed == ("z",) and b"hi\n" in b"".join(seen)
    assert done.run.record.hand_changes == ["z"]
    assert done.to_json()["hand_changes"] == ["z"]
    result = asyncio.run(AsyncCorral(api).continue_run(
        first, "more", script=script(tmp_path, [call("read_file", path="z"),
                                                {"text": "read z"}])))
    assert result.status is RunStatus.COMPLETED
    assert result.record.continues == first
    assert result.record.hand_changes == ["z"]  # what was changed by hand stays marked
    assert "\tz" in result.record.audit[0]["result"]
    with pytest.raises(Exception, match="interactive shell needs a terminal") as raised:
        api.shell(result.run_id)
    assert getattr(raised.value, "code", None) == "usage_error"


# -- the ledger's side ----------------------------------------------------------------------

def _record(repo: Path, messages: list[Message]) -> str:
    run_id = new_run_id()
    write_run(ledger_dir(repo), RunRecord(
        run_id=run_id, agent="w", agent_format="ngn", agent_source="w.md", contract_digest="d",
        prompt="p", backend="host", mode="worktree", status=RunStatus.CANCELLED), messages)
    return run_id


def test_a_call_the_transcript_has_no_result_for_is_answered(repo: Path) -> None:
    call_a, call_b = ToolCall("c1", "shell", {"command": "sleep 9"}), ToolCall("c2", "read")
    run_id = _record(repo, [
        Message(role="system", content="sys"), Message(role="user", content="go"),
        Message(role="assistant", tool_calls=(call_a, call_b)),
        Message(role="tool", content="ok", tool_call_id="c2", name="read")])
    messages = conversation(ledger_dir(repo), run_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[3].tool_call_id == "c1" and messages[3].content == UNANSWERED
    assert messages[3].is_error


def test_a_running_run_and_a_crashed_one_gc_has_not_finalised_are_refused(
        w_repo: Path) -> None:
    api = Corral(w_repo, backend="host")
    alive = _record(w_repo, [])
    ledger = ledger_dir(w_repo)
    write_run(ledger, find_run(ledger, alive).model_copy(update={
        "status": RunStatus.RUNNING, "owner": running_owner()}), [])  # this process: alive
    dead = _record(w_repo, [])  # its owner's pid now runs another process: it crashed
    write_run(ledger, find_run(ledger, dead).model_copy(update={
        "status": RunStatus.RUNNING, "owner": {**running_owner(), "started": 0.0}}), [])
    for run_id, code in ((alive, "run_in_progress"), (dead, "run_crashed")):
        for attempt in (lambda r=run_id: api.shell(r, ["true"]),
                        lambda r=run_id: api.continue_run(r, "more")):
            with pytest.raises(Exception, match="cannot") as raised:
                attempt()
            assert getattr(raised.value, "code", None) == code


def test_a_shell_never_overwrites_a_run_that_changed_meanwhile(
        w_repo: Path, tmp_path: Path) -> None:
    run_id = started(w_repo, tmp_path, "host", NOTES)
    ledger = ledger_dir(w_repo)
    seen = find_run(ledger, run_id)
    set_run_state(ledger, run_id, "discarded")
    with pytest.raises(Exception, match="changed while the shell was open") as raised:
        record_hand(ledger, seen, DiffResult(sandbox_id="s", base_commit=None, patch=b"p\n"),
                    {}, ("f",), {})
    saved = Path(getattr(raised.value, "context", {})["saved"])
    assert saved.read_bytes() == b"p\n"
    assert find_run(ledger, run_id).hand_changes == []


def test_a_shell_never_overwrites_a_diff_another_shell_recorded_meanwhile(
        w_repo: Path, tmp_path: Path) -> None:
    """Issue 33: the run stays ``pending`` while a second ``corral shell`` records its
    change: the first session's record is then stale by its diff alone, and must not
    overwrite the second's work."""
    run_id = started(w_repo, tmp_path, "host", NOTES)
    ledger = ledger_dir(w_repo)
    seen = find_run(ledger, run_id)
    api = Corral(w_repo, trust_project=True, personal=False)
    assert api.shell(run_id, ["sh", "-c", "echo other > other"]).changed == ("other",)
    assert find_run(ledger, run_id).state == "pending"
    with pytest.raises(Exception, match="changed while the shell was open") as raised:
        record_hand(ledger, seen, DiffResult(sandbox_id="s", base_commit=None, patch=b"p\n"),
                    {}, ("f",), {})
    assert getattr(raised.value, "code", None) == "run_changed"
    after = find_run(ledger, run_id)
    assert after.hand_changes == ["other"] and "+other" in after.diff


def test_every_shell_session_keeps_what_earlier_ones_changed_by_hand(
        w_repo: Path, tmp_path: Path) -> None:
    run_id = started(w_repo, tmp_path, "host", NOTES)
    api = Corral(w_repo, trust_project=True, personal=False)
    api.shell(run_id, ["sh", "-c", "echo one > one"])
    done = api.shell(run_id, ["sh", "-c", "echo two > two"])
    assert done.changed == ("two",)
    shown = record(w_repo, run_id)
    assert shown["hand_changes"] == ["one", "two"]
    assert "+one" in shown["diff"] and "+two" in shown["diff"] and "+first" in shown["diff"]


def test_a_session_that_fails_half_way_keeps_its_diff_for_gc(
        w_repo: Path, tmp_path: Path) -> None:
    """A session whose caller fails after the command changed something (here the output
    callback raises) is not recorded, and its workspace's diff is kept under the state
    root's results, not thrown away."""
    from sandbox.state import default_state_root

    run_id = started(w_repo, tmp_path, "host", NOTES)
    api = Corral(w_repo, trust_project=True, personal=False)
    results = default_state_root() / "results"
    before = set(results.glob("*/diff.patch")) if results.is_dir() else set()

    def fail(_stream: str, data: bytes) -> None:
        if b"half" in data:
            raise RuntimeError("the caller went away")

    with pytest.raises(RuntimeError, match="went away"):
        api.shell(run_id, ["sh", "-c", "echo kept-by-gc > lost; echo half"], on_output=fail)
    assert record(w_repo, run_id)["hand_changes"] == []
    kept = [p for p in results.glob("*/diff.patch") if p not in before]
    assert any(b"+kept-by-gc" in p.read_bytes() for p in kept), kept
