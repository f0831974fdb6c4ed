"""What each tool of ``corral mcp`` does: a call of the Python API (:mod:`executor.api`),
bounded by how the server was started.

Every handler takes the server's :class:`ServerOptions` and the tool's validated
arguments and returns a JSON object, or raises the
:class:`~executor.api.CorralError` the CLI would have rendered: same contract,
same ledger, same apply checks, same codes, because it is the same call. The
quick ones are plain blocking functions (the server runs them in a thread); the
long ones (``run_agent``, ``fanout``) are coroutines over
:class:`executor.api.AsyncCorral`, whose progress becomes the request's
notifications and whose cancellation stops the run. Definitions are discovered
anew on every call, as every CLI command does, so an agent file edited while the
server runs is seen by the next call.

What a client may ask for is bounded by how the user started the server, never
widened by an argument:

- the root is the server's (a ``script`` path must resolve under it, symlinks
  followed: :func:`confined`);
- ``apply_run`` only validates unless the server has ``--allow-apply``, and
  then returns the command the user runs; with it, it merges only a diff whose
  review list is empty: anything ``corral apply`` would need ``--yes`` or an
  ``--allow-*`` flag for (a flagged file, a symlink, a binary, an unverified
  record) is refused (``needs_a_person``, ``review_required``, ...) with the
  plain command a person runs, and that command never carries a flag the
  client asked for: the person adds flags after reading the review list; a flagged
  file (a child's ``.corral/environment.toml``) is refused by apply_run's own confirmation;
- ``mode: workspace-write`` (a child writing the checkout, with no review list
  between it and your files) needs ``--allow-workspace-write``, which
  ``--allow-apply`` does not imply; ``backend: host`` (no process isolation)
  needs the server to have been started with ``--backend host``;
- approvals are the server's ``--approve``; an ``ask`` rule is otherwise denied,
  as in a non-interactive ``corral run``;
- ``jobs``, ``n`` (and the lists that set it) and timeouts are bounded by the
  server's ceilings (:meth:`ServerOptions.ceilings`, advertised as each
  argument's ``maximum``): above one is ``above_ceiling``; an omitted timeout is
  the ceiling;
- a run id is an id or a unique prefix of one, never a pattern
  (:class:`~executor.mcpserver.arguments.RunRefArgs`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.api import (
    HOST_WARNING,
    MODES,
    AsyncCorral,
    ChildPlan,
    Corral,
    ExecutorError,
    MergeRefused,
    PatchPlan,
    Replay,
    RunRecord,
)
from executor.mcpserver.arguments import (
    DEFAULT_MAX_CHILDREN,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_TIMEOUT,
    WIDENING,
    ApplyRunArgs,
    DiscardRunArgs,
    FanoutArgs,
    RunAgentArgs,
    RunRefArgs,
    ShowRunArgs,
)
from executor.mcpserver.listing import list_agents_tool, list_runs_tool
from executor.mcpserver.progress import CANCEL_REASON, ProgressSink

__all__ = [
    "ServerOptions",
    "ServerRefused",
    "apply_run_tool",
    "confined",
    "diff_run_tool",
    "discard_run_tool",
    "fanout_tool",
    "list_agents_tool",
    "list_runs_tool",
    "run_agent_tool",
    "show_run_tool",
]

#: Sends one progress line to the client (the request's ``notifications/progress``).
Send = Callable[[str], Awaitable[None]]
_WORKSPACE_WRITE = MODES[2]


class ServerRefused(ExecutorError):
    """A call asked for more than the server was started to allow (exit code family 4)."""

    code = "refused"
    exit_code = 4


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """How the user started ``corral mcp``: what every call shares and may not exceed."""

    root: Path
    trust_project: bool = False
    config_file: Path | None = None
    strict: bool = False
    no_personal: bool = False
    allow_apply: bool = False
    allow_workspace_write: bool = False
    #: The project's environment (``corral mcp --no-env``, ``--setup-network``).
    no_env: bool = False
    setup_network: bool = False
    #: Memory of each sandbox (``corral mcp --memory``; ``None``: ``[sandbox] memory``).
    memory: str | None = None
    backend: str = "auto"
    approve: str | None = None
    #: Ceilings of what one call may ask for (``corral mcp --max-jobs/--max-children/
    #: --max-timeout``); a call that gives no timeout gets ``max_timeout``.
    max_jobs: int = DEFAULT_MAX_JOBS
    max_children: int = DEFAULT_MAX_CHILDREN
    max_timeout: float = DEFAULT_MAX_TIMEOUT
    #: Where fanout children run (``corral mcp --fanout-on``): the server's choice, never a
    #: call's.
    fanout_on: str = "local"

    def ceilings(self) -> dict[str, tuple[float, str]]:
        """Argument -> (its ceiling, the ``corral mcp`` option that sets it)."""
        children = (self.max_children, "--max-children")
        timeout = (self.max_timeout, "--max-timeout")
        return {"jobs": (self.max_jobs, "--max-jobs"), "n": children, "agents": children,
                "scripts": children, "script_texts": children, "models": children,
                "timeout": timeout, "check_timeout": timeout}

    def corral(self, backend: str | None = None, net: str = "none") -> Corral:
        """The Corral every call of this server runs on (``backend``: a call's choice, once
        :func:`_backend` allowed it)."""
        return Corral(self.root, trust_project=self.trust_project,
                      config_file=self.config_file, strict=self.strict,
                      personal=not self.no_personal, backend=backend or self.backend,
                      memory=self.memory, net=net)

    def runs_on(self, backend: str, net: str = "none") -> AsyncCorral:
        """What a long call awaits; a client that gives up cancels its run."""
        return AsyncCorral(self.corral(backend, net), cancel_reason=CANCEL_REASON)


def _within_ceilings(options: ServerOptions, args: RunAgentArgs | FanoutArgs) -> None:
    """Refuse an argument the call gave above the server's ceiling, before anything is
    read or run (a default above one is lowered to it where it is used)."""
    for name, (limit, option) in options.ceilings().items():
        value = getattr(args, name, None) if name in args.model_fields_set else None
        if value is None or (len(value) if isinstance(value, list) else value) <= limit:
            continue
        given = f"has {len(value)} items" if isinstance(value, list) else f"{value:g}"
        raise ServerRefused(
            f"{name} {given}, above this server's ceiling of {limit:g}",
            code="above_ceiling", operation="check_arguments",
            context={"argument": name, "ceiling": f"{limit:g}"},
            hint=f"ask for at most {limit:g} (the maximum in the tool's input schema); the "
            f"user may restart the server with `corral mcp {option} N`")


def confined(root: Path, value: str, *, argument: str) -> Path:
    """The file ``value`` names under ``root`` (relative to it, or absolute inside it),
    with every symlink resolved; anything else is refused before it is read."""
    given = Path(value)  # no ~ or $VAR expansion: a path means what it says
    top = Path(os.path.realpath(root))
    real = Path(os.path.realpath(given if given.is_absolute() else top / given))
    context = {"argument": argument, "given": value, "root": str(top)}
    if not real.is_relative_to(top):
        raise ServerRefused(
            f"{argument} {value!r} lies outside the server's root", code="path_outside_root",
            operation="resolve_path", context=context | {"resolves to": str(real)},
            hint=f"name a file under {top} (relative to it), or pass the replay itself as "
            f"{argument.removesuffix('s')}_text")
    if not real.is_file():
        raise ExecutorError(
            f"{argument} {value!r} is not a file under the server's root",
            code="script_not_found", operation="resolve_path",
            context=context | {"resolves to": str(real)},
            hint=f"name an existing replay file under {top}, relative to it")
    return real


def _read_script(options: ServerOptions, value: str, *, argument: str) -> Replay:
    """The replay in a file under the server's root (:func:`confined`)."""
    path = confined(options.root, value, argument=argument)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExecutorError(f"cannot read {argument} {value!r}: {exc}", code="bad_script",
                            operation="load_script", context={"file": str(path)}) from exc
    return Replay.from_text(text, source=str(path))


