"""Benchmark: the bytes each native tool's definition costs in every model request.

Every request carries every offered tool: name, description and parameter schema. A
small local model reads them in a context window of a few thousand tokens, so their
size is a cost per turn. This prints, per tool, the definition as pydantic's own schema
would send it and as corral sends it (:func:`executor.tools.wire_schema.compact`), in
bytes of compact JSON, and the whole set. ``delegate`` is measured with two targets.
Sizes, not times: the figure is the same on every run.

    python scripts/bench_tool_schemas.py [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from executor.tools import native_tools
from executor.tools.wire_schema import compact


def measure() -> dict[str, Any]:
    """Per tool: ``{"pydantic": bytes, "sent": bytes}``, and the totals."""
    tools = native_tools(use_ripgrep=True,
                         delegate_targets=[("reviewer", "Reviews the diff."),
                                           ("fixer", "Fixes failing tests.")],
                         network=None, url_rule=lambda _url: True)
    rows: dict[str, dict[str, int]] = {}
    for name, tool in sorted(tools.items()):
        schema = tool.args.model_json_schema()
        rows[name] = {kind: len(json.dumps({"name": name, "description": tool.description,
                                            "parameters": shown}, separators=(",", ":")))
                      for kind, shown in (("pydantic", schema), ("sent", compact(schema)))}
    total = {kind: sum(row[kind] for row in rows.values()) for kind in ("pydantic", "sent")}
    return {"tools": rows, "total": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    figures = measure()
    if parser.parse_args().json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{'tool':14} {'pydantic':>9} {'sent':>6} {'ratio':>6}")
    for name, row in [*figures["tools"].items(), ("(all)", figures["total"])]:
        print(f"{name:14} {row['pydantic']:>9} {row['sent']:>6} "
              f"{row['sent'] / row['pydantic']:>6.2f}")


if __name__ == "__main__":
    main()
