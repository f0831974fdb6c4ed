"""What each tool of ``corral mcp`` does: the CLI's library calls, with the CLI's checks.

Every handler is a plain blocking function (the server runs the long ones in a
thread, :mod:`executor.mcpserver.bridge`) that takes the server's
:class:`ServerOptions` and the tool's validated arguments and returns a JSON
object, or raises the :class:`~policies.errors.CorralError` the CLI would have
rendered: same contract, same ledger, same apply checks, same codes. Definitions
are discovered anew on every call, as every CLI command does, so an agent file
edited while the server runs is seen by the next call.

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
  client asked for: the person adds flags after reading the review list;
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

import base64
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from executor.agents.views import diagnostics_json
from executor.apply import ApplyOptions, MergeRefused, PatchPlan, apply_run
from executor.cli_agents import find_agent, load
from executor.cli_fanout import fanout_exit_code
from executor.cli_runs import exit_code, run_json
from executor.errors import ExecutorError, ModelError
from executor.fanout import FanoutRequest, run_fanout
from executor.fanout.plan import plan_children
from executor.fanout.rows import fanout_json
from executor.ledger import (
    discard_run,
    find_run,
    ledger_dir,
    load_patch,
    load_transcript,
    run_status,
    write_fanout,
)
from executor.mcpserver.arguments import (
    DEFAULT_MAX_CHILDREN,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_TIMEOUT,
    WIDENING,
    ApplyRunArgs,
    DiscardRunArgs,
    FanoutArgs,
    ListAgentsArgs,
    RunAgentArgs,
    RunRefArgs,
    ShowRunArgs,
)
from executor.mcpserver.bridge import ProgressSink
from executor.models import ScriptedModel
from executor.run import RunSettings, with_environment
from executor.run import run_agent as run_agent_tree
from executor.run.approval import parse_approve, policy_handler
from executor.scheduling import Cancellation, Deadline, LocalScheduler
from policies.config import config_path, load_user_config
from policies.contract import SandboxMode
from policies.loader import Environment, LoadResult
from sandbox.config import HOST_WARNING, USER_BACKENDS

__all__ = [
    "ServerOptions",
    "ServerRefused",
    "apply_run_tool",
    "confined",
    "diff_run_tool",
    "discard_run_tool",
    "fanout_tool",
    "list_agents_tool",
    "run_agent_tool",
    "show_run_tool",
]


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
    backend: str = "auto"
    approve: str | None = None
    #: Ceilings of what one call may ask for (``corral mcp --max-jobs/--max-children/
    #: --max-timeout``); a call that gives no timeout gets ``max_timeout``.
    max_jobs: int = DEFAULT_MAX_JOBS
    max_children: int = DEFAULT_MAX_CHILDREN
    max_timeout: float = DEFAULT_MAX_TIMEOUT

    def ceilings(self) -> dict[str, tuple[float, str]]:
        """Argument -> (its ceiling, the ``corral mcp`` option that sets it)."""
        children = (self.max_children, "--max-children")
        timeout = (self.max_timeout, "--max-timeout")
        return {"jobs": (self.max_jobs, "--max-jobs"), "n": children, "agents": children,
                "scripts": children, "script_texts": children, "models": children,
                "timeout": timeout, "check_timeout": timeout}


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


def _load(options: ServerOptions) -> LoadResult:
    return load(options.root, options.trust_project, options.config_file, options.strict,
                options.no_personal)


def _find(options: ServerOptions, name: str, registry: LoadResult) -> None:
    find_agent(name, registry, root=options.root, trust_project=options.trust_project,
               config_file=options.config_file, strict=options.strict,
               no_personal=options.no_personal)


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


def _turns(source: str, text: str) -> list[object]:
    """A replay's turns, validated as ``ScriptedModel`` does (a user error otherwise)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ExecutorError(f"{source}: not valid YAML: {exc}", code="bad_script",
                            operation="load_script", context={"script": source},
                            hint="a script is a YAML list of turns: {text: ...} or "
                            "{tool_calls: [{name, arguments}]}") from exc
    try:
        ScriptedModel(data, source=source)
    except ModelError as exc:
        raise ExecutorError(exc.message, code="bad_script", operation="load_script",
                            context=exc.context, hint=exc.hint or "a script is a YAML list "
                            "of turns: {text: ...} or {tool_calls: [{name, arguments}]}"
                            ) from exc
    return list(data)


def _read_script(options: ServerOptions, value: str, *, argument: str) -> tuple[str, str]:
    path = confined(options.root, value, argument=argument)
    try:
        return str(path), path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExecutorError(f"cannot read {argument} {value!r}: {exc}", code="bad_script",
                            operation="load_script", context={"file": str(path)}) from exc


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


