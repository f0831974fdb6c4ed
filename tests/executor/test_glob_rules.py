"""A deny with a class, ``Read(secrets/[a-z]*.env)``, holds on the read tool (issue 28).

The permission glob took ``[`` literally, so this deny matched nothing while ``find`` read
the same pattern as a class: the child read ``secrets/prod.env``. Driven through a real run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_support import Runner, git

from policies.contract import SandboxMode


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@pytest.mark.parametrize("backend", ["host"], indirect=True)
def test_a_deny_with_a_class_denies_the_read_and_hides_the_path(run: Runner,
                                                                 repo: Path) -> None:
    (repo / "secrets").mkdir()
    (repo / "secrets" / "prod.env").write_text("TOPSECRET=1\n")
    (repo / "secrets" / "Notes.env").write_text("capital, outside [a-z]\n")
    (repo / "secrets" / "app.env").write_text("app\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "secrets")
    path = repo / ".claude/agents/c.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: c\ndescription: d\ntools: Read, Glob\n"
                    "disallowedTools: Read(secrets/[a-z]*.env), Read(secrets/[!a]pp.env)\n"
                    "---\nx\n")
    record = run("c", [
        call("read_file", path="secrets/prod.env"),
        call("read_file", path="./secrets/prod.env"),
        call("read_file", path="secrets/Notes.env"),
        call("find", pattern="secrets/[A-Z]*.env"),
        call("find", pattern="secrets/*.env"),
        {"text": "done"}], mode=SandboxMode.READ_ONLY)
    decisions = [a["decision"] for a in record.audit]
    assert decisions[:3] == ["denied", "denied", "allowed"]
    assert "TOPSECRET" not in json.dumps([a["result"] for a in record.audit])
    assert record.audit[3]["result"] == "secrets/Notes.env"  # find reads classes as rules do
    assert "secrets/prod.env" not in record.audit[4]["result"].split("\n")
    assert "hidden by permission rules" in record.audit[4]["result"]
