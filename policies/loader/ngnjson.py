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

Import paths resolve beside the JSON file; absolute paths are accepted. A
``path`` entry selects one file, exactly as the ngn spec says (a directory or a
pattern there is an error that names the extension below). corral's extensions,
which ngn does not read: ``directory`` instead of ``path`` imports every
definition file of a directory, laid out as the format's own agent directory
(flat; recursive for OpenCode and zuno; ``<name>/agent.md`` for ngn and
Antigravity), and ``glob`` imports every file a pattern matches
(``categories/**/*.md``; ``**`` crosses directories, never a symlinked one).
Both skip READMEs and ``_`` files, report symlinks and never follow them, count
every file against the scope's bound, and apply the entry's ``model``,
``provider`` and ``tool_map`` to every file they select. ``tool_map`` maps a
foreign tool name (the key) to native or installed custom tools (the list): it
names tools that exist, it installs nothing. Within one document, profiles
override imports whatever the key order. Personal JSON lives at
``$XDG_CONFIG_HOME/ngn/config.json``, project JSON at ``.ngn/config.json``;
``--config FILE`` selects one explicitly (and trusts its imports).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from policies.contract import AgentFormat, Scope
from policies.loader.base import Context, Options, Source
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.discovery import Candidate, directory_candidates
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
_IMPORT_KEYS = frozenset({"path", "directory", "glob", "format", "model", "provider",
                          "tool_map"})
_TARGET_KEYS = ("path", "directory", "glob")
_GLOB_CHARS = frozenset("*?[")
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
    left = budget
    for index, entry in enumerate(imports):
        if left <= 0:
            outcomes += failed("agent_imports", f"{len(imports) - index} import(s) not read: "
                               f"discovery reads at most {MAX_FILES_PER_SCOPE} files per scope",
                               _entry_line(text, index), code="too_many_files")
            break
        imported = _import(path, display, text, index, entry, options, left)
        left -= len(imported)
        outcomes += imported
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
            options: Options, left: int) -> list[FileOutcome]:
    """The outcomes of one entry: one per file it selects (at most ``left``)."""
    line = _entry_line(text, index)
    where = f"agent_imports[{index}]"

    def bad(reason: str, hint: str | None = None,
            severity: Severity = Severity.ERROR) -> list[FileOutcome]:
        diag = Diagnostic(file=display, line=line, field=where, severity=severity,
                          reason=reason, code="json_config", hint=hint)
        status = Status.REJECTED if severity is Severity.ERROR else Status.SKIPPED
        return [FileOutcome(display, AgentFormat.NGN, status, diagnostics=[diag])]

    if not isinstance(entry, dict):
        return bad("must be an object with path and format")
    unknown = set(entry) - _IMPORT_KEYS
    if unknown:
        return bad(f"unknown keys {sorted(unknown)}; expected {sorted(_IMPORT_KEYS)}")
    keys = [key for key in _TARGET_KEYS if key in entry]
    if len(keys) != 1:
        return bad("needs exactly one of path (one file), directory or glob (corral's "
                   "extensions)", hint='{"path": "agents/reviewer.md", "format": "claude"}, '
                   '{"directory": "agents", "format": "claude"} or {"glob": '
                   '"categories/**/*.md", "format": "claude"}')
    kind = keys[0]
    target = entry[kind]
    fmt_name = entry.get("format")
    if not isinstance(target, str) or not target:
        return bad(f"{kind} must be a nonempty string")
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
    fmt = IMPORT_FORMATS[fmt_name]
    imported = replace(options, tool_map=tool_map, model=model, provider=provider)
    base = path.parent.absolute()
    if kind == "glob":
        found, notes, problem = _glob(target, base, fmt, display)
        if problem is not None:
            return bad(problem)
        if not found and not notes:
            return bad(f"glob {target!r} matches no file",
                       hint="a glob is relative to this JSON file; ** crosses directories")
    else:
        resolved = Path(os.path.normpath(target if Path(target).is_absolute() else
                                         base / target))
        linked = _symlinked_component(resolved, base)
        if linked is not None:
            return bad(f"{kind} goes through the symlink {linked}; symlinks are not followed")
        try:
            is_dir = stat.S_ISDIR(resolved.lstat().st_mode)
        except OSError:
            is_dir = False
        if kind == "path":
            return [_one_file(resolved, fmt, display, target, imported, is_dir=is_dir)]
        if not is_dir:
            return bad(f"directory {target!r} is not a directory" + (
                "" if resolved.exists() else " (it does not exist)"),
                hint='a single file is imported with "path"')
        found, notes = directory_candidates(
            fmt, resolved, lambda p: _display_import(display, _relative_to(p, base, target)))
        if not found and not notes:
            return bad(f"directory {target!r} holds no {fmt.value} definition files",
                       severity=Severity.WARNING)
    outcomes = [FileOutcome(display, fmt, Status.SKIPPED, diagnostics=notes)] if notes else []
    if len(found) > left:
        outcomes += bad(f"selects {len(found)} files; discovery reads at most "
                        f"{MAX_FILES_PER_SCOPE} per scope, so the last {len(found) - left} "
                        f"were not loaded, starting with {found[left].display}")
        found = found[:left]
    return [*outcomes, *(candidate.load(Scope.IMPORT, imported) for candidate in found)]