def list_agents_tool(options: ServerOptions, args: ListAgentsArgs) -> dict[str, Any]:
    """``list_agents``: what ``corral agents list --json`` lists, in brief."""
    registry = _load(options)
    agents = [{"name": name, "description": contract.description,
               "format": contract.origin.format.value, "mode": contract.mode.value,
               "sandbox": contract.sandbox.value if contract.sandbox else None,
               "display_name": contract.display_name, "source": contract.origin.source,
               "scope": contract.origin.scope.value, "read_only": contract.is_read_only,
               "user_invocable": contract.user_invocable}
              for name, contract in sorted(registry.agents.items())]
    return {"root": str(options.root), "agents": agents,
            "default_agent": registry.default_agent,
            "diagnostics": diagnostics_json(registry.diagnostics)}


def _settings(options: ServerOptions, registry: LoadResult, backend: str, *,
              ledger: Path, **extra: Any) -> RunSettings:
    allowed = parse_approve(options.approve)
    settings = RunSettings(
        root=options.root, backend=USER_BACKENDS[backend](), config=load_user_config(),
        registry=registry, ledger=ledger, env=Environment.from_env(),
        trust_project=options.trust_project, config_file=config_path(),
        approval=policy_handler(allowed) if allowed is not None else None, **extra)
    # The project's environment: the server owner's grants only (no client asks for them).
    return with_environment(settings, no_env=options.no_env,
                            network=True if options.setup_network else None)


def run_agent_tool(options: ServerOptions, args: RunAgentArgs, *, progress: ProgressSink,
                   cancellation: Cancellation) -> dict[str, Any]:
    """``run_agent``: ``corral run --json``, its exit code, and what to do with the diff."""
    _within_ceilings(options, args)
    backend = _backend(options, args.backend)
    if args.mode == SandboxMode.WORKSPACE_WRITE.value and not options.allow_workspace_write:
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
    ledger = ledger_dir(options.root)  # refuses a state dir a child could write
    registry = _load(options)
    if args.agent is not None or registry.default_agent is not None:
        _find(options, args.agent or str(registry.default_agent), registry)
    replay = None
    if args.script is not None:
        source, text = _read_script(options, args.script, argument="script")
        replay = ScriptedModel(_turns(source, text), source=source)
    elif args.script_text is not None:
        replay = ScriptedModel(_turns("script_text", args.script_text), source="script_text")
    settings = _settings(options, registry, backend, ledger=ledger,
                         mode_ceiling=SandboxMode(args.mode), model_override=args.model,
                         script=replay, progress=progress,
                         timeout_seconds=args.timeout or options.max_timeout,
                         cancellation=cancellation)
    record = run_agent_tree(settings, args.agent, args.prompt)
    result = run_json(record) | {"exit_code": exit_code(record),
                                 "warnings": [HOST_WARNING] if backend == "host" else []}
    if record.diff and record.mode != SandboxMode.WORKSPACE_WRITE.value:
        result["next"] = (f"apply_run {{run_id: {record.run_id}}} validates the diff "
                          f"against the checkout (`corral apply {record.run_id}` merges it)")
    return result


def fanout_tool(options: ServerOptions, args: FanoutArgs, *, progress: ProgressSink,
                cancellation: Cancellation) -> dict[str, Any]:
    """``fanout``: ``corral fanout --json`` and its exit code."""
    _within_ceilings(options, args)
    timeout = args.timeout or options.max_timeout
    check_timeout = min(args.check_timeout, options.max_timeout)
    jobs = min(args.jobs, options.max_jobs)
    backend = _backend(options, args.backend)
    if args.scripts and args.script_texts:
        raise _usage("scripts and script_texts are exclusive", "pass replay files under the "
                     "server's root as scripts, or the replays themselves as script_texts")
    ledger = ledger_dir(options.root)
    registry = _load(options)
    named = list(args.agents) or ([registry.default_agent] if registry.default_agent else [])
    replays: dict[str, list[object]] = {}
    keys: list[Path] = []
    for value in args.scripts:
        source, text = _read_script(options, value, argument="scripts")
        replays.setdefault(source, _turns(source, text))
        keys.append(Path(source))
    for index, text in enumerate(args.script_texts, 1):
        source = f"script_texts[{index}]"
        replays[source] = _turns(source, text)
        keys.append(Path(source))
    plans = plan_children(count=args.n, agents=named, models=args.models, scripts=keys)
    for agent in dict.fromkeys(plan.agent for plan in plans):
        _find(options, agent, registry)
    if args.check_cmd is not None and not args.check_cmd.strip():
        raise _usage("the check command is empty", "leave check_cmd out, or give a command "
                     "such as 'pytest -q'")
    settings = _settings(options, registry, backend, ledger=ledger)
    request = FanoutRequest(settings=settings, prompt=args.prompt, plans=plans,
                            approve=options.approve, check_command=args.check_cmd,
                            check_timeout=check_timeout, jobs=jobs,
                            timeout_seconds=timeout, replays=replays)
    for plan in plans:
        progress.label(plan.run_id, f"[{plan.index}/{len(plans)}] {plan.agent} {plan.run_id}")
    with LocalScheduler(jobs=jobs, deadline=Deadline.after(timeout),
                        cancellation=cancellation, name="corral-mcp-fanout") as scheduler:
        record = run_fanout(request, scheduler=scheduler, report=progress)
    if cancellation.cancelled and record.status != "cancelled":
        record = record.model_copy(update={"status": "cancelled"})
        write_fanout(ledger, record)
    return fanout_json(record, ledger) | {"exit_code": fanout_exit_code(record, ledger),
                                          "warnings": [HOST_WARNING] if backend == "host"
                                          else []}


