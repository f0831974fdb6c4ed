"""Dispatch: the capability enforced a second time, whatever the model sends."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from executor.models.base import ToolCall
from executor.tools.dispatch import (
    ApprovalRequest,
    Decision,
    Dispatcher,
    ToolFailure,
    ToolOutput,
)
from policies.capability import Capability, restrict
from policies.contract import AgentContract, AgentFormat, Origin, Scope, ToolBinding
from policies.permissions import Action, PermissionPolicy, PermissionRule

ORIGIN = Origin(format=AgentFormat.NGN, file="/a.md", source="a.md", scope=Scope.PROJECT)


class ShellArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str


class PathArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str


class Recorder:
    def __init__(self, name: str, args: type[BaseModel], subject: str) -> None:
        self.name, self.args, self.subject = name, args, subject
        self.description = f"the {name} tool"
        self.calls: list[BaseModel] = []

    def subjects(self, args: BaseModel) -> list[str | None]:
        return [getattr(args, self.subject)]

    def run(self, args: BaseModel, context: Any) -> ToolOutput:
        if getattr(args, self.subject) == "boom":
            raise ToolFailure("it broke")
        self.calls.append(args)
        return ToolOutput(f"ran {self.name}")


def dispatcher(capability: Capability, approval: Any = None) -> tuple[Dispatcher[Any],
                                                                     dict[str, Recorder]]:
    tools = {"shell": Recorder("shell", ShellArgs, "command"),
             "write_file": Recorder("write_file", PathArgs, "path"),
             "read_file": Recorder("read_file", PathArgs, "path")}
    return Dispatcher(agent="a", capability=capability, tools=tools, context=None,
                      approval=approval), tools


def contract(**fields: Any) -> AgentContract:
    return AgentContract.model_validate({"name": "a", "id": "a", "display_name": "a",
                                         "origin": ORIGIN} | fields)


READ_ONLY = restrict(Capability.root(), contract(tools=frozenset({"read_file"})))

VARIANTS = ["Shell", "SHELL", "sh\u0435ll", "ｓｈｅｌｌ", "shell ", " shell", "shell\n",
            "sh\u200bell", "shell_", "mcp__shell", "write_File", "writefile", "write-file", ""]


@pytest.mark.parametrize("name", VARIANTS)
def test_variants_of_a_real_name_are_denied_and_nothing_runs(name: str) -> None:
    d, tools = dispatcher(Capability.root())
    result = d.dispatch(ToolCall(id="1", name=name, arguments={"command": "ls", "path": "x"}))
    assert result.is_error
    assert d.audit[-1].decision is Decision.DENIED
    # The name layer refused it (not a permission rule, not argument validation), and the
    # error names exactly the tools that exist.
    assert d.audit[-1].reason == f"tool {name!r} is not available to this agent"
    assert result.content.endswith(
        "; the tools you can use are: read_file, shell, write_file"), result.content
    assert all(not t.calls for t in tools.values())


@pytest.mark.parametrize("name", ["shell", "write_file"])
def test_a_hidden_tool_is_denied_and_its_twin_allowed(name: str) -> None:
    args = {"command": "ls"} if name == "shell" else {"path": "a.txt"}
    d, tools = dispatcher(READ_ONLY)
    assert [s.name for s in d.schemas()] == ["read_file"]
    denied = d.dispatch(ToolCall(id="1", name=name, arguments=args))
    assert denied.is_error and tools[name].calls == []
    assert d.denied[0].tool == name
    # Refused by the first layer (exact name among the visible tools), before any rule.
    assert d.denied[0].reason == f"tool {name!r} is not available to this agent"
    assert denied.content == (f"error: tool {name!r} is not available to this agent; "
                              "the tools you can use are: read_file")
    allowed_d, allowed_tools = dispatcher(Capability.root())
    assert not allowed_d.dispatch(ToolCall(id="1", name=name, arguments=args)).is_error
    assert len(allowed_tools[name].calls) == 1


def test_invalid_arguments_are_a_tool_error_not_a_run() -> None:
    d, tools = dispatcher(Capability.root())
    result = d.dispatch(ToolCall(id="1", name="shell", arguments={"cmd": "ls"}))
    assert result.is_error and "invalid arguments" in result.content
    assert d.audit[-1].decision is Decision.INVALID and not tools["shell"].calls
    raw = d.dispatch(ToolCall(id="2", name="shell", raw_arguments="{not json"))
    assert raw.is_error and d.audit[-1].decision is Decision.INVALID


def test_rules_deny_by_argument_pattern() -> None:
    policy = PermissionPolicy(rules=(PermissionRule(tool="shell", pattern="rm *",
                                                    action=Action.DENY),))
    d, tools = dispatcher(Capability.root(policy=policy))
    assert d.dispatch(ToolCall(id="1", name="shell", arguments={"command": "rm -rf /"})).is_error
    assert not d.dispatch(ToolCall(id="2", name="shell", arguments={"command": "ls"})).is_error
    assert [c.command for c in tools["shell"].calls] == ["ls"]  # type: ignore[attr-defined]
    assert "rm -rf /" in d.denied[0].reason


def test_ask_without_an_approver_denies() -> None:
    policy = PermissionPolicy(rules=(PermissionRule(tool="shell", action=Action.ASK),))
    d, tools = dispatcher(Capability.root(policy=policy))
    result = d.dispatch(ToolCall(id="1", name="shell", arguments={"command": "ls"}))
    assert result.is_error and "no approver" in result.content and not tools["shell"].calls


def test_ask_goes_to_the_approver() -> None:
    policy = PermissionPolicy(rules=(PermissionRule(tool="shell", action=Action.ASK),))
    seen: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        seen.append(request)
        return request.subjects == ("ls",)

    d, tools = dispatcher(Capability.root(policy=policy), approval=approve)
    assert not d.dispatch(ToolCall(id="1", name="shell", arguments={"command": "ls"})).is_error
    assert d.dispatch(ToolCall(id="2", name="shell", arguments={"command": "rm x"})).is_error
    assert [r.decision for r in d.audit] == [Decision.APPROVED, Decision.DENIED]
    assert len(seen) == 2 and len(tools["shell"].calls) == 1


def test_needs_approval_binding_asks_even_under_allow_all() -> None:
    c = contract(tool_bindings=(ToolBinding(name="write_file", needs_approval=True),),
                 permission=PermissionPolicy(mode="allow_all"))
    d, tools = dispatcher(restrict(Capability.root(), c))
    assert d.dispatch(ToolCall(id="1", name="write_file", arguments={"path": "a"})).is_error
    assert not tools["write_file"].calls


def test_tool_failure_is_an_error_result_and_audited() -> None:
    d, _ = dispatcher(Capability.root())
    result = d.dispatch(ToolCall(id="1", name="shell", arguments={"command": "boom"}))
    assert result.is_error and "it broke" in result.content
    assert d.audit[-1].decision is Decision.FAILED


@pytest.mark.parametrize("name", ["shell", "write_file"])
def test_a_hidden_tool_is_refused_by_every_layer_on_its_own(name: str) -> None:
    """Which layer denies a hidden tool: the dispatcher's name check, even when every
    permission layer would allow it (``allow_all``, an explicit allow rule); and the
    capability on its own (its ``decide``) denies it too, so removing either leaves the
    other, and each is pinned here."""
    lenient = PermissionPolicy(mode="allow_all", rules=(
        PermissionRule(tool=name, action=Action.ALLOW),))
    capability = restrict(Capability.root(policy=lenient),
                          contract(tools=frozenset({"read_file"})))
    assert name not in capability.tools
    assert capability.decide(name, "anything") is Action.DENY
    assert capability.decide(name) is Action.DENY
    d, tools = dispatcher(capability)
    args = {"command": "ls"} if name == "shell" else {"path": "a.txt"}
    result = d.dispatch(ToolCall(id="1", name=name, arguments=args))
    assert result.is_error and not tools[name].calls
    assert d.audit[-1].decision is Decision.DENIED
    assert d.audit[-1].reason == f"tool {name!r} is not available to this agent"


def test_deferred_tools_are_uncallable_until_activated() -> None:
    tools = {"shell": Recorder("shell", ShellArgs, "command"),
             "read_file": Recorder("read_file", PathArgs, "path")}
    d: Dispatcher[Any] = Dispatcher(agent="a", capability=Capability.root(), tools=tools,
                                    context=None, deferred=frozenset({"shell"}))
    assert [s.name for s in d.schemas()] == ["read_file"]
    call = ToolCall(id="1", name="shell", arguments={"command": "ls"})
    result = d.dispatch(call)
    assert result.is_error and not tools["shell"].calls
    assert d.audit[-1].reason == "tool 'shell' is not available to this agent"
    assert result.content.endswith("the tools you can use are: read_file")
    assert d.activate(["shell", "write_file"]) == ["shell"]
    assert not d.dispatch(call).is_error
    assert len(tools["shell"].calls) == 1
