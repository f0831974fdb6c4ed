"""``corral agents new``: a valid, minimal definition of a new agent in any format.

zuno's ``agent create --path .zuno/agent/reviewer.md --mode subagent`` has its
counterpart here for every format corral loads: :func:`definition_text` is the
smallest definition the format's own loader accepts without a diagnostic (name,
description, instructions, and the reachability ``mode`` in the format's own
words), and :func:`scaffold` writes it where discovery finds that format's
project agents (or at ``path``), never over an existing file.

``mode`` is the reachability zuno's ``mode`` names: ``all`` (the user runs it and
agents delegate to it), ``primary`` (only the user) or ``subagent`` (only as a
delegation target). A format that cannot say ``primary`` or ``subagent``
(Claude, Codex, Cursor, Gemini, pi, the catalog: every agent is both) refuses
them rather than write a definition that means something else.

Before anything is written, the text is loaded by the format's adapter from a
scratch copy: a name the format rejects (a Gemini name must be a lowercase
slug) is a user error naming the loader's reason, and no file is left behind.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from executor.errors import ExecutorError
from policies.contract import AgentFormat, Scope
from policies.loader import Severity, load_file
from policies.loader.base import NAME_RE, RESERVED_NAMES
from policies.loader.formats import EXTENSIONS

__all__ = ["MODES", "SCAFFOLD_PATHS", "Scaffolded", "definition_text", "scaffold"]

#: Reachability: where the agent may be used (zuno's ``mode``).
MODES = ("all", "primary", "subagent")
#: Where each format's project agents are discovered: the default file of agent ``{name}``
#: (relative to the repository root).
SCAFFOLD_PATHS: dict[AgentFormat, str] = {
    AgentFormat.NGN: ".ngn/agents/{name}.md",
    AgentFormat.CLAUDE: ".claude/agents/{name}.md",
    AgentFormat.COPILOT: ".github/agents/{name}.agent.md",
    AgentFormat.OPENCODE: ".opencode/agents/{name}.md",
    AgentFormat.CODEX: ".codex/agents/{name}.toml",
    AgentFormat.CURSOR: ".cursor/agents/{name}.md",
    AgentFormat.GEMINI: ".gemini/agents/{name}.md",
    AgentFormat.ANTIGRAVITY: ".agents/agents/{name}.md",
    AgentFormat.PI: ".pi/agents/{name}.md",
    AgentFormat.ZUNO: ".zuno/agent/{name}.md",
    AgentFormat.CATALOG: "initial-data/agent-definitions/{name}.json",
}
#: The formats whose definitions say who may use the agent (the others: everyone).
_REACHABILITY = frozenset({AgentFormat.NGN, AgentFormat.COPILOT, AgentFormat.OPENCODE,
                           AgentFormat.ANTIGRAVITY, AgentFormat.ZUNO})


@dataclass(frozen=True)
class Scaffolded:
    """What :func:`scaffold` wrote: the file, its format, the agent's name and mode."""

    path: Path
    format: AgentFormat
    name: str
    mode: str
    text: str


def _user_error(message: str, code: str, hint: str | None = None,
                **context: str) -> ExecutorError:
    return ExecutorError(message, code=code, operation="new_agent", context=context, hint=hint)


def _quoted(text: str) -> str:
    """A double-quoted YAML (and TOML basic) string: JSON's escapes are valid in both."""
    return json.dumps(text, ensure_ascii=False)


def definition_text(fmt: AgentFormat, name: str, *, mode: str = "all",
                    description: str | None = None, instructions: str | None = None) -> str:
    """The minimal definition of agent ``name`` in ``fmt``, reachable as ``mode`` says."""
    if mode not in MODES:
        raise _user_error(f"unknown mode {mode!r}: use {', '.join(MODES)}", "bad_mode")
    if mode != "all" and fmt not in _REACHABILITY:
        can = ", ".join(sorted(f.value for f in _REACHABILITY))
        raise _user_error(
            f"a {fmt.value} definition cannot make an agent {mode}-only: every {fmt.value} "
            "agent can be run by you and delegated to", "unsupported_mode",
            hint=f"use --mode all, or a format that says who may use an agent ({can})")
    description = description or f"Describe when to use {name}."
    instructions = (instructions or f"You are {name}. Replace this with the instructions "
                    f"{name} follows.").strip() + "\n"
    user, subagent = mode != "subagent", mode != "primary"
    yes = {True: "true", False: "false"}
    if fmt is AgentFormat.CODEX:
        return (f"name = {_quoted(name)}\ndescription = {_quoted(description)}\n"
                f"developer_instructions = {_quoted(instructions)}\n")
    if fmt is AgentFormat.CATALOG:
        agent_id = str(uuid.uuid4())
        data = {
            "id": agent_id, "namespace": {"value": "local"}, "name": name,
            "description": description, "systemPrompt": instructions.rstrip("\n"),
            "llmConfigName": "agent-default", "status": "ACTIVE",
            "tools": [{"id": str(uuid.uuid4()), "agentDefinitionId": agent_id,
                       "name": "file_read", "enabled": True}],
        }
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    header: list[tuple[str, str]] = []
    if fmt not in (AgentFormat.OPENCODE, AgentFormat.ZUNO):  # their file name is the name
        header.append(("name", name))
    header.append(("description", _quoted(description)))
    if fmt is AgentFormat.NGN:
        header += [("user_invocable", yes[user]), ("subagent_available", yes[subagent])]
    elif fmt is AgentFormat.COPILOT:
        header += [("user-invocable", yes[user]), ("disable-model-invocation", yes[not subagent])]
    elif fmt is AgentFormat.ANTIGRAVITY:
        header += [("mainAgent", yes[user]), ("subagent", yes[subagent])]
    elif fmt in (AgentFormat.OPENCODE, AgentFormat.ZUNO):
        header.append(("mode", mode))
    elif fmt is AgentFormat.GEMINI:
        header.append(("kind", "local"))
    return "---\n" + "".join(f"{key}: {value}\n" for key, value in header) + "---\n" + (
        instructions)


