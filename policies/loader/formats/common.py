"""Helpers the format adapters share: reading a Markdown source, building the contract."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from policies.contract import AgentContract, AgentFormat, Origin
from policies.loader.base import Context, Reader, Source
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.frontmatter import split_frontmatter
from policies.loader.toolnames import ToolSet, resolve_tools
from policies.permissions import PermissionRule
from policies.tools import why_unrunnable

__all__ = [
    "Adapter",
    "allowlist",
    "build",
    "denylist",
    "json_document",
    "key_line",
    "markdown",
    "warn_unrunnable",
]


class Adapter(Protocol):
    """One format: reads a source, returns its contracts (usually one)."""

    format: AgentFormat

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """Read ``source``; report through ``ctx``; raise DefinitionRejected to stop."""
        ...


def markdown(source: Source, ctx: Context, *, known: frozenset[str], lenient: bool,
             require_header: bool = True) -> tuple[Reader, str]:
    """Split a Markdown source; return a reader over its header and the body."""
    parsed = split_frontmatter(source.text, lenient=lenient, known_keys=known)
    if not parsed.has_header and require_header:
        stripped = source.text.lstrip("\n")
        indented = stripped.startswith((" ", "\t")) and stripped.strip().startswith("---")
        raise DefinitionRejected(
            "frontmatter",
            "no YAML header" + (" (an indented '---' does not open one)" if indented else ""),
            line=1,
            hint="start the file with a '---' line, then name and description, then '---'",
            code="no_frontmatter",
        )
    if parsed.lenient_reason:
        ctx.warn(
            "frontmatter",
            f"the header is not valid YAML ({parsed.lenient_reason}); read field by field with "
            "the lenient reader" + (
                f" (kept as raw text: {', '.join(sorted(parsed.lenient_keys))})"
                if parsed.lenient_keys else ""),
            line=1,
            hint="quote multi-line values or use a block scalar (description: |)",
            code="lenient_yaml",
        )
    reader = Reader(ctx, parsed.fields, parsed.lines, raw_keys=parsed.lenient_keys)
    return reader, parsed.body.strip()


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DefinitionRejected("file", f"duplicate JSON key {key!r}", code="json")
        out[key] = value
    return out


#: JSONC comments and trailing commas (strings first, so their contents are kept); compiled
#: by ``re``'s cache on the first ``.jsonc`` file, not when an adapter is imported.
_COMMENT = r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/'
_TRAILING_COMMA = r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])'


def json_document(text: str, *, jsonc: bool = False) -> Any:
    """Parse JSON strictly (duplicate keys rejected); ``jsonc`` allows comments and
    trailing commas, as ``opencode.jsonc`` does."""
    if jsonc:
        def keep_strings(match: re.Match[str]) -> str:
            token = match.group(0)
            if token.startswith('"'):
                return token
            return re.sub(r"[^\n]", " ", token)  # keep line numbers intact
        text = re.sub(_COMMENT, keep_strings, text, flags=re.DOTALL)
        text = re.sub(_TRAILING_COMMA, lambda m: m.group(0) if m.group(0).startswith('"') else "",
                      text, flags=re.DOTALL)
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates)
    except json.JSONDecodeError as exc:
        raise DefinitionRejected("file", f"invalid JSON: {exc.msg}", line=exc.lineno,
                                 code="json") from exc
    except RecursionError as exc:
        raise DefinitionRejected("file", "JSON nesting is too deep", code="json") from exc


def key_line(text: str, key: str, start: int = 0) -> int:
    """Best-effort line of ``"key":`` (JSON) or ``key =`` (TOML) in ``text``."""
    # [ \t], not \s: a match must start on the key's own line, not on a blank one above it.
    pattern = re.compile(
        rf'^[ \t]*(?:"{re.escape(key)}"\s*:|\[?[ \t]*{re.escape(key)}[ \t]*[=\]])',
        re.MULTILINE)
    match = pattern.search(text, start)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def allowlist(reader: Reader, key: str, names: Sequence[str] | None, fmt: AgentFormat,
              ) -> tuple[frozenset[str] | None, list[PermissionRule], frozenset[str] | None]:
    """Resolve an allowlist field: (tools or None for inherit, rules, delegates)."""
    if names is None:
        return None, [], None
    resolved: ToolSet = resolve_tools(reader, key, names, fmt)
    if resolved.everything:
        return None, [], None
    delegates = frozenset(resolved.delegates) if resolved.delegates is not None else None
    return frozenset(resolved.tools), resolved.rules, delegates


def denylist(reader: Reader, key: str, names: Sequence[str] | None, fmt: AgentFormat,
             ) -> tuple[frozenset[str], list[PermissionRule]]:
    """Resolve a deny-list field: (denied tools, deny rules for argument patterns)."""
    if not names:
        return frozenset(), []
    resolved = resolve_tools(reader, key, names, fmt, deny=True)
    if resolved.everything:
        reader.error(key, "'*' in a deny list would deny every tool; write tools: [] instead")
    return frozenset(resolved.tools), resolved.rules


def build(reader: Reader, source: Source, *, line: int | None = None,
          check: Callable[[], None] | None = None, **fields: Any) -> AgentContract:
    """Construct the contract, or raise when the definition had errors."""
    if check is not None:
        check()
    warn_unrunnable(reader, fields.get("tools"))
    if reader.ctx.failed:
        raise DefinitionRejected("definition", "rejected", code="rejected_after_errors")
    origin = Origin(format=source.format, file=str(source.path), source=source.display,
                    scope=source.scope, line=line)
    try:
        return AgentContract(origin=origin, **fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "definition"
        raise DefinitionRejected(where, first["msg"], line=line) from exc


def warn_unrunnable(reader: Reader, tools: frozenset[str] | None, key: str = "tools") -> None:
    """Warn about every tool an allowlist grants that no run can call (web tools: no
    network; custom and MCP tools no installed MCP server provides): the agent loads,
    but without them."""
    options = reader.ctx.options
    for tool in sorted(tools or ()):
        reason = why_unrunnable(tool, servers=options.mcp_servers,
                                provided=options.provided_tools, network=options.network)
        if reason is not None:
            reader.warn(key, f"{tool!r} cannot run: {reason}", code="tool_cannot_run")
