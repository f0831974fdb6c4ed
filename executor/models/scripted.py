"""The scripted model: a deterministic replay of a YAML file (``corral run --script FILE``).

A script is a YAML list of turns. Each turn is exactly one of::

    - text: "The final answer."
    - tool_calls:
        - name: read
          arguments: {path: README.md}
        - name: grep                       # arguments may be omitted: {}
      usage: {input_tokens: 10, output_tokens: 3}   # optional, on any turn

A parallel ``delegate`` call (several tasks at once) runs its children
concurrently, so they cannot share one replay in "execution order": the turn
after the call holds one replay per task, in task order, and each child plays
its own (:meth:`ScriptedModel.fork`)::

    - tool_calls:
        - name: delegate
          arguments: {tasks: [{agent: a, prompt: x}, {agent: b, prompt: y}]}
    - parallel:                            # task 1's replay, then task 2's
        - [{text: "a is done"}]
        - [{tool_calls: [{name: read_file, arguments: {path: x}}]}, {text: "b is done"}]
    - text: "Both are done."               # the delegating agent again

Every :meth:`ScriptedModel.complete` returns the next turn, whatever the
request says (it is a replay), and records the request for tests and
debugging. Turns are numbered from 1 in errors; tool call ids are
``call_<turn>_<n>``, both numbers 1-based, so a replay is byte-for-byte
reproducible. Running out of turns is ``ModelError(code="script_exhausted")``.

The file is the user's own input, validated strictly before anything runs:
an unknown key, a turn with both ``text`` and ``tool_calls`` or neither, a
tool name that is not a non-empty string, arguments that are not a mapping of
JSON values: each is ``ModelError(code="config")`` naming the file, the turn
and the problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from executor.errors import ModelError
from executor.models.base import Message, ModelResponse, Sampling, ToolCall, ToolSchema, Usage

__all__ = ["ScriptedModel", "ScriptedRequest"]

_TURN_KEYS = frozenset({"text", "tool_calls", "usage", "parallel"})
_CALL_KEYS = frozenset({"name", "arguments"})
_USAGE_KEYS = frozenset({"input_tokens", "output_tokens"})


@dataclass(frozen=True)
class ScriptedRequest:
    """One request the scripted model received, kept as given."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...]
    sampling: Sampling