def _one_file(resolved: Path, fmt: AgentFormat, display: str, target: str, options: Options,
              *, is_dir: bool) -> FileOutcome:
    """A ``path`` entry: one file, as the spec says; a directory or a pattern there is an
    error that names corral's extension for it."""
    shown = _display_import(display, target)
    if is_dir or (_GLOB_CHARS & set(target) and not resolved.exists()):
        key = "directory" if is_dir else "glob"
        what = "a directory" if is_dir else "a pattern"
        diag = Diagnostic(
            file=shown, line=1, field="file", severity=Severity.ERROR, code="import_target",
            reason=f"is {what}: an agent_imports path selects one file (ngn spec)",
            hint=f'to import every definition it holds, write {{"{key}": "{target}", '
            f'"format": "{fmt.value}"}} (corral\'s extension)')
        return FileOutcome(shown, fmt, Status.REJECTED, diagnostics=[diag])
    return load_file(resolved, fmt, scope=Scope.IMPORT, display=shown, options=options,
                     skip_non_agents=False)


def _glob(pattern: str, base: Path, fmt: AgentFormat, display: str,
          ) -> tuple[list[Candidate], list[Diagnostic], str | None]:
    """The files a glob entry selects, sorted, or why it cannot be read."""
    parts = Path(pattern).parts
    fixed = 0
    while fixed < len(parts) and not _GLOB_CHARS & set(parts[fixed]):
        fixed += 1
    if fixed == len(parts):
        return [], [], (f"glob {pattern!r} has no wildcard: use path for one file, directory "
                        "for a directory")
    if ".." in parts[fixed:]:
        return [], [], f"glob {pattern!r}: '..' is only allowed before the first wildcard"
    anchor = Path(os.path.normpath(Path(*parts[:fixed]) if Path(pattern).is_absolute() else
                                   base.joinpath(*parts[:fixed])))
    linked = _symlinked_component(anchor / "x", base)
    if linked is not None or anchor.is_symlink():
        return [], [], (f"glob goes through the symlink {linked or anchor}; symlinks are not "
                        "followed")
    rest = str(Path(*parts[fixed:]))
    notes: list[Diagnostic] = []
    found: list[Candidate] = []
    for match in sorted(anchor.glob(rest)) if anchor.is_dir() else []:
        try:
            info = match.lstat()
        except OSError:
            continue
        shown = _display_import(display, _relative_to(match, base, pattern))
        if stat.S_ISDIR(info.st_mode):
            continue
        linked = _symlinked_component(match, anchor)
        if linked is not None:
            notes.append(Diagnostic(file=shown, line=1, field="file", severity=Severity.WARNING,
                                    code="symlink", reason=f"not read: it lies under the "
                                    f"symlinked directory {linked}, which is not followed"))
            continue
        relative = match.relative_to(anchor).as_posix()
        location = relative[: -len(match.suffix)] if match.suffix else relative
        found.append(Candidate(match, fmt, shown, location))
    return found, notes, None


def _relative_to(path: Path, base: Path, target: str) -> str:
    """How a selected file is shown: relative to the JSON file when the entry was."""
    if Path(target).is_absolute():
        return path.as_posix()
    return os.path.relpath(path, base)


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


def _entry_line(text: str, index: int) -> int:
    """The line of the ``index``-th import entry (its ``path`` or ``glob`` key)."""
    starts = sorted(m.start() for m in re.finditer(r'"(?:path|directory|glob)"\s*:', text))
    if index >= len(starts):
        return 1
    return text.count("\n", 0, starts[index]) + 1


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
