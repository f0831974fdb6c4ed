"""Agents as text: ``corral agents show`` and ``corral agents check`` (every value escaped)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from executor.api import Agents, AgentView
from executor.text import one_line, printable
from policies.loader import Diagnostic, LoadResult, Severity

__all__ = ["list_lines", "render_check", "render_show"]

#: The narrowest description column ``agents list`` cuts to (a narrower terminal wraps).
MIN_DESCRIPTION = 20
#: The widest name column (a longer name pushes its own row's columns right).
MAX_NAME = 28
#: What ``agents list`` prints after its rows (on stderr).
LEGEND = ("flags: R read-only, u you can run it, s it can run as a delegated child; "
          "`corral agents show NAME` shows everything, `-l` each source")


def list_lines(found: Agents,
               keep: Callable[[str, Mapping[str, Any]], bool] = lambda name, data: True,
               *, width: int = 120, long: bool = False) -> list[str]:
    """``agents list`` as text (the picker): a header, then per agent its name, flags
    (``R`` read-only, ``u`` runnable by you, ``s`` runnable as a subagent), format and
    the description's first line cut to ``width`` (``agents show`` has it whole); under
    it why it cannot run when it cannot (with the config line that fixes a missing
    model) and, with ``long``, its source. Every value is escaped."""
    views = found.to_json()["agents"]  # in name order, as found.agents sorted
    rows = [(name, contract, data) for (name, contract), data
            in zip(sorted(found.agents.items()), views, strict=True) if keep(name, data)]
    if not rows:
        return []
    name_width = min(MAX_NAME, max(4, *(len(one_line(name)) for name, _, _ in rows)))
    room = max(MIN_DESCRIPTION, width - name_width - 19)
    lines = [f"{'NAME':{name_width}} {'FLAGS':5} {'FORMAT':11} DESCRIPTION"]
    for name, contract, data in rows:
        can = data["runnable"]
        flags = "".join(["R" if contract.is_read_only else "-",
                         "u" if can["user"] else "-", "s" if can["subagent"] else "-"])
        whole = (data["description"] or "").strip()
        description = one_line(whole.split("\n", 1)[0].strip())
        if len(description) > room or "\n" in whole:
            description = description[:room - 3].rstrip() + "..."
        lines.append(f"{one_line(name):{name_width}} {flags:5} {data['format']:11} "
                     f"{description}".rstrip())
        why = can["why_not"]  # the one answer (executor.agents.views.runnable), as MCP's
        if why:
            lines.append(f"    [not runnable: {one_line(why)}]")
        if long:
            shown = f"  ({one_line(data['display_name'])})" if data["display_name"] not in (
                name, data["source"]) else ""
            lines.append(f"    {one_line(data['source'])}{shown}")
    return lines


def render_show(view: AgentView) -> str:
    """The effective, resolved contract as text (like ``zuno debug agent``).

    Every value a definition file chose is escaped (:func:`one_line`): a
    description cannot carry terminal escapes, nor a newline that would fake
    the ``tools`` or ``effective`` line after it. The instructions keep their lines.
    """
    contract = view.contract
    data = view.to_json()
    route = data["model_route"]
    if route["needs_override"]:
        model = f"{route['foreign']} ({contract.origin.format.value} model: needs an override)"
    elif route["inherit"]:
        model = "inherit (the parent's model)" + (
            f" on provider {route['provider']}" if route["provider"] else "")
    else:
        model = " -> ".join(route["candidates"]) + (
            f" via {route['provider']}" if route["provider"] else
            " (a bare id on the parent's connection)" if route["inherit_connection"] else "")
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
        *(f"{'arguments' if i == 0 else '':12} {one_line(line)}"
          for i, line in enumerate(data["effective"]["arguments"].values())),
        *(["mcp servers  " + names(data["effective"]["mcp_servers"]) + " (a run starts them "
           "to list their tools)"] if data["effective"]["mcp_servers"] else []),
        *(network_lines(data["effective"]["network"]) if data["effective"].get("network")
          else []),
        *egress_lines(data["effective"]),
        "delegates    " + ("inherit" if data["delegates"] is None else names(data["delegates"])
                           or "(none)"),
        f"reachable    user: {'yes' if contract.user_invocable else 'no'}, "
        f"subagent: {'yes' if contract.subagent_available else 'no'}"
        + (", hidden" if contract.hidden else "") + (", DISABLED" if contract.disabled else ""),
        f"runnable     you: {'yes' if data['runnable']['user'] else 'no'}, "
        f"subagent: {'yes' if data['runnable']['subagent'] else 'no'}"
        + (f" ({one_line(data['runnable']['why_not'])})" if data["runnable"]["why_not"]
           else ""),
        f"steps        {contract.steps or 'unbounded'}",
        f"permission   mode {contract.permission.mode.value}",
    ]
    lines += [f"  {rule.action.value:5} {one_line(rule.tool)}"
              + (f"  {one_line(rule.pattern)}" if rule.pattern else "")
              for rule in contract.permission.rules]
    if data["effective"]["approval_required"]:
        lines.append("approval     " + ", ".join(
            one_line(tool) + (" (every call: needsApproval)"
                              if tool in data["effective"]["approval_every_call"]
                              else " (ask rule)")
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
    diagnostics = view.diagnostics
    lines.append("diagnostics  " + (f"{len(diagnostics)}" if diagnostics else "none"))
    lines += [f"  {d.severity.value}: {one_line(f'{d.file}:{d.line}: {d.field}: {d.reason}')}"
              + (f"\n    hint: {one_line(d.hint)}" if d.hint else "")
              for d in diagnostics]
    # Split on newlines only: splitlines() would also break at \r, \x85 or U+2028 and
    # hide them instead of showing them.
    body = contract.instructions.removesuffix("\n")
    lines += ["", "instructions", *("  " + printable(line) for line in body.split("\n") if body)]
    return "\n".join(lines)


def network_lines(network: Mapping[str, Any]) -> list[str]:
    """The hosts web_fetch may reach (the user's grant, the agent's rules narrowing it)."""
    lines = ["network      web_fetch may reach " + ", ".join(
        one_line(p) for p in network["allow"]) + " (your grant)"]
    if network["deny"]:
        lines.append("  denied     " + ", ".join(one_line(p) for p in network["deny"]))
    if network["allow_private"]:
        lines.append("  private    " + ", ".join(one_line(a) for a in network["allow_private"])
                     + " (allow_private: reachable though not public)")
    lines += [f"  rule       {one_line(rule)} (this agent's web_fetch rules narrow it)"
              for rule in network["rules"]]
    return lines


def egress_lines(effective: Mapping[str, Any]) -> list[str]:
    """What ``--net allow`` opens to the agent's commands (or why nothing)."""
    if effective.get("egress"):
        return ["egress       with --net allow its commands reach " + ", ".join(
            one_line(p) for p in effective["egress"]) + " through corral's proxy (your grant)"]
    if effective.get("egress_refusal"):
        return [f"egress       --net allow opens nothing: {one_line(effective['egress_refusal'])}"]
    return []


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


