"""Per-tool permission rules: allow / ask / deny, with argument patterns.

A :class:`PermissionPolicy` is one *layer*: a mode and an ordered list of
rules. Within a layer the last matching rule wins (the OpenCode and zuno
semantics, so ``{"*": deny, "git *": allow}`` reads as "only git"). Across
layers the strictest decision wins, and a ``deny`` from any layer is terminal:
no mode and no other layer can lift it. ``allow_all`` turns its own layer's
``ask`` into ``allow``; it never lifts a deny, and it never touches another
layer's ``ask``.

Argument patterns are globs over the call's *subject*: the command for
``shell``, the workspace-relative path for file tools, the agent name for
``delegate``, the URL for ``web_fetch``, in the one dialect the file tools read
too (:mod:`policies.globs`): for a path ``**`` crosses directories, ``*``, ``?``
and ``[...]`` classes do not. A trailing `` *`` also matches the bare command
(``git status *`` matches ``git status``). A pattern that dialect cannot read
(an unterminated ``[``) is refused when the rule is made, never inert.

Shell commands are read by a strict shell parser (:mod:`policies.shellsyntax`,
as bash and as sh) in :mod:`policies.shellwords`: a deny or ask pattern
applies when it matches *any* reading of the line (each simple command,
unwrapped, nested ``sh -c`` text, substitutions, heredocs fed to shells; the
whole line split at every operator when a reading fails), where a word the
parser cannot read with certainty (``git $x``) may be anything; every deny and
ask pattern applies to a line that runs a command whose name or deciding
words are not literals (``$x f``, ``r$()m``, ``env $x``, ``sh -c "$x"``); an
allow pattern allows it only when it matches *every* simple command of both
readings, literally; and a line that hides or changes what runs
(substitutions, ``eval``, assignments, functions, file redirections) or that
the parser cannot read with certainty is never allowed by a pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, field_validator

from policies.globs import (
    DOUBLE_STAR,
    DOUBLE_STAR_SLASH,
    ONE,
    STAR,
    CharClass,
    check_glob,
    glob_regex,
    glob_tokens,
)
from policies.tools import check_tool_name, is_side_effecting, tool_matches

__all__ = [
    "PATH_TOOLS",
    "Action",
    "PermissionMode",
    "PermissionPolicy",
    "PermissionRule",
    "combine",
    "decide_layers",
    "denied_programs",
    "glob_matches",
    "only_patterns_allow",
    "shell_segments",
]


class Action(StrEnum):
    """What a rule does with a matching call."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class PermissionMode(StrEnum):
    """How a layer admits calls no rule resolves.

    ``strict`` denies unresolved side-effecting calls, ``standard`` allows them
    (the sandbox contains their effects), ``allow_all`` also turns the layer's
    ``ask`` rules into ``allow``. Ordered from most to least restrictive.
    """

    STRICT = "strict"
    STANDARD = "standard"
    ALLOW_ALL = "allow_all"


MODE_ORDER = {PermissionMode.STRICT: 0, PermissionMode.STANDARD: 1, PermissionMode.ALLOW_ALL: 2}
_SEVERITY = {Action.ALLOW: 0, Action.ASK: 2, Action.DENY: 3}


class PermissionRule(BaseModel):
    """One rule: a tool selector, an optional argument glob, and an action."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    pattern: str | None = None
    action: Action

    @field_validator("tool")
    @classmethod
    def _check_tool(cls, value: str) -> str:
        if value == "*":
            return value
        return check_tool_name(value, allow_pattern=True)

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, value: str | None) -> str | None:
        return None if value is None else check_glob(value)

    def selects(self, tool: str) -> bool:
        """Whether this rule is about ``tool`` at all."""
        return self.tool == "*" or tool_matches(self.tool, tool)


class PermissionPolicy(BaseModel):
    """One layer of permissions: a mode plus ordered rules (last match wins)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: PermissionMode = PermissionMode.STANDARD
    rules: tuple[PermissionRule, ...] = ()

    def decide(self, tool: str, subject: str | None = None) -> Action:
        """This layer's decision for a call of ``tool`` on ``subject``."""
        found = self._resolve(tool, subject)
        if found is None:
            if self.mode is PermissionMode.STRICT and is_side_effecting(tool):
                return Action.DENY
            return Action.ALLOW
        if found is Action.ASK and self.mode is PermissionMode.ALLOW_ALL:
            return Action.ALLOW
        return found

    def may_ask(self, tool: str) -> bool:
        """Whether some call of ``tool`` may end at an ``ask`` rule of this layer: one that
        can be the last match (no pattern-free rule after it), unless ``allow_all`` turns
        this layer's asks into allows."""
        if self.mode is PermissionMode.ALLOW_ALL:
            return False
        rules = [rule for rule in self.rules if rule.selects(tool)]
        free = [i for i, rule in enumerate(rules) if rule.pattern in {None, "*", "**"}]
        return any(rule.action is Action.ASK for rule in rules[free[-1] if free else 0:])

    def denies_outright(self, tool: str) -> bool:
        """Whether every call of ``tool`` is denied whatever its arguments.

        Used to hide a tool from the model: a tool denied by a pattern-free rule
        that no later rule for the same tool can override.
        """
        decision: Action | None = None
        for rule in self.rules:
            if not rule.selects(tool):
                continue
            if rule.pattern is None or rule.pattern in {"*", "**"}:
                decision = rule.action
            elif decision is Action.DENY:
                return False  # a later pattern rule may re-allow some calls
        return decision is Action.DENY

    def _resolve(self, tool: str, subject: str | None) -> Action | None:
        rules = [rule for rule in self.rules if rule.selects(tool)]
        if not rules:
            return None
        if tool == "shell" and subject is not None:
            return _decide_shell(rules, subject)
        return _last_match(rules, subject, path=tool in PATH_TOOLS)


