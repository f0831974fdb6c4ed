"""``corral trust`` and ``corral untrust``: load a project's own definitions without
``--trust-project`` while they are the ones you read (``Corral.trust``)."""

from __future__ import annotations

from pathlib import Path

import click

from executor.api import Corral
from executor.options import echo
from executor.text import one_line

__all__ = ["trust_command", "untrust_command"]


@click.command("trust")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=".")
def trust_command(path: Path) -> None:
    """Trust the definitions of the repository at PATH (default: here) as they are now.
    Read them first: `corral agents list --trust-project` lists them. They load without
    --trust-project until one is added, changed or removed; then corral says so and loads
    none of them until you trust again."""
    corral = Corral(path, trust_project=True, personal=False)
    found = corral.agents()
    files = sorted({c.origin.source for c in found.agents.values()
                    if c.origin.scope.value == "project"})
    corral.trust()
    echo(f"trusted the project definitions of {one_line(str(path.resolve()))}: "
         f"{len(found.agents)} agent(s) from {len(files)} file(s)", err=True)
    for source in files:
        echo(f"  {one_line(source)}", err=True)
    echo("`corral untrust` forgets it; a change to any of them needs `corral trust` again",
         err=True)


@click.command("untrust")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=".")
def untrust_command(path: Path) -> None:
    """Forget `corral trust` for the repository at PATH (default: here)."""
    shown = one_line(str(path.resolve()))
    if Corral(path).untrust():
        echo(f"the project definitions of {shown} are untrusted again", err=True)
    else:
        echo(f"{shown} was not trusted", err=True)
