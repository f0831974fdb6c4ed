"""ngn native Markdown (``.ngn/agents/*.md``, ``.ngn/agents/<name>/agent.md``).

Exactly the field table of ``shared/spec/ngn-agent-definitions.md``: every
other field is rejected, the header is strict YAML (no lenient fallback),
``description`` is required and nonempty, the instructions are nonempty, the
name falls back to the basename (or the directory name for ``agent.md``).
JSON profiles share the same fields (:func:`profile_contract`), with
``instructions`` in the object (a string, or ``{"file": path}`` read as
literal text), arrays for lists, and an optional description.

``provider`` must name a connection of the user's corral config ("Existing ngn
provider connection ID") when the loader knows them (``Options.providers``);
with ``model`` omitted the agent runs its parent's model id on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policies.contract import AgentContract, AgentFormat, AgentMode
from policies.loader.base import Context, FieldRules, Reader, Source, check_name
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.common import allowlist, build, denylist, markdown
from policies.loader.models import native_route
from policies.permissions import PermissionPolicy

__all__ = ["NgnAdapter", "profile_contract"]

FIELDS = frozenset({
    "name", "description", "mode", "model", "provider", "tools", "denied_tools",
    "allowed_agents", "user_invocable", "subagent_available",
})
_RULES = FieldRules(reject_unknown=True)


class NgnAdapter:
    """The native format."""

    format = AgentFormat.NGN

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """One Markdown file, one agent."""
        reader, body = markdown(source, ctx, known=FIELDS, lenient=False)
        if not body:
            ctx.error("instructions", "the instructions (the Markdown body) must not be empty",
                      line=1)
        return [_contract(reader, source, body, comma=True, description_required=True)]


def profile_contract(source: Source, ctx: Context, name: str, data: dict[str, Any],
                     line: int) -> AgentContract:
    """A JSON profile: the native fields plus ``instructions``; arrays for lists."""
    reader = Reader(ctx, data, {}, base_line=line, where=f"profiles.{name}.")
    instructions = _instructions(reader, source)
    if "name" in data and data["name"] != name:
        reader.error("name", f"does not match the profile key {name!r}")
    reader.fields.setdefault("name", name)
    return _contract(reader, source, instructions, comma=False, description_required=False,
                     line=line)


def _instructions(reader: Reader, source: Source) -> str:
    """A string, or ``{"file": path}`` read as literal text beside the JSON file
    (Markdown frontmatter in it is not interpreted)."""
    value = reader.take("instructions")
    if value is None or isinstance(value, str):
        return (value or "").strip()
    if isinstance(value, dict) and set(value) == {"file"} and isinstance(value["file"], str):
        target = Path(value["file"])
        path = target if target.is_absolute() else source.path.parent / target
        try:
            return decode_text(read_bounded(path)).strip()
        except DefinitionRejected as exc:
            reader.error("instructions", f"instructions file {value['file']!r}: {exc.reason}")
            return ""
    reader.error("instructions", 'must be a string or {"file": "<path>"}')
    return ""


def _contract(reader: Reader, source: Source, instructions: str, *, comma: bool,
              description_required: bool, line: int | None = None) -> AgentContract:
    name = reader.string("name") or source.location_name
    check_name(reader, "name", name)
    description = reader.string("description", required=description_required)
    mode = reader.choice("mode", [m.value for m in AgentMode]) or AgentMode.BUILD.value
    model = reader.string("model")
    provider = reader.string("provider")
    known = reader.ctx.options.providers
    if provider is not None and known is not None and provider not in known:
        reader.error("provider", f"{provider!r} is not a provider connection of your corral "
                     f"config (connections: {', '.join(sorted(known)) or 'none'})",
                     hint=f"add [providers.{provider}] to your corral config, or remove "
                     "provider to inherit the parent's connection")
    tools, rules, _ = allowlist(reader, "tools", reader.names("tools", comma=comma),
                                AgentFormat.NGN)
    denied, deny_rules = denylist(reader, "denied_tools",
                                  reader.names("denied_tools", comma=comma), AgentFormat.NGN)
    agents = reader.names("allowed_agents", comma=comma)
    for agent in agents or []:
        check_name(reader, "allowed_agents", agent)
    user_invocable = reader.boolean("user_invocable")
    subagent_available = reader.boolean("subagent_available")
    reader.leftovers(_RULES)
    return build(
        reader, source, line=line,
        name=name, id=name, display_name=name, description=description,
        instructions=instructions, mode=AgentMode(mode),
        model=native_route(reader, "model", [model] if model else [], provider=provider,
                           ngn=True),
        tools=tools, denied_tools=denied,
        delegates=frozenset(agents) if agents is not None else None,
        user_invocable=True if user_invocable is None else user_invocable,
        subagent_available=True if subagent_available is None else subagent_available,
        permission=PermissionPolicy(rules=(*rules, *deny_rules)),
    )
