"""JSON and text views of contracts and diagnostics (what the CLI prints)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from executor.offer import make_offer
from executor.text import one_line, printable
from policies.capability import READ_ONLY_REMOVED_GROUPS, Capability, refusal, restrict
from policies.contract import AgentContract
from policies.loader import Diagnostic, Environment, LoadResult, Severity
from policies.mcp import McpServerConfig
from policies.tools import group_of, tool_matches

__all__ = ["agent_diagnostics", "agent_json", "diagnostics_json", "list_json", "list_lines",
           "own_tools", "render_check", "render_show", "runnable", "show_context",
           "skill_views"]

#: How much of a description ``agents list`` shows (``agents show`` shows it whole).
LIST_DESCRIPTION_CHARS = 100


def own_tools(contract: AgentContract) -> list[str] | None:
    """The agent's own allowlist after its denied tools and its mode; None = inherits."""
    if contract.tools is None:
        return None
    tools = {t for t in contract.tools
             if not any(tool_matches(denied, t) for denied in contract.denied_tools)}
    if contract.is_read_only:
        tools = {t for t in tools if group_of(t) not in READ_ONLY_REMOVED_GROUPS}
    return sorted(tools)


def runnable(contract: AgentContract) -> dict[str, bool]:
    """Whether the agent can run at the top level (``corral run``) and as a delegated
    child: what a run refuses, a listing never offers (:func:`policies.capability.refusal`)."""
    return {"user": refusal(contract, delegated=False) is None,
            "subagent": refusal(contract, delegated=True) is None}


