"""``corral mcp``: serve corral's tools over MCP (stdio, or streamable HTTP on 127.0.0.1).

The MCP front door's own command: ``corral``'s command table names it
(:data:`executor.cli.app.LAZY_COMMANDS`) and loads it by name, and neither front
door imports the other. The server's root is ``--root`` (default: the directory
it is started in), its definitions are loaded as the CLI loads them
(``--trust-project``, ``--config``, ...; :class:`executor.api.Corral`), and
what a client may ask for is bounded by the options it was started with (see
:mod:`executor.mcpserver.handlers`). The SDK is imported here, inside the
command, so no other command pays for it.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from executor.api import BACKENDS, HOST_WARNING, Corral, parse_approve
from executor.api.placement import scheduler_for
from executor.mcpserver.arguments import (
    DEFAULT_MAX_CHILDREN,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_TIMEOUT,
)
from executor.options import echo, environment_options, loader_options

__all__ = ["mcp_command"]



@click.command("mcp")
@loader_options
@click.option("--http", "http_port", type=click.IntRange(0, 65535), metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (0 picks a free port) instead "
              "of stdio; clients must send the bearer token printed at start "
              "($CORRAL_MCP_TOKEN when set).")
@click.option("--allow-apply", is_flag=True, help="Let apply_run merge diffs whose review "
              "list is empty into the checkout (without it, apply_run only validates and "
              "returns the command to run; flagged files, symlinks and binaries are always a "
              "person's `corral apply`).")
@environment_options
@click.option("--allow-workspace-write", is_flag=True, help="Let run_agent use mode "
              "workspace-write: the child writes the checkout itself, flagged files included, "
              "with no review before they land.")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="auto",
              show_default=True,
              help="Where children run unless a call names bubblewrap or docker; 'host' (no "
              "process isolation) also lets calls ask for host.")
@click.option("--approve", help="Approvals for every call (nobody is asked through MCP): "
              "never, or always-for=TOOL,TOOL; an 'ask' rule otherwise denies.")
@click.option("--max-jobs", type=click.IntRange(min=1), default=DEFAULT_MAX_JOBS,
              show_default=True, help="The most children a fanout call may run at once.")
@click.option("--max-children", type=click.IntRange(min=1), default=DEFAULT_MAX_CHILDREN,
              show_default=True, help="The most children one fanout call may ask for.")
@click.option("--max-timeout", type=click.FloatRange(min=0, min_open=True),
              default=DEFAULT_MAX_TIMEOUT, show_default=True, metavar="SECONDS",
              help="The longest timeout a call may ask for; a call that gives none gets it.")
@click.option("--fanout-on", default="local", show_default=True, metavar="local|ray[://ADDR]",
              help="Where fanout calls run their children: this machine, or the sandboxing "
              "nodes of a Ray cluster (needs corral[ray]).")
def mcp_command(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                no_personal: bool, http_port: int | None, allow_apply: bool,
                allow_workspace_write: bool, no_env: bool, setup_network: bool,
                memory: str | None, backend: str,
                approve: str | None, max_jobs: int, max_children: int,
                max_timeout: float, fanout_on: str) -> None:
    """Serve corral over MCP so another harness (Claude Code, Codex, OpenCode, Cursor, ...)
    can list agents, run them in sandboxes, fan out, and read, apply or discard their
    diffs. Tools: list_agents, list_runs, run_agent, fanout, show_run, diff_run, apply_run,
    discard_run."""
    import anyio  # noqa: PLC0415 - only `corral mcp` loads the SDK and its stack

    from executor.mcpserver.handlers import ServerOptions  # noqa: PLC0415
    from executor.mcpserver.server import (  # noqa: PLC0415
        TOKEN_ENV,
        http_token,
        serve_http,
        serve_stdio,
    )

    parse_approve(approve)  # a bad --approve is a usage error now, not at every call
    scheduler_for(fanout_on)  # so are a bad --fanout-on and a missing Ray
    if not root.is_dir():
        raise click.BadParameter(f"{root} is not a directory", param_hint="--root")
    corral = Corral(root, trust_project=trust_project, config_file=config_file, strict=strict,
                    personal=not no_personal, memory=memory)
    corral.ledger()  # refuses a state dir a child could write, before serving anything
    corral.agents()  # --root and --config exist
    options = ServerOptions(root=root.resolve(), trust_project=trust_project,
                            config_file=config_file.resolve() if config_file else None,
                            strict=strict, no_personal=no_personal, allow_apply=allow_apply,
                            allow_workspace_write=allow_workspace_write, no_env=no_env,
                            setup_network=setup_network, memory=memory,
                            backend=backend, approve=approve, max_jobs=max_jobs,
                            max_children=max_children, max_timeout=max_timeout,
                            fanout_on=fanout_on)
    if backend == "host":
        echo(f"warning: {HOST_WARNING}", err=True)
    if http_port is None:
        anyio.run(serve_stdio, options)
        return
    token, generated = http_token(os.environ)

    def announce(url: str) -> None:
        echo(f"corral mcp: serving {options.root} at {url} (streamable HTTP, this machine "
             "only)", err=True)
        if generated:
            echo(f"corral mcp: clients must send the header 'Authorization: Bearer {token}' "
                 f"(set ${TOKEN_ENV} to choose the token)", err=True)
        else:
            echo(f"corral mcp: clients must send 'Authorization: Bearer ${TOKEN_ENV}'",
                 err=True)

    try:
        anyio.run(lambda: serve_http(options, port=http_port, token=token,
                                     announce=announce))
    except KeyboardInterrupt:
        echo("corral mcp: stopped", err=True)
