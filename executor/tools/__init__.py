"""The native tools, implemented over the sandbox.

The model sees and calls these native names whatever harness the agent's
definition came from. Each tool has a pydantic argument model (its JSON
schema is what the model is shown) and reports failures as tool errors.
``web_fetch`` runs in corral's own process, on the host side, and reaches only
the hosts the user granted (:mod:`executor.tools.web_fetch`); ``web_search`` has
no implementation (no search provider), so it is never offered.

Every call reaches them through :mod:`executor.tools.dispatch`, the one door
(exact name, arguments, permission rules, approval, audit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from executor.tools.agents import DelegateTool, ListAgentsTool, TodoTool, ToolSearchTool
from executor.tools.context import ToolContext, truncate
from executor.tools.dispatch import Tool
from executor.tools.files import EditTool, FindTool, ListFilesTool, ReadFileTool, WriteFileTool
from executor.tools.overrides import override_note, with_overrides
from executor.tools.patch import ApplyPatchTool
from executor.tools.search import SearchTool
from executor.tools.shell import ShellTool
from executor.tools.web_fetch import WebFetchTool
from policies.network import NetworkGrant

__all__ = ["IMPLEMENTED", "ToolContext", "native_tools", "override_note", "truncate",
           "with_overrides"]


def native_tools(*, use_ripgrep: bool = True, delegate_targets: Sequence[tuple[str, str]] = (),
                 delegate_description: str | None = None,
                 network: NetworkGrant | None = None,
                 url_rule: Callable[[str], bool] | None = None,
                 ) -> dict[str, Tool[Any, ToolContext]]:
    """Every implemented native tool, by its canonical name; ``delegate_targets``
    (name, description) are the agents the delegate tool's schema names, after
    ``delegate_description`` (a binding's own description of the tool). ``network`` is
    the user's grant ``web_fetch`` fetches under, ``url_rule`` the agent's own rules a
    redirect target must pass."""
    tools: list[Tool[Any, ToolContext]] = [
        ReadFileTool(), ListFilesTool(), FindTool(), SearchTool(use_ripgrep=use_ripgrep),
        EditTool(), WriteFileTool(), ApplyPatchTool(), ShellTool(),
        DelegateTool(delegate_targets, description=delegate_description), ListAgentsTool(),
        TodoTool(), ToolSearchTool(), WebFetchTool(network, url_rule),
    ]
    return {tool.name: tool for tool in tools}


#: The native tools a run can call (``web_search`` is not among them; ``web_fetch`` is
#: offered only under a network grant: :mod:`executor.agents.offer`).
IMPLEMENTED = frozenset(native_tools())
