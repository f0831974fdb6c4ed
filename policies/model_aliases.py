"""The shipped default mapping of well-known harness model names to provider model ids.

About 350 agents of real collections name a harness's model (``sonnet``, ``haiku``,
``gemini-2.5-pro``, ``GPT-4.1``, ``Claude Sonnet 4.5``) and could not run until a
``model_map`` was written by hand. This table maps the well-known names (case and
spacing folded) to a *vendor* and its model id. A name maps only where the user's
config has a provider for that vendor, never guessing a connection:

- ``anthropic``: a provider named ``anthropic``, else the one provider of
  ``type = "anthropic"`` (two or more: ambiguous, nothing maps);
- ``openai``: a provider named ``openai``;
- ``google``: a provider named ``google`` or ``gemini``.

``model_map.<format>.<name>`` in the user's config wins over this table, and an
``agent_imports`` entry's ``model`` over both (:mod:`policies.loader.models`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["DEFAULT_ALIASES", "default_model_map", "fold"]

#: folded harness model name -> (vendor, model id at that vendor).
DEFAULT_ALIASES: dict[str, tuple[str, str]] = {
    # Claude Code's aliases, and the ids and display names other harnesses use.
    "sonnet": ("anthropic", "claude-sonnet-4-5"),
    "opus": ("anthropic", "claude-opus-4-1"),
    "haiku": ("anthropic", "claude-haiku-4-5"),
    "claude-sonnet-4-5": ("anthropic", "claude-sonnet-4-5"),
    "claude-sonnet-4": ("anthropic", "claude-sonnet-4-0"),
    "claude-opus-4-1": ("anthropic", "claude-opus-4-1"),
    "claude-haiku-4-5": ("anthropic", "claude-haiku-4-5"),
    "claude sonnet 4.5": ("anthropic", "claude-sonnet-4-5"),
    "claude sonnet 4": ("anthropic", "claude-sonnet-4-0"),
    "claude haiku 4.5": ("anthropic", "claude-haiku-4-5"),
    "claude opus 4.1": ("anthropic", "claude-opus-4-1"),
    # OpenAI models as Codex and Copilot name them.
    "gpt-5": ("openai", "gpt-5"),
    "gpt-5-codex": ("openai", "gpt-5-codex"),
    "gpt-4.1": ("openai", "gpt-4.1"),
    "gpt-4o": ("openai", "gpt-4o"),
    "o3": ("openai", "o3"),
    # Gemini CLI's models.
    "gemini-2.5-pro": ("google", "gemini-2.5-pro"),
    "gemini-2.5-flash": ("google", "gemini-2.5-flash"),
    "gemini-3-pro-preview": ("google", "gemini-3-pro-preview"),
    "gemini-3-flash": ("google", "gemini-3-flash"),
}

_COPILOT = re.compile(r"\s*\((?:copilot)\)\s*$", re.IGNORECASE)


def fold(name: str) -> str:
    """A harness's model name as the table keys it: lower case, one space, no Copilot
    ``(copilot)`` suffix."""
    return " ".join(_COPILOT.sub("", name).lower().split())


def _provider(vendor: str, providers: Mapping[str, str]) -> str | None:
    """The user's provider serving ``vendor`` (name -> provider type), or ``None``."""
    names = {"anthropic": ("anthropic",), "openai": ("openai",),
             "google": ("google", "gemini")}[vendor]
    for name in names:
        if name in providers:
            return name
    if vendor == "anthropic":
        typed = [name for name, kind in providers.items() if kind == "anthropic"]
        if len(typed) == 1:
            return typed[0]
    return None


def default_model_map(providers: Mapping[str, str]) -> dict[str, str]:
    """Folded harness name -> route (``provider/model``) for every alias the user's
    providers (name -> type) can serve."""
    mapped: dict[str, str] = {}
    for name, (vendor, model) in DEFAULT_ALIASES.items():
        provider = _provider(vendor, providers)
        if provider is not None:
            mapped[name] = f"{provider}/{model}"
    return mapped
