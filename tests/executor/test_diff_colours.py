"""Issue 19: "Diffs coloured with a pager on a terminal (`NO_COLOR`, `PAGER`, `--no-pager`
honoured)". The colours are corral's own codes around whole lines of an escaped patch:
a child's bytes can neither open nor close one (the attack below writes its own SGR and
a reset to try)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from exec_support import Runner, agent_file
from tty_support import on_terminal, raw_controls

from executor.cli.pager import coloured_patch

GREEN, RED, CYAN, BOLD, RESET = "\x1b[32m", "\x1b[31m", "\x1b[36m", "\x1b[1m", "\x1b[m"
SGR = re.compile(rb"\x1b\[[0-9;]*m")


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _changed(run: Runner, repo: Path) -> str:
    agent_file(repo, "a", "tools: [edit, write_file]")
    done = run("a", [call("edit", path="README.md", old_string="hello", new_string="bye"),
                     call("write_file", path="evil.txt",
                          content="\x1b[32mlooks added\x1b[m\n\x1b[0mreset\n"),
                     {"text": "ok"}])
    return done.run_id


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_diff_on_a_terminal_is_coloured_by_corral_alone(run: Runner, repo: Path) -> None:
    run_id = _changed(run, repo)
    shown = on_terminal("diff", run_id, "--root", str(repo), env={"NO_COLOR": ""})
    assert shown.code == 0
    text = shown.text
    assert f"{BOLD}diff --git a/README.md b/README.md{RESET}" in text
    assert f"{RED}-hello{RESET}" in text and f"{GREEN}+bye{RESET}" in text
    assert re.search(re.escape(CYAN) + r"@@ [^\n]*" + re.escape(RESET), text)
    # The child's own escapes are shown escaped inside corral's colour, never raw.
    assert f"{GREEN}+\\x1b[32mlooks added\\x1b[m{RESET}" in text
    assert raw_controls(SGR.sub(b"", shown.screen)) == []
    # Every SGR on the screen is one of corral's five.
    assert {m.decode() for m in SGR.findall(shown.screen)} <= {GREEN, RED, CYAN, BOLD, RESET}


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_no_color_and_pipes_get_no_colour(run: Runner, repo: Path, tmp_path: Path) -> None:
    run_id = _changed(run, repo)
    plain = on_terminal("diff", run_id, "--root", str(repo), env={"NO_COLOR": "1"})
    assert plain.code == 0 and SGR.search(plain.screen) is None
    piped = on_terminal("diff", run_id, "--root", str(repo), stdout_to=tmp_path / "p",
                        env={"NO_COLOR": ""})
    assert piped.stdout is not None and b"\x1b[32m" in piped.stdout  # the child's, exact
    assert b"\x1b[32m+bye" not in piped.stdout  # and none of corral's


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_the_pager_is_used_on_a_terminal_and_no_pager_skips_it(
        run: Runner, repo: Path, tmp_path: Path) -> None:
    run_id = _changed(run, repo)
    pager = tmp_path / "pager"
    seen = tmp_path / "seen"
    pager.write_text(f"#!/bin/sh\necho PAGED >&2\ncat > {seen}\n")
    pager.chmod(0o755)
    paged = on_terminal("diff", run_id, "--root", str(repo), env={"PAGER": str(pager)},
                        tty_stdin=True)
    assert paged.code == 0 and b"PAGED" in paged.screen
    assert "+bye" in seen.read_text()
    seen.unlink()
    direct = on_terminal("diff", run_id, "--root", str(repo), "--no-pager",
                         env={"PAGER": str(pager)}, tty_stdin=True)
    assert direct.code == 0 and b"PAGED" not in direct.screen and not seen.exists()
    assert b"+bye" in direct.screen


def test_colouring_keeps_every_line_and_colours_only_line_starts() -> None:
    text = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n context\n"
    coloured = coloured_patch(text)
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == text
    assert coloured.splitlines()[-1] == " context"  # context lines stay plain
