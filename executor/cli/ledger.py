"""``corral ledger reindex``: rebuild the ledger's index from the record files by hand.

Every listing rebuilds a missing, unusable or outdated index by itself; this command is
for an index whose rows were changed in place (by hand, or by a tool that edited record
files in place): it reads every record and fanout record again, with a progress bar on a
terminal (rich, loaded only then).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from executor.api import Corral
from executor.options import echo
from executor.text import one_line

__all__ = ["ledger_group"]


@click.group("ledger")
def ledger_group() -> None:
    """The ledger of recorded runs: its index."""


@click.command("reindex")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".")
def reindex_command(root: Path) -> None:
    """Rebuild the index of this repository's ledger from its record files (they are the
    truth; the index only orders and filters them for `corral runs`, `show last`, gc, the
    web view and MCP's list_runs)."""
    corral = Corral(root)
    start = time.monotonic()
    if sys.stderr.isatty():
        from rich.progress import Progress  # noqa: PLC0415 - rich only on a terminal

        with Progress(transient=True) as bar:
            task = bar.add_task("reading records", total=None)
            rows = corral.reindex(progress=lambda done, total: bar.update(
                task, completed=done, total=total))
    else:
        rows = corral.reindex()
    echo(f"reindexed {one_line(str(corral.ledger()))}: {rows} run(s) and fanout(s) in "
         f"{time.monotonic() - start:.1f}s", err=True)


ledger_group.add_command(reindex_command)