def _backend(options: ServerOptions, requested: str | None) -> str:
    name = requested or options.backend
    if name == "host" and options.backend != "host":
        raise ServerRefused(
            "backend 'host' runs the child's commands with no process isolation; this "
            "server allows it only when started with --backend host",
            code="backend_not_allowed", operation="check_arguments",
            context={"requested": name, "server backend": options.backend},
            hint="use backend bubblewrap or docker (or leave it out); the user may restart "
            "the server with `corral mcp --backend host`")
    return name


def _usage(message: str, hint: str) -> ExecutorError:
    return ExecutorError(message, code="usage_error", operation="check_arguments", hint=hint)


def _environment(options: ServerOptions) -> dict[str, Any]:
    """The project's environment: the server owner's grants only (no client asks for them)."""
    return {"environment": not options.no_env,
            "setup_network": True if options.setup_network else None}


async def run_agent_tool(options: ServerOptions, args: RunAgentArgs, *,
                         send: Send | None = None) -> dict[str, Any]:
    """``run_agent``: ``corral run --json``, its exit code, and what to do with the diff."""
    _within_ceilings(options, args)
    backend = _backend(options, args.backend)
    if args.mode == _WORKSPACE_WRITE and not options.allow_workspace_write:
        raise ServerRefused(
            "mode workspace-write lets the child write the checkout itself, flagged files "
            "(CI, hooks, agent settings) included, with no review before they land; this "
            "server allows it only when started with --allow-workspace-write",
            code="mode_not_allowed", operation="check_arguments", context={"mode": args.mode},
            hint="use mode worktree (the default): you get a diff, and apply_run validates "
            "it; the user may restart the server with `corral mcp --allow-workspace-write`")
    if args.script is not None and args.script_text is not None:
        raise _usage("script and script_text are exclusive", "pass a replay file under the "
                     "server's root as script, or the replay itself as script_text")
    if (args.script is not None or args.script_text is not None) and args.model is not None:
        raise _usage("a script and a model are exclusive", "replay a script, or run a model")
    options.corral().ledger()  # refuses a state dir a child could write, before anything
    replay = None
    if args.script is not None:
        replay = _read_script(options, args.script, argument="script")
    elif args.script_text is not None:
        replay = Replay.from_text(args.script_text, source="script_text")
    result = await options.runs_on(backend, args.net).run(
        args.prompt, agent=args.agent, mode=args.mode, script=replay, model=args.model,
        approve=options.approve, timeout=args.timeout or options.max_timeout,
        progress=ProgressSink(send), **_environment(options))
    data = result.to_json() | {"exit_code": result.exit_code,
                               "warnings": [HOST_WARNING] if backend == "host" else []}
    if result.diff and result.record.mode != _WORKSPACE_WRITE:
        data["next"] = (f"apply_run {{run_id: {result.run_id}}} validates the diff "
                        f"against the checkout (`corral apply {result.run_id}` merges it)")
    return data


