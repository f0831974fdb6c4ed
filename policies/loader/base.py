"""What every format adapter shares: the source, the options, typed field reading.

An adapter reads one :class:`Source` and returns contracts. It reports
problems through :class:`Context`: ``ctx.warn`` for a caveat, ``ctx.error``
for a problem that rejects the definition (collected, so one file reports all
of its errors at once), and ``raise DefinitionRejected`` when it cannot go on.
:class:`Reader` gives typed access to header fields and remembers which were
used, so the fields left over can be judged by the format's own rules
(:class:`FieldRules`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from policies.contract import AgentFormat, Scope
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity

__all__ = [
    "NAME_RE",
    "Context",
    "FieldRules",
    "Options",
    "Reader",
    "Source",
    "check_name",
    "json_ready",
    "normalize_name",
    "tolerant_name",
]

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
RESERVED_NAMES = frozenset({"assistant"})


@dataclass(frozen=True)
class Source:
    """One definition file, already read and decoded."""

    path: Path
    #: Path relative to the root or personal directory, used in diagnostics.
    display: str
    scope: Scope
    format: AgentFormat
    text: str
    #: Identity taken from the file's location (basename, directory, or
    #: OpenCode's relative path), used when the format says so.
    location_name: str
    #: Facts another file declared about this one (Codex ``config.toml``).
    declared: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    """Loader options that come from the user, never from definition files."""

    strict: bool = False
    custom_tools: frozenset[str] = frozenset()
    #: MCP servers installed in the user config, and the custom tools one ``provides``:
    #: a granted tool none of them runs is a warning (it is never offered).
    mcp_servers: frozenset[str] = frozenset()
    provided_tools: frozenset[str] = frozenset()
    #: Whether the user granted any host (``[network] allow``, ``--allow-net``): else a
    #: granted ``web_fetch`` is a warning (it is never offered).
    network: bool = False
    #: Explicit foreign-name -> native/custom tool names (``agent_imports`` entry).
    tool_map: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Explicit model override for this import (``agent_imports`` entry).
    model: str | None = None
    provider: str | None = None
    #: Trusted user config: foreign model names per format -> exact model ids.
    model_map: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: The shipped aliases the user's providers can serve (folded harness model name ->
    #: route, :mod:`policies.model_aliases`); ``model_map`` wins over them.
    default_models: Mapping[str, str] = field(default_factory=dict)
    #: The provider connections of the user config (``None``: not known, nothing is
    #: checked): an ngn ``provider`` must name one.
    providers: frozenset[str] | None = None
    #: The ``[roles]`` of the user config (``None``: not known): a pi ``@role`` defined
    #: neither there nor in pi's settings is a warning (a run refuses it).
    roles: frozenset[str] | None = None
    #: pi's ``subagent.roles`` from ``~/.pi/agent/settings.json`` (read by discovery).
    pi_roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Context:
    """Collects the diagnostics of one source."""

    def __init__(self, source: Source, options: Options) -> None:
        self.source = source
        self.options = options
        self.diagnostics: list[Diagnostic] = []
        #: Set by adapters of a file that maps names to definitions (``opencode.json``,
        #: ``zuno.json``): each definition stands alone, so one rejected entry does not
        #: take its siblings down (as it does not in the harness).
        self.partial = False

    def _add(
        self, severity: Severity, field: str, reason: str, line: int | None, hint: str | None,
        code: str,
    ) -> None:
        self.diagnostics.append(
            Diagnostic(
                file=self.source.display, line=line or 1, field=field, severity=severity,
                reason=reason, hint=hint, code=code,
            )
        )

    def warn(self, field: str, reason: str, *, line: int | None = None, hint: str | None = None,
             code: str = "warning") -> None:
        """A caveat; ``--strict`` turns it into a rejection."""
        self._add(Severity.WARNING, field, reason, line, hint, code)

    def info(self, field: str, reason: str, *, line: int | None = None, hint: str | None = None,
             code: str = "info") -> None:
        """Something the loader did on purpose."""
        self._add(Severity.INFO, field, reason, line, hint, code)

    def error(self, field: str, reason: str, *, line: int | None = None, hint: str | None = None,
              code: str = "definition") -> None:
        """A problem that rejects the definition; reading goes on to find the rest."""
        self._add(Severity.ERROR, field, reason, line, hint, code)

    @property
    def failed(self) -> bool:
        """Whether an error was recorded."""
        return any(d.severity is Severity.ERROR for d in self.diagnostics)


def json_ready(value: Any) -> JsonValue:
    """``value`` as JSON data (YAML gives only JSON types with the strict reader)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    return str(value)


