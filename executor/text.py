"""Text hygiene at the two edges where a child's text leaves the executor.

* :func:`safe_text` before anything is recorded: a file name that is not
  UTF-8 arrives as lone surrogates, which no UTF-8 writer accepts; they become
  visible ``\\udcff`` escapes instead of an error that would lose the record.
* :func:`printable` before anything is shown on a terminal: control and
  formatting characters (ANSI escapes, carriage returns, bidi overrides,
  zero-width characters) become visible escapes, so a child cannot hide part
  of a command from an approval prompt or repaint the screen.
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable", "safe_text"]


def safe_text(text: str) -> str:
    """``text`` with lone surrogates replaced by backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def printable(text: str) -> str:
    """``text`` safe to print: newlines and tabs stay, other control/format characters
    are shown as escapes."""
    out: list[str] = []
    for char in safe_text(text):
        if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp"):
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)
