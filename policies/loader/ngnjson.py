"""ngn JSON configuration: ``agent_imports`` and ``profiles``.

.. code-block:: json

    {
      "agent_imports": [
        {"path": "../.claude/agents/research.md", "format": "claude",
         "model": "your-model-id", "provider": "your-connection",
         "tool_map": {"repo_lookup": ["github_search"]}}
      ],
      "profiles": {
        "research": {"description": "...", "instructions": "...", "tools": ["read_file"]}
      }
    }

Import paths resolve beside the JSON file; absolute paths are accepted. Each
entry selects one file. ``tool_map`` maps a foreign tool name (the key) to
native or installed custom tools (the list): it names tools that exist, it
installs nothing. Within one document, profiles override imports whatever the
key order. Personal JSON lives at ``$XDG_CONFIG_HOME/ngn/config.json``,
project JSON at ``.ngn/config.json``; ``--config FILE`` selects one
explicitly (and trusts its imports).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from policies.contract import AgentFormat, Scope
from policies.loader.base import Context, Options, Source
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.files import MAX_FILES_PER_SCOPE, decode_text, read_bounded
from policies.loader.formats.common import json_document, key_line
from policies.loader.formats.ngn import profile_contract
from policies.loader.single import FileOutcome, Status, finish, load_file

__all__ = ["IMPORT_FORMATS", "load_json_config"]

IMPORT_FORMATS: dict[str, AgentFormat] = {
    "native": AgentFormat.NGN, "ngn": AgentFormat.NGN, "claude": AgentFormat.CLAUDE,
    "copilot": AgentFormat.COPILOT, "opencode": AgentFormat.OPENCODE,
    "codex": AgentFormat.CODEX, "cursor": AgentFormat.CURSOR, "gemini": AgentFormat.GEMINI,
    "antigravity": AgentFormat.ANTIGRAVITY, "pi": AgentFormat.PI, "zuno": AgentFormat.ZUNO,
    "catalog": AgentFormat.CATALOG,
}
_IMPORT_KEYS = frozenset({"path", "format", "model", "provider", "tool_map"})
_TOP_KEYS = frozenset({"agent_imports", "profiles", "$schema"})


def load_json_config(path: Path, display: str, scope: Scope, options: Options, *,
                     budget: int = MAX_FILES_PER_SCOPE) -> list[FileOutcome]:
    """Outcomes of the imports (first) and the profiles (last: they override).

    ``budget`` is what is left of the scope's file bound: imports beyond it
    are not read, and say so.
    """
    def failed(field: str, reason: str, line: int = 1,
               code: str = "json_config") -> list[FileOutcome]:
        diag = Diagnostic(file=display, line=line, field=field, severity=Severity.ERROR,
                          reason=reason, code=code)
        return [FileOutcome(display, AgentFormat.NGN, Status.REJECTED, diagnostics=[diag])]

    try:
        text = decode_text(read_bounded(path))
        document = json_document(text)
    except DefinitionRejected as exc:
        return failed(exc.field, exc.reason, exc.line or 1)
    if not isinstance(document, dict):
        return failed("file", "the config must be a JSON object")
    outcomes: list[FileOutcome] = []
    notes = [
        Diagnostic(file=display, line=key_line(text, key), field=key, severity=Severity.WARNING,
                   reason="unknown top-level key; expected agent_imports and profiles",
                   code="unknown_field")
        for key in document if key not in _TOP_KEYS
    ]
    if notes:
        outcomes.append(FileOutcome(display, AgentFormat.NGN, Status.SKIPPED, diagnostics=notes))
    imports = document.get("agent_imports", [])
    if not isinstance(imports, list):
        outcomes += failed("agent_imports", "must be a list", key_line(text, "agent_imports"))
        imports = []
    for index, entry in enumerate(imports):
        if index >= budget:
            outcomes += failed("agent_imports", f"{len(imports) - index} import(s) not read: "
                               f"discovery reads at most {MAX_FILES_PER_SCOPE} files per scope",
                               _nth_line(text, '"path"', index), code="too_many_files")
            break
        outcomes.append(_import(path, display, text, index, entry, options))
    profiles = document.get("profiles", {})
    if not isinstance(profiles, dict):
        outcomes += failed("profiles", "must be a map of name to profile", key_line(text,
                                                                                     "profiles"))
        profiles = {}
    start = max(text.find('"profiles"'), 0)
    for name, data in profiles.items():
        outcomes.append(_profile(path, display, text, scope, options, name, data,
                                 key_line(text, name, start)))
    return outcomes


def _import(path: Path, display: str, text: str, index: int, entry: Any,
            options: Options) -> FileOutcome:
    line = _nth_line(text, '"path"', index)
    where = f"agent_imports[{index}]"

    def bad(reason: str) -> FileOutcome:
        diag = Diagnostic(file=display, line=line, field=where, severity=Severity.ERROR,
                          reason=reason, code="json_config")
        return FileOutcome(display, AgentFormat.NGN, Status.REJECTED, diagnostics=[diag])

    if not isinstance(entry, dict):
        return bad("must be an object with path and format")
    unknown = set(entry) - _IMPORT_KEYS
    if unknown:
        return bad(f"unknown keys {sorted(unknown)}; expected {sorted(_IMPORT_KEYS)}")
    target, fmt_name = entry.get("path"), entry.get("format")
    if not isinstance(target, str) or not target:
        return bad("path must be a nonempty string")
    if fmt_name not in IMPORT_FORMATS:
        return bad(f"format must be one of {', '.join(IMPORT_FORMATS)}, got {fmt_name!r}")
    model, provider = entry.get("model"), entry.get("provider")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        return bad("model must be an exact model id")
    if provider is not None and (not isinstance(provider, str) or not provider.strip()):
        return bad("provider must be a connection id")
    if provider is not None and model is None:
        return bad("provider needs a model: a connection alone does not pick a model")
    tool_map: dict[str, tuple[str, ...]] = {}
    raw_map = entry.get("tool_map", {})
    if not isinstance(raw_map, dict):
        return bad("tool_map must map a foreign tool name to a list of tool names")
    for foreign, targets in raw_map.items():
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            return bad(f"tool_map.{foreign} must be a list of tool names")
        tool_map[foreign] = tuple(targets)
    resolved = Path(os.path.normpath(
        target if Path(target).is_absolute() else path.parent.absolute() / target))
    linked = _symlinked_component(resolved, path.parent.absolute())
    if linked is not None:
        return bad(f"path goes through the symlink {linked}; symlinks are not followed")
    imported = replace(options, tool_map=tool_map, model=model, provider=provider)
    return load_file(resolved, IMPORT_FORMATS[fmt_name], scope=Scope.IMPORT,
                     display=_display_import(display, target), options=imported,
                     skip_non_agents=False)


def _profile(path: Path, display: str, text: str, scope: Scope, options: Options, name: str,
             data: Any, line: int) -> FileOutcome:
    source = Source(path=path, display=display, scope=scope, format=AgentFormat.NGN, text=text,
                    location_name=name)
    ctx = Context(source, options)
    agents = []
    try:
        if not isinstance(data, dict):
            raise DefinitionRejected(f"profiles.{name}", "must be an object", line=line)
        agents = [profile_contract(source, ctx, name, dict(data), line)]
    except DefinitionRejected as exc:
        if not (exc.diag_code == "rejected_after_errors" and ctx.failed):
            ctx.error(exc.field, exc.reason, line=exc.line or line, hint=exc.hint)
    return finish(display, AgentFormat.NGN, agents, ctx.diagnostics, strict=options.strict)


def _symlinked_component(target: Path, base: Path) -> Path | None:
    """The first component of ``target`` below its common prefix with ``base`` that is a
    symlink (the file itself is checked by the bounded reader)."""
    common = Path(os.path.commonpath([target, os.path.normpath(base)]))
    probe = common
    for part in target.relative_to(common).parts[:-1]:
        probe = probe / part
        if probe.is_symlink():
            return probe
    return None


def _nth_line(text: str, needle: str, index: int) -> int:
    position = -1
    for _ in range(index + 1):
        position = text.find(needle, position + 1)
        if position < 0:
            return 1
    return text.count("\n", 0, position) + 1


def _display_import(config_display: str, target: str) -> str:
    if Path(target).is_absolute():
        return target
    parent = Path(config_display).parent
    return (parent / target).as_posix() if str(parent) not in {"", "."} else target