def show_run_tool(options: ServerOptions, args: ShowRunArgs) -> dict[str, Any]:
    """``show_run``: ``corral show --json`` (the transcript optional)."""
    ledger = ledger_dir(options.root)
    record = find_run(ledger, args.run_id)
    data = record.model_dump(mode="json") | {"status": run_status(record).value}
    if args.transcript:
        data["transcript"] = load_transcript(ledger, record.run_id)
    return data


def diff_run_tool(options: ServerOptions, args: RunRefArgs) -> dict[str, Any]:
    """``diff_run``: the run's exact diff (``diff_base64`` too when it is not UTF-8)."""
    ledger = ledger_dir(options.root)
    record = find_run(ledger, args.run_id)
    patch = load_patch(ledger, record.run_id)
    text = patch.decode("utf-8", "replace")
    result: dict[str, Any] = {
        "run_id": record.run_id, "status": run_status(record).value, "state": record.state,
        "mode": record.mode, "diff": text, "changed_files": record.changed_files,
        "empty": not patch}
    if text.encode("utf-8") != patch:
        result["diff_base64"] = base64.b64encode(patch).decode("ascii")
        result["note"] = ("the diff is not valid UTF-8: `diff` shows it with replacement "
                          "characters, `diff_base64` holds its exact bytes")
    if not patch:
        result["note"] = f"run {record.run_id} changed nothing: its diff is empty"
    return result


def _apply_command(options: ServerOptions, run_id: str) -> str:
    """The command a person runs to merge a run: plain, whatever the client asked for."""
    return shlex.join(["corral", "apply", "--root", str(options.root), run_id])


def _person(command: str) -> str:
    return (f"only a person merges this: the user runs `{command}`, which lists every file "
            "with its review flags and what it refuses, and adds --yes (flagged files) or an "
            "--allow-* flag themselves, after reading that list; nothing was changed")


#: Refusals of ``corral apply`` that a flag on its command line lifts: a person's call.
_PERSON_CODES = frozenset({"review_required", "merge_refused", "record_unverified"})


def apply_run_tool(options: ServerOptions, args: ApplyRunArgs) -> dict[str, Any]:
    """``apply_run``: ``corral apply``'s checks, and its merge when the server may and the
    diff's review list is empty (see the module docstring)."""
    ledger = ledger_dir(options.root)
    run_id = find_run(ledger, args.run_id).run_id
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
    try:
        record, plan, result = apply_run(
            options.root, ledger, run_id,
            ApplyOptions(check_only=check_only, three_way=args.three_way),
            confirm=lambda plan: False, show=lambda record, plan: plans.append(plan))
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
    data: dict[str, Any] = {
        "run_id": record.run_id, "status": result.status,
        "applied": result.status in ("applied", "conflicts"),
        "files": [{"path": f.path, "status": f.status, "old_path": f.old_path,
                   "flags": list(f.flags)} for f in plan.files],
        "flagged": [f.path for f in plan.flagged], "merged": result.merged,
        "conflicts": result.conflicts,
        "backup": str(result.backup) if result.backup is not None else None,
        "state": record.state}
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
    record, already = discard_run(ledger_dir(options.root), args.run_id)
    data: dict[str, Any] = {"run_id": record.run_id, "state": record.state,
                            "already_discarded": already,
                            "changed_files": len(record.changed_files)}
    if record.mode == SandboxMode.WORKSPACE_WRITE.value and record.diff:
        data["note"] = ("its changes were made in the checkout (workspace-write) and stay "
                        "there: `git restore` undoes them")
    return data