async def fanout_tool(options: ServerOptions, args: FanoutArgs, *,
                      send: Send | None = None) -> dict[str, Any]:
    """``fanout``: ``corral fanout --json`` and its exit code."""
    _within_ceilings(options, args)
    backend = _backend(options, args.backend)
    if args.scripts and args.script_texts:
        raise _usage("scripts and script_texts are exclusive", "pass replay files under the "
                     "server's root as scripts, or the replays themselves as script_texts")
    options.corral().ledger()
    replays = [_read_script(options, value, argument="scripts") for value in args.scripts]
    replays += [Replay.from_text(text, source=f"script_texts[{index}]")
                for index, text in enumerate(args.script_texts, 1)]
    if args.check_cmd is not None and not args.check_cmd.strip():
        raise _usage("the check command is empty", "leave check_cmd out, or give a command "
                     "such as 'pytest -q'")
    progress = ProgressSink(send)

    def label(plans: list[ChildPlan]) -> None:
        for plan in plans:
            progress.label(plan.run_id, f"[{plan.index}/{len(plans)}] {plan.agent} "
                           f"{plan.run_id}")

    result = await options.runs_on(backend, args.net).fanout(
        args.prompt, agents=args.agents, n=args.n, scripts=replays, models=args.models,
        check=args.check_cmd, check_timeout=min(args.check_timeout, options.max_timeout),
        jobs=min(args.jobs, options.max_jobs), timeout=args.timeout or options.max_timeout,
        approve=options.approve, progress=progress, on_plan=label, on=options.fanout_on,
        **_environment(options))
    return result.to_json() | {"exit_code": result.exit_code,
                               "warnings": [HOST_WARNING] if backend == "host" else []}


