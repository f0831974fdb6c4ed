"""corral from Python: :class:`Corral`, the one API under every front door.

``corral ...`` on the command line and ``corral mcp`` are thin adapters over
this class: the same contracts, ledger, errors and exit codes. Each method
imports the machinery it needs when it is called, so listing agents never
loads the sandboxes, and nothing here prints: progress, setup output and
warnings go to the callbacks a caller passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.agents.registry import Sources
from executor.api.environment_methods import EnvironmentMethods
from executor.api.memory import checked_memory, sized
from executor.api.network import checked_allow_net, checked_net
from executor.errors import ExecutorError
from executor.scheduling import DEFAULT_JOBS

if TYPE_CHECKING:
    from executor.agents.trust import TrustState
    from executor.api.agents import Agents, AgentView, NewAgent
    from executor.api.fanouts import FanoutResult
    from executor.api.inputs import Replay
    from executor.api.journal import LogEvent
    from executor.api.records import GcReport
    from executor.api.reports import ApplyReport, BranchReport, Discarded, Recovered
    from executor.api.results import Diff, RunList, RunResult
    from executor.api.running import SchedulerFactory
    from executor.api.sessions import ShellResult
    from executor.apply import PatchPlan
    from executor.fanout import ChildPlan
    from executor.ledger import Entry, RunRecord
    from executor.run.session import ProgressEvent
    from executor.scheduling import Cancellation
    from executor.tools.dispatch import ApprovalHandler
    from sandbox.config import BackendConfig
    from sandbox.terminal import TerminalIO

__all__ = ["BACKENDS", "MODES", "Corral"]

#: Where children run: ``auto`` (bubblewrap, else docker; never host), ``bubblewrap``,
#: ``docker``, or ``host`` (changes isolated, processes not: see the README).
BACKENDS = ("auto", "bubblewrap", "docker", "host")
#: The most a child may write: nothing, a fresh worktree (a diff), or the checkout itself.
MODES = ("read-only", "worktree", "workspace-write")


class Corral(EnvironmentMethods):
    """corral for one repository: its agents, runs, fanouts and ledger.

    ``root`` is the repository (a git checkout). Definitions are discovered as the
    CLI discovers them: personal ones (``~/.claude/agents``, ...) unless ``personal``
    is false, the project's own only with ``trust_project``, and the agents an ngn JSON
    ``config_file`` imports. ``strict`` rejects every definition with a warning.
    ``backend`` is one of :data:`BACKENDS` (or a :mod:`sandbox.config` backend
    config); ``state_dir`` is where sandboxes and the run ledger live (default:
    ``$CORRAL_STATE_DIR``, else ``~/.local/state/corral``); ``memory`` is what each sandbox may
    use, all its processes together (``"4G"``; default: ``[sandbox] memory`` of your config,
    else half of this machine's memory); ``allow_net``: hosts web_fetch may reach on top of
    ``[network] allow``; ``net="allow"``: its runs' commands reach them via corral's proxy
    (``--net allow``, :mod:`sandbox.egress`); ``review_commands`` lets a read-only agent keep
    the shell its definition gives it, its commands writing a throwaway layer over the
    checkout (as ``[review] commands``). Your corral config (providers, roles, MCP servers,
    the environment) is read from ``$CORRAL_CONFIG`` or ``~/.config/corral/config.toml``.

    Every method raises :class:`~executor.api.CorralError` (code, message, context,
    hint, exit code) on purpose, and nothing else; a user's mistake (an unknown agent,
    a missing replay) is raised before anything runs. A Corral holds no open resource:
    make one wherever you need it, use it from any thread.
    """

    def __init__(self, root: str | os.PathLike[str] = ".", *, trust_project: bool = False,
                 config_file: str | os.PathLike[str] | None = None, strict: bool = False,
                 personal: bool = True, backend: str | BackendConfig = "auto",
                 state_dir: str | os.PathLike[str] | None = None,
                 memory: str | int | None = None, allow_net: Sequence[str] = (),
                 review_commands: bool = False, net: str = "none") -> None:
        if isinstance(backend, str) and backend not in BACKENDS:
            raise ExecutorError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}",
                                code="usage_error", operation="check_arguments",
                                hint="auto picks bubblewrap, else docker")
        self.memory, self.allow_net, self.net = (checked_memory(memory),
                                                 checked_allow_net(allow_net), checked_net(net))
        #: Read-only agents' shells run in a throwaway layer (--review-commands, [review]).
        self.review_commands = review_commands
        self.root, self.trust_project = Path(root), trust_project
        self.config_file = Path(config_file) if config_file is not None else None
        self.strict = strict
        self.personal = personal
        self.backend = backend
        self.state_dir = Path(state_dir).absolute() if state_dir is not None else None

    def __repr__(self) -> str:
        backend = self.backend if isinstance(self.backend, str) else self.backend.type
        return f"Corral({str(self.root)!r}, backend={backend!r})"

    # -- where things are ------------------------------------------------------------------

    def sources(self) -> Sources:
        """Where this Corral's definitions come from."""
        return Sources(self.root, self.trust_project, self.config_file, self.strict,
                       self.personal, self.allow_net)

    def state_root(self) -> Path:
        """The state dir (not checked: :meth:`ledger` checks it)."""
        from sandbox.state import default_state_root  # noqa: PLC0415 - sandbox only when used
        return self.state_dir or default_state_root()

    def ledger(self) -> Path:
        """The run ledger of this repository, after checking that no child could write it
        (a state dir inside a working tree is refused: ``state_dir_misplaced``, exit 2)."""
        from executor.ledger import ledger_dir  # noqa: PLC0415 - sandbox only when used
        env = {"CORRAL_STATE_DIR": str(self.state_dir)} if self.state_dir else None
        return ledger_dir(self.root, env=env)

    def backend_config(self) -> BackendConfig:
        """The backend's config (a fresh one for a name), with the memory of
        :func:`executor.api.memory.sized`."""
        from sandbox.config import USER_BACKENDS  # noqa: PLC0415 - sandbox only when used
        if isinstance(self.backend, str):
            return sized(self, USER_BACKENDS[self.backend]())
        return sized(self, self.backend)

    # -- agents ----------------------------------------------------------------------------

    def agents(self) -> Agents:
        """Every agent that won discovery, every diagnostic, the zuno ``default_agent``."""
        from executor.api.agents import discover  # noqa: PLC0415
        return discover(self.sources())

    def check(self) -> Agents:
        """Discovery for its diagnostics: ``rejected`` says whether a definition was
        rejected (``corral agents check`` then exits 1)."""
        return self.agents()

    def agent(self, name: str) -> AgentView:
        """Agent ``name``: its contract and what a run of it is offered. An unknown name is
        ``unknown_agent`` with a few close names in its hint."""
        from executor.api.agents import show  # noqa: PLC0415
        return show(self.sources(), name)

    def trust(self) -> str:
        """Trust the repository's own definitions as they are now (:mod:`executor.agents.
        trust`: loaded without ``trust_project`` until one changes); their digest."""
        from executor.agents import trust  # noqa: PLC0415
        return trust.trust(self.root, state_root=self.state_dir)

    def untrust(self) -> bool:
        """Forget :meth:`trust`; whether there was any."""
        from executor.agents import trust  # noqa: PLC0415
        return trust.untrust(self.root, state_root=self.state_dir)

    def trust_state(self) -> TrustState:
        """``trusted``, ``changed`` (since trusted: not loaded) or ``untrusted``, and when."""
        from executor.agents import trust  # noqa: PLC0415
        return trust.trust_state(self.root, state_root=self.state_dir)

    def new_agent(self, name: str, *, format: str, mode: str = "all",
                  path: str | os.PathLike[str] | None = None,
                  description: str | None = None) -> NewAgent:
        """Write a valid, minimal definition of agent ``name`` in ``format`` (any format
        corral loads), reachable as ``mode`` says (``all``, ``primary`` or ``subagent``), at
        ``path`` (relative to the root; by default where that format's project agents are
        discovered). An existing file is never overwritten: ``file_exists``."""
        from executor.api.agents import new  # noqa: PLC0415
        return new(self.sources(), name, format=format, mode=mode,
                   path=Path(path) if path is not None else None, description=description)

    # -- runs ------------------------------------------------------------------------------

    def run(self, prompt: str, *, agent: str | None = None, mode: str = "worktree",
            script: str | os.PathLike[str] | Replay | None = None, model: str | None = None,
            approve: str | ApprovalHandler | None = None, timeout: float | None = None,
            environment: bool = True, setup_network: bool | None = None,
            progress: Callable[[ProgressEvent], None] | None = None,
            cancel: Cancellation | None = None,
            on_setup_output: Callable[[str], None] | None = None,
            on_warning: Callable[[str], None] | None = None,
            welcome: Callable[[str, str], None] | None = None) -> RunResult:
        """Run ``agent`` (default: the zuno ``default_agent``) on ``prompt`` in a sandbox;
        return its record (also in the ledger). Blocks until the run ends.

        ``mode`` is the most it may write (:data:`MODES`; its contract can only narrow
        it). ``script`` replays a scripted model (a YAML file or a :class:`Replay`) for the
        whole run tree; ``model`` is a route (``provider/model``, ``@role``) overriding the
        agent's; the two are exclusive. ``approve``: ``"never"``, ``"always-for=TOOL,..."``,
        or a callable asked for each call an ``ask`` rule holds (``None``: every such call
        is denied). ``timeout``: the run's wall-clock limit in seconds. The project's
        ``environment`` (setup, carried paths, image, variables) is built first unless
        false; ``setup_network`` lets its setup reach the network.

        ``progress`` gets every :class:`~executor.api.ProgressEvent` (from any thread); a
        progress object that is also a context manager (a live display) is entered around
        the run itself, after every check and the environment's setup. ``cancel`` (a
        :class:`~executor.api.CancelToken`) stops the run from another thread: it ends
        ``cancelled``, its diff recorded. ``on_setup_output`` gets the environment's
        setup output as it streams, ``on_warning`` each warning (the host backend's,
        what an environment's description had ignored), ``welcome`` an agent's
        ``(name, welcome message)`` when its session starts.

        The run's own outcome is its status (``completed``, ``failed``, ``timeout``,
        ``denied``, ``cancelled``, ``step_limit``, ``review_failed``), never an
        exception; ``RunResult.exit_code`` is the CLI's. A KeyboardInterrupt is recorded
        (``cancelled``) and raised again.
        """
        from executor.api.running import run_one  # noqa: PLC0415 - the run machinery
        return run_one(self, prompt, agent=agent, mode=mode, script=script, model=model,
                       approve=approve, timeout=timeout, environment=environment,
                       setup_network=setup_network, progress=progress, cancel=cancel,
                       on_setup_output=on_setup_output, on_warning=on_warning,
                       welcome=welcome)

    def continue_run(self, run_id: str, prompt: str, *,
                     script: str | os.PathLike[str] | Replay | None = None,
                     model: str | None = None, approve: str | ApprovalHandler | None = None,
                     timeout: float | None = None, environment: bool = True,
                     setup_network: bool | None = None, cancel: Cancellation | None = None,
                     progress: Callable[[ProgressEvent], None] | None = None,
                     on_setup_output: Callable[[str], None] | None = None,
                     on_warning: Callable[[str], None] | None = None,
                     welcome: Callable[[str, str], None] | None = None) -> RunResult:
        """A new run of run ``run_id``'s agent on ``prompt`` in its workspace rebuilt (the
        checkout now, its diff applied), its conversation continued, its diff cumulative; the
        old run is then ``continued_by`` it (:mod:`executor.api.sessions`; else :meth:`run`)."""
        from executor.api.sessions import continue_run  # noqa: PLC0415 - the run machinery
        return continue_run(self, run_id, prompt, script=script, model=model, approve=approve,
                            timeout=timeout, environment=environment, cancel=cancel,
                            setup_network=setup_network, progress=progress, welcome=welcome,
                            on_setup_output=on_setup_output, on_warning=on_warning)

    def shell(self, run_id: str, command: Sequence[str] | None = None, *,
              terminal: TerminalIO | None = None, timeout: float | None = None,
              environment: bool = True, on_output: Callable[[str, bytes], None] | None = None,
              on_setup_output: Callable[[str], None] | None = None,
              on_warning: Callable[[str], None] | None = None) -> ShellResult:
        """Run ``command`` (``on_output`` gets its output) or a shell on the raw ``terminal``
        in run ``run_id``'s rebuilt workspace; what it changed is recorded in the run, by hand."""
        from executor.api.sessions import shell  # noqa: PLC0415 - the sandboxes
        return shell(self, run_id, command, terminal=terminal, timeout=timeout,
                     environment=environment, on_output=on_output,
                     on_setup_output=on_setup_output, on_warning=on_warning)

    def fanout(self, prompt: str, *, agents: Sequence[str] = (), n: int | None = None,
               scripts: Sequence[str | os.PathLike[str] | Replay] = (),
               models: Sequence[str] = (), check: str | None = None,
               check_timeout: float = 600.0, jobs: int = DEFAULT_JOBS,
               timeout: float | None = None, approve: str | None = None,
               environment: bool = True, setup_network: bool | None = None,
               progress: Callable[[ProgressEvent], None] | None = None,
               cancel: Cancellation | None = None,
               on_plan: Callable[[list[ChildPlan]], None] | None = None,
               on_setup_output: Callable[[str], None] | None = None,
               on_warning: Callable[[str], None] | None = None,
               scheduler: SchedulerFactory | None = None, on: str = "local") -> FanoutResult:
        """Run ``prompt`` in several children at once, each in its own sandbox from one
        snapshot of the checkout; run ``check`` (a shell command, e.g. ``"pytest -q"``) on
        each child's recorded diff; return every child's result and which diffs conflict.
        Nothing is applied: :meth:`apply` merges the child you choose.

        ``agents``, ``models`` and ``scripts`` each take one value (every child gets it)
        or exactly ``n`` values (child *i* gets the *i*-th); ``n`` may be left out when one
        of them is given once per child. ``jobs`` children run at once; ``timeout`` is
        the whole fanout's, checks included; ``check_timeout`` one check's. Nobody is
        asked during a fanout: ``approve`` (``"never"``, ``"always-for=TOOLS"``) decides
        an ``ask`` rule, which denies otherwise.

        ``on_plan`` gets the children's plans (index, run id, agent, model or replay)
        before any starts; ``progress``, ``cancel``, ``on_setup_output`` and ``on_warning``
        are :meth:`run`'s. ``on``: ``local``, ``ray`` or ``ray://HOST:PORT`` (a Ray cluster's
        sandboxing nodes, where the environment is built: see the README); ``scheduler``
        replaces its scheduler: ``(jobs, deadline, cancellation)`` -> a scheduler.
        """
        from executor.api.running import fanout_many  # noqa: PLC0415 - the run machinery
        return fanout_many(self, prompt, agents=agents, n=n, scripts=scripts, models=models,
                           check=check, check_timeout=check_timeout, jobs=jobs,
                           timeout=timeout, approve=approve, environment=environment,
                           setup_network=setup_network, progress=progress, cancel=cancel,
                           on_plan=on_plan, on_setup_output=on_setup_output,
                           on_warning=on_warning, scheduler=scheduler, on=on)

    # -- the ledger ------------------------------------------------------------------------

    def runs(self, *, limit: int | None = None, after: str | None = None,
             **filters: Any) -> RunList:
        """One page of the recorded runs and fanouts, newest first, from the ledger's index:
        ``limit`` entries after entry ``after``, ``filters`` as :func:`records.filters`."""
        from executor.api import records  # noqa: PLC0415
        return records.runs(self, records.filters(**filters), limit=limit, after=after)

    def iter_runs(self, *, after: str | None = None, **filters: Any) -> Iterator[Entry]:
        """Every entry :meth:`runs` would list, streamed as the index is read."""
        from executor.api import records  # noqa: PLC0415
        return records.iter_runs(self, records.filters(**filters), after=after)

    def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the ledger's index from the record files; how many rows it holds."""
        from executor.api import records  # noqa: PLC0415
        return records.reindex(self, progress)

    def show(self, run_id: str) -> RunResult:
        """A run's record. ``run_id`` is an id or a unique prefix of one (or ``last``,
        ``last~N``), never a pattern; an unknown one is ``unknown_run``. A run still going
        (or whose process died) has the calls so far from its journal
        (``RunResult.from_journal``; a call not ended yet is ``in_progress``)."""
        from executor.api import records  # noqa: PLC0415
        return records.show(self, run_id)

    def show_fanout(self, fanout_id: str) -> FanoutResult:
        """A recorded fanout (an id such as ``f-20261201-...`` or a unique start of one):
        its record and each child as it recorded itself, as :meth:`fanout` returned it."""
        from executor.api import records  # noqa: PLC0415
        return records.show_fanout(self, fanout_id)

    def pick(self, fanout_id: str, index: int | str) -> str:
        """The run id of child ``index`` (from 1) of a recorded fanout (``unknown_run``: no
        such child, or it never started), or ``"best"``'s (:meth:`FanoutResult.best`)."""
        from executor.api import records  # noqa: PLC0415
        return records.pick(self, fanout_id, index)

    def transcript(self, run_id: str) -> list[dict[str, Any]]:
        """A run's transcript: every message and tool result, one dict each (a run still
        going, or whose process died: the messages its journal holds so far)."""
        from executor.api import records  # noqa: PLC0415
        return records.transcript(self, run_id)

    def journal(self, run_id: str) -> list[LogEvent]:
        """What a run journaled so far (``corral logs``): every prompt, model answer, tool
        call, decision, output chunk, result, phase and end, oldest first. A fanout id
        (``f-...``) gives every child's, interleaved by time, each labelled with its
        place (``LogEvent.child`` of ``children``)."""
        from executor.api import journal  # noqa: PLC0415
        return journal.events(self, run_id)

    def follow(self, run_id: str, *, poll: float = 0.1) -> Iterator[LogEvent]:
        """:meth:`journal`, then each event as it is journaled (``corral logs -f``: a
        command's output as it streams), until the run's record is final or its process
        died (a fanout: until the fanout ends); ``poll`` seconds between reads that found
        nothing new."""
        from executor.api import journal  # noqa: PLC0415
        return journal.follow(self, run_id, poll=poll)

    def diff(self, run_id: str) -> Diff:
        """A run's exact diff (the bytes :meth:`apply` merges)."""
        from executor.api import records  # noqa: PLC0415
        return records.diff(self, run_id)

    def apply(self, run_id: str, *, check_only: bool = False, three_way: bool = False,
              yes: bool = False, allow_symlinks: bool = False, allow_binary: bool = False,
              allow_git_dirs: bool = False, allow_unverified: bool = False,
              confirm: Callable[[PatchPlan], bool] | None = None,
              on_plan: Callable[[RunRecord, PatchPlan], None] | None = None) -> ApplyReport:
        """Verify a run's diff (its digest), judge it (paths, symlinks, binaries, git
        directories, review flags), check it against the checkout, and merge it, all or
        nothing, with a backup kept; ``check_only`` changes nothing.

        ``three_way`` merges files changed since the child's snapshot (conflicts are left
        marked: status ``conflicts``). Files flagged for review are merged only with
        ``yes`` or when ``confirm(plan)`` says so; ``allow_*`` widen what is accepted.
        ``on_plan`` sees the judged plan before any refusal. A refusal is
        :class:`~executor.api.MergeRefused` (exit code 4): nothing was written. A fanout's
        child's conflicting siblings are then ``superseded`` (``ApplyReport.superseded``).
        """
        from executor.api import records  # noqa: PLC0415
        return records.apply(self, run_id, check_only=check_only, three_way=three_way,
                             allow_symlinks=allow_symlinks, allow_binary=allow_binary,
                             allow_git_dirs=allow_git_dirs, allow_unverified=allow_unverified,
                             yes=yes, confirm=confirm, on_plan=on_plan)

    def branch(self, run_id: str, name: str, *, allow_symlinks: bool = False,
               allow_binary: bool = False, allow_git_dirs: bool = False,
               allow_unverified: bool = False) -> BranchReport:
        """Keep a run's verified diff as one commit on a new branch ``name`` from ``HEAD``,
        the checkout, index and other refs untouched (:mod:`executor.apply.branch`)."""
        from executor.api import records  # noqa: PLC0415
        return records.branch(self, run_id, name, allow_symlinks=allow_symlinks,
                              allow_binary=allow_binary, allow_git_dirs=allow_git_dirs,
                              allow_unverified=allow_unverified)

    def recover(self, run_id: str) -> Recovered:
        """Put back the files an interrupted apply of the run saved."""
        from executor.api import records  # noqa: PLC0415
        return records.recover(self, run_id)

    def discard(self, run_id: str) -> Discarded:
        """Mark a run's diff discarded (it stays readable; the checkout does not change)."""
        from executor.api import records  # noqa: PLC0415
        return records.discard(self, run_id)

    def gc(self, older_than: str | float | None = None) -> GcReport:
        """Clean what crashed runs left (diffs saved to their records), mark crashed fanouts,
        remove environments and idle snapshots unused for the config's ``prune_after_days``
        and ``snapshots.prune_after_hours``; with ``older_than`` (seconds, or ``"7d"``,
        ``"1h30m"``; ``0`` for all) also what finished runs left, and older idle snapshots."""
        from executor.api import records  # noqa: PLC0415
        return records.gc(self, older_than)
