"""The model layer: one :class:`Model` protocol, its providers, and route resolution.

- :class:`ScriptedModel`: a deterministic replay of a YAML file (``--script``);
- :class:`OpenAIChatModel`: OpenAI-compatible chat completions (OpenAI, vLLM,
  Ollama, llama.cpp server);
- :class:`AnthropicModel`: the Anthropic Messages API;
- :func:`resolve_model`: a contract's :class:`~policies.contract.ModelRoute`
  plus the user's config -> the first available model.

Every provider failure is a :class:`~executor.errors.ModelError`; the HTTP
providers translate httpx's exceptions in :mod:`executor.models.http` only.
"""

from typing import TYPE_CHECKING, Any

from executor.models.base import (
    Message,
    Model,
    ModelResponse,
    Role,
    Sampling,
    ToolCall,
    ToolSchema,
    Usage,
)
from executor.models.routing import (
    Attempt,
    Candidate,
    LeveledModel,
    build_provider_model,
    expand_candidates,
    resolve_model,
    with_level,
)
from executor.models.scripted import ScriptedModel, ScriptedRequest

if TYPE_CHECKING:
    from executor.models.anthropic import AnthropicModel
    from executor.models.http import RetryPolicy
    from executor.models.openai import OpenAIChatModel

#: The HTTP providers and their wire models, imported on first use: a scripted run
#: never builds them (``tests/test_startup.py``).
_LAZY = {"AnthropicModel": "executor.models.anthropic", "OpenAIChatModel": "executor.models.openai",
         "RetryPolicy": "executor.models.http"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - only for the lazy names above

    return getattr(importlib.import_module(module), name)

__all__ = [
    "AnthropicModel",
    "Attempt",
    "Candidate",
    "LeveledModel",
    "Message",
    "Model",
    "ModelResponse",
    "OpenAIChatModel",
    "RetryPolicy",
    "Role",
    "Sampling",
    "ScriptedModel",
    "ScriptedRequest",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "build_provider_model",
    "expand_candidates",
    "resolve_model",
    "with_level",
]
