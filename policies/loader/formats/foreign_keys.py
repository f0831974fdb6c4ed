"""Restricting fields of one harness that show up in another harness's files.

Such a field is ignored by the harness the file is written for, so honouring
it would be a guess and ignoring it would grant more than the author meant:
corral rejects it and says what the format's own equivalent is.
"""

from __future__ import annotations

__all__ = ["CLAUDE_KEYS", "OPENCODE_KEYS", "cross_harness"]

CLAUDE_KEYS = {
    "tools": "tools",
    "disallowedTools": "a deny list",
    "permissionMode": "a permission mode",
    "maxTurns": "a turn limit",
    "mcpServers": "MCP servers",
    "hooks": "hooks",
    "isolation": "worktree isolation",
}
OPENCODE_KEYS = {
    "mode": "reachability (subagent/primary/all)",
    "hidden": "hiding from the picker",
    "permission": "permission rules",
    "permissions": "permission rules",
    "steps": "a step limit",
}


def cross_harness(fmt_name: str, origin: str, keys: dict[str, str],
                  equivalents: dict[str, str]) -> dict[str, str]:
    """Unsupported-field reasons for ``keys`` (from harness ``origin``) in ``fmt_name`` files."""
    out: dict[str, str] = {}
    for key, meaning in keys.items():
        reason = (f"is a {origin} field ({meaning}) that {fmt_name} ignores; corral will not "
                  "guess what it should mean here")
        if key in equivalents:
            reason += f"; {fmt_name} writes this as {equivalents[key]}"
        out[key] = reason
    return out
