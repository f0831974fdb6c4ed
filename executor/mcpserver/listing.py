"""``list_agents``: the agents ``corral mcp`` serves, compact and paged for a model's
context (156 agents with every field and diagnostic were 177K characters); ``list_runs``:
the recorded runs, paged from the ledger's index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from executor.api.results import entry_json

if TYPE_CHECKING:
    from executor.mcpserver.arguments import ListAgentsArgs, ListRunsArgs
    from executor.mcpserver.handlers import ServerOptions

__all__ = ["DESCRIPTION_CHARS", "list_agents_tool", "list_runs_tool"]


#: How much of a description ``list_agents`` returns (its first line, cut).
DESCRIPTION_CHARS = 160


def list_agents_tool(options: ServerOptions, args: ListAgentsArgs) -> dict[str, Any]:
    """``list_agents``: compact by default, so a calling model's context holds a collection
    of 150 agents: name, the description's first line, whether a run accepts it; filters,
    paging, details and diagnostics on request."""
    found = options.corral().agents()
    views = found.to_json()["agents"]
    wanted = (args.match or "").casefold()
    rows: list[dict[str, Any]] = []
    for view in views:
        text = f"{view['name']}\n{view['description'] or ''}".casefold()
        can = view["runnable"]
        if (wanted and wanted not in text) or (args.format and view["format"] != args.format) \
                or (args.runnable_only and not (can["user"] or can["subagent"])):
            continue
        first = (view["description"] or "").strip().split("\n", 1)[0]
        row: dict[str, Any] = {
            "name": view["name"],
            "description": first[:DESCRIPTION_CHARS] + ("..." if len(first) > DESCRIPTION_CHARS
                                                        else ""),
            "runnable": bool(can["user"])}
        if can["why_not"]:
            row["why_not"] = can["why_not"]
        if args.details:
            row |= {key: view[key] for key in ("format", "mode", "sandbox", "display_name",
                                               "source", "scope")}
        rows.append(row)
    page = rows[args.offset:args.offset + args.limit]
    counts: dict[str, int] = {}
    for diagnostic in found.diagnostics:
        counts[diagnostic.severity.value] = counts.get(diagnostic.severity.value, 0) + 1
    result: dict[str, Any] = {
        "root": str(options.root), "total": len(rows), "offset": args.offset, "agents": page,
        "next_offset": args.offset + len(page) if args.offset + len(page) < len(rows) else None,
        "default_agent": found.default_agent, "diagnostic_counts": counts}
    if args.diagnostics:
        result["diagnostics"] = found.diagnostics_json()
    return result


def list_runs_tool(options: ServerOptions, args: ListRunsArgs) -> dict[str, Any]:
    """``list_runs``: one page of the recorded runs (``corral runs --json``'s objects),
    ``next_after`` to ask for the next (None: the last page)."""
    found = options.corral().runs(limit=args.limit, after=args.after, status=args.status,
                                  agent=args.agent, pending=args.pending, since=args.since,
                                  fanout=args.fanout)
    return {"root": str(options.root),
            "entries": [item for entry in found.entries for item in entry_json(entry)],
            "next_after": found.next_after,
            "corrupted": [exc.to_dict() for exc in found.broken]}
