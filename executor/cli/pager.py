"""A diff on a terminal: coloured, and through your pager (``corral diff``, ``corral run``).

The patch is escaped first (:func:`executor.text.printable_patch`: no byte a child
wrote reaches the terminal as a control character); the colours are corral's own
SGR codes, added at the start and end of whole lines afterwards, so a child's text
can never open, close or forge one. ``NO_COLOR`` (any value) turns colours off,
``--no-pager`` or ``PAGER=cat`` the pager; the pager runs only when stdout is a
terminal (click's: ``PAGER``, else ``less``; ``LESS`` defaults to ``FRX`` as git's
does: one screen quits at once, colours pass, nothing is cleared).
"""

from __future__ import annotations

import os
import sys

import click

__all__ = ["coloured_patch", "show_patch", "wants_colour"]

_RESET = "\x1b[m"
#: Line start -> SGR: file headers bold, hunk headers cyan, additions green, removals red.
_STYLES = (("diff --git ", "\x1b[1m"), ("index ", "\x1b[1m"), ("--- ", "\x1b[1m"),
           ("+++ ", "\x1b[1m"), ("new file mode", "\x1b[1m"), ("deleted file mode", "\x1b[1m"),
           ("rename ", "\x1b[1m"), ("similarity ", "\x1b[1m"), ("old mode", "\x1b[1m"),
           ("new mode", "\x1b[1m"), ("Binary files", "\x1b[1m"), ("GIT binary patch", "\x1b[1m"),
           ("@@", "\x1b[36m"), ("+", "\x1b[32m"), ("-", "\x1b[31m"))


def wants_colour() -> bool:
    """Colours on stdout: a terminal, and ``NO_COLOR`` unset or empty (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def coloured_patch(text: str) -> str:
    """``text`` (an already escaped patch) with each line coloured by how it starts."""
    lines = []
    for line in text.split("\n"):
        style = next((code for start, code in _STYLES if line.startswith(start)), None)
        lines.append(f"{style}{line}{_RESET}" if style and line else line)
    return "\n".join(lines)


def show_patch(text: str, *, pager: bool) -> None:
    """Print an escaped patch on stdout: coloured when :func:`wants_colour`, through the
    pager when ``pager`` and stdout is a terminal."""
    colour = wants_colour()
    shown = coloured_patch(text) if colour else text
    if pager and sys.stdout.isatty():
        os.environ.setdefault("LESS", "FRX")
        click.echo_via_pager(shown, color=colour)
        return
    click.echo(shown, nl=not shown.endswith("\n"), color=colour)
