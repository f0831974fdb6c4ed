"""``corral replay from-diff PATCH``: a replay whose child applies a patch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from executor.api.replays import replay_from_diff
from executor.errors import ExecutorError
from executor.options import echo
from executor.text import one_line

__all__ = ["replay_group"]


@click.group("replay")
def replay_group() -> None:
    """Replays (scripted models) made from what you already have."""


@replay_group.command("from-diff")
@click.argument("patch", metavar="PATCH")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the replay here (default: standard output).")
@click.option("--answer", default="Applied the patch.", show_default=True,
              help="The child's final answer.")
@click.option("--json", "as_json", is_flag=True,
              help="Print {\"replay\", \"output\"} as JSON instead of the replay.")
def from_diff(patch: str, output: Path | None, answer: str, as_json: bool) -> None:
    """A replay whose child applies PATCH (a file, or - for standard input: a unified
    diff or a '*** Begin Patch' patch), for `corral run --script` or `fanout --script`:
    a fix made by hand becomes a candidate like any other."""
    try:
        data = sys.stdin.buffer.read() if patch == "-" else Path(patch).read_bytes()
    except OSError as exc:
        raise ExecutorError(f"cannot read {patch}: {exc.strerror}", code="bad_patch",
                            operation="replay_from_diff", context={"patch": patch},
                            hint="give a patch file, or - to read standard input") from exc
    text = replay_from_diff(data, source="standard input" if patch == "-" else patch,
                            answer=answer)
    if output is not None:
        partial = output.with_name(f".{output.name}.partial")
        try:
            partial.write_text(text, encoding="utf-8")
            partial.replace(output)  # never a half-written replay where --script would read it
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise ExecutorError(f"cannot write {output}: {exc.strerror}", code="bad_output",
                                operation="replay_from_diff", context={"output": str(output)},
                                hint="name a file in a directory that exists") from exc
    if as_json:
        click.echo(json.dumps({"replay": text, "output": str(output) if output else None}))
    elif output is None:
        click.echo(text, nl=False)
    else:
        echo(f"wrote {one_line(str(output))}: corral run --script {one_line(str(output))} ...",
             err=True)