def show_run_tool(options: ServerOptions, args: ShowRunArgs) -> dict[str, Any]:
    """``show_run``: ``corral show --json`` (the transcript optional)."""
    corral = options.corral()
    run = corral.show(args.run_id)
    data = run.record_json()
    if args.transcript:
        data["transcript"] = corral.transcript(run.run_id)
    return data


def diff_run_tool(options: ServerOptions, args: RunRefArgs) -> dict[str, Any]:
    """``diff_run``: the run's exact diff (``diff_base64`` too when it is not UTF-8)."""
    return options.corral().diff(args.run_id).to_json()


def _apply_command(options: ServerOptions, run_id: str) -> str:
    """The command a person runs to merge a run: plain, whatever the client asked for."""
    return shlex.join(["corral", "apply", "--root", str(options.root), run_id])


def _person(command: str) -> str:
    return (f"only a person merges this: the user runs `{command}`, which lists every file "
            "with its review flags and what it refuses, and adds --yes (flagged files) or an "
            "--allow-* flag themselves, after reading that list (or reviews and applies the "
            "run in `corral serve`); nothing was changed")


#: Refusals of ``corral apply`` that a flag on its command line lifts: a person's call.
_PERSON_CODES = frozenset({"review_required", "merge_refused", "record_unverified"})


def apply_run_tool(options: ServerOptions, args: ApplyRunArgs) -> dict[str, Any]:
    """``apply_run``: ``corral apply``'s checks, and its merge when the server may and the
    diff's review list is empty (see the module docstring)."""
    corral = options.corral()
    run_id = corral.show(args.run_id).run_id
    command = _apply_command(options, run_id)
    asked = [name for name in WIDENING if getattr(args, name)]
    if asked:
        raise ServerRefused(
            f"apply_run does not take {', '.join(asked)}: only a person merges flagged files "
            "or widens what apply accepts", code="needs_a_person", operation="apply_run",
            context={"run_id": run_id, "asked": ", ".join(asked), "command": command},
            hint=_person(command))
    check_only = args.check or not options.allow_apply
    plans: list[PatchPlan] = []

    def seen(record: RunRecord, plan: PatchPlan) -> None:
        plans.append(plan)

    def no_person(plan: PatchPlan) -> bool:  # files flagged for review: whatever was passed
        flagged = "; ".join(f"{f.path} [{', '.join(f.flags)}]" for f in plan.flagged)
        raise ServerRefused(f"apply_run never merges files flagged for review: {flagged}",
                            code="review_required", operation="apply_run", hint=_person(command),
                            context={"run_id": run_id, "flagged": flagged, "command": command})

    try:
        report = corral.apply(run_id, check_only=check_only, three_way=args.three_way,
                              confirm=no_person, on_plan=seen)
    except MergeRefused as exc:
        if exc.code not in _PERSON_CODES:
            raise
        context = dict(exc.context)
        if plans and plans[0].flagged:
            context["flagged"] = "; ".join(f"{f.path} [{', '.join(f.flags)}]"
                                           for f in plans[0].flagged)
        raise ServerRefused(exc.message, code=exc.code, operation="apply_run",
                            context=context | {"command": command},
                            hint=_person(command)) from exc
    plan, result = report.plan, report.result
    data = report.to_json()
    if result.status == "checked" and plan.flagged:
        data["note"] = (f"{len(plan.flagged)} file(s) are flagged for review: only a person "
                        f"merges them, with `{command}` and --yes after reading the list")
    if result.status == "conflicts":
        data["note"] = ("applied with conflict markers (<<<<<<< ours / >>>>>>> theirs) in "
                        "the files listed in conflicts: resolve them")
    if not options.allow_apply and not args.check and result.status == "checked":
        data["command"] = command
        data["message"] = ("this corral mcp server only validates diffs (it was started "
                           "without --allow-apply): the diff applies cleanly; to merge it, "
                           f"the user runs: {command}")
    return data


def discard_run_tool(options: ServerOptions, args: DiscardRunArgs) -> dict[str, Any]:
    """``discard_run``: ``corral discard``."""
    return options.corral().discard(args.run_id).to_json()