def _last_match(
    rules: Sequence[PermissionRule], subject: str | None, *, path: bool = False
) -> Action | None:
    decision: Action | None = None
    for rule in rules:
        if rule.pattern is None or (
            subject is not None and glob_matches(rule.pattern, subject, path=path)
        ):
            decision = rule.action
    return decision


def _decide_shell(rules: Sequence[PermissionRule], command: str) -> Action | None:
    """A shell call: deny and ask patterns on any reading, allow on every literal command.

    See :mod:`policies.shellwords`. A deny or ask *pattern* that matches any
    candidate reading wins; pattern-free rules (and ``*``) decide as for any
    tool. Allow patterns must match every literal simple command of a line
    read with certainty; a line that is not (a syntax error, a substitution,
    a write redirection, ...) is decided by the pattern-free rules alone.
    """
    from policies import shellwords  # noqa: PLC0415 - the parser loads on first use (CLI start)

    reading = shellwords.read_command_line(command)
    wilds = shellwords.WILD + shellwords.QUOTED_WILD
    live = _live_restrictive(rules)
    restrictive: set[Action | None] = set()
    for subject in reading.candidates:
        if any(char in wilds for char in subject):  # some value of it may match
            restrictive |= {rule.action for rule in live
                            if rule.pattern is not None and _may_match(rule.pattern, subject,
                                                                       wilds)}
        else:
            restrictive.add(_restrictive(rules, subject))
    if reading.uncertain or not reading.exhaustive:  # it may run anything: every pattern
        restrictive |= {rule.action for rule in live}
    if Action.DENY in restrictive:
        return Action.DENY
    if reading.certain:
        literal = [_last_match(rules, text) for text in reading.commands] or [
            _last_match(rules, command.strip())
        ]
    else:
        literal = [_last_match([r for r in rules if not _has_pattern(r)], command.strip())]
    if Action.DENY in literal:
        return Action.DENY
    if Action.ASK in literal or Action.ASK in restrictive:
        return Action.ASK
    if None in literal:
        return None
    return Action.ALLOW


def shell_segments(command: str) -> tuple[list[str], bool]:
    """The top-level simple commands of ``command``, literally, and whether it is opaque
    (no pattern may allow it); see :func:`policies.shellwords.shell_segments`."""
    from policies import shellwords  # noqa: PLC0415 - the parser loads on first use (CLI start)

    return shellwords.shell_segments(command)


def _has_pattern(rule: PermissionRule) -> bool:
    return rule.pattern is not None and rule.pattern not in {"*", "**"}


def _live_restrictive(rules: Sequence[PermissionRule]) -> list[PermissionRule]:
    """The deny and ask pattern rules that may be a subject's last match: those after
    the last pattern-free rule (which matches every subject). Never an allow: an allow
    pattern never covers a value the parser could not read."""
    last_free = max((i for i, rule in enumerate(rules) if not _has_pattern(rule)), default=-1)
    return [rule for rule in rules[last_free + 1:] if rule.action is not Action.ALLOW]


_STAR, _ONE = "**", "??"  # tokens of _may_match; a literal character is a 1-character token
_Token = str | CharClass


def _may_match(pattern: str, subject: str, wilds: str) -> bool:
    """Whether some value of ``subject``'s wildcards (any text) makes the glob ``pattern``
    match it, as :func:`glob_matches` does for commands (broadly: ``**/`` is ``*``)."""
    text = tuple(_STAR if char in wilds else char for char in subject)
    forms = [pattern, pattern[:-2]] if pattern.endswith(" *") else [pattern]
    return any(_intersects(_pattern_tokens(form), text) for form in forms)


_WILD = {STAR: _STAR, DOUBLE_STAR: _STAR, DOUBLE_STAR_SLASH: _STAR, ONE: _ONE}


@lru_cache(maxsize=1024)
def _pattern_tokens(pattern: str) -> tuple[_Token, ...]:
    """The glob's tokens (:func:`policies.globs.glob_tokens`) as :func:`_intersects` reads
    them: every star is ``_STAR``, ``?`` is ``_ONE``, a class stays one class."""
    return tuple(token if isinstance(token, CharClass) else _WILD.get(token, token)
                 for token in glob_tokens(pattern))


