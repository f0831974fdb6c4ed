"""Review commands in the capability algebra: only the user grants them, and only the shell.

A read-only agent keeps the shell its definition gives it when the user's root holds the
grant (``[review] commands = true``, ``--review-commands``); never a write tool, never
from a definition (``allow_all``, an allowlist, a rule), and a child inherits the grant
only from its parent. Without it, :func:`shell_removed` names what the mode removed (the
record's note). Definitions from the real formats: Claude ``permissionMode: plan`` with
``Bash``, pi ``sandbox: read-only`` listing ``bash``, ngn ``mode: reviewer`` with shell.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from policies.capability import (
    Capability,
    derive_child,
    restrict,
    shell_removed,
)
from policies.config import UserConfig
from policies.contract import AgentContract, AgentFormat, SandboxMode, Scope
from policies.loader import Status, load_file

WRITES = {"write_file", "edit", "apply_patch"}

DEFINITIONS = {
    "claude-plan": (AgentFormat.CLAUDE, ".claude/agents/p.md",
                    "---\nname: p\ndescription: d\ntools: Bash, Read, Write, Edit\n"
                    "permissionMode: plan\n---\nx\n"),
    "pi-read-only": (AgentFormat.PI, ".pi/agents/p.md",
                     "---\nname: p\ndescription: d\ntools: read, bash, write\n"
                     "sandbox: read-only\n---\nx\n"),
    "ngn-reviewer": (AgentFormat.NGN, ".ngn/agents/p.md",
                     "---\nname: p\ndescription: d\nmode: reviewer\n"
                     "tools: [read_file, shell, write_file]\n---\nx\n"),
}


def _load(tmp_path: Path, key: str) -> AgentContract:
    fmt, name, text = DEFINITIONS[key]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    outcome = load_file(path, fmt, scope=Scope.PROJECT, display=name)
    assert outcome.status is Status.LOADED, outcome.diagnostics
    [contract] = outcome.agents
    return contract


@pytest.mark.parametrize("key", sorted(DEFINITIONS))
def test_the_shell_stays_only_with_the_users_grant(tmp_path: Path, key: str) -> None:
    contract = _load(tmp_path, key)
    plain = derive_child(Capability.root(), contract)
    assert plain.read_only and "shell" not in plain.tools
    assert shell_removed(plain, contract) == {"shell"}  # the record's grant note
    granted = derive_child(Capability.root(review_commands=True), contract)
    assert granted.read_only and granted.sandbox is SandboxMode.READ_ONLY
    assert "shell" in granted.tools and "read_file" in granted.tools
    assert not granted.tools & WRITES  # the file tools stay refused for writes
    assert shell_removed(granted, contract) == frozenset()
    assert granted.is_within(Capability.root(review_commands=True))
    assert not granted.is_within(Capability.root())  # a grant never appears below


def test_a_definition_can_never_grant_it(tmp_path: Path) -> None:
    """``allow_all``, an allow rule for shell, an allowlist naming it: still removed."""
    path = tmp_path / ".claude" / "agents" / "greedy.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: greedy\ndescription: d\ntools: Bash\npermissionMode: plan\n"
                    "---\nx\n")
    [contract] = load_file(path, AgentFormat.CLAUDE, scope=Scope.PROJECT,
                           display="greedy.md").agents
    from policies.permissions import Action, PermissionMode, PermissionPolicy, PermissionRule

    greedy = contract.model_copy(update={"permission": PermissionPolicy(
        mode=PermissionMode.ALLOW_ALL,
        rules=(PermissionRule(tool="shell", pattern=None, action=Action.ALLOW),))})
    assert "shell" not in derive_child(Capability.root(), greedy).tools
    assert not any("command" in name for name in AgentContract.model_fields)


def test_a_pi_read_only_agent_without_bash_gets_none(tmp_path: Path) -> None:
    """pi's read-only allowlist: a bash it does not list is never added by the grant."""
    path = tmp_path / ".pi" / "agents" / "scout.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: scout\ndescription: d\nsandbox: read-only\n---\nx\n")
    [contract] = load_file(path, AgentFormat.PI, scope=Scope.PROJECT, display="s.md").agents
    granted = derive_child(Capability.root(review_commands=True), contract)
    assert granted.tools == {"read_file", "search", "find", "list_files"}


def test_the_grant_is_inherited_and_never_widened(tmp_path: Path) -> None:
    contract = _load(tmp_path, "claude-plan")
    worktree = restrict(Capability.root(review_commands=True), contract.model_copy(
        update={"mode": contract.mode.BUILD, "tools": None}))
    assert worktree.review_commands  # a writing parent passes the grant down ...
    child = derive_child(worktree, contract)
    assert "shell" in child.tools  # ... to its read-only children
    no_shell = restrict(Capability.root(review_commands=True), contract.model_copy(
        update={"denied_tools": frozenset({"shell"})}))
    assert "shell" not in no_shell.tools  # its own deny list still applies


def test_a_read_only_root_holds_the_shell_only_with_the_grant() -> None:
    assert "shell" not in Capability.root(sandbox=SandboxMode.READ_ONLY).tools
    granted = Capability.root(sandbox=SandboxMode.READ_ONLY, review_commands=True)
    assert "shell" in granted.tools and not granted.tools & WRITES


def test_the_review_section_of_the_user_config() -> None:
    config = UserConfig.model_validate({"review": {"commands": True, "scratch_size": "64M"}})
    assert config.review.commands and config.review.scratch_size == 64 << 20
    assert not UserConfig().review.commands and UserConfig().review.scratch_size == 1 << 30
    with pytest.raises(ValidationError, match="memory size"):
        UserConfig.model_validate({"review": {"scratch_size": "lots"}})
    with pytest.raises(ValidationError, match="comands"):
        UserConfig.model_validate({"review": {"comands": True}})