#: More warnings than this are shown grouped by kind (``agents check -v``: each one).
_GROUP_ABOVE = 10


def render_check(result: LoadResult, *, verbose: bool = False) -> list[str]:
    """``agents check`` as text lines, what to fix first: the summary, the rejected files,
    every error (each distinct hint once, numbered when several share it), then the
    warnings grouped by kind with counts (``verbose``: each one), then the notes.

    A collection of 150 agents can carry hundreds of warnings of one kind (``emoji``,
    ``vibe``) that used to scroll its rejected files away. Every value is escaped
    (:func:`one_line`): file names and reasons quote what a definition file chose.
    """
    diagnostics = result.diagnostics
    per_file: dict[str, dict[Severity, int]] = {}
    for diagnostic in diagnostics:
        counted_file = per_file.setdefault(diagnostic.file, {})
        counted_file[diagnostic.severity] = counted_file.get(diagnostic.severity, 0) + 1
    rejected = [f for f, by in per_file.items() if by.get(Severity.ERROR)]
    warned = [f for f, by in per_file.items()
              if by.get(Severity.WARNING) and not by.get(Severity.ERROR)]
    lines = [f"{len(result.agents)} agent(s) loaded, {len(rejected)} definition(s) rejected"
             + (f", {len(warned)} loaded with warnings" if warned else "")]

    def counted(by: dict[Severity, int], severity: Severity) -> str:
        return f"{by[severity]} {severity.value}{'s' if by[severity] > 1 else ''}"

    lines += [f"  rejected  {one_line(f)} ({counted(per_file[f], Severity.ERROR)})"
              for f in rejected]
    if verbose or len(warned) <= _GROUP_ABOVE:
        lines += [f"  warnings  {one_line(f)} ({counted(per_file[f], Severity.WARNING)})"
                  for f in warned]
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    if errors:
        lines += ["", *_listed(errors)]
    warnings = [d for d in diagnostics if d.severity is Severity.WARNING]
    if warnings and (verbose or len(warnings) <= _GROUP_ABOVE):
        lines += ["", *_listed(warnings)]
    elif warnings:
        groups: dict[tuple[str, str], list[Diagnostic]] = {}
        for diagnostic in warnings:
            groups.setdefault((diagnostic.field, diagnostic.code), []).append(diagnostic)
        files = len({d.file for d in warnings})
        lines += ["", f"{len(warnings)} warning(s) of {len(groups)} kind(s) in {files} "
                      "file(s) (`-v` lists each one):"]
        for (field, _), group in sorted(groups.items(), key=lambda item: -len(item[1])):
            first = group[0]
            lines.append(f"warning: {one_line(field)} ({len(group)}x): {one_line(first.reason)}"
                         f" (e.g. {one_line(first.file)}:{first.line})")
            if first.hint:
                lines.append(f"  hint: {one_line(first.hint)}")
    notes = [d for d in diagnostics if d.severity is Severity.INFO]
    if notes:
        lines += ["", *_listed(notes)]
    return lines


def _listed(diagnostics: list[Diagnostic]) -> list[str]:
    """One line each (``severity: file:line: field: reason``); a hint printed once, under
    the first diagnostic that has it, numbered when several share it."""
    counts: dict[str, int] = {}
    for diagnostic in diagnostics:
        if diagnostic.hint:
            counts[diagnostic.hint] = counts.get(diagnostic.hint, 0) + 1
    numbers: dict[str, int] = {}
    lines: list[str] = []
    for diagnostic in diagnostics:
        where = f"{diagnostic.file}:{diagnostic.line}: {diagnostic.field}: {diagnostic.reason}"
        line = f"{diagnostic.severity.value}: {one_line(where)}"
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
    return lines