def _meet(a: _Token, b: _Token) -> bool:
    """Whether one character both tokens accept exists (neither is ``_STAR``)."""
    if isinstance(a, CharClass):  # two classes: broadly, a "may" errs towards a match
        return isinstance(b, CharClass) or b == _ONE or a.matches(b)
    if isinstance(b, CharClass):
        return a == _ONE or b.matches(a)
    return a == b or _ONE in (a, b)


def _intersects(left: tuple[_Token, ...], right: tuple[_Token, ...]) -> bool:
    """Whether some text matches both token sequences: a search over pairs of positions,
    each step reading one character both sides accept (``_STAR`` may also be skipped, and
    a class is one character, which a wildcard always meets)."""
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        i, j = state
        a = left[i] if i < len(left) else None
        b = right[j] if j < len(right) else None
        if a is None and b is None:
            return True
        if a == _STAR:
            todo.append((i + 1, j))
        if b == _STAR:
            todo.append((i, j + 1))
        if a is None or b is None or (a == _STAR and b == _STAR):
            continue
        if _STAR not in (a, b) and not _meet(a, b):  # no character both accept
            continue
        todo.append((i if a == _STAR else i + 1, j if b == _STAR else j + 1))
    return False


def _restrictive(rules: Sequence[PermissionRule], subject: str) -> Action | None:
    """The action of the last rule matching ``subject`` when it is a deny/ask pattern."""
    found: PermissionRule | None = None
    for rule in rules:
        if rule.pattern is None or glob_matches(rule.pattern, subject):
            found = rule
    if found is None or found.action is Action.ALLOW or not _has_pattern(found):
        return None
    return found.action


#: Tools whose subject is a workspace path: there ``*`` stops at ``/``.
PATH_TOOLS = frozenset(
    {"read_file", "list_files", "find", "search", "edit", "write_file", "apply_patch"}
)


def glob_matches(pattern: str, subject: str, *, path: bool = False) -> bool:
    """Whether ``subject`` matches the glob ``pattern`` (:mod:`policies.globs`).

    With ``path`` (file tools) ``*``, ``?`` and classes stop at ``/`` and ``**`` crosses
    directories; for commands, agent names and URLs ``*`` matches anything, and a
    trailing `` *`` also matches the text without it.
    """
    return glob_regex(pattern, path=path).match(subject) is not None


def only_patterns_allow(layers: Sequence[PermissionPolicy], tool: str) -> bool:
    """Whether a call of ``tool`` runs only because an allow pattern matched it: some
    layer's last pattern-free rule for it denies (``tools: Bash(git status:*)``)."""
    for layer in layers:
        free = [rule for rule in layer.rules if rule.selects(tool) and not _has_pattern(rule)]
        if free and free[-1].action is Action.DENY:
            return True
    return False


#: A program name a deny pattern may remove from a sandbox (a file name in ``PATH``).
_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")


def denied_programs(layers: Sequence[PermissionPolicy]) -> dict[str, str]:
    """Programs some layer denies whole, each with the pattern that denies it.

    ``rm *`` (Claude's ``Bash(rm:*)``) and a bare ``curl`` deny a program: the sandbox then
    makes it unreachable where it runs (:mod:`sandbox.denials`), so no spelling the shell
    reader misses reaches it. A bare name is read as the whole program, more strictly than
    the line ``curl`` alone: a deny only narrows. A deny is whole only when no later rule of
    its layer (last match wins) may decide a call of that program otherwise: a pattern-free
    rule, or a pattern whose first word may be the name (``rm -i *`` allowed after ``rm *``
    denied leaves ``rm`` to the reader)."""
    found: dict[str, str] = {}
    for layer in layers:
        rules = [rule for rule in layer.rules if rule.selects("shell")]
        for i, rule in enumerate(rules):
            if rule.action is not Action.DENY or rule.pattern is None:
                continue
            name = rule.pattern.removesuffix(" *")
            if not _PROGRAM.fullmatch(name) or name in found:
                continue
            later = rules[i + 1:]
            if any(not _has_pattern(r) or _may_match(r.pattern or "", name + " " + _ANY, _ANY)
                   or _may_match(r.pattern or "", name, _ANY) for r in later):
                continue
            found[name] = rule.pattern
    return found


_ANY = "\x00"  # a wildcard character for _may_match: what follows the name may be anything


def combine(actions: Iterable[Action]) -> Action:
    """The strictest of several layer decisions (deny > ask > allow)."""
    result = Action.ALLOW
    for action in actions:
        if _SEVERITY[action] > _SEVERITY[result]:
            result = action
    return result


def decide_layers(
    layers: Sequence[PermissionPolicy], tool: str, subject: str | None = None
) -> Action:
    """Decide a call against every layer: strictest wins, deny is terminal."""
    return combine(layer.decide(tool, subject) for layer in layers)
