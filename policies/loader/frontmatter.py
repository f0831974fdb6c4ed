"""Markdown definitions: split the YAML header from the body, strictly first.

Rules, decided once for every Markdown format (``README`` documents them):

* The header opens with a ``---`` line as the file's first line and closes at
  the next line made only of three or more dashes (real files close with a
  56-dash line). Blank lines inside the header are fine. A file that does not
  start with ``---`` has no header (an indented ``    ---`` is not a header).
* The header is at most 32 KiB.
* Strict YAML first (:mod:`policies.loader.yamlstrict`). When that fails with
  a plain syntax error and the format allows it, a lenient line reader takes
  over and the result carries a warning naming the YAML error: many real Claude
  files have unquoted multi-line descriptions with ``user: "..."`` lines in
  them, which Claude Code itself tolerates. Duplicate keys, aliases and tags
  are never tolerated, by either reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from policies.loader.diagnostics import DefinitionRejected
from policies.loader.files import MAX_HEADER_BYTES
from policies.loader.yamlstrict import YamlError, load_mapping, load_value

__all__ = ["Frontmatter", "split_frontmatter"]

_OPEN_RE = re.compile(r"^---[ \t]*$")
_CLOSE_RE = re.compile(r"^-{3,}[ \t]*$")
_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*):(?:[ \t]+|$)")
#: Labels that start lines of example dialogue inside descriptions; never fields.
_PROSE_LABELS = frozenset(
    {"user", "assistant", "human", "system", "ai", "bot", "context", "example", "examples",
     "commentary", "note", "response", "output", "input", "question", "answer", "result"}
)


@dataclass
class Frontmatter:
    """A parsed Markdown definition."""

    has_header: bool
    fields: dict[str, Any]
    lines: dict[str, int]
    body: str
    body_line: int
    #: The YAML error that made the lenient reader take over, if it did.
    lenient_reason: str | None = None
    lenient_keys: set[str] = field(default_factory=set)


def split_frontmatter(text: str, *, lenient: bool,
                      known_keys: frozenset[str] = frozenset()) -> Frontmatter:
    """Parse ``text`` (already LF-normalized) into header fields and body.

    ``known_keys`` are the format's field names: the lenient reader always
    treats ``key:`` lines for them as new fields.
    """
    lines = text.split("\n")
    if not lines or not _OPEN_RE.match(lines[0]):
        return Frontmatter(False, {}, {}, text, 1)
    close = next((i for i in range(1, len(lines)) if _CLOSE_RE.match(lines[i])), None)
    if close is None:
        raise DefinitionRejected(
            "frontmatter",
            "the YAML header opened on line 1 is never closed",
            line=1,
            hint="end the header with a line of three dashes (---)",
            code="frontmatter",
        )
    header = "\n".join(lines[1:close])
    if len(header.encode()) > MAX_HEADER_BYTES:
        raise DefinitionRejected(
            "frontmatter",
            f"the YAML header is larger than {MAX_HEADER_BYTES} bytes",
            line=1,
            code="header_too_large",
        )
    body = "\n".join(lines[close + 1 :])
    body_line = close + 2
    try:
        fields, key_lines = load_mapping(header)
    except YamlError as exc:
        line = exc.line + 1 if exc.line is not None else 1  # header starts on file line 2
        if not exc.syntax or not lenient:
            raise DefinitionRejected(
                "frontmatter", f"invalid YAML: {exc.message}", line=line, code="yaml"
            ) from exc
        fields, key_lines, lenient_keys = _lenient(lines[1:close], known_keys)
        return Frontmatter(
            True, fields, key_lines, body, body_line,
            lenient_reason=f"{exc.message} (line {line})", lenient_keys=lenient_keys,
        )
    return Frontmatter(True, fields, {k: v + 1 for k, v in key_lines.items()}, body, body_line)


def _starts_field(line: str, known_keys: frozenset[str]) -> str | None:
    match = _KEY_RE.match(line)
    if not match:
        return None
    key = match.group(1)
    if key in known_keys:
        return key
    if key[0].isupper() or key.casefold() in _PROSE_LABELS:
        return None
    return key


def _lenient(
    header_lines: list[str], known_keys: frozenset[str]
) -> tuple[dict[str, Any], dict[str, int], set[str]]:
    """Line reader: ``key: rest`` starts a field, any other line continues it.

    Each field's text is then parsed alone with the strict reader; a field
    that is still not valid YAML keeps its raw text (with literal ``\\n``
    escapes turned into newlines) and is reported in the returned key set.
    """
    chunks: list[tuple[str, int, list[str]]] = []
    for number, line in enumerate(header_lines, start=2):
        key = _starts_field(line, known_keys)
        if key is not None:
            chunks.append((key, number, [line]))
        elif chunks:
            chunks[-1][2].append(line)
        elif line.strip():
            raise DefinitionRejected(
                "frontmatter", "the header does not start with a `key: value` line", line=number,
                code="yaml",
            )
    fields: dict[str, Any] = {}
    key_lines: dict[str, int] = {}
    raw_keys: set[str] = set()
    for key, number, chunk in chunks:
        if key in fields:
            raise DefinitionRejected(
                key, f"duplicate key {key!r} (first at line {key_lines[key]})", line=number,
                code="yaml",
            )
        key_lines[key] = number
        try:
            value = load_value("\n".join(chunk))
        except YamlError as exc:
            if not exc.syntax:
                raise DefinitionRejected(key, f"invalid YAML: {exc.message}", line=number,
                                         code="yaml") from exc
            value = None
        if isinstance(value, dict) and list(value) == [key]:
            fields[key] = value[key]
        else:
            # Not valid YAML alone, or continuation lines that YAML would read as
            # other keys: keep the field's raw text rather than lose lines.
            first = chunk[0].split(":", 1)[1].strip()
            rest = [line.rstrip() for line in chunk[1:]]
            raw = "\n".join([first, *rest]).strip()
            fields[key] = raw.replace("\\n", "\n")
            raw_keys.add(key)
    return fields, key_lines, raw_keys