def _check_name(name: str) -> None:
    if not NAME_RE.fullmatch(name):
        raise _user_error(f"invalid agent name {name!r}: use letters, digits, '_' or '-', at "
                          "most 128 characters", "invalid_name")
    if name.casefold() in RESERVED_NAMES:
        raise _user_error(f"the name {name!r} is reserved", "invalid_name")


def _check_description(description: str | None) -> None:
    if description is not None and (not description.strip() or not description.isprintable()):
        raise _user_error("the description must be one nonempty line of printable text",
                          "bad_description")


def _validate(fmt: AgentFormat, target: Path, text: str, display: str) -> list[str]:
    """Load ``text`` as ``fmt`` from a scratch copy named like ``target``: a user error
    naming the loader's reasons unless it loads without a warning. The names it loads."""
    with tempfile.TemporaryDirectory(prefix="corral-new-") as scratch:
        probe = Path(scratch) / target.name
        probe.write_text(text, encoding="utf-8")
        outcome = load_file(probe, fmt, scope=Scope.PROJECT, display=display,
                            location_name=_stem(target, fmt), skip_non_agents=False)
    problems = [d for d in outcome.diagnostics if d.severity is not Severity.INFO]
    if outcome.status.value != "loaded" or problems:
        reasons = "; ".join(f"{d.field}: {d.reason}" for d in problems) or outcome.status.value
        raise _user_error(f"the {fmt.value} loader would not accept this definition: {reasons}",
                          "rejected_definition", hint="choose another name (or format)",
                          file=display)
    return [agent.name for agent in outcome.agents]


def _stem(path: Path, fmt: AgentFormat) -> str:
    for suffix in EXTENSIONS[fmt]:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.stem


def scaffold(root: Path, name: str, fmt: AgentFormat | str, *, mode: str = "all",
             path: Path | None = None, description: str | None = None) -> Scaffolded:
    """Write the minimal definition of agent ``name`` (see :func:`definition_text`) at
    ``path`` (relative to ``root``; by default where ``fmt``'s project agents are
    discovered). An existing file is never overwritten (a user error)."""
    try:
        fmt = AgentFormat(fmt)
    except ValueError:
        raise _user_error(f"unknown format {fmt!r}", "unknown_format",
                          hint="use one of " + ", ".join(f.value for f in AgentFormat)) from None
    _check_name(name)
    _check_description(description)
    text = definition_text(fmt, name, mode=mode, description=description)
    target = root / (path if path is not None else SCAFFOLD_PATHS[fmt].format(name=name))
    display = str(path if path is not None else SCAFFOLD_PATHS[fmt].format(name=name))
    if not target.name.endswith(EXTENSIONS[fmt]):
        raise _user_error(f"{display}: {fmt.value} definitions are "
                          f"{' or '.join(EXTENSIONS[fmt])} files", "bad_path")
    if target.exists() or target.is_symlink():
        raise _user_error(f"{display} already exists; corral agents new never overwrites a file",
                          "file_exists", hint="choose another name or --path, or edit the file",
                          path=str(target))
    if _validate(fmt, target, text, display) != [name]:
        own = SCAFFOLD_PATHS[fmt].format(name=name).rsplit("/", 1)[-1]
        raise _user_error(f"{display}: a {fmt.value} agent is named by its file, so this file "
                          f"would not define {name!r}", "bad_path", hint=f"name the file {own}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: a file that appeared since the check above is not overwritten either.
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise _user_error(f"{display} already exists; corral agents new never overwrites a "
                          "file", "file_exists", path=str(target)) from None
    except OSError as exc:
        raise _user_error(f"cannot create {display}: {exc.strerror}", "cannot_write",
                          path=str(target)) from None
    with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
    return Scaffolded(path=target, format=fmt, name=name, mode=mode, text=text)
