"""The scripted model: a strict, deterministic replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.errors import ModelError
from executor.models import Message, Model, Sampling, ScriptedModel, ToolCall, ToolSchema, Usage

SCRIPT = """\
- tool_calls:
    - name: read
      arguments: {path: README.md}
    - name: grep
  usage: {input_tokens: 10, output_tokens: 4}
- text: Done.
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_replays_turns_in_order_and_records_requests(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPT)
    model = ScriptedModel.from_file(path)
    assert isinstance(model, Model) and model.name == f"scripted:{path}"
    assert (model.remaining, model.played) == (2, 0)
    tool = ToolSchema("read", "Read.", {"type": "object"})
    first = model.complete([Message("user", "anything")], [tool], sampling=Sampling())
    assert first.tool_calls == (ToolCall("call_1_1", "read", {"path": "README.md"}),
                                ToolCall("call_1_2", "grep", {}))
    assert (first.stop_reason, first.usage) == ("tool_calls", Usage(10, 4))
    second = model.complete([Message("user", "something else entirely")], [],
                            sampling=Sampling(reasoning="high"))
    assert (second.text, second.stop_reason, second.tool_calls) == ("Done.", "end", ())
    assert model.remaining == 0 and model.played == 2
    assert [r.messages[0].content for r in model.requests] == ["anything",
                                                               "something else entirely"]
    assert model.requests[0].tools == (tool,) and model.requests[1].sampling.reasoning == "high"


def test_replay_is_deterministic(tmp_path: Path) -> None:
    path = _write(tmp_path, SCRIPT)

    def play() -> list[object]:
        model = ScriptedModel.from_file(path)
        return [model.complete([], [], sampling=Sampling()) for _ in range(model.remaining)]

    assert play() == play()


def test_exhaustion_names_the_turns_played() -> None:
    model = ScriptedModel([{"text": "one"}, {"text": "two"}], source="demo.yaml")
    for _ in range(2):
        model.complete([], [], sampling=Sampling())
    with pytest.raises(ModelError) as caught:
        model.complete([], [], sampling=Sampling())
    assert caught.value.code == "script_exhausted" and not caught.value.retryable
    assert "all 2 turns were played" in caught.value.message
    assert caught.value.context == {"file": "demo.yaml", "played": 2}
    assert len(model.requests) == 3


@pytest.mark.parametrize(("text", "turn", "problem"), [
    ("- text: a\n- txt: b\n", 2, "unknown key(s) txt"),
    ("- text: a\n  tool_calls: [{name: read}]\n", 1, "exactly one of text or tool_calls, not both"),
    ("- usage: {input_tokens: 1}\n", 1, "exactly one of text or tool_calls"),
    ("- tool_calls: [{name: 3}]\n", 1, "tool call 1: name must be a non-empty string"),
    ("- tool_calls: [{name: read}, {name: ''}]\n", 1, "tool call 2: name must be"),
    ("- tool_calls: [{name: read, arguments: [a]}]\n", 1, "arguments must be a mapping"),
    ("- tool_calls: [{name: read, args: {}}]\n", 1, "unknown key(s) args"),
    ("- tool_calls: [{name: read, arguments: {when: 2024-01-01}}]\n", 1,
     "arguments.when is a date, not a JSON value"),
    ("- tool_calls: []\n", 1, "tool_calls must be a non-empty list"),
    ("- text: 3\n", 1, "text must be a string"),
    ("- text: a\n  usage: {input_tokens: -1}\n", 1, "usage.input_tokens must be"),
    ("- text: a\n  usage: {tokens: 1}\n", 1, "usage has unknown key(s) tokens"),
    ("- text: a\n- just a string\n", 2, "a turn is a mapping, found str"),
])
def test_invalid_turns_name_file_turn_and_problem(tmp_path: Path, text: str, turn: int,
                                                  problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ModelError) as caught:
        ScriptedModel.from_file(path)
    error = caught.value
    assert error.code == "config"
    assert error.message.startswith(f"{path}: turn {turn}: ")
    assert problem in error.message
    assert error.context["turn"] == turn and error.context["file"] == str(path)


@pytest.mark.parametrize(("text", "problem"), [
    ("", "a script is a YAML list of turns, found nothing"),
    ("text: a\n", "found a mapping"),
    ("[]\n", "the script has no turns"),
    ("- text: [unclosed\n", "not valid YAML"),
])
def test_invalid_files_name_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ModelError) as caught:
        ScriptedModel.from_file(path)
    assert caught.value.code == "config"
    assert str(path) in caught.value.message and problem in caught.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        ScriptedModel.from_file(tmp_path / "nope.yaml")
    assert caught.value.code == "config" and "nope.yaml" in caught.value.message
