"""Tools about agents and the session: delegate, list_agents, todo, tool_search.

The ``delegate`` tool's schema names the agents the caller may delegate to,
with their descriptions (ngn: "Descriptions appear in the picker and the
model's delegation tool schema"): the ``agent`` argument lists their names,
and the tool's description lists each with its description, so a model
never has to guess a name or call ``list_agents`` first. It also takes pi's
``instructions`` task contract ("Callers may pass an instructions task
contract, truncated to 16 KB").

pi's parallel mode is ``delegate(tasks=[{agent, prompt}, ...])``: up to
:data:`MAX_PARALLEL_TASKS` tasks at once (each may carry ``instructions``, or
``child`` to follow up with a retained child), run concurrently under the
tree's budgets; the result holds every task's own result, in task order.
Exactly one of the two shapes per call: ``agent`` + ``prompt``, or ``tasks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, JsonValue, create_model, model_validator

from executor.tools.context import Args, ToolContext
from executor.tools.dispatch import ToolFailure, ToolOutput

__all__ = ["MAX_INSTRUCTIONS_BYTES", "MAX_PARALLEL_TASKS", "DelegateTask", "DelegateTool",
           "ListAgentsTool", "TodoTool", "ToolSearchTool"]

#: pi: an ``instructions`` task contract is "truncated to 16 KB".
MAX_INSTRUCTIONS_BYTES = 16 * 1024
#: pi's parallel mode: "up to 8 tasks".
MAX_PARALLEL_TASKS = 8
#: How many agents, and how much of each description, the delegate tool's description lists.
_LISTED_AGENTS = 64
_DESCRIPTION_CHARS = 200
_BASE_DESCRIPTION = ("Run another agent on a task in its own sandbox; you get back its final "
                     "answer, status and diff. Call it with agent and prompt. Only to run "
                     f"several at once (at most {MAX_PARALLEL_TASKS}), pass tasks instead.")
_AGENT = "Name of the agent to run."
_PROMPT = "The task for it, self-contained."
_CHILD = ("A retained child (its run id, or the agent's name when you started it once), to "
          "send it a follow-up instead of starting a new one.")
_INSTRUCTIONS = ("A task contract for a new child: the repository rules or review contract it "
                 "must follow (children load no repository instructions themselves). Cut to "
                 "16 KB.")


class DelegateTask(Args):
    """One task of a parallel delegate call."""

    agent: str = Field(min_length=1, description=_AGENT)
    prompt: str = Field(min_length=1, description=_PROMPT)
    child: str | None = Field(default=None, description=_CHILD)
    instructions: str | None = Field(default=None, description=_INSTRUCTIONS)


class DelegateArgs(Args):
    agent: str | None = Field(default=None, min_length=1, description=_AGENT)
    prompt: str | None = Field(default=None, min_length=1, description=_PROMPT)
    child: str | None = Field(default=None, description=_CHILD)
    instructions: str | None = Field(default=None, description=_INSTRUCTIONS)
    tasks: list[DelegateTask] | None = Field(
        default=None, min_length=1, max_length=MAX_PARALLEL_TASKS,
        description="Instead of agent and prompt: several tasks run at once, each "
        "{agent, prompt}; their results come back in task order.")

    @model_validator(mode="after")
    def _one_shape(self) -> DelegateArgs:
        single = [name for name in ("agent", "prompt", "child", "instructions")
                  if getattr(self, name) is not None]
        if self.tasks is not None and single:
            raise ValueError(f"pass either tasks or agent and prompt, not both (also got "
                             f"{', '.join(single)})")
        if self.tasks is None and (self.agent is None or self.prompt is None):
            raise ValueError("agent and prompt are required (or tasks, to run several at "
                             "once)")
        return self


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class DelegateTool:
    """delegate(agent, prompt, child, instructions): run a sub-agent in its own sandbox.

    ``targets`` are the agents the caller may delegate to, as (name, description):
    the schema's ``agent`` lists their names and the description lists both, after
    ``description`` (a binding's own description of the tool) or the default one.
    """

    name = "delegate"

    def __init__(self, targets: Sequence[tuple[str, str]] = (), *,
                 description: str | None = None) -> None:
        self.targets = list(targets)
        self.args: type[DelegateArgs] = DelegateArgs
        base = description or _BASE_DESCRIPTION
        self.description = base
        if not self.targets:
            return
        names: list[JsonValue] = [name for name, _ in self.targets]
        listed_agent = Field(min_length=1, description="Name of the agent to run: one of the "
                             "agents listed in this tool's description.",
                             json_schema_extra={"enum": names})
        task = create_model("DelegateTask", __base__=DelegateTask, agent=(str, listed_agent))
        self.args = create_model(
            "DelegateArgs", __base__=DelegateArgs,
            agent=(str | None, Field(default=None, min_length=1,
                                     description=listed_agent.description,
                                     json_schema_extra={"enum": names})),
            tasks=(list[task] | None, Field(
                default=None, min_length=1, max_length=MAX_PARALLEL_TASKS,
                description=DelegateArgs.model_fields["tasks"].description)))
        listed = [f"- {name}: {_one_line(description, _DESCRIPTION_CHARS) or '(no description)'}"
                  for name, description in self.targets[:_LISTED_AGENTS]]
        more = len(self.targets) - _LISTED_AGENTS
        if more > 0:
            listed.append(f"- ... and {more} more (list_agents lists them all)")
        self.description = "\n".join([base, "", "Agents you may delegate to:", *listed])

    def subjects(self, args: DelegateArgs) -> list[str | None]:
        if args.tasks is not None:  # the rules judge every agent of the call
            return [task.agent for task in args.tasks]
        return [args.agent]

    def run(self, args: DelegateArgs, context: ToolContext) -> ToolOutput:
        if args.tasks is not None:
            if context.delegate_tasks is None:
                raise ToolFailure("parallel delegation is not available in this session")
            return ToolOutput(context.delegate_tasks(
                [DelegateTask.model_validate(task.model_dump()) for task in args.tasks]))
        if context.delegate is None or args.agent is None or args.prompt is None:
            raise ToolFailure("delegation is not available in this session")
        return ToolOutput(context.delegate(args.agent, args.prompt, args.child,
                                           args.instructions))


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
        for name in found:
            context.deferred.pop(name, None)
        return ToolOutput("activated: " + ", ".join(found))
