"""Per-harness tool-name alias tables (``shared/formats.md`` section 3).

Each table maps a harness's documented tool names onto native tool names.
An entry that maps to the empty set is a *known* tool of that harness with no
corral equivalent: naming it grants nothing and produces a warning, because it
is not a misspelling. A name that is in no table, is not an MCP or extension
name in the harness's own syntax, and is not an installed custom tool or an
explicit ``tool_map`` entry is *unknown* and rejects the definition: a
misspelled deny must never silently grant access.

Matching is exact. Copilot is the one harness whose documentation makes its
aliases case-insensitive (``execute``, ``shell``, ``Bash``, ``powershell``);
its table lists the documented spellings and :func:`lookup` folds case only
for that table's documented aliases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from policies.contract import AgentFormat
from policies.tools import NATIVE_TOOLS

__all__ = ["COPILOT_TOOL_SETS", "TABLES", "HarnessTools", "lookup", "mcp_canonical"]

_READ = frozenset({"read_file"})
_LIST = frozenset({"list_files"})
_FIND = frozenset({"find"})
_SEARCH = frozenset({"search"})
_EDIT = frozenset({"edit"})
_WRITE = frozenset({"write_file"})
_PATCH = frozenset({"apply_patch"})
_SHELL = frozenset({"shell"})
_DELEGATE = frozenset({"delegate"})
_FETCH = frozenset({"web_fetch"})
_WEBSEARCH = frozenset({"web_search"})
_TODO = frozenset({"todo"})
_TOOLSEARCH = frozenset({"tool_search"})
_NONE: frozenset[str] = frozenset()
_NATIVE = {name: frozenset({name}) for name in NATIVE_TOOLS}


@dataclass(frozen=True)
class HarnessTools:
    """One harness's tool vocabulary."""

    format: AgentFormat
    names: Mapping[str, frozenset[str]]
    #: Harness names whose lookup ignores case (documented by the harness).
    case_insensitive: frozenset[str] = frozenset()
    #: Whether ``*`` means "every tool" in this harness's tool lists.
    star_means_all: bool = False


_CLAUDE: dict[str, frozenset[str]] = {
    "Read": _READ, "NotebookRead": _READ,
    "Write": _WRITE,
    "Edit": _EDIT, "MultiEdit": _EDIT, "NotebookEdit": _EDIT,
    "Glob": _FIND, "Grep": _SEARCH, "LS": _LIST,
    "Bash": _SHELL, "PowerShell": _SHELL, "BashOutput": _SHELL, "KillBash": _SHELL,
    "KillShell": _SHELL,
    "Agent": _DELEGATE, "Task": _DELEGATE,
    "WebFetch": _FETCH, "WebSearch": _WEBSEARCH,
    "TodoWrite": _TODO, "TaskCreate": _TODO, "TaskGet": _TODO, "TaskList": _TODO,
    "TaskOutput": _TODO, "TaskStop": _TODO, "TaskUpdate": _TODO,
    "ToolSearch": _TOOLSEARCH,
    # Documented Claude Code tools with no corral equivalent.
    **dict.fromkeys(
        ["Artifact", "AskUserQuestion", "CronCreate", "CronDelete", "CronList", "EnterPlanMode",
         "EnterWorktree", "ExitPlanMode", "ExitWorktree", "ListMcpResourcesTool", "LSP", "Monitor",
         "PushNotification", "ReadMcpResourceTool", "RemoteTrigger", "ReportFindings",
         "ScheduleWakeup", "SendMessage", "SendUserFile", "Skill", "TeamCreate", "TeamDelete",
         "WaitForMcpServers"],
        _NONE,
    ),
}

_CURSOR: dict[str, frozenset[str]] = {**_CLAUDE, "Shell": _SHELL, "ReadLints": _NONE}