@dataclass(frozen=True)
class FieldRules:
    """How a format treats header fields its adapter does not read itself.

    ``cosmetic``: documented, no authority; kept in ``extras`` silently.
    ``unsupported``: documented but changes what the agent may do in a way
    corral cannot enforce; rejects, with the reason given.
    ``near_miss``: a misspelling of a restricting key; rejects with "did you
    mean". Any other key is undocumented: a warning, kept in ``extras``
    (``reject_unknown`` makes it an error, as the ngn native format demands).
    """

    cosmetic: frozenset[str] = frozenset()
    unsupported: Mapping[str, str] = field(default_factory=dict)
    near_miss: Mapping[str, str] = field(default_factory=dict)
    restricting: frozenset[str] = frozenset()
    reject_unknown: bool = False


def _fold(key: str) -> str:
    return re.sub(r"[-_ ]", "", key).casefold()


class Reader:
    """Typed, consumption-tracking access to one definition's fields."""

    def __init__(
        self, ctx: Context, fields: Mapping[str, Any], lines: Mapping[str, int] | None = None,
        *, raw_keys: Iterable[str] = (), base_line: int = 1, where: str = "",
    ) -> None:
        self.ctx = ctx
        self.fields = dict(fields)
        self.lines = dict(lines or {})
        self.raw_keys = set(raw_keys)
        self.base_line = base_line
        self.where = where
        self.used: set[str] = set()
        self.closed = False

    def name_of(self, key: str) -> str:
        """The field name as diagnostics show it (nested readers prefix theirs)."""
        return f"{self.where}{key}"

    def line(self, key: str) -> int:
        """The line a field starts on (the definition's first line when unknown)."""
        return self.lines.get(key, self.base_line)

    def has(self, key: str) -> bool:
        """Whether the field is present (even if null)."""
        return key in self.fields

    def take(self, key: str) -> Any:
        """The raw value (``None`` when absent), marking the field used."""
        if self.closed:
            raise RuntimeError(f"field {key!r} read after leftovers() judged the rest")
        self.used.add(key)
        return self.fields.get(key)

    def reject(self, key: str, reason: str, hint: str | None = None) -> DefinitionRejected:
        """An exception to raise for a field that stops the definition."""
        return DefinitionRejected(self.name_of(key), reason, line=self.line(key), hint=hint)

    def error(self, key: str, reason: str, hint: str | None = None) -> None:
        """Record an error on a field and keep reading."""
        self.ctx.error(self.name_of(key), reason, line=self.line(key), hint=hint)

    def warn(self, key: str, reason: str, hint: str | None = None, code: str = "warning") -> None:
        """Record a warning on a field."""
        self.ctx.warn(self.name_of(key), reason, line=self.line(key), hint=hint, code=code)

    def string(self, key: str, *, required: bool = False, allow_empty: bool = False) -> str | None:
        """A string field; numbers are not silently turned into strings."""
        value = self.take(key)
        if value is None:
            if required:
                self.error(key, "is required" if key not in self.fields else "must not be empty")
            return None
        if not isinstance(value, str):
            self.error(key, f"must be a string, got {_kind(value)}")
            return None
        if not value.strip() and not allow_empty:
            if required:
                self.error(key, "must not be empty")
            return None
        return value.strip()

    def boolean(self, key: str) -> bool | None:
        """A boolean field (``true``/``false``; YAML 1.1 ``yes``/``no`` are not booleans)."""
        value = self.take(key)
        if value is None or isinstance(value, bool):
            return value
        if key in self.raw_keys and isinstance(value, str) and value.lower() in {"true", "false"}:
            return value.lower() == "true"
        self.error(key, f"must be true or false, got {_kind(value)} {value!r}")
        return None

    def integer(self, key: str, *, minimum: int | None = None) -> int | None:
        """An integer field (booleans are not integers)."""
        value = self.take(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(key, f"must be an integer, got {_kind(value)} {value!r}")
            return None
        if minimum is not None and value < minimum:
            self.error(key, f"must be at least {minimum}, got {value}")
            return None
        return value

    def number(self, key: str, *, low: float | None = None,
               high: float | None = None) -> float | None:
        """A number field within ``[low, high]``."""
        value = self.take(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(key, f"must be a number, got {_kind(value)} {value!r}")
            return None
        if (low is not None and value < low) or (high is not None and value > high):
            self.error(key, f"must be between {low} and {high}, got {value}")
            return None
        return float(value)

    def names(self, key: str, *, comma: bool = True) -> list[str] | None:
        """A list of names: a YAML list, or (``comma``) a comma-separated string.

        Entries are trimmed and deduplicated in order; empty entries are dropped.
        ``None`` when absent, ``[]`` when explicitly empty.
        """
        value = self.take(key)
        if value is None:
            return None
        if isinstance(value, str):
            if not comma:
                self.error(key, "must be a list, got a string",
                           hint=f"write {key}: [a, b] instead of a comma-separated string")
                return None
            items: list[Any] = value.split(",")
        elif isinstance(value, list):
            items = value
        else:
            self.error(key, f"must be a list of names, got {_kind(value)}")
            return None
        out: list[str] = []
        for item in items:
            if not isinstance(item, str):
                self.error(key, f"entries must be strings, got {_kind(item)} {item!r}")
                continue
            text = item.strip()
            if text and text not in out:
                out.append(text)
        return out

    def mapping(self, key: str) -> dict[str, Any] | None:
        """A mapping field."""
        value = self.take(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.error(key, f"must be a mapping, got {_kind(value)}")
            return None
        return value

    def choice(self, key: str, choices: Iterable[str]) -> str | None:
        """A string that must be one of ``choices`` (exact spelling)."""
        options = list(choices)
        value = self.take(key)
        if value is None:
            return None
        if not isinstance(value, str) or value.strip() not in options:
            self.error(key, f"must be one of {', '.join(options)}; got {value!r}")
            return None
        return value.strip()

    def leftovers(self, rules: FieldRules) -> dict[str, JsonValue]:
        """Judge every unread field by ``rules``; return what goes to ``extras``."""
        self.closed = True
        extras: dict[str, JsonValue] = {}
        restricting = {_fold(key): key for key in rules.restricting}
        for key, value in self.fields.items():
            if key in self.used:
                continue
            if key in rules.unsupported:
                self.error(key, rules.unsupported[key])
            elif key in rules.near_miss:
                self.error(
                    key, f"is not a field of this format; did you mean {rules.near_miss[key]!r}?",
                    hint="a misspelled restriction would silently grant more than intended",
                )
            elif _fold(key) in restricting and restricting[_fold(key)] != key:
                self.error(
                    key,
                    f"is not a field of this format; did you mean {restricting[_fold(key)]!r}?",
                    hint="a misspelled restriction would silently grant more than intended",
                )
            elif key in rules.cosmetic:
                extras[key] = json_ready(value)
            elif rules.reject_unknown:
                self.error(key, "unsupported field", hint="remove it; this format accepts only its "
                           "documented fields")
            else:
                self.warn(key, "undocumented field; kept in extras, not enforced",
                          code="unknown_field")
                extras[key] = json_ready(value)
        return extras


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def check_name(reader: Reader, key: str, name: str, *, segments: bool = False) -> bool:
    """Apply the name rules; record an error and return False when broken.

    Letters, digits, ``_`` and ``-``, at most 128 characters, ASCII only (a
    homoglyph in a delegation target must never match), ``assistant``
    reserved. ``segments`` allows ``/``-separated segments (OpenCode ids).
    """
    parts = name.split("/") if segments else [name]
    if not all(NAME_RE.fullmatch(part) for part in parts) or len(name) > 128:
        reader.error(
            key,
            f"invalid agent name {name!r}: use letters, digits, '_' or '-', at most 128 characters",
        )
        return False
    if name.casefold() in RESERVED_NAMES:
        reader.error(key, f"the name {name!r} is reserved")
        return False
    return True


#: Printable ASCII other than what an identifier may hold: what normalisation replaces.
_REPLACEABLE_RE = re.compile(r"[\x20-\x2c\x2e-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7e]+")


def normalize_name(name: str) -> str | None:
    """corral's stable identity for a name its harness tolerates but its identifier rules
    refuse, or ``None`` when there is none.

    The documented normalisation: lowercase, every run of spaces, dots and other
    ASCII punctuation becomes one ``-``, leading and trailing ``-`` are dropped
    (``Frontend Developer`` -> ``frontend-developer``, ``Node.js Pro`` ->
    ``node-js-pro``). A name that holds anything outside printable ASCII (a
    control character, a letter of another script, a homoglyph) has no
    normalisation: guessing an ASCII spelling of it could make two different
    names meet, or a homoglyph match a delegation target.
    """
    if not name or any(not (" " <= char <= "~") for char in name):
        return None
    normalized = re.sub(r"-{2,}", "-", _REPLACEABLE_RE.sub("-", name)).strip("-").lower()
    if not NAME_RE.fullmatch(normalized) or normalized in RESERVED_NAMES:
        return None
    return normalized


def tolerant_name(reader: Reader, key: str, name: str, *, stem: str | None = None,
                  segments: bool = False) -> str:
    """The identity of a definition whose harness tolerates names corral's rules refuse.

    A valid name is kept as written. Otherwise the name is normalised
    (:func:`normalize_name`; each ``/`` segment on its own when ``segments``),
    else the file's ``stem`` is (when the name came from a header field), with a
    warning naming the original, which stays the display name; when neither
    gives an identifier the definition is rejected as :func:`check_name` does.
    """
    parts = name.split("/") if segments else [name]
    if all(NAME_RE.fullmatch(part) for part in parts) and len(name) <= 128 and \
            name.casefold() not in RESERVED_NAMES:
        return name
    candidates: list[tuple[str, str]] = []
    normalized = [normalize_name(part) for part in parts]
    if all(normalized):
        candidates.append(("/".join(p for p in normalized if p), "normalised"))
    if stem is not None and stem != name:
        stem_parts = stem.split("/") if segments else [stem]
        from_stem = [part if NAME_RE.fullmatch(part) else normalize_name(part)
                     for part in stem_parts]
        if all(from_stem):
            candidates.append(("/".join(p for p in from_stem if p), "from its file name"))
    for identity, how in candidates:
        if len(identity) <= 128 and identity.casefold() not in RESERVED_NAMES:
            reader.warn(
                key, f"{name!r} is not an identifier corral accepts (letters, digits, '_', "
                f"'-'): the agent's identity is {identity!r} ({how}), and {name!r} stays its "
                "display name",
                hint="delegate to it and run it by the identifier; rename it in the file to "
                "silence this warning", code="name_normalized")
            return identity
    check_name(reader, key, name, segments=segments)
    return name
