"""``corral env build|show|prune``: the project's environment, ahead of time and on disk.

``build`` prepares it now (setup output streams on a terminal) so the next
``run`` or ``fanout`` pays nothing; ``show`` lists what is cached under the
state dir (key, status, size, age, the checkouts that used it, what described
it) or one environment with its setup log (a failed one's cause and hint);
``prune`` removes environments (those named, or those unused for a while, or
all) that no live sandbox runs in.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from executor.api import BACKENDS, Corral, EnvironmentInfo
from executor.cli.app import loading_corral, setup_output, warn
from executor.options import echo, environment_options, loader_options
from executor.text import one_line

__all__ = ["env_group"]


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _age(then: float) -> str:
    seconds = max(0.0, time.time() - then)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _json(info: EnvironmentInfo) -> dict[str, object]:
    return info.model_dump(mode="json") | {"log": str(info.log)}


@click.group("env")
def env_group() -> None:
    """Build, list or remove the project's cached environments (docs/environments.md)."""


@env_group.command("build")
@loader_options
@environment_options
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="auto",
              show_default=True, help="The backend whose children will use it.")
@click.option("--rebuild", is_flag=True, help="Run setup again even if this key is built.")
@click.option("--json", "as_json", is_flag=True, help="Print the environment as JSON.")
def env_build(root: Path, trust_project: bool, config_file: Path | None, strict: bool,
              no_personal: bool, no_env: bool, setup_network: bool, memory: str | None,
              backend: str, rebuild: bool, as_json: bool) -> None:
    """Prepare the project's environment now: setup runs once per key (its output
    streams on a terminal); a later run or fanout with the same key pays nothing."""
    if no_env:
        raise click.UsageError("--no-env: there is nothing to build")
    corral = loading_corral(root, trust_project, config_file, strict, no_personal,
                            backend=backend, memory=memory)
    built = corral.build_environment(setup_network=True if setup_network else None,
                                     rebuild=rebuild, on_output=setup_output(as_json),
                                     on_warning=warn)
    if built is None:
        echo("no environment is described: see docs/environments.md "
             "(your config's [environment], or .corral/environment.toml / "
             ".devcontainer/devcontainer.json under --trust-project)", err=True)
        sys.exit(2)
    info = built.info
    if as_json:
        click.echo(json.dumps(_json(info) if info else {"key": built.key}, indent=2))
        return
    echo(f"environment {built.key} ready" + (f" ({_human(info.size_bytes)})" if info else ""))


@env_group.command("show")
@click.argument("key", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def env_show(key: str | None, as_json: bool) -> None:
    """List the cached environments (most recently used first), or show one with its
    setup log."""
    found = Corral().environments()
    if key is not None:
        found = [info for info in found if info.key.startswith(key)]
        if len(found) != 1:
            why = "is ambiguous" if found else "is not cached"
            raise click.UsageError(f"environment {key!r} {why}; `corral env show` lists them")
        info = found[0]
        log = info.log.read_text(encoding="utf-8", errors="replace") if info.log.is_file() \
            else ""
        if as_json:
            click.echo(json.dumps(_json(info) | {"log_text": log}, indent=2))
            return
        echo(f"environment {info.key}: {info.status}, {info.backend}, "
             f"{_human(info.size_bytes)}, made {_age(info.created_at)} ago in "
             f"{info.setup_seconds:.1f}s, used {_age(info.last_used)} ago")
        echo(f"repository: {one_line(info.repo)}")
        for other in info.repos:
            if other != info.repo:
                echo(f"also used by: {one_line(other)}")
        if info.workspace:
            echo(f"workspace: {one_line(info.workspace)} (where setup ran, in the sandbox)")
        for source in info.sources:
            echo(f"described by: {one_line(source)}")
        if info.image:
            echo(f"image: {one_line(info.image)}")
        for command in info.setup:
            echo(f"setup: {one_line(command)}")
        if info.error:
            echo(f"error: {one_line(info.error)}")
        if info.cause:
            echo(f"cause: {one_line(info.cause)}")
        if info.hint:
            echo(f"hint: {one_line(info.hint)}")
        echo(f"log: {one_line(str(info.log))}")
        if log:
            echo(log, nl=not log.endswith("\n"))
        return
    if as_json:
        click.echo(json.dumps({"environments": [_json(i) for i in found]}, indent=2))
        return
    if not found:
        echo("no environment is cached")
        return
    echo(f"{'KEY':16}  {'STATUS':8}  {'BACKEND':10}  {'SIZE':>10}  {'USED':>5}  REPOSITORY")
    for info in found:
        others = len(set(info.repos) - {info.repo})
        echo(f"{info.key:16}  {info.status:8}  {info.backend:10}  "
             f"{_human(info.size_bytes):>10}  {_age(info.last_used):>5}  {one_line(info.repo)}"
             + (f" (+{others} more)" if others else ""))


@env_group.command("prune")
@click.argument("keys", nargs=-1)
@click.option("--older-than", "older_than", metavar="DURATION",
              help="Only those no run used for DURATION (30m, 12h, 7d, 2w).")
@click.option("--all", "everything", is_flag=True, help="Every environment not in use.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def env_prune(keys: tuple[str, ...], older_than: str | None, everything: bool,
              as_json: bool) -> None:
    """Remove cached environments (KEY..., those unused for --older-than, or --all) that
    no live sandbox runs in, with the images built for them."""
    if not keys and older_than is None and not everything:
        raise click.UsageError("name environments (KEY...), or give --older-than or --all")
    removed = Corral().prune_environments(keys, older_than=older_than, everything=everything)
    if as_json:
        click.echo(json.dumps({"removed": [_json(i) for i in removed]}, indent=2))
        return
    for info in removed:
        echo(f"removed {info.key}  {_human(info.size_bytes)}  {one_line(info.repo)}")
    if not removed:
        echo("nothing removed")
