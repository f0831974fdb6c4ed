"""Tools about agents and the session: delegate, list_agents, todo, tool_search."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from executor.dispatch import ToolFailure, ToolOutput
from executor.tools.context import Args, ToolContext

__all__ = ["DelegateTool", "ListAgentsTool", "TodoTool", "ToolSearchTool"]


class DelegateArgs(Args):
    agent: str = Field(min_length=1, description="Name of the agent to run.")
    prompt: str = Field(min_length=1, description="The task for it, self-contained.")
    child: str | None = Field(default=None, description="A retained child (its run id, or the "
                              "agent's name when you started it once), to send it a follow-up "
                              "instead of starting a new one.")


class DelegateTool:
    """delegate(agent, prompt, child): run a sub-agent in its own sandbox."""

    name = "delegate"
    description = ("Run another agent on a task in its own sandbox and get back its final "
                   "answer, status and diff. Pass child=<id> to follow up with a child you "
                   "started before.")
    args = DelegateArgs

    def subjects(self, args: DelegateArgs) -> list[str | None]:
        return [args.agent]

    def run(self, args: DelegateArgs, context: ToolContext) -> ToolOutput:
        if context.delegate is None:
            raise ToolFailure("delegation is not available in this session")
        return ToolOutput(context.delegate(args.agent, args.prompt, args.child))


class NoArgs(Args):
    pass


class ListAgentsTool:
    """list_agents(): the agents this one may delegate to."""

    name = "list_agents"
    description = "List the agents you may delegate to, with their descriptions."
    args = NoArgs

    def subjects(self, args: NoArgs) -> list[str | None]:
        return [None]

    def run(self, args: NoArgs, context: ToolContext) -> ToolOutput:
        agents = context.list_agents() if context.list_agents else []
        if not agents:
            return ToolOutput("(no agents available for delegation)")
        return ToolOutput("\n".join(f"{name}: {description}" for name, description in agents))


class TodoItem(Args):
    content: str = Field(min_length=1)
    status: Literal["pending", "in_progress", "completed"] = "pending"


class TodoArgs(Args):
    items: list[TodoItem] = Field(description="The whole task list (replaces the previous one).")


class TodoTool:
    """todo(items): keep a task list in the session."""

    name = "todo"
    description = "Keep your task list: send the whole list each time (replaces the old one)."
    args = TodoArgs

    def subjects(self, args: TodoArgs) -> list[str | None]:
        return [None]

    def run(self, args: TodoArgs, context: ToolContext) -> ToolOutput:
        context.todos = [item.model_dump() for item in args.items]
        marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
        return ToolOutput("\n".join(f"{marks[i.status]} {i.content}" for i in args.items)
                          or "(empty list)")


class ToolSearchArgs(Args):
    query: str = Field(min_length=1, description="Words to look for in tool names and "
                       "descriptions.")


class ToolSearchTool:
    """tool_search(query): activate deferred tools whose name or description matches."""

    name = "tool_search"
    description = ("Find and activate deferred tools by name or description; activated tools "
                   "become callable from the next step.")
    args = ToolSearchArgs

    def subjects(self, args: ToolSearchArgs) -> list[str | None]:
        return [None]

    def run(self, args: ToolSearchArgs, context: ToolContext) -> ToolOutput:
        words = args.query.lower().split()
        found = [name for name, description in sorted(context.deferred.items())
                 if any(w in name.lower() or w in description.lower() for w in words)]
        if not found:
            return ToolOutput("no deferred tool matches; available: "
                              + (", ".join(sorted(context.deferred)) or "none"))
        if context.activate is not None:
            context.activate(found)
        return ToolOutput("activated: " + ", ".join(found))