_COPILOT_ALIASES: dict[str, frozenset[str]] = {
    # GitHub's documented aliases (case-insensitive).
    "execute": _SHELL, "shell": _SHELL, "Bash": _SHELL, "powershell": _SHELL,
    "read": _READ, "Read": _READ, "NotebookRead": _READ,
    "edit": _EDIT | _WRITE | _PATCH, "Edit": _EDIT, "MultiEdit": _EDIT, "Write": _WRITE,
    "NotebookEdit": _EDIT,
    "search": _FIND | _SEARCH | _LIST, "Grep": _SEARCH, "Glob": _FIND,
    "agent": _DELEGATE, "custom-agent": _DELEGATE, "Task": _DELEGATE,
    "web": _FETCH | _WEBSEARCH, "WebSearch": _WEBSEARCH, "WebFetch": _FETCH,
    "todo": _TODO, "TodoWrite": _TODO,
}
#: VS Code's built-in tool-set namespaces; ``server/tool`` ids under them are
#: built-in tools, never MCP servers.
COPILOT_TOOL_SETS = frozenset(
    {"read", "search", "edit", "execute", "web", "agent", "runCommands", "vscode"}
)
_COPILOT: dict[str, frozenset[str]] = {
    **_COPILOT_ALIASES,
    # VS Code tool-set ids.
    "read/readFile": _READ, "read/problems": _NONE, "read/terminalLastCommand": _NONE,
    "read/terminalSelection": _NONE, "read/getTaskOutput": _NONE,
    "search/codebase": _SEARCH, "search/fileSearch": _FIND, "search/textSearch": _SEARCH,
    "search/listDirectory": _LIST, "search/usages": _NONE, "search/changes": _NONE,
    "search/searchResults": _NONE,
    "edit/editFiles": _EDIT | _PATCH, "edit/createFile": _WRITE, "edit/createDirectory": _WRITE,
    "execute/runInTerminal": _SHELL, "execute/getTerminalOutput": _SHELL,
    "execute/runTask": _SHELL, "execute/createAndRunTask": _SHELL, "execute/testFailure": _NONE,
    "web/fetch": _FETCH, "agent/runSubagent": _DELEGATE, "todos": _TODO,
    "vscode": _NONE, "browser": _NONE, "githubRepo": _NONE,
    # Flat legacy names that real files still use.
    "codebase": _SEARCH, "editFiles": _EDIT | _PATCH, "runCommands": _SHELL, "fetch": _FETCH,
    "problems": _NONE, "usages": _NONE, "findTestFiles": _FIND, "runTests": _SHELL,
    "terminalLastCommand": _NONE, "terminalSelection": _NONE, "openSimpleBrowser": _NONE,
    "new": _NONE, "vscodeAPI": _NONE, "terminal": _SHELL, "runSubagent": _DELEGATE,
    "changes": _NONE, "runTasks": _SHELL, "searchResults": _NONE, "testFailure": _NONE,
    "extensions": _NONE, "runCommands/terminalLastCommand": _NONE,
    "runCommands/terminalSelection": _NONE,
}

_OPENCODE: dict[str, frozenset[str]] = {
    "read": _READ, "write": _WRITE, "edit": _EDIT, "patch": _PATCH, "apply_patch": _PATCH,
    "grep": _SEARCH, "glob": _FIND, "list": _LIST, "bash": _SHELL, "shell": _SHELL,
    "task": _DELEGATE, "subagent": _DELEGATE,
    "webfetch": _FETCH, "websearch": _WEBSEARCH, "todowrite": _TODO, "todoread": _TODO,
    **dict.fromkeys(
        ["skill", "lsp", "question", "codesearch", "doom_loop", "external_directory"], _NONE
    ),
}

_GEMINI: dict[str, frozenset[str]] = {
    "read_file": _READ, "read_many_files": _READ, "write_file": _WRITE, "replace": _EDIT,
    "glob": _FIND, "grep_search": _SEARCH, "search_file_content": _SEARCH,
    "list_directory": _LIST, "run_shell_command": _SHELL, "web_fetch": _FETCH,
    "google_web_search": _WEBSEARCH, "write_todos": _TODO, "invoke_agent": _DELEGATE,
    **dict.fromkeys(
        ["ask_user", "activate_skill", "enter_plan_mode", "exit_plan_mode", "read_mcp_resource",
         "list_mcp_resources", "complete_task", "update_topic"],
        _NONE,
    ),
}

_PI: dict[str, frozenset[str]] = {
    "read": _READ, "grep": _SEARCH, "find": _FIND, "ls": _LIST, "edit": _EDIT, "write": _WRITE,
    "bash": _SHELL, "web_search": _WEBSEARCH, "web_fetch": _FETCH,
}

_ANTIGRAVITY: dict[str, frozenset[str]] = {
    "view_file": _READ, "write_to_file": _WRITE, "replace_file_content": _EDIT,
    "multi_replace_file_content": _EDIT, "run_command": _SHELL, "grep_search": _SEARCH,
    "list_dir": _LIST | _FIND, "read_url_content": _FETCH, "search_web": _WEBSEARCH,
    "invoke_subagent": _DELEGATE, "ask_question": _NONE,
}

_ZUNO: dict[str, frozenset[str]] = {**_NATIVE, **_OPENCODE}

_CATALOG: dict[str, frozenset[str]] = {
    **_NATIVE,
    "file_read": _READ, "file_write": _WRITE, "file_list": _LIST, "file_search": _SEARCH,
    "file_edit": _EDIT, "run_agent": _DELEGATE, "run_shell": _SHELL,
}