def agent_json(contract: AgentContract, *, effective: Capability | None = None,
               agents: Mapping[str, AgentContract] | None = None,
               servers: Mapping[str, McpServerConfig] | None = None,
               diagnostics: Sequence[Diagnostic] | None = None,
               skills: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The ``agents show --json`` object; ``effective`` is the root capability, and the
    ``effective`` tools are exactly what a run's model is offered (:mod:`executor.offer`).
    ``diagnostics`` are the agent's own (:func:`agent_diagnostics`), ``skills`` its
    required skills as a run resolves them (:func:`skill_views`)."""
    route = contract.model
    data: dict[str, Any] = {
        "name": contract.name,
        "id": contract.id,
        "display_name": contract.display_name,
        "description": contract.description,
        "format": contract.origin.format.value,
        "source": contract.origin.source,
        "scope": contract.origin.scope.value,
        "mode": contract.mode.value,
        "sandbox": contract.sandbox.value if contract.sandbox else None,
        "tools": own_tools(contract),
        "denied_tools": sorted(contract.denied_tools),
        "delegates": sorted(contract.delegates) if contract.delegates is not None else None,
        "model": route.display,
        "model_route": {
            "candidates": [str(ref) for ref in route.candidates],
            "provider": route.provider,
            "inherit": route.inherit,
            "foreign": route.foreign,
            "needs_override": route.needs_override,
            "parent_fallback": route.parent_fallback,
            "preset": route.preset,
            "roles": {role: list(chain) for role, chain in sorted(route.roles.items())},
        },
        "user_invocable": contract.user_invocable,
        "subagent_available": contract.subagent_available,
        "runnable": runnable(contract),
        "hidden": contract.hidden,
        "disabled": contract.disabled,
        "steps": contract.steps,
        "timeout_seconds": contract.timeout_seconds,
        "reasoning": contract.reasoning,
        "temperature": contract.temperature,
        "top_p": contract.top_p,
        "variant": contract.variant,
        "permission": contract.permission.model_dump(mode="json"),
        "options": contract.options,
        "required_skills": list(contract.required_skills),
        "memory": contract.memory.model_dump(mode="json"),
        "tool_bindings": [b.model_dump(mode="json") for b in contract.tool_bindings],
        "status": contract.status.value if contract.status else None,
        "namespace": contract.namespace,
        "welcome_message": contract.welcome_message,
        "response_reviewers": list(contract.response_reviewers),
        "color": contract.color,
        "extras": contract.extras,
        "digest": contract.digest(),
        "instructions": contract.instructions,
    }
    if skills is not None:
        data["skills"] = [dict(skill) for skill in skills]
    if diagnostics is not None:
        data["diagnostics"] = diagnostics_json(list(diagnostics))
    if effective is not None:
        narrowed = restrict(effective, contract)
        offer = make_offer(narrowed, contract, agents or {}, servers=servers)
        data["effective"] = {
            **offer.to_json(),
            "sandbox": narrowed.sandbox.value,
            "read_only": narrowed.read_only,
            # Every tool some call of which waits for a human: needsApproval, or an ask rule.
            "approval_required": sorted(tool for tool in (*offer.tools, *offer.deferred)
                                        if narrowed.may_ask(tool)),
        }
    return data


#: A diagnostic on one entry of a file that maps names to definitions (zuno.json,
#: opencode.json, an ngn JSON file's profiles).
_ENTRY_RE = re.compile(r"^(?:agents?|profiles)\.(?P<name>[^.]+)(?:\.|$)")


def agent_diagnostics(contract: AgentContract,
                      diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics about ``contract``'s own definition: those of its source file (and
    of the zuno layers it merged), without those of other entries of a shared file."""
    files = {contract.origin.source, *contract.origin.layers}
    names = {contract.name, contract.display_name, contract.name.rsplit("/", 1)[-1]}
    out = []
    for diagnostic in diagnostics:
        if diagnostic.file not in files:
            continue
        entry = _ENTRY_RE.match(diagnostic.field)
        if entry is not None and entry.group("name") not in names:
            continue
        out.append(diagnostic)
    return out


def skill_views(contract: AgentContract, *, root: Path, env: Environment,
                trust_project: bool) -> list[dict[str, Any]]:
    """Each required skill as a run resolves it (:func:`executor.skills.resolve_skills`):
    its source, its metadata (the SKILL.md header's ``name`` and ``description``) and
    its body budget (a run sends the whole body; a SKILL.md over 256 KiB is refused), or
    why a run cannot start with it."""
    # The skill resolver (the run's own) only when an agent requires skills.
    from executor.errors import RunError  # noqa: PLC0415
    from executor.skills import resolve_skills  # noqa: PLC0415
    from policies.loader.diagnostics import DefinitionRejected  # noqa: PLC0415
    from policies.loader.files import MAX_FILE_BYTES  # noqa: PLC0415
    from policies.loader.frontmatter import split_frontmatter  # noqa: PLC0415

    views: list[dict[str, Any]] = []
    for name in contract.required_skills:
        try:
            (skill,) = resolve_skills((name,), root=root, env=env, trust_project=trust_project)
        except RunError as exc:
            views.append({"name": name, "status": exc.code, "reason": exc.message,
                          "context": {k: str(v) for k, v in exc.context.items()}})
            continue
        metadata: dict[str, Any] = {}
        try:
            header = split_frontmatter(skill.path.read_text(encoding="utf-8"), lenient=True)
            metadata = {key: header.fields[key] for key in ("name", "description")
                        if isinstance(header.fields.get(key), str)}
        except (DefinitionRejected, OSError, UnicodeDecodeError):
            pass
        body = skill.instructions.encode("utf-8")
        views.append({"name": name, "status": "resolved", "source": str(skill.path),
                      "metadata": metadata,
                      "budget": {"body_bytes": len(body), "sent": len(body),
                                 "limit_bytes": MAX_FILE_BYTES}})
    return views


def show_context(contract: AgentContract, result: LoadResult, *, root: Path,
                 trust_project: bool) -> dict[str, Any]:
    """What ``agents show`` adds to the contract: its own diagnostics and its skills."""
    return {"diagnostics": agent_diagnostics(contract, result.diagnostics),
            "skills": skill_views(contract, root=root, env=Environment.from_env(),
                                  trust_project=trust_project)}


def diagnostics_json(diagnostics: list[Diagnostic]) -> list[dict[str, object]]:
    """Diagnostics as JSON objects."""
    return [d.to_json() for d in diagnostics]


def list_json(result: LoadResult) -> dict[str, Any]:
    """The ``agents list --json`` object."""
    return {
        "agents": [agent_json(c) for _, c in sorted(result.agents.items())],
        "diagnostics": diagnostics_json(result.diagnostics),
        "default_agent": result.default_agent,
    }


def list_lines(result: LoadResult) -> list[str]:
    """``agents list`` as text (the picker): per agent its name, flags (``R`` read-only,
    ``u`` runnable by you, ``s`` runnable as a subagent), format and source, why it cannot
    run at all when it cannot, and its description under it (its first line, cut at
    :data:`LIST_DESCRIPTION_CHARS` with a marker; ``agents show`` has it whole)."""
    lines: list[str] = []
    for name, contract in sorted(result.agents.items()):
        can = runnable(contract)
        flags = "".join(["R" if contract.is_read_only else "-", "u" if can["user"] else "-",
                         "s" if can["subagent"] else "-"])
        shown = f"  ({one_line(contract.display_name)})" if contract.display_name not in (
            name, contract.origin.source) else ""
        why = refusal(contract, delegated=True) if not any(can.values()) else None
        lines.append(f"{one_line(name):32} {flags} {contract.origin.format.value:11} "
                     f"{one_line(contract.origin.source)}{shown}"
                     + (f"  [not runnable: {why}]" if why else ""))
        description = (contract.description or "").strip().split("\n", 1)[0].strip()
        if description:
            cut = len(description) > LIST_DESCRIPTION_CHARS
            lines.append("    " + one_line(description[:LIST_DESCRIPTION_CHARS])
                         + (" [...]" if cut or "\n" in (contract.description or "").strip()
                            else ""))
    return lines


def render_show(contract: AgentContract, effective: Capability,
                agents: Mapping[str, AgentContract] | None = None,
                servers: Mapping[str, McpServerConfig] | None = None, *,
                diagnostics: Sequence[Diagnostic] | None = None,
                skills: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The effective, resolved contract as text (like ``zuno debug agent``).

    Every value a definition file chose is escaped (:func:`one_line`): a
    description cannot carry terminal escapes, nor a newline that would fake
    the ``tools`` or ``effective`` line after it. The instructions keep their lines.
    """
    data = agent_json(contract, effective=effective, agents=agents, servers=servers,
                      diagnostics=diagnostics, skills=skills)
    route = data["model_route"]
    if route["needs_override"]:
        model = f"{route['foreign']} ({contract.origin.format.value} model: needs an override)"
    elif route["inherit"]:
        model = "inherit (the parent's model)" + (
            f" on provider {route['provider']}" if route["provider"] else "")
    else:
        model = " -> ".join(route["candidates"]) + (f" via {route['provider']}"
                                                    if route["provider"] else "")
    if route["preset"]:
        model += f" (preset {route['preset']})"

    def names(items: list[str]) -> str:
        return ", ".join(one_line(item) for item in items)

    lines = [
        f"agent        {one_line(contract.name)}" + (
            f"  ({one_line(contract.display_name)})"
            if contract.display_name != contract.name else ""),
        f"source       {one_line(data['source'])}  [{data['format']}, {data['scope']}]",
        f"description  {one_line(contract.description or '-')}",
        f"model        {one_line(model)}",
        f"mode         {data['mode']}",
        f"sandbox      {data['sandbox'] or 'inherit'} (effective: {data['effective']['sandbox']})",
        "tools        " + ("inherit" if data["tools"] is None else names(data["tools"])
                           or "(none)"),
        "denied       " + (names(data["denied_tools"]) or "-"),
        "effective    " + (names(data["effective"]["tools"]) or "(none)"),
        *(["deferred     " + names(data["effective"]["deferred"]) + " (tool_search)"]
          if data["effective"]["deferred"] else []),
        *(["model sees   " + ", ".join(f"{one_line(wire)} ({one_line(tool)})" for tool, wire
                                       in data["effective"]["names"].items())]
          if data["effective"]["names"] else []),
        *(f"  not offered {one_line(tool)}: {one_line(why)}"
          for tool, why in data["effective"]["unavailable"].items()),
        *(["mcp servers  " + names(data["effective"]["mcp_servers"]) + " (a run starts them "
           "to list their tools)"] if data["effective"]["mcp_servers"] else []),
        "delegates    " + ("inherit" if data["delegates"] is None else names(data["delegates"])
                           or "(none)"),
        f"reachable    user: {'yes' if contract.user_invocable else 'no'}, "
        f"subagent: {'yes' if contract.subagent_available else 'no'}"
        + (", hidden" if contract.hidden else "") + (", DISABLED" if contract.disabled else ""),
        f"steps        {contract.steps or 'unbounded'}",
        f"permission   mode {contract.permission.mode.value}",
    ]
    lines += [f"  {rule.action.value:5} {one_line(rule.tool)}"
              + (f"  {one_line(rule.pattern)}" if rule.pattern else "")
              for rule in contract.permission.rules]
    if data["effective"]["approval_required"]:
        lines.append("approval     " + ", ".join(
            one_line(tool) + (" (every call: needsApproval)"
                              if tool in effective.approval_required
                              or tool in contract.approval_required else " (ask rule)")
            for tool in data["effective"]["approval_required"]))
    lines += [f"role         {one_line(role)} = {one_line(', '.join(chain))} (from the "
              f"{contract.origin.format.value} settings; your [roles] win)"
              for role, chain in route["roles"].items()]
    if contract.options:
        lines.append("options      " + ", ".join(
            f"{one_line(key)}={one_line(json.dumps(value, sort_keys=True))}"
            for key, value in sorted(contract.options.items())) + " (sent with every request)")
    if contract.required_skills:
        lines.append("skills       " + names(list(contract.required_skills)))
        for skill in data.get("skills", []):
            lines.append(_skill_line(skill))
    if contract.extras:
        lines.append("extras       " + names(sorted(contract.extras)))
    if contract.response_reviewers:
        lines.append("reviewers    " + names(list(contract.response_reviewers)))
    if contract.welcome_message:
        lines.append(f"welcome      {one_line(contract.welcome_message)}")
    if diagnostics is not None:
        lines.append("diagnostics  " + (f"{len(diagnostics)}" if diagnostics else "none"))
        lines += [f"  {d.severity.value}: {one_line(f'{d.file}:{d.line}: {d.field}: {d.reason}')}"
                  + (f"\n    hint: {one_line(d.hint)}" if d.hint else "")
                  for d in diagnostics]
    # Split on newlines only: splitlines() would also break at \r, \x85 or U+2028 and
    # hide them instead of showing them.
    body = contract.instructions.removesuffix("\n")
    lines += ["", "instructions", *("  " + printable(line) for line in body.split("\n") if body)]
    return "\n".join(lines)


def _skill_line(skill: Mapping[str, Any]) -> str:
    """One required skill under ``skills``: its source, metadata and body budget, or why a
    run cannot start with it."""
    if skill["status"] != "resolved":
        return f"  {one_line(skill['name'])}: {one_line(skill['reason'])} (a run will not start)"
    meta = skill["metadata"]
    about = (f" \"{one_line(meta['description'])}\"" if meta.get("description") else "")
    budget = skill["budget"]
    return (f"  {one_line(skill['name'])}: {one_line(skill['source'])}{about}; body "
            f"{budget['body_bytes']} bytes, sent whole (a SKILL.md over "
            f"{budget['limit_bytes'] // 1024} KiB is refused)")


def render_check(result: LoadResult) -> list[str]:
    """``agents check`` as text lines: every diagnostic with its severity, each distinct
    hint once, then a summary naming every file that was rejected or warned about.

    A hint that several diagnostics share (one collection can repeat one hint
    hundreds of times) is printed under the first of them, numbered, and the
    others point at it. Every value is escaped (:func:`one_line`): file names and
    reasons quote what a definition file chose.
    """
    counts: dict[str, int] = {}
    for diagnostic in result.diagnostics:
        if diagnostic.hint:
            counts[diagnostic.hint] = counts.get(diagnostic.hint, 0) + 1
    numbers: dict[str, int] = {}
    lines: list[str] = []
    per_file: dict[str, dict[Severity, int]] = {}
    for diagnostic in result.diagnostics:
        where = f"{diagnostic.file}:{diagnostic.line}: {diagnostic.field}: {diagnostic.reason}"
        line = f"{diagnostic.severity.value}: {one_line(where)}"
        per_file.setdefault(diagnostic.file, {}).setdefault(diagnostic.severity, 0)
        per_file[diagnostic.file][diagnostic.severity] += 1
        hint = diagnostic.hint
        if hint is None:
            lines.append(line)
        elif counts[hint] == 1:
            lines += [line, f"  hint: {one_line(hint)}"]
        elif hint in numbers:
            lines.append(f"{line}  [hint {numbers[hint]}]")
        else:
            numbers[hint] = len(numbers) + 1
            lines += [line, f"  hint {numbers[hint]} (for {counts[hint]} diagnostics): "
                      f"{one_line(hint)}"]
    rejected = [f for f, by in per_file.items() if by.get(Severity.ERROR)]
    warned = [f for f, by in per_file.items()
              if by.get(Severity.WARNING) and not by.get(Severity.ERROR)]
    summary = (f"{len(result.agents)} agent(s) loaded, {len(rejected)} definition(s) rejected"
               + (f", {len(warned)} loaded with warnings" if warned else ""))
    if lines:
        lines.append("")
    lines.append(summary)

    def counted(by: dict[Severity, int], severity: Severity) -> str:
        return f"{by[severity]} {severity.value}{'s' if by[severity] > 1 else ''}"

    lines += [f"  rejected  {one_line(f)} ({counted(per_file[f], Severity.ERROR)})"
              for f in rejected]
    lines += [f"  warnings  {one_line(f)} ({counted(per_file[f], Severity.WARNING)})"
              for f in warned]
    return lines
