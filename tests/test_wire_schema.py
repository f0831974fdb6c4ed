"""Compact tool schemas (issue 31, D6): what a model is shown costs fewer bytes and still
says exactly how to call each tool.

The arguments are validated by each tool's pydantic model whatever the schema says; these
tests check that the compact schema admits the calls pydantic admits (a model that follows
it makes valid calls) and refuses the shapes pydantic refuses that a schema can express.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from executor.tools import native_tools
from executor.tools.wire_schema import compact

TOOLS = native_tools(use_ripgrep=True, delegate_targets=[("reviewer", "Reviews."),
                                                         ("fixer", "Fixes.")],
                     network=None, url_rule=lambda _url: True)

VALID: dict[str, list[dict[str, Any]]] = {
    "read_file": [{"path": "a.py"}, {"path": "a.py", "offset": 3, "limit": 10}],
    "delegate": [{"agent": "fixer", "prompt": "fix it"},
                 {"agent": "reviewer", "prompt": "look", "instructions": "be strict"},
                 {"tasks": [{"agent": "fixer", "prompt": "a"},
                            {"agent": "reviewer", "prompt": "b", "child": "r1"}]}],
    "todo": [{"items": [{"content": "x"}, {"content": "y", "status": "completed"}]}],
    "shell": [{"command": "ls"}],
}
INVALID: dict[str, list[dict[str, Any]]] = {
    "read_file": [{}, {"path": "a", "limit": 0}, {"path": "a", "color": "red"}],
    # (an agent outside the enum is the capability's to deny, at dispatch: not pydantic's)
    "delegate": [{"tasks": []}, {"tasks": [{"agent": "fixer"}]}],
    "todo": [{"items": [{"content": "x", "status": "maybe"}]}],
}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_no_schema_keeps_pydantics_bulk_and_none_grows(name: str) -> None:
    schema = TOOLS[name].args.model_json_schema()
    shown = compact(schema)
    text = json.dumps(shown)
    assert '"title"' not in text and "$ref" not in text and "$defs" not in text
    assert '{"type": "null"}' not in text
    assert len(text) <= len(json.dumps(schema))
    jsonschema.Draft202012Validator.check_schema(shown)
    assert shown.get("required", []) == schema.get("required", [])


@pytest.mark.parametrize(("name", "arguments"),
                         [(n, a) for n, calls in VALID.items() for a in calls])
def test_what_pydantic_admits_the_schema_admits(name: str, arguments: dict[str, Any]) -> None:
    TOOLS[name].args.model_validate(arguments)
    jsonschema.validate(arguments, compact(TOOLS[name].args.model_json_schema()))


@pytest.mark.parametrize(("name", "arguments"),
                         [(n, a) for n, calls in INVALID.items() for a in calls])
def test_what_the_schema_can_refuse_both_refuse(name: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, compact(TOOLS[name].args.model_json_schema()))
    with pytest.raises(ValueError):
        TOOLS[name].args.model_validate(arguments)


def test_delegate_says_one_form_first_and_its_tasks_do_not_repeat_the_descriptions() -> None:
    tool = TOOLS["delegate"]
    assert "Call it with agent and prompt." in tool.description
    shown = compact(tool.args.model_json_schema())
    task = shown["properties"]["tasks"]["items"]["properties"]
    assert task["agent"]["enum"] == ["reviewer", "fixer"]
    assert "description" not in task["prompt"]  # said once, at the top level
    assert len(json.dumps({"d": tool.description, "p": shown})) < 1600