TABLES: dict[AgentFormat, HarnessTools] = {
    AgentFormat.NGN: HarnessTools(AgentFormat.NGN, _NATIVE),
    AgentFormat.CLAUDE: HarnessTools(AgentFormat.CLAUDE, _CLAUDE),
    AgentFormat.CURSOR: HarnessTools(AgentFormat.CURSOR, _CURSOR),
    AgentFormat.COPILOT: HarnessTools(
        AgentFormat.COPILOT, _COPILOT, frozenset(_COPILOT_ALIASES), star_means_all=True
    ),
    AgentFormat.OPENCODE: HarnessTools(AgentFormat.OPENCODE, _OPENCODE, star_means_all=True),
    AgentFormat.GEMINI: HarnessTools(AgentFormat.GEMINI, _GEMINI, star_means_all=True),
    AgentFormat.PI: HarnessTools(AgentFormat.PI, _PI),
    AgentFormat.ANTIGRAVITY: HarnessTools(AgentFormat.ANTIGRAVITY, _ANTIGRAVITY),
    AgentFormat.ZUNO: HarnessTools(AgentFormat.ZUNO, _ZUNO),
    AgentFormat.CATALOG: HarnessTools(AgentFormat.CATALOG, _CATALOG),
    AgentFormat.CODEX: HarnessTools(AgentFormat.CODEX, {}),
}

_FOLDED = {
    table.format: {name.casefold(): target for name, target in table.names.items()
                   if name in table.case_insensitive}
    for table in TABLES.values()
}


def lookup(fmt: AgentFormat, name: str) -> frozenset[str] | None:
    """Native names for a harness tool name, or ``None`` when it is not in the table."""
    table = TABLES[fmt]
    found = table.names.get(name)
    if found is not None:
        return found
    if fmt is AgentFormat.COPILOT and name.startswith("vscode/"):
        return _NONE  # VS Code editor tools (installExtension, runCommand, ...)
    return _FOLDED[fmt].get(name.casefold())


_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
#: An MCP server name never contains "__" (the separator); the tool part may.
_SERVER = r"[A-Za-z0-9](?:[A-Za-z0-9.-]|_(?!_))*"
_DOUBLE = rf"^mcp__(?P<server>{_SERVER}|\*)(?:__(?P<tool>{_SEGMENT}|\*))?$"
#: Source of each format's MCP tool-name pattern, compiled on first use (a definition that
#: names an MCP tool), not when the loader is imported.
_MCP_FORMS: dict[AgentFormat, str] = {
    # Claude / Cursor: mcp__server__tool, mcp__server__*, mcp__server, mcp__*
    AgentFormat.CLAUDE: _DOUBLE,
    AgentFormat.CURSOR: _DOUBLE,
    # Copilot / VS Code: server/tool, server/*; publisher.extension/tool for extensions.
    AgentFormat.COPILOT: rf"^(?P<server>{_SEGMENT})/(?P<tool>{_SEGMENT}|\*)$",
    # Gemini: mcp_server_tool, mcp_server_*, mcp_*
    AgentFormat.GEMINI:
        r"^mcp_(?P<server>[A-Za-z0-9][A-Za-z0-9-]*|\*)(?:_(?P<tool>[A-Za-z0-9][A-Za-z0-9_.-]*|\*))?$",
    # pi extensions: mcp:server
    AgentFormat.PI: rf"^mcp:(?P<server>{_SEGMENT})$",
    # Native, zuno and catalog files name MCP tools canonically.
    AgentFormat.NGN: _DOUBLE,
    AgentFormat.ZUNO: _DOUBLE,
    AgentFormat.CATALOG: _DOUBLE,
}


def mcp_canonical(fmt: AgentFormat, name: str) -> str | None:
    """The canonical ``mcp__server__tool`` (or pattern) for an MCP name, else ``None``.

    A VS Code extension tool (``publisher.extension/tool``) is kept as its own
    exact custom name. ``mcp__*`` means every MCP tool.
    """
    source = _MCP_FORMS.get(fmt)
    match = re.fullmatch(source, name) if source else None
    if match is None:
        return None
    server, tool = match.group("server"), match.groupdict().get("tool")
    if fmt is AgentFormat.COPILOT:
        if server in COPILOT_TOOL_SETS:
            return None  # a built-in tool-set id missing from the table: unknown
        if "." in server:
            return name  # an extension tool, by exact name
    if server == "*":
        return "mcp__*"
    if tool is None or tool == "*":
        return f"mcp__{server}__*"
    return f"mcp__{server}__{tool}"
