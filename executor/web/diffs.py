"""A unified diff as HTML with syntax colour: each file's lines coloured by its language.

The patch's bytes are first made visible text (:func:`executor.text.printable_patch`:
bytes that are not UTF-8, controls and bidi overrides become escapes, as on a
terminal); each line is then highlighted by pygments with the lexer its file name
picks (plain text otherwise), which escapes it for HTML. Line classes (``add``,
``del``, ``hunk``, ``meta``) and pygments' token classes are coloured by the app's
own stylesheet: no inline style (the CSP forbids it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from executor.text import printable_patch

__all__ = ["MAX_LINES", "DiffFile", "render_diff"]

#: Lines of one diff rendered with colour; the rest are counted, not shown.
MAX_LINES = 4000
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="tok-")


@dataclass
class DiffFile:
    """One file of a diff: its path (as the ``+++``/``---`` lines name it) and its lines as
    ``(css class, HTML)``."""

    path: str
    lines: list[tuple[str, Markup]] = field(default_factory=list)


def _lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return cast("Lexer", TextLexer(stripnl=False, ensurenl=False))


def _code(text: str, lexer: Lexer) -> Markup:
    if not text:
        return Markup("")
    return Markup(highlight(text, lexer, _FORMATTER).rstrip("\n"))  # noqa: S704 - pygments escapes


def _path(line: str) -> str:
    name = line.split(" ", 1)[1] if " " in line else line
    return name[2:] if name.startswith(("a/", "b/")) else name


def render_diff(patch: bytes) -> tuple[list[DiffFile], int]:
    """The files of ``patch`` with their coloured lines, and how many lines were left out."""
    text, _ = printable_patch(patch)
    files: list[DiffFile] = []
    lexer: Lexer = TextLexer()
    left = 0
    shown = 0
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            words = line.split(" ")
            files.append(DiffFile(_path(words[-1]) if len(words) >= 4 else line))
            lexer = _lexer(files[-1].path)
        if not files:
            files.append(DiffFile(""))
        if shown >= MAX_LINES:
            left += 1
            continue
        shown += 1
        if line.startswith("+++ ") and line[4:] != "/dev/null":
            files[-1].path = _path(line[4:])
            lexer = _lexer(files[-1].path)
        if line.startswith(("diff --git ", "index ", "--- ", "+++ ", "new file", "deleted file",
                            "old mode", "new mode", "similarity", "rename ", "Binary files")):
            files[-1].lines.append(("meta", escape(line)))
        elif line.startswith("@@"):
            files[-1].lines.append(("hunk", escape(line)))
        elif line.startswith("+"):
            files[-1].lines.append(("add", Markup("+") + _code(line[1:], lexer)))
        elif line.startswith("-"):
            files[-1].lines.append(("del", Markup("-") + _code(line[1:], lexer)))
        elif line:
            files[-1].lines.append(("ctx", escape(line[:1]) + _code(line[1:], lexer)))
    return [f for f in files if f.lines], left
