"""The one glob dialect of corral: permission patterns and the file tools' ``find`` and ``search``.

A permission rule ``Read(secrets/[a-z]*.env)`` and the ``find`` tool read a pattern the
same way, so a deny can never be inert where the tool would match (the permission glob
used to take ``[`` literally while ``find`` read it as a class: the deny failed open).

=============  ==================================================================
``**/``        zero or more whole directories (``**/*.env`` matches ``.env``)
``**``         any text, ``/`` included
``*``          any text; in a path (``path=True``) not ``/``
``?``          one character; in a path not ``/``
``[abc]``      one character of the class: members and ranges (``a-z``); ``!`` or
               ``^`` first negates it (``[!a]``); ``]`` first is a member when a later
               ``]`` ends the class; in a path a class never matches ``/``
anything else  itself (a backslash too: there is no escape; ``[[]`` is a literal ``[``)
=============  ==================================================================

For commands, agent names and URLs (``path=False``) a trailing `` *`` also matches the
text without it (``git status *`` matches ``git status``).

A pattern this dialect cannot read is refused (:class:`GlobError`, or the reason from
:func:`glob_problem`), never taken some other way: a ``[`` no ``]`` closes, an empty
class (``[]``, ``[!]``), a range out of order (``[z-a]``), a POSIX class (``[[:alpha:]]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from policies.errors import PolicyError

__all__ = [
    "DOUBLE_STAR",
    "DOUBLE_STAR_SLASH",
    "GLOB_HINT",
    "ONE",
    "STAR",
    "CharClass",
    "GlobError",
    "GlobToken",
    "check_glob",
    "glob_problem",
    "glob_regex",
    "glob_tokens",
]

GLOB_HINT = ("globs read *, ?, ** and [...] classes ([a-z], [!a]); write [[] for a "
             "literal '['")


class GlobError(PolicyError):
    """A glob corral cannot read (see the module docstring)."""

    code = "bad_glob"


@dataclass(frozen=True)
class CharClass:
    """``[...]``: one character in (or, ``negated``, not in) ``ranges`` (inclusive pairs)."""

    negated: bool
    ranges: tuple[tuple[str, str], ...]

    def matches(self, char: str, *, path: bool = False) -> bool:
        """Whether the class takes ``char`` (in a path never ``/``)."""
        if path and char == "/":
            return False
        return any(low <= char <= high for low, high in self.ranges) != self.negated

    def regex(self, *, path: bool) -> str:
        body = "".join(re.escape(low) if low == high else f"{re.escape(low)}-{re.escape(high)}"
                       for low, high in self.ranges)
        one = f"[{'^' if self.negated else ''}{body}]"
        return f"(?!/){one}" if path else one


STAR, DOUBLE_STAR, DOUBLE_STAR_SLASH, ONE = "*", "**", "**/", "?"
#: A token: one of the four wildcards above, a class, or one literal character (a
#: literal ``*`` or ``?`` cannot occur: those are always wildcards).
GlobToken = str | CharClass


def _class(pattern: str, start: int) -> tuple[CharClass, int]:
    """The class opening at ``pattern[start]`` (a ``[``) and the index after it."""
    at = start + 1
    negated = pattern[at:at + 1] in ("!", "^")
    at += 1 if negated else 0
    first = at
    if pattern[at:at + 1] == "]":
        if pattern.find("]", at + 1) == -1:
            raise GlobError(f"{pattern!r} has an empty class {pattern[start:at + 1]!r} at "
                            f"position {start + 1}", hint=GLOB_HINT)
        at += 1  # a ']' first is a member
    end = pattern.find("]", at)
    if end == -1:
        raise GlobError(f"{pattern!r} has a '[' at position {start + 1} that no ']' closes",
                        hint=GLOB_HINT)
    body = pattern[first:end]
    if any(posix in body for posix in ("[:", "[=", "[.")):
        raise GlobError(f"{pattern!r} uses a POSIX class ({pattern[start:end + 1]!r}), which "
                        "corral does not read", hint="name the characters: [a-zA-Z]")
    ranges: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low > high:
                raise GlobError(f"{pattern!r} has a range out of order, {low}-{high}",
                                hint=f"write {high}-{low}")
            ranges.append((low, high))
            i += 3
        else:
            ranges.append((body[i], body[i]))
            i += 1
    return CharClass(negated, tuple(ranges)), end + 1


@lru_cache(maxsize=2048)
def glob_tokens(pattern: str) -> tuple[GlobToken, ...]:
    """``pattern`` read as tokens; :class:`GlobError` when it cannot be read."""
    out: list[GlobToken] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith(DOUBLE_STAR_SLASH, i):
            out.append(DOUBLE_STAR_SLASH)
            i += 3
        elif pattern.startswith(DOUBLE_STAR, i):
            out.append(DOUBLE_STAR)
            i += 2
        elif pattern[i] == "[":
            char_class, i = _class(pattern, i)
            out.append(char_class)
        else:
            out.append(pattern[i])  # "*", "?" or a literal character
            i += 1
    return tuple(out)


def glob_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be read (``None``: it can)."""
    try:
        glob_tokens(pattern)
    except GlobError as exc:
        return exc.message
    return None


def check_glob(pattern: str) -> str:
    """``pattern``, once it can be read; else :class:`GlobError`."""
    glob_tokens(pattern)
    return pattern


def _regex_of(tokens: tuple[GlobToken, ...], path: bool) -> str:
    out: list[str] = []
    for token in tokens:
        if isinstance(token, CharClass):
            out.append(token.regex(path=path))
        elif token == DOUBLE_STAR_SLASH:
            out.append("(?:.*/)?")
        elif token == DOUBLE_STAR:
            out.append(".*")
        elif token == STAR:
            out.append("[^/]*" if path else ".*")
        elif token == ONE:
            out.append("[^/]" if path else ".")
        else:
            out.append(re.escape(token))
    return "".join(out)


@lru_cache(maxsize=2048)
def glob_regex(pattern: str, *, path: bool) -> re.Pattern[str]:
    """The anchored regex of ``pattern`` (see the module docstring): ``path`` for a
    workspace path (``*``, ``?`` and classes stop at ``/``), else commands, agent names
    and URLs, where a trailing `` *`` also matches the text without it."""
    tokens = glob_tokens(pattern)
    body = _regex_of(tokens, path)
    if not path and tokens[-2:] == (" ", STAR):
        body = f"{body}|{_regex_of(tokens[:-2], path)}"
    return re.compile(rf"\A(?:{body})\Z", re.DOTALL)
