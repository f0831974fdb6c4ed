"""Reading a shell command line well enough to apply command patterns to it.

Command patterns (``git *`` allowed, ``rm *`` denied) are a policy
convenience, not an OS sandbox: the sandbox backends are what confine a
command. Within that limit the reading is deliberately asymmetric:

* an **allow** pattern must match *every* simple command of the line, read
  literally (a wrapper such as ``sudo git`` is not ``git``), and a line that
  hides what it runs (``$(...)``, backticks, process substitution, ``${...}``,
  ``eval``, ``sh -c``) is never allowed by a pattern;
* a **deny** pattern denies the line when it matches *any* candidate: each
  simple command, with grouping syntax and shell keywords stripped (``(rm x)``,
  ``{ rm x; }``, ``then rm x``), with wrappers stripped (``sudo``, ``env
  A=b``, ``nohup``, ``command``, ``exec``, ``timeout 5``, ...), with the
  command word reduced to its basename (``/bin/rm``), and recursively the
  text of ``sh -c '...'``, ``eval '...'`` and substitutions.

A determined writer can still phrase a command no pattern anticipates
(``find -delete``, an interpreter one-liner); deny patterns narrow, the
sandbox confines.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["deny_candidates", "shell_segments"]

_SPLIT_RE = re.compile(r"\|\||&&|[;&|\n()`]")
_OPAQUE_RE = re.compile(r"\$\(|`|<\(|>\(|\$\{|(?:^|[\s;&|(])(?:eval|source|\.)\s")
_NESTED_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}",
                       "fi", "done", "esac", "time", "coproc"})
_WRAPPERS = frozenset({"sudo", "doas", "env", "nohup", "exec", "command", "builtin", "nice",
                       "ionice", "timeout", "stdbuf", "setsid", "xargs", "unbuffer", "chroot"})
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_segments(command: str) -> tuple[list[str], bool]:
    """Split a command line into simple commands; report whether it is opaque.

    Separators (``;``, ``&&``, ``||``, ``|``, ``&``, newlines, parentheses,
    backticks) inside quotes do not split. Leading shell keywords and grouping
    words are dropped from each segment. ``opaque`` is true when the text
    contains substitution or ``eval``/``source``, whose effect cannot be read
    off the text.
    """
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        char = command[i]
        if quote:
            current.append(char)
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"' and i + 1 < len(command):
                current.append(command[i + 1])
                i += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "\\" and i + 1 < len(command):
            current.append(char + command[i + 1])
            i += 1
        else:
            match = _SPLIT_RE.match(command, i)
            if match:
                segments.append("".join(current))
                current = []
                i = match.end()
                continue
            current.append(char)
        i += 1
    segments.append("".join(current))
    cleaned = [_strip_keywords(" ".join(segment.split())) for segment in segments]
    return [segment for segment in cleaned if segment], bool(_OPAQUE_RE.search(command))


def _strip_keywords(segment: str) -> str:
    words = segment.split(" ")
    while words and words[0] in _KEYWORDS:
        words.pop(0)
    while words and words[-1] in _KEYWORDS:
        words.pop()
    return " ".join(words)


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        return segment.split()


def _unwrap(words: list[str]) -> list[str]:
    """Drop assignments and wrapper commands (with their options) in front."""
    while words:
        head = words[0]
        if _ASSIGNMENT_RE.match(head):
            words = words[1:]
        elif head.rsplit("/", 1)[-1] in _WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or _ASSIGNMENT_RE.match(words[0])
                             or words[0].replace(".", "").isdigit()):
                words = words[1:]
        else:
            break
    return words


def deny_candidates(command: str, *, depth: int = 0) -> list[str]:
    """Every reading of ``command`` a deny pattern is tried against (see module doc)."""
    segments, _ = shell_segments(command)
    out: list[str] = []
    for segment in segments:
        out.append(segment)
        words = _unwrap(_words(segment))
        if not words:
            continue
        base = words[0].rsplit("/", 1)[-1].lstrip("\\")
        plain = " ".join([base, *words[1:]])
        if plain not in out:
            out.append(plain)
        inner = _nested(base, words[1:])
        if inner is not None and depth < 4:
            out.extend(deny_candidates(inner, depth=depth + 1))
    return out


def _nested(base: str, args: list[str]) -> str | None:
    """The command text a nested shell or eval would run, if any."""
    if base == "eval" and args:
        return " ".join(args)
    if base in _NESTED_SHELLS:
        for index, arg in enumerate(args):
            if arg.startswith("-") and "c" in arg.lstrip("-") and index + 1 < len(args):
                return args[index + 1]
    return None
