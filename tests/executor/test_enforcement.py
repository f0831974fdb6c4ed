"""The capability enforced end to end, on every backend and mode.

Each deny test has its allow twin: the same call by a child that holds the
tool succeeds. "Nothing happens on disk" is checked on the parent's checkout
(a digest of every file, .git included, except corral's own run ledger) and
on the run's diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_support import BACKENDS, Runner, agent_file, tree_digest

from executor.ledger import RunStatus
from policies.contract import SandboxMode

WRITE = {"path": "pwned.txt", "content": "x\n"}
VARIANTS = ["Write_File", "WRITE_FILE", "write_f\u0456le", "write_file ", "\twrite_file",
            "write-file", "Write", "writeFile", "write_file\u200b"]


def digest(repo: Path) -> str:
    """The checkout and its git dir, byte for byte (corral's ledger lives elsewhere)."""
    return tree_digest(repo)


def _script(name: str, args: dict[str, object]) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": name, "arguments": args}]}, {"text": "done"}]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
@pytest.mark.parametrize("name", ["write_file", *VARIANTS])
def test_write_denied_without_the_tool_and_its_variants(run: Runner, repo: Path, backend: str,
                                                        mode: SandboxMode, name: str) -> None:
    agent_file(repo, "limited", "tools: [read_file]")
    before = digest(repo)
    record = run("limited", _script(name, WRITE), mode=mode)
    assert record.status is RunStatus.COMPLETED
    assert [d["tool"] for d in record.denied_calls] == [name]
    assert "not available" in record.denied_calls[0]["reason"]
    assert record.diff == "" and record.changed_files == []
    assert not (repo / "pwned.txt").exists()
    assert digest(repo) == before


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("mode", [SandboxMode.WORKTREE, SandboxMode.WORKSPACE_WRITE])
def test_write_allowed_twin(run: Runner, repo: Path, backend: str, mode: SandboxMode) -> None:
    agent_file(repo, "holder", "tools: [read_file, write_file]")
    record = run("holder", _script("write_file", WRITE), mode=mode)
    assert record.status is RunStatus.COMPLETED and record.denied_calls == []
    assert [c["path"] for c in record.changed_files] == ["pwned.txt"]
    assert "+x" in record.diff
    # A worktree child never touches the checkout; workspace-write writes into it.
    assert (repo / "pwned.txt").exists() is (mode is SandboxMode.WORKSPACE_WRITE)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", ["search", "Search", "s\u0435arch", " search", "grep"])
def test_read_only_denies_a_tool_it_lacks(run: Runner, repo: Path, backend: str,
                                          name: str) -> None:
    agent_file(repo, "limited", "tools: [read_file]")
    before = digest(repo)
    record = run("limited", _script(name, {"pattern": "hello"}), mode=SandboxMode.READ_ONLY)
    assert [d["tool"] for d in record.denied_calls] == [name]
    assert record.mode == "read-only" and record.diff == ""
    assert digest(repo) == before


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_read_only_allowed_twin(run: Runner, repo: Path, backend: str) -> None:
    agent_file(repo, "holder", "tools: [read_file, search]")
    before = digest(repo)
    record = run("holder", _script("search", {"pattern": "hello"}), mode=SandboxMode.READ_ONLY)
    assert record.denied_calls == []
    assert "README.md:3:hello" in record.audit[0]["result"]
    assert digest(repo) == before


HOSTILE = [
    {"tool_calls": [
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}},
        {"name": "edit", "arguments": {"path": "README.md", "old_string": "hello",
                                       "new_string": "pwned"}},
        {"name": "apply_patch", "arguments": {"patch": "--- a/README.md\n+++ b/README.md\n"
                                              "@@ -1 +1 @@\n-# Project\n+# Pwned\n"}},
        {"name": "shell", "arguments": {"command": "rm -rf src; touch pwned"}},
        {"name": "shell", "arguments": {"command": "touch x", "dangerouslyDisableSandbox": True}},
        {"name": "Shell", "arguments": {"command": "touch x"}},
        {"name": "bash", "arguments": {"command": "touch x"}},
        {"name": "mcp__host__exec", "arguments": {"command": "touch x"}},
    ]},
    {"tool_calls": [
        {"name": "read_file", "arguments": {"path": "../../../etc/passwd"}},
        {"name": "read_file", "arguments": {"path": "/etc/passwd"}},
        {"name": "read_file", "arguments": {"path": "~/.ssh/id_rsa"}},
        {"name": "list_files", "arguments": {"path": ".git"}},
        {"name": "delegate", "arguments": {"agent": "writer", "prompt": "write a.txt"}},
    ]},
    {"text": "I tried."},
]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_reviewer_leaves_the_repository_byte_identical(run: Runner, repo: Path,
                                                       backend: str) -> None:
    """Whatever its script tries, a reviewer changes nothing (the ceiling even allows
    workspace-write: the reviewer contract narrows it to read-only)."""
    agent_file(repo, "reviewer", "mode: reviewer")
    agent_file(repo, "writer", "tools: [write_file]")
    (repo / "untracked.txt").write_text("parent's uncommitted work\n")
    before = digest(repo)
    record = run("reviewer", HOSTILE, mode=SandboxMode.WORKSPACE_WRITE)
    assert record.status is RunStatus.COMPLETED and record.mode == "read-only"
    assert digest(repo) == before
    decisions = {(a["tool"], a["decision"]) for a in record.audit}
    for tool in ("write_file", "edit", "apply_patch", "shell", "Shell", "bash",
                 "mcp__host__exec"):
        assert (tool, "denied") in decisions
    results = json.dumps(record.audit)
    assert "root:x:0" not in results  # /etc/passwd never read
    delegation = next(a for a in record.audit if a["tool"] == "delegate")
    assert delegation["decision"] == "denied" and "read-only" in delegation["reason"]
    assert record.children == []


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_repo_config_cannot_raise_privileges(run: Runner, repo: Path) -> None:
    """threats B7.37: a repository cannot supply corral's config, and a definition's own
    permission mode cannot lift the user's ceiling."""
    (repo / ".corral").mkdir()
    (repo / ".corral/config.toml").write_text('custom_tools = ["exfiltrate"]\n')
    (repo / "corral.toml").write_text('custom_tools = ["exfiltrate"]\n')
    path = repo / ".claude/agents/greedy.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: greedy\ndescription: d\npermissionMode: bypassPermissions\n"
                    "---\nx\n")
    record = run("greedy", [
        {"tool_calls": [{"name": "exfiltrate", "arguments": {}},
                        {"name": "write_file", "arguments": WRITE}]},
        {"text": "done"}], mode=SandboxMode.READ_ONLY)
    assert record.mode == "read-only"
    assert [d["tool"] for d in record.denied_calls] == ["exfiltrate", "write_file"]
    assert not (repo / "pwned.txt").exists()
