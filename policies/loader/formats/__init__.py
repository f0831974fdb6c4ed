"""One adapter module per format; this registry maps each format to its adapter."""

from __future__ import annotations

from policies.contract import AgentFormat
from policies.loader.formats.antigravity import AntigravityAdapter
from policies.loader.formats.catalog import CatalogAdapter
from policies.loader.formats.claude import ClaudeAdapter
from policies.loader.formats.codex import CodexAdapter
from policies.loader.formats.common import Adapter
from policies.loader.formats.copilot import CopilotAdapter
from policies.loader.formats.cursor import CursorAdapter
from policies.loader.formats.gemini import GeminiAdapter
from policies.loader.formats.ngn import NgnAdapter
from policies.loader.formats.opencode import OpenCodeAdapter
from policies.loader.formats.pi import PiAdapter
from policies.loader.formats.zuno import ZunoAdapter

__all__ = ["ADAPTERS", "EXTENSIONS", "Adapter"]

ADAPTERS: dict[AgentFormat, Adapter] = {
    adapter.format: adapter
    for adapter in (
        NgnAdapter(), ClaudeAdapter(), CopilotAdapter(), OpenCodeAdapter(), CodexAdapter(),
        CursorAdapter(), GeminiAdapter(), AntigravityAdapter(), ZunoAdapter(), PiAdapter(),
        CatalogAdapter(),
    )
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
