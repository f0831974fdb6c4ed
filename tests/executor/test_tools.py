"""The native tools over a real sandbox (host backend: the file API is the same everywhere)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.tools import ToolContext, native_tools
from executor.tools.dispatch import ToolFailure
from executor.tools.patch import parse_patch
from policies.contract import SandboxMode
from sandbox.config import HostConfig, Limits
from sandbox.factory import open_sandbox
from tests.timescale import scaled

TOOLS = native_tools()


@pytest.fixture
def ctx(repo: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ToolContext]:
    mode = getattr(request, "param", SandboxMode.WORKTREE)
    sandbox = open_sandbox(HostConfig(limits=Limits(timeout_seconds=20)), repo=repo, mode=mode,
                           state_root=tmp_path / "state")
    try:
        yield ToolContext(sandbox=sandbox, agent="t")
    finally:
        sandbox.teardown(discard=True)


def call(ctx: ToolContext, name: str, **arguments: object) -> str:
    tool = TOOLS[name]
    return tool.run(tool.args.model_validate(arguments), ctx).content


def test_read_file_numbers_lines_and_marks_truncation(ctx: ToolContext) -> None:
    ctx.sandbox.files.write_text("big.txt", "".join(f"line {n}\n" for n in range(1, 2501)))
    out = call(ctx, "read_file", path="big.txt")
    assert out.startswith("     1\tline 1")
    assert "[truncated: showing lines 1-2000 of 2500; call read_file with offset=2001" in out
    tail = call(ctx, "read_file", path="big.txt", offset=2499, limit=5)
    assert tail.splitlines() == ["  2499\tline 2499", "  2500\tline 2500"]
    assert "past the end" in call(ctx, "read_file", path="big.txt", offset=9999)


def test_read_file_refuses_escapes(ctx: ToolContext) -> None:
    for path in ("../x", "/etc/passwd", "~/.bashrc", "/proc/self/root/etc/passwd"):
        with pytest.raises(ToolFailure):
            call(ctx, "read_file", path=path)


def test_read_file_binary_is_not_dumped(ctx: ToolContext) -> None:
    ctx.sandbox.files.write_bytes("b.bin", b"\0\1\2" * 10)
    assert "binary file, 30 bytes" in call(ctx, "read_file", path="b.bin")


def test_edit_exact_zero_and_ambiguous(ctx: ToolContext) -> None:
    ctx.sandbox.files.write_text("f.py", "a = 1\nb = 1\n")
    with pytest.raises(ToolFailure, match="not found"):
        call(ctx, "edit", path="f.py", old_string="c = 1", new_string="c = 2")
    with pytest.raises(ToolFailure, match="appears 2 times"):
        call(ctx, "edit", path="f.py", old_string=" = 1", new_string=" = 2")
    call(ctx, "edit", path="f.py", old_string="a = 1", new_string="a = 3")
    call(ctx, "edit", path="f.py", old_string=" = ", new_string=" := ", replace_all=True)
    assert ctx.sandbox.files.read_text("f.py") == "a := 3\nb := 1\n"


def test_write_list_find(ctx: ToolContext) -> None:
    assert call(ctx, "write_file", path="pkg/mod.py", content="x = 1\n").startswith("created")
    assert call(ctx, "write_file", path="pkg/mod.py", content="x = 2\n").startswith("overwrote")
    listing = call(ctx, "list_files", path=".")
    assert "pkg/" in listing.splitlines() and "README.md" in listing.splitlines()
    assert call(ctx, "find", pattern="**/*.py").splitlines() == ["pkg/mod.py", "src/app.py"]
    with pytest.raises(ToolFailure):
        call(ctx, "write_file", path=".git/hooks/pre-commit", content="#!/bin/sh\n")
    with pytest.raises(ToolFailure):
        call(ctx, "write_file", path=".GIT/config", content="x")


@pytest.mark.parametrize("ctx", [SandboxMode.READ_ONLY], indirect=True)
def test_read_only_workspace_refuses_writes_at_the_file_layer(ctx: ToolContext) -> None:
    """Even if a write tool were reached, the file API refuses it in read-only mode."""
    with pytest.raises(ToolFailure, match="read-only"):
        call(ctx, "write_file", path="x.txt", content="x")


@pytest.mark.parametrize("engine", [pytest.param("rg", marks=pytest.mark.requires("ripgrep")),
                                    "python"])
def test_search_engines_agree_and_never_hang_on_fifos(ctx: ToolContext, engine: str) -> None:
    ctx.sandbox.files.write_text("docs/notes.md", "TODO: one\nfine\ntodo: two\n")
    os.mkfifo(ctx.sandbox.root / "docs" / "pipe")
    tool = TOOLS["search"].__class__(use_ripgrep=engine == "rg")  # type: ignore[call-arg]
    started = time.monotonic()
    out = tool.run(tool.args(pattern="todo", ignore_case=True, path="docs"), ctx).content
    assert time.monotonic() - started < scaled(10)
    assert out.splitlines() == ["docs/notes.md:1:TODO: one", "docs/notes.md:3:todo: two"]
    capped = tool.run(tool.args(pattern="o", path="docs", max_results=1), ctx).content
    assert "[truncated: showing the first 1 matches" in capped


def test_apply_patch_all_or_nothing(ctx: ToolContext) -> None:
    files = ctx.sandbox.files
    good = ("--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n-# Project\n+# Better\n \n"
            " hello\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n")
    assert call(ctx, "apply_patch", patch=good) == "patched README.md, created new.txt"
    assert files.read_text("README.md") == "# Better\n\nhello\n"
    assert files.read_text("new.txt") == "one\ntwo\n"
    bad = ("--- a/new.txt\n+++ b/new.txt\n@@ -1 +1 @@\n-one\n+ONE\n"
           "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# Nope\n+# X\n")
    with pytest.raises(ToolFailure, match="does not apply at line 1"):
        call(ctx, "apply_patch", patch=bad)
    assert files.read_text("new.txt") == "one\ntwo\n"  # the first file was not written
    delete = "--- a/new.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    assert call(ctx, "apply_patch", patch=delete) == "deleted new.txt"
    assert not files.exists("new.txt")


@pytest.mark.parametrize("patch", [
    "--- a/../x\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n",
    "--- /dev/null\n+++ b/.git/hooks/post-commit\n@@ -0,0 +1 @@\n+x\n",
    "--- /dev/null\n+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+x\n",
    "GIT binary patch\nliteral 3\n",
    "diff --git a/a b/b\nrename from a\nrename to b\n",
    "no headers at all\n",
])
def test_apply_patch_refuses_hostile_or_unsupported_patches(ctx: ToolContext, patch: str) -> None:
    with pytest.raises(ToolFailure):
        call(ctx, "apply_patch", patch=patch)


def test_apply_patch_edge_cases(ctx: ToolContext) -> None:
    files = ctx.sandbox.files
    files.write_bytes("crlf.txt", b"one\r\ntwo\r\n")
    call(ctx, "apply_patch", patch="--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,2 +1,2 @@\n one\n"
         "-two\n+TWO\n")
    assert files.read_bytes("crlf.txt") == b"one\r\nTWO\r\n"  # CRLF kept, added line too
    files.write_text("odd.txt", "a\x0cb\nc\n")  # a form feed is not a line break
    call(ctx, "apply_patch", patch="--- odd.txt\n+++ odd.txt\n@@ -1,2 +1,2 @@\n a\x0cb\n-c\n"
         "+C\n")
    assert files.read_text("odd.txt") == "a\x0cb\nC\n"
    files.write_text("a/b.txt", "x\n")  # a real directory named a: no prefix stripping
    call(ctx, "apply_patch", patch="--- a/b.txt\n+++ a/b.txt\n@@ -1 +1 @@\n-x\n+y\n")
    assert files.read_text("a/b.txt") == "y\n"
    twice = ("--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# Project\n+# One\n"
             "--- a/README.md\n+++ b/README.md\n@@ -3 +3 @@\n-hello\n+bye\n")
    with pytest.raises(ToolFailure, match="two sections"):
        call(ctx, "apply_patch", patch=twice)


def test_parse_patch_counts_lines() -> None:
    with pytest.raises(ToolFailure, match="wrong line counts"):
        parse_patch("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n")


def test_shell_reports_exit_code_output_and_truncation(ctx: ToolContext) -> None:
    out = call(ctx, "shell", command="echo out; echo err >&2; exit 3")
    assert out.splitlines() == ["exit code 3", "--- stdout ---", "out", "--- stderr ---", "err"]
    big = call(ctx, "shell", command="yes | head -c 200000")
    assert "[truncated: stdout was 200000 bytes, showing 65536]" in big
    slow = call(ctx, "shell", command="sleep 30", timeout=0.5)
    assert slow.startswith("timed out after")
    assert ctx.resources["commands"] == 3


def test_shell_has_no_unsandboxed_escape_hatch() -> None:
    """threats B7.39: no argument can ask for an unsandboxed run."""
    schema = TOOLS["shell"].args.model_json_schema()
    assert set(schema["properties"]) == {"command", "timeout", "cwd"}
    assert schema.get("additionalProperties") is False


def test_todo_and_tool_search(ctx: ToolContext) -> None:
    out = call(ctx, "todo", items=[{"content": "a", "status": "completed"}, {"content": "b"}])
    assert out == "[x] a\n[ ] b" and len(ctx.todos) == 2
    activated: list[str] = []
    ctx.deferred = {"mcp__gh__search": "Search GitHub issues"}
    ctx.activate = activated.extend
    assert call(ctx, "tool_search", query="github") == "activated: mcp__gh__search"
    assert activated == ["mcp__gh__search"]
