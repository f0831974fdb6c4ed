"""Every place in a repository corral reads as the project's own: one table.

:data:`PROJECT_PLACES` lists, for each format, the directories and files
project discovery (:func:`policies.loader.discovery.project_candidates`) reads
under ``--trust-project``, in workspace precedence order within a format,
plus the project files read besides definitions: ngn's ``.ngn/config.json``
(its imports and profiles, after every project file) and corral's own
environment (``.corral/environment.toml``, else ``.devcontainer/devcontainer.json``:
its ``setup`` runs before every child and check). Discovery iterates the table;
:data:`sandbox.names.REVIEW_RULES` derives review flags from it, so a merged diff
that adds a place (a child's ``.corral/environment.toml``) needs a person's
``--yes``, and a test holds the two equal: a place added here is flagged there.

Pure data, the standard library only: ``sandbox.names`` imports it on every diff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CORRAL", "DISCOVERED", "LAYOUTS", "PROJECT_PLACES", "Layout", "ProjectPlace"]

#: The ``format`` of corral's own places (the others are :class:`AgentFormat` values).
CORRAL = "corral"

Layout = Literal["flat", "recursive", "nested", "agent_map", "codex_layer", "zuno_layer",
                 "ngn_json", "environment"]
#: What each layout of a place holds (and how discovery reads it).
LAYOUTS: dict[str, str] = {
    "flat": "agent files in the directory",
    "recursive": "agent files in the directory and below (ids are paths)",
    "nested": "agent files and <name>/agent.md directories",
    "agent_map": "a config file mapping names to agents",
    "codex_layer": "config.toml and the role files it declares inside the directory",
    "zuno_layer": "every directory of this name in the project, nested ones too: its "
                  "zuno.json, then agent/ and agents/ below it",
    "ngn_json": "agent_imports and profiles, read after every project definition file",
    "environment": "setup commands, inputs, image: run before every child and check",
}
#: The layouts project discovery turns into candidates (the others are read elsewhere).
DISCOVERED: frozenset[str] = frozenset({"flat", "recursive", "nested", "agent_map",
                                        "codex_layer", "zuno_layer"})


@dataclass(frozen=True)
class ProjectPlace:
    """One place a project's own files are read from: whose (an ``AgentFormat`` value or
    :data:`CORRAL`), where (relative to the project root, ``/``-separated), whether it is a
    ``file`` or a ``dir``, and what it holds (:data:`LAYOUTS`)."""

    format: str
    path: str
    kind: Literal["file", "dir"]
    layout: Layout


_P = ProjectPlace
#: Every project place, formats in no particular order, each format's places in the order
#: discovery reads them (the workspace order of formats is the loader's WORKSPACE_ORDER).
PROJECT_PLACES: tuple[ProjectPlace, ...] = (
    _P("antigravity", ".agents/agents", "dir", "nested"),
    _P("claude", ".claude/agents", "dir", "flat"),
    _P("copilot", ".github/agents", "dir", "flat"),
    _P("opencode", ".opencode/agent", "dir", "recursive"),
    _P("opencode", ".opencode/agents", "dir", "recursive"),
    _P("opencode", "opencode.json", "file", "agent_map"),
    _P("opencode", "opencode.jsonc", "file", "agent_map"),
    _P("opencode", ".opencode/opencode.json", "file", "agent_map"),
    _P("opencode", ".opencode/opencode.jsonc", "file", "agent_map"),
    _P("codex", ".codex/agents", "dir", "flat"),
    _P("codex", ".codex", "dir", "codex_layer"),
    _P("cursor", ".cursor/agents", "dir", "flat"),
    _P("gemini", ".gemini/agents", "dir", "flat"),
    _P("pi", ".pi/agents", "dir", "flat"),
    _P("zuno", ".zuno", "dir", "zuno_layer"),
    _P("catalog", "initial-data/agent-definitions", "dir", "flat"),
    _P("ngn", ".ngn/agents", "dir", "nested"),
    _P("ngn", ".ngn/config.json", "file", "ngn_json"),
    _P(CORRAL, ".corral/environment.toml", "file", "environment"),
    _P(CORRAL, ".devcontainer/devcontainer.json", "file", "environment"),
)
