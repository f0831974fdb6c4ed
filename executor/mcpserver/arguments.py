"""The arguments of each tool ``corral mcp`` serves: one strict pydantic model per tool.

The models are the tools' input schemas (``model_json_schema``) and their
validators: an unknown argument, a wrong type or a missing prompt is refused
before anything runs (``bad_arguments``), naming the argument and what it takes.
They mirror the CLI's options (``corral run``, ``fanout``, ``show``, ``diff``,
``apply``, ``discard``) with three differences a model on the other end of the
protocol calls for:

- a replay is a ``script`` path under the server's root, or its content as
  ``script_text`` (a client may have no file to point at);
- approvals are the server's (``corral mcp --approve``), never an argument: the
  parent model does not get to answer a question an agent's rules put to you;
- ``backend: host`` and ``mode: workspace-write`` are refused unless the server
  was started with them allowed (see :mod:`executor.mcpserver.handlers`);
- ``apply_run`` takes none of ``corral apply``'s widening flags (:data:`WIDENING`:
  ``--yes`` for flagged files, ``--allow-*``): only a person merges what they
  cover, on the command line, after reading the review list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

__all__ = [
    "DEFAULT_MAX_CHILDREN",
    "DEFAULT_MAX_JOBS",
    "DEFAULT_MAX_TIMEOUT",
    "RUN_ID_PATTERN",
    "TOOLS",
    "WIDENING",
    "ApplyRunArgs",
    "DiscardRunArgs",
    "FanoutArgs",
    "ListAgentsArgs",
    "ListRunsArgs",
    "RunAgentArgs",
    "RunRefArgs",
    "ShowRunArgs",
    "ToolSpec",
]

#: The default ceilings a server puts on ``jobs``, ``n`` (and the lists that set it) and
#: timeouts (``corral mcp --max-jobs/--max-children/--max-timeout``): each call's
#: arguments are bounded by them and the schemas advertise them as ``maximum``.
DEFAULT_MAX_JOBS = 8
DEFAULT_MAX_CHILDREN = 16
DEFAULT_MAX_TIMEOUT = 3600.0

Backend = Literal["auto", "host", "bubblewrap", "docker"]
Mode = Literal["read-only", "worktree", "workspace-write"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ListAgentsArgs(_Args):
    match: str | None = Field(
        default=None, max_length=200, description="Only agents whose name or description "
        "contains this text (case-insensitive).")
    format: str | None = Field(default=None, max_length=40, description="Only agents of "
                               "this format (claude, codex, ngn, zuno, pi, ...).")
    runnable_only: bool = Field(default=False, description="Only agents a run accepts now.")
    details: bool = Field(default=False, description="Also each agent's format, mode, "
                          "sandbox, source and scope.")
    diagnostics: bool = Field(default=False, description="Also every loading diagnostic "
                              "(by default only their counts).")
    offset: int = Field(default=0, ge=0, description="Skip this many agents (paging).")
    limit: int = Field(default=50, ge=1, le=500, description="At most this many agents.")


class ListRunsArgs(_Args):
    status: list[str] = Field(default_factory=list, max_length=9, description="Only runs "
                              "with one of these statuses (completed, failed, running, ...).")
    agent: str | None = Field(default=None, max_length=200, description="Only runs of this "
                              "agent.")
    pending: bool = Field(default=False, description="Only runs whose diff waits for "
                          "apply_run or discard_run.")
    since: str | None = Field(default=None, max_length=40, description="Only runs started "
                              "since: a duration back from now (30m, 12h, 7d) or an ISO time.")
    fanout: str | None = Field(default=None, pattern=r"^f-[0-9a-z-]{1,64}$",
                               description="Only this fanout and its children.")
    after: str | None = Field(default=None, pattern=r"^[0-9a-z-]{1,64}$",
                              description="The entries after this one: the next_after of "
                              "the page before (paging).")
    limit: int = Field(default=20, ge=1, le=200, description="At most this many entries (a "
                       "fanout with its children counts as one).")


class RunAgentArgs(_Args):
    prompt: str = Field(min_length=1, description="The task for the child agent.")
    agent: str | None = Field(
        default=None, description="The agent to run (list_agents names them); default: the "
        "default_agent of a zuno.json.")
    net: Literal["none", "allow"] = Field(
        default="none", description="allow: the child's commands reach the hosts the user "
        "granted ([network] allow) through corral's filtering proxy, nothing else; none: no "
        "network (the default).")
    backend: Backend | None = Field(
        default=None, description="Where the child runs: bubblewrap or docker (auto picks "
        "one); default: the server's --backend. 'host' (no process isolation) only when the "
        "server was started with --backend host.")
    mode: Mode = Field(
        default="worktree", description="The most the child may write (its contract can only "
        "narrow it): read-only, worktree (a fresh worktree; your checkout is untouched, you "
        "get a diff), or workspace-write (only when the server was started with "
        "--allow-apply).")
    script: str | None = Field(
        default=None, description="A replay file (YAML turns) under the server's root that "
        "plays the model for the whole run tree (no model key needed).")
    script_text: str | None = Field(
        default=None, description="A replay's YAML itself, instead of a file.")
    model: str | None = Field(
        default=None, description="A model route (provider/model or @role) from the user's "
        "corral config, overriding the agent's.")
    timeout: float | None = Field(default=None, gt=0,
                                  description="Wall-clock limit of the run, in seconds.")


class FanoutArgs(_Args):
    prompt: str = Field(min_length=1, description="The task every child runs.")
    agents: list[str] = Field(
        default_factory=list, description="The agent of each child: one name for every "
        "child, or one per child; default: the default_agent of a zuno.json.")
    n: int | None = Field(
        default=None, ge=1, description="How many children (default: the number of agents, "
        "models or scripts given when more than one).")
    scripts: list[str] = Field(
        default_factory=list, description="Replay files under the server's root: one for "
        "every child (each plays its own copy), or one per child.")
    script_texts: list[str] = Field(
        default_factory=list, description="Replays' YAML itself, instead of files: one for "
        "every child, or one per child.")
    models: list[str] = Field(default_factory=list,
                              description="Model routes: one for every child, or one per child.")
    check_cmd: str | None = Field(
        default=None, description="A command run in each child's sandbox after its diff was "
        "recorded (e.g. 'pytest -q'); it cannot change the diff.")
    check_timeout: float = Field(default=600.0, gt=0,
                                 description="Seconds the check command may take.")
    backend: Backend | None = Field(default=None,
                                    description="As for run_agent.")
    net: Literal["none", "allow"] = Field(default="none", description="As for run_agent.")
    jobs: int = Field(default=4, ge=1, description="Children at once.")
    timeout: float | None = Field(
        default=None, gt=0, description="Shared wall-clock limit of the whole fanout, checks "
        "included, in seconds.")


#: What a run id (``20261129-153409-a1b2c3``) or a prefix of one is made of.
RUN_ID_PATTERN = r"^(?:[0-9a-z-]{1,64}|last~[0-9]{1,6})$"


class RunRefArgs(_Args):
    run_id: str = Field(description="A run id (or a unique prefix of one), as run_agent, "
                        "fanout or `corral runs` give it; `last` is the newest run, `last~1` "
                        "the one before it.",
                        json_schema_extra={"pattern": RUN_ID_PATTERN})

    @field_validator("run_id", mode="before")
    @classmethod
    def _an_id_not_a_pattern(cls, value: object) -> object:
        """Never a glob or a path: the ledger is looked up by name (``*`` named any run)."""
        if isinstance(value, str) and not re.fullmatch(RUN_ID_PATTERN, value):
            raise ValueError(
                f"{value[:80]!r} is not a run id: a run id, or a unique prefix of one, is "
                "1 to 64 digits, lowercase letters and '-' (such as 20261129-153409-a1b2c3), "
                "or last / last~N, never a pattern or a path")
        return value


class ShowRunArgs(RunRefArgs):
    transcript: bool = Field(default=True, description="Include the whole transcript "
                             "(every message and tool result).")


class DiscardRunArgs(RunRefArgs):
    """A run to mark discarded."""


#: ``corral apply``'s flags that widen what it merges. Only a person passes them, on the
#: command line, after reading the review list: they are not in ``apply_run``'s schema,
#: and a client that sends one anyway is refused with the command to give the user.
WIDENING: tuple[str, ...] = ("yes", "allow_symlinks", "allow_binary", "allow_git_dirs",
                             "allow_unverified")


class ApplyRunArgs(RunRefArgs):
    check: bool = Field(default=False, description="Only validate, even on a server that "
                        "may apply.")
    three_way: bool = Field(default=False, description="Merge files changed since the "
                            "child's snapshot three ways (conflicts are marked and listed).")
    # WIDENING: accepted (so the refusal can say what to do), never advertised.
    yes: SkipJsonSchema[bool] = False
    allow_symlinks: SkipJsonSchema[bool] = False
    allow_binary: SkipJsonSchema[bool] = False
    allow_git_dirs: SkipJsonSchema[bool] = False
    allow_unverified: SkipJsonSchema[bool] = False


class ToolSpec(BaseModel):
    """One tool: its name, what it does (the model reads this), its arguments."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str
    arguments: type[_Args]
    read_only: bool
    destructive: bool = False
    long_running: bool = False

    def input_schema(self, ceilings: Mapping[str, float] | None = None) -> dict[str, Any]:
        """The JSON schema of the arguments; ``ceilings`` (argument -> the server's upper
        bound) become each number's ``maximum`` and each list's ``maxItems``."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        properties = schema.setdefault("properties", {})
        for name, limit in (ceilings or {}).items():
            prop = properties.get(name)
            if prop is None:
                continue
            if prop.get("type") == "array":
                prop["maxItems"] = int(limit)
            for branch in prop.get("anyOf", [prop]):
                if branch.get("type") in ("integer", "number"):
                    branch["maximum"] = limit
        return schema


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(name="list_agents", arguments=ListAgentsArgs, read_only=True,
             description="The agents corral can run here, compact and paged: name, the "
             "description's first line, whether a run accepts it (and why not); filters "
             "(match, format, runnable_only); details and diagnostics on request."),
    ToolSpec(name="list_runs", arguments=ListRunsArgs, read_only=True,
             description="The recorded runs, newest first and paged (a fanout with its "
             "children as one entry): id, agent, status, what became of its diff, start "
             "time, prompt's first line, files changed, check; filters (status, agent, "
             "pending, since, fanout). show_run has a whole record."),
    ToolSpec(name="run_agent", arguments=RunAgentArgs, read_only=False, long_running=True,
             description="Run an agent on a task in an isolated sandbox (a fresh worktree of "
             "the current checkout by default) and return its run_id, status, final_text, "
             "diff, changed_files and denied_calls. The checkout is not changed: apply_run "
             "merges a diff when the user wants it."),
    ToolSpec(name="fanout", arguments=FanoutArgs, read_only=False, long_running=True,
             description="Run one task in several children at once, each in its own sandbox "
             "from one snapshot, run a check command in each, and return one row per child "
             "and which diffs conflict. Nothing is applied."),
    ToolSpec(name="show_run", arguments=ShowRunArgs, read_only=True,
             description="A recorded run's whole record: status, final text, diff, every "
             "tool call with its decision and result, usage."),
    ToolSpec(name="diff_run", arguments=RunRefArgs, read_only=True,
             description="A recorded run's unified diff."),
    ToolSpec(name="apply_run", arguments=ApplyRunArgs, read_only=False, destructive=True,
             description="Validate a run's diff against the checkout; merge it (all or "
             "nothing, a backup kept) only when the server was started with --allow-apply "
             "and nothing in it is flagged for review, otherwise return the command the user "
             "runs to merge it (flagged files, symlinks, binaries: only a person merges "
             "them, after reading the review list)."),
    ToolSpec(name="discard_run", arguments=DiscardRunArgs, read_only=False,
             description="Mark a run's diff discarded (it stays readable; the checkout does "
             "not change)."),
)
