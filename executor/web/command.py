"""``corral serve [--port P]``: the web app on 127.0.0.1, behind a token in its URL.

The web front door's own command: ``corral``'s command table names it
(:data:`executor.cli.app.LAZY_COMMANDS`), so starlette, uvicorn and jinja2 are
imported only when it runs. The token is generated at start (``secrets``) and
printed inside the URL; ``--port 0`` (the default) picks a free port.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import click

from executor.api import BACKENDS, HOST_WARNING, Corral
from executor.api.serving import LOOPBACK, loopback_socket
from executor.options import echo, loader_options

__all__ = ["serve_command"]

@click.command("serve")
@loader_options
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Listen on 127.0.0.1:PORT (0 picks a free port).")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="auto",
              show_default=True, help="Where runs started from the page run.")
def serve_command(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
                  no_personal: bool, port: int, backend: str) -> None:
    """Serve a local web app to watch runs live, compare fanout candidates side by side,
    apply one, and start runs: on 127.0.0.1 only, at the URL printed (its token is the
    key; every change is a POST carrying it)."""
    import uvicorn  # noqa: PLC0415 - only `corral serve` loads the web stack

    from executor.web.app import build_app  # noqa: PLC0415

    if not root.is_dir():
        raise click.BadParameter(f"{root} is not a directory", param_hint="--root")
    corral = Corral(root.resolve(), trust_project=trust_project, config_file=config_file,
                    strict=strict, personal=not no_personal, backend=backend)
    corral.ledger()  # refuses a state dir a child could write, before serving anything
    if backend == "host":
        echo(f"warning: {HOST_WARNING}", err=True)
    token = secrets.token_urlsafe(32)
    sock = loopback_socket(port, operation="serve", option="--port P")
    bound = sock.getsockname()[1]
    web = build_app(corral, token, port=bound)
    echo(f"corral serve: {corral.root} at http://{LOOPBACK}:{bound}/{token}/ "
         "(this machine only; the URL's token is the key: do not share it)", err=True)
    config = uvicorn.Config(web.app, log_level="warning", lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        # Runs started from the page end cancelled, their diffs recorded, never crashed.
        left = web.starts.close()
    if left:
        echo(f"corral serve: {len(left)} run(s) did not stop in time: `corral gc` cleans "
             "what they leave", err=True)
    echo("corral serve: stopped", err=True)
