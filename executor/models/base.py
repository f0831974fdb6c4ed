"""The provider-neutral conversation types and the :class:`Model` protocol.

A session talks to every provider in these types: a list of :class:`Message`
(system, user, assistant with optional tool calls, tool results), the
:class:`ToolSchema` list the model may call, and :class:`Sampling` settings.
A provider turns one request into one :class:`ModelResponse`: text and/or
tool calls, the usage, and why it stopped. Providers translate their own
errors into :class:`executor.errors.ModelError` at exactly one boundary, with
``retryable`` set for rate limits, timeouts and 5xx responses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "DEFAULT_MAX_TOKENS",
    "Message",
    "Model",
    "ModelLimits",
    "ModelResponse",
    "Role",
    "Sampling",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "effective_tool_choice",
    "model_limits",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSchema:
    """One tool as the model sees it: an exact name, a description, a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A model's request to call a tool.

    ``arguments`` is the decoded JSON object; when the model sent text that
    is not a JSON object, ``arguments`` is empty and ``raw_arguments`` holds
    the text, so dispatch can answer with a tool error instead of crashing.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None


@dataclass(frozen=True)
class Message:
    """One conversation message.

    ``assistant`` messages may carry ``tool_calls``; each ``tool`` message
    answers one call (``tool_call_id``, ``name``) with ``content``;
    ``is_error`` marks a tool result that reports a failure or a denial.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False


#: The answer's token cap when the provider sets none (nor a context window).
DEFAULT_MAX_TOKENS = 4096
#: The conversation's token budget when the provider names no context window.
DEFAULT_BUDGET_TOKENS = 100_000


@dataclass(frozen=True)
class Sampling:
    """Per-request settings; ``None`` leaves the provider's default.

    ``tool_choice`` (see :func:`effective_tool_choice`): ``auto``, ``required`` (some
    tool must be called), ``none`` (the tool definitions stay in the request but no call
    may be made: a provider feature; the session's finalization request sends no tools
    at all instead, as zuno's spec says), or the name of one offered tool (that tool must
    be called); ``None`` leaves it to the provider's configured ``tool_choice``.
    """

    temperature: float | None = None
    top_p: float | None = None
    reasoning: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    tool_choice: str | None = None
    #: Provider options (zuno ``options``): request fields sent verbatim, except the ones
    #: corral alone sets (:data:`policies.contract.RESERVED_OPTION_KEYS`); an explicit
    #: setting above (temperature, top_p, reasoning) wins over the same option.
    options: Mapping[str, Any] = field(default_factory=dict)


def effective_tool_choice(sampling: Sampling, messages: Sequence[Message],
                          default: str | None) -> str:
    """The ``tool_choice`` one request goes with: the request's own, else the provider's
    ``default``, else ``auto``. A forcing choice (``required`` or a named tool) is
    *released* to ``auto`` once the conversation ends in a tool result: it forces the
    turn's first call, and the model can then still answer in text (a forced model could
    otherwise never finish)."""
    choice = sampling.tool_choice or default or "auto"
    if choice not in ("auto", "none") and messages and messages[-1].role == "tool":
        return "auto"
    return choice


@dataclass(frozen=True)
class ModelLimits:
    """A provider's token limits (``[providers.NAME] context_window``, ``max_tokens``).

    ``output_tokens`` is what each request asks for at most: ``max_tokens``, else a
    quarter of the context window (at most :data:`DEFAULT_MAX_TOKENS`), else that default.
    ``input_budget`` is what the conversation may fill: the window less the answer's room
    (auto-compacting memory compacts at its ratio of it), else
    :data:`DEFAULT_BUDGET_TOKENS`. A model that names none (a replay) has the defaults.
    """

    context_window: int | None = None
    max_tokens: int | None = None

    def output_tokens(self) -> int:
        """The ``max_tokens`` each request sends."""
        if self.max_tokens is not None:
            return self.max_tokens
        if self.context_window is not None:
            return max(1, min(DEFAULT_MAX_TOKENS, self.context_window // 4))
        return DEFAULT_MAX_TOKENS

    def input_budget(self) -> int:
        """The tokens the conversation (system prompt, task, turns) may take."""
        if self.context_window is None:
            return DEFAULT_BUDGET_TOKENS
        return max(1, self.context_window - self.output_tokens())


def model_limits(model: object) -> ModelLimits:
    """``model``'s limits (its ``limits`` attribute), the defaults when it has none."""
    limits = getattr(model, "limits", None)
    return limits if isinstance(limits, ModelLimits) else ModelLimits()


@dataclass(frozen=True)
class Usage:
    """Token counts of one response (0 when the provider does not say)."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: Of ``input_tokens``, how many the provider read from its prompt cache.
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cached_tokens + other.cached_tokens)


@dataclass(frozen=True)
class ModelResponse:
    """One model turn.

    ``stop_reason`` is normalized: ``tool_calls`` (the model wants tools run),
    ``end`` (a final answer), ``length`` (cut at max tokens), ``other``.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: Literal["tool_calls", "end", "length", "other"] = "end"
    model: str = ""


@runtime_checkable
class Model(Protocol):
    """Anything that answers a conversation: a provider connection or a replay."""

    @property
    def name(self) -> str:
        """A display name: ``provider/model`` or ``scripted:FILE``."""
        ...

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema], *,
                 sampling: Sampling) -> ModelResponse:
        """One request. ``tools`` may be empty: the model must then answer in text."""
        ...
