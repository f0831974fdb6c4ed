"""Text hygiene at the two edges where a child's text leaves the executor.

* :func:`safe_text` before anything is recorded: a file name that is not
  UTF-8 arrives as lone surrogates, which no UTF-8 writer accepts; they become
  visible ``\\udcff`` escapes instead of an error that would lose the record.
* :func:`printable` (and :func:`one_line`, :func:`field`, :func:`printable_patch`)
  before anything is shown on a terminal: every text a child, a project's agent
  definition, a file name or a model produced. Control and formatting
  characters become visible escapes, so a child cannot hide part of a command
  from an approval prompt or a diff, repaint the screen, set the window title,
  write the clipboard (OSC 52) or plant a hyperlink (OSC 8).

What is escaped: C0 controls but tab and newline (``\\r``, ``ESC``, ``BEL``,
...), DEL, C1 controls (U+0080 to U+009F, which some terminals obey as ``CSI``
and ``OSC``), format characters (bidi overrides and isolates, zero-width
characters, the byte order mark, language tags), U+2028/U+2029, lone
surrogates, and a few characters that draw nothing (Hangul fillers, the
combining grapheme joiner, the variation selector supplement). The escape says
what was there: ``\\x1b`` for a character below U+0080, ``\\u202e`` and
``\\U000e0041`` above it, and ``\\xff`` (two hex digits from ``\\x80``) for a
byte that is not UTF-8 at all. Printable text, tabs and newlines pass through
unchanged, however long the line.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["field", "one_line", "printable", "printable_patch", "safe_text"]

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: Printable by category, yet drawn as nothing: Hangul fillers, the combining grapheme
#: joiner, the variation selector supplement (used to smuggle text invisibly).
_NOT_PLAIN_ASCII = re.compile("[^\t\x20-\x7e]+")
_INVISIBLE = re.compile("[\u034f\u115f\u1160\u3164\uffa0\U000e0100-\U000e01ef]")


def safe_text(text: str) -> str:
    """``text`` with lone surrogates replaced by backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in _HIDDEN_CATEGORIES or bool(_INVISIBLE.match(char))


def _escape_line(line: str) -> tuple[str, int]:
    """One line (no ``\\n`` in it) with its hidden characters escaped, and how many."""
    if line.replace("\t", "").isprintable() and (line.isascii() or not _INVISIBLE.search(line)):
        return line, 0  # the common case, decided in C
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        run = match.group()
        if run.isprintable() and not _INVISIBLE.search(run):
            return run  # non-ASCII text (CJK, accents, emoji) as a whole
        out = []
        for char in run:
            if _hidden(char):
                count += 1
                out.append(_escape(char))
            else:
                out.append(char)
        return "".join(out)

    return _NOT_PLAIN_ASCII.sub(replace, line), count


def _escape_text(text: str, *, newlines: bool) -> tuple[str, int]:
    lines = text.split("\n")
    escaped = [_escape_line(line) for line in lines]
    joiner = "\n" if newlines else "\\x0a"
    return joiner.join(line for line, _ in escaped), sum(n for _, n in escaped) + (
        0 if newlines else len(lines) - 1)


def printable(text: str) -> str:
    """``text`` safe to print: newlines and tabs stay, every other control, format or
    invisible character becomes a visible escape."""
    return _escape_text(text, newlines=True)[0]


def one_line(text: str) -> str:
    """:func:`printable`, with newlines escaped too: for a value shown inside a line
    (a name, a path, a reason), which must not be able to fake the lines after it."""
    return _escape_text(text, newlines=False)[0]


def field(label: str, text: str, *, indent: str | None = None) -> str:
    """``label`` and ``text`` as lines: ``text`` escaped as :func:`printable` (its
    newlines kept), each later line indented by ``indent`` (default: under the text's
    first character), trailing blank lines dropped.

    For a value that may span lines after a label of corral's own (``error:``, ``hint:``,
    a context key): a continuation line starts deeper than any label, so no line of the
    value can pass for one (``...\nhint: run this``).
    """
    lines = printable(text).split("\n")
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    pad = " " * len(label) if indent is None else indent
    return "\n".join([(label + lines[0]).rstrip(" "), *(pad + line for line in lines[1:])])


def printable_patch(patch: bytes) -> tuple[str, int]:
    """A patch's bytes as terminal text, and how many characters were escaped.

    Valid UTF-8 is shown as text; bytes that are not UTF-8 become ``\\xNN``;
    tabs and newlines stay, so the diff keeps its shape.
    """
    return _escape_text(patch.decode("utf-8", "surrogateescape"), newlines=True)
