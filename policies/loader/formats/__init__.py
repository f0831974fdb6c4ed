"""One adapter module per format; this registry maps each format to its adapter.

An adapter module is imported the first time a file of its format is loaded
(:func:`adapter_for`), never before: ``corral agents list`` on a repository of
Claude Code agents reads no other format's code. The table below names each
module and class; ``EXTENSIONS`` is plain data every caller may read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from policies.contract import AgentFormat

if TYPE_CHECKING:
    from policies.loader.formats.common import Adapter

__all__ = ["ADAPTER_CLASSES", "EXTENSIONS", "adapter_for"]

#: Format -> (module under ``policies.loader.formats``, adapter class in it).
ADAPTER_CLASSES: dict[AgentFormat, tuple[str, str]] = {
    AgentFormat.NGN: ("ngn", "NgnAdapter"),
    AgentFormat.CLAUDE: ("claude", "ClaudeAdapter"),
    AgentFormat.COPILOT: ("copilot", "CopilotAdapter"),
    AgentFormat.OPENCODE: ("opencode", "OpenCodeAdapter"),
    AgentFormat.CODEX: ("codex", "CodexAdapter"),
    AgentFormat.CURSOR: ("cursor", "CursorAdapter"),
    AgentFormat.GEMINI: ("gemini", "GeminiAdapter"),
    AgentFormat.ANTIGRAVITY: ("antigravity", "AntigravityAdapter"),
    AgentFormat.ZUNO: ("zuno", "ZunoAdapter"),
    AgentFormat.PI: ("pi", "PiAdapter"),
    AgentFormat.CATALOG: ("catalog", "CatalogAdapter"),
}

#: File extensions of definitions inside agent directories (longest match wins for the stem).
#: Config files (``opencode.json``, ``zuno.json``, Codex ``config.toml``) are found by name.
EXTENSIONS: dict[AgentFormat, tuple[str, ...]] = {
    AgentFormat.NGN: (".md",),
    AgentFormat.CLAUDE: (".md",),
    AgentFormat.COPILOT: (".agent.md", ".md"),
    AgentFormat.OPENCODE: (".md",),
    AgentFormat.CODEX: (".toml",),
    AgentFormat.CURSOR: (".md",),
    AgentFormat.GEMINI: (".md",),
    AgentFormat.ANTIGRAVITY: (".md",),
    AgentFormat.ZUNO: (".md",),
    AgentFormat.PI: (".md",),
    AgentFormat.CATALOG: (".json",),
}

_LOADED: dict[AgentFormat, Adapter] = {}


def adapter_for(fmt: AgentFormat) -> Adapter:
    """The adapter of ``fmt``, its module imported on first use."""
    found = _LOADED.get(fmt)
    if found is None:
        module, name = ADAPTER_CLASSES[fmt]
        adapter: Adapter = getattr(importlib.import_module(f"{__name__}.{module}"), name)()
        found = _LOADED.setdefault(fmt, adapter)
    return found
