"""Hostile text in every field a page shows, and a project whose runs carry it.

Each payload is put, with a label of its own, in every field a child, a definition, a
file name or a model produces: an agent's description, a definition file's text, the
prompt, the model's answer, a tool call's arguments, a command's output, a file's
name (``/`` cannot be in one: it becomes ``_``) and content, a check's output.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from web_support import agent_file, call, replay

from executor.api import Corral, FanoutResult
from tests.backends import git

#: name -> text. The script and HTML payloads set ``window.__pwned`` if they ever run.
PAYLOADS = {
    "script": "<script>window.__pwned=1</script>",
    "html": '<img src=x onerror="window.__pwned=2"><b>bold</b><a href="javascript:x">l</a>',
    "bidi": "safe\u202etxt.exe\u2066 zero\u200bwidth \x1b[31mred",
}
#: What must never reach a page as it is.
RAW = ("<script>window", "<img src=x", "<b>bold", "\u202e", "\u2066", "\u200b", "\x1b")
FIELDS = ("description", "definition", "prompt", "final_text", "tool_arguments",
          "tool_output", "file_name", "file_content", "check_output")


def labelled(payload: str, field: str) -> str:
    return f"{payload} [{field}]"


def file_name(payload: str) -> str:
    return labelled(payload, "file_name").replace("/", "_")


@dataclass(frozen=True)
class Carried:
    """The fanout (of one child) that carries one payload in every field."""

    payload: str
    fanout: FanoutResult

    @property
    def run_id(self) -> str:
        return self.fanout.children[0].run_id


def make_hostile(repo: Path, scripts: Path, corral: Corral) -> dict[str, Carried]:
    """Definitions and one fanout per payload (the repository must be made already)."""
    for name, payload in PAYLOADS.items():
        agent_file(repo, f"carrier-{name}", "tools: [write_file, shell]",
                   description=labelled(payload, "description"))
        broken = repo / ".ngn" / "agents" / f"broken-{name}.md"
        broken.write_text(f"---\nname: broken-{name}\ndescription: broken\n"
                          f"tools: [no_such_tool]\n# {labelled(payload, 'definition')}\n"
                          "---\nbody\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hostile agents")
    carried = {}
    for name, payload in PAYLOADS.items():
        path = file_name(payload)
        script = replay(
            scripts, name,
            call("write_file", path=path, content=labelled(payload, "file_content") + "\n"),
            call("shell", command=f"printf '%s\\n' {shlex.quote(labelled(payload, 'tool_output'))}"
                 f" # {labelled(payload, 'tool_arguments')}"),
            {"text": labelled(payload, "final_text")})
        check = f"printf '%s\\n' {shlex.quote(labelled(payload, 'check_output'))}"
        result = corral.fanout(labelled(payload, "prompt"), agents=[f"carrier-{name}"], n=1,
                               scripts=[script], check=check)
        carried[name] = Carried(payload, result)
    return carried