class ScriptedModel:
    """A :class:`~executor.models.base.Model` that replays turns in order."""

    def __init__(self, turns: Sequence[object], *, source: str = "<script>") -> None:
        """Validate ``turns`` (the YAML list's items) now; ``source`` names them in errors."""
        self._source = source
        if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
            raise _invalid(source, None, "a script is a list of turns")
        if not turns:
            raise _invalid(source, None, "the script has no turns")
        self._turns: tuple[ModelResponse | _Parallel, ...] = tuple(
            _turn(source, index, turn) for index, turn in enumerate(turns, 1))
        self._played = 0
        self._requests: list[ScriptedRequest] = []

    @classmethod
    def from_file(cls, path: Path) -> ScriptedModel:
        """Read and validate a script file."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read script {path}: {exc}", code="config",
                             operation="load_script", context={"file": str(path)}) from exc
        except yaml.YAMLError as exc:
            raise ModelError(f"{path}: not valid YAML: {exc}", code="config",
                             operation="load_script", context={"file": str(path)},
                             hint="a script is a YAML list of turns") from exc
        if not isinstance(data, list):
            raise _invalid(str(path), None, "a script is a YAML list of turns, found "
                           f"{_kind(data)}")
        return cls(data, source=str(path))

    @property
    def name(self) -> str:
        """``scripted:FILE``."""
        return f"scripted:{self._source}"

    @property
    def played(self) -> int:
        """How many turns were returned so far."""
        return self._played

    @property
    def remaining(self) -> int:
        """How many turns are not consumed yet (0 when the replay is complete)."""
        return len(self._turns) - self._played

    @property
    def requests(self) -> tuple[ScriptedRequest, ...]:
        """Every request received, in order (including one that found the script exhausted)."""
        return tuple(self._requests)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema], *,
                 sampling: Sampling) -> ModelResponse:
        """The next turn; the request itself is recorded, never interpreted."""
        self._requests.append(ScriptedRequest(tuple(messages), tuple(tools), sampling))
        if self._played >= len(self._turns):
            raise ModelError(
                f"script {self._source} is exhausted: all {self._played} turns were played "
                "and the session asked for another", code="script_exhausted",
                operation="model_request",
                context={"file": self._source, "played": self._played},
                hint="add turns to the script (a final {text: ...} turn ends a session)")
        turn = self._turns[self._played]
        if isinstance(turn, _Parallel):
            raise ModelError(
                f"{self._source}: turn {self._played + 1} holds the replays of a parallel "
                "delegate call (parallel: ...), but the session asked the model for its next "
                "turn", code="config", operation="model_request",
                context={"file": self._source, "turn": self._played + 1},
                hint="a parallel turn follows a delegate call with tasks: [...]")
        self._played += 1
        return turn

    def fork(self, count: int) -> tuple[ScriptedModel, ...]:
        """The replays of the ``count`` tasks of a parallel delegate call: the next turn
        must be a ``parallel`` turn with exactly ``count`` replays (consumed here)."""
        turn = self._turns[self._played] if self._played < len(self._turns) else None
        if not isinstance(turn, _Parallel) or len(turn.replays) != count:
            found = ("the script's end" if turn is None else
                     f"a parallel turn with {len(turn.replays)} replay(s)"
                     if isinstance(turn, _Parallel) else "a model turn")
            raise ModelError(
                f"{self._source}: a delegate call started {count} task(s) at once, so turn "
                f"{self._played + 1} must hold their {count} replay(s) (parallel: [...]); "
                f"found {found}", code="config", operation="model_request",
                context={"file": self._source, "turn": self._played + 1},
                hint="after a delegate call with tasks, add a turn `parallel:` listing one "
                "replay (a list of turns) per task, in task order")
        self._played += 1
        return tuple(ScriptedModel(replay, source=f"{self._source} turn {self._played} "
                                   f"task {n}") for n, replay in enumerate(turn.replays, 1))


@dataclass(frozen=True)
class _Parallel:
    """A ``parallel`` turn: one replay per task of a parallel delegate call."""

    replays: tuple[tuple[object, ...], ...]


def _parallel(source: str, index: int, turn: Mapping[Any, Any]) -> _Parallel:
    if set(turn) != {"parallel"}:
        raise _invalid(source, index, "a parallel turn has no other key")
    replays = turn["parallel"]
    if not isinstance(replays, list) or not replays:
        raise _invalid(source, index, "parallel must be a non-empty list of replays")
    for n, replay in enumerate(replays, 1):
        if not isinstance(replay, list) or not replay:
            raise _invalid(source, index, f"parallel replay {n} must be a non-empty list of "
                           f"turns, found {_kind(replay)}")
        ScriptedModel(replay, source=f"{source} turn {index} task {n}")  # validated now
    return _Parallel(tuple(tuple(replay) for replay in replays))


def _turn(source: str, index: int, turn: object) -> ModelResponse | _Parallel:
    if not isinstance(turn, Mapping):
        raise _invalid(source, index, f"a turn is a mapping, found {_kind(turn)}")
    _check_keys(source, index, turn, _TURN_KEYS, "a turn")
    if "parallel" in turn:
        return _parallel(source, index, turn)
    has_text, has_calls = "text" in turn, "tool_calls" in turn
    if has_text == has_calls:
        raise _invalid(source, index, "a turn has exactly one of text or tool_calls"
                       + (", not both" if has_text else ""))
    usage = _usage(source, index, turn.get("usage"))
    model = f"scripted:{source}"
    if has_text:
        text = turn["text"]
        if not isinstance(text, str):
            raise _invalid(source, index, f"text must be a string, found {_kind(text)}")
        return ModelResponse(text=text, usage=usage, stop_reason="end", model=model)
    calls = turn["tool_calls"]
    if not isinstance(calls, list) or not calls:
        raise _invalid(source, index, "tool_calls must be a non-empty list")
    return ModelResponse(
        tool_calls=tuple(_call(source, index, n, call) for n, call in enumerate(calls, 1)),
        usage=usage, stop_reason="tool_calls", model=model)


def _call(source: str, index: int, n: int, call: object) -> ToolCall:
    where = f"tool call {n}"
    if not isinstance(call, Mapping):
        raise _invalid(source, index, f"{where} is a mapping, found {_kind(call)}")
    _check_keys(source, index, call, _CALL_KEYS, where)
    name = call.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _invalid(source, index, f"{where}: name must be a non-empty string, found "
                       f"{_kind(name)}")
    arguments = call.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise _invalid(source, index, f"{where} ({name}): arguments must be a mapping, found "
                       f"{_kind(arguments)}")
    problem = _json_problem(arguments, "arguments")
    if problem:
        raise _invalid(source, index, f"{where} ({name}): {problem}")
    return ToolCall(id=f"call_{index}_{n}", name=name, arguments=dict(arguments))


def _usage(source: str, index: int, usage: object) -> Usage:
    if usage is None:
        return Usage()
    if not isinstance(usage, Mapping):
        raise _invalid(source, index, f"usage is a mapping, found {_kind(usage)}")
    _check_keys(source, index, usage, _USAGE_KEYS, "usage")
    counts: dict[str, int] = {}
    for key in sorted(_USAGE_KEYS):
        value = usage.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _invalid(source, index, f"usage.{key} must be a non-negative integer")
        counts[key] = value
    return Usage(counts["input_tokens"], counts["output_tokens"])


def _check_keys(source: str, index: int, data: Mapping[Any, Any], allowed: frozenset[str],
                where: str) -> None:
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise _invalid(source, index, f"{where} has unknown key(s) {', '.join(unknown)} "
                       f"(expected {', '.join(sorted(allowed))})")


def _json_problem(value: object, path: str) -> str | None:
    """Why ``value`` is not a JSON value (YAML also has dates, sets, binary...)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a non-string key {key!r}"
            problem = _json_problem(item, f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(value, list):
        for n, item in enumerate(value):
            problem = _json_problem(item, f"{path}[{n}]")
            if problem:
                return problem
        return None
    return f"{path} is a {_kind(value)}, not a JSON value"


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _invalid(source: str, index: int | None, problem: str) -> ModelError:
    where = f"{source}: turn {index}" if index is not None else source
    context: dict[str, Any] = {"file": source, "problem": problem}
    if index is not None:
        context["turn"] = index
    return ModelError(f"{where}: {problem}", code="config", operation="load_script",
                      context=context, hint="a turn is {text: ...} or {tool_calls: [{name: ..., "
                      "arguments: {...}}]}, with optional usage")
