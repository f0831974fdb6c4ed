"""A replay from a patch: ``corral replay from-diff PATCH`` and its Python call.

The way to turn a fix made by hand (or by another tool) into a candidate: the replay's
first turn is one ``apply_patch`` call carrying the patch, its second the answer, so
``corral run --script`` or ``corral fanout --script`` makes a child whose diff is that
patch, checked and compared like any other. The patch is read here the way the tool will
read it (a unified diff or a V4A patch): one the tool would refuse is refused now, naming
the line, not after a sandbox was opened.
"""

from __future__ import annotations

from typing import Any

import yaml

from executor.errors import ExecutorError
from executor.tools.dispatch import ToolFailure
from executor.tools.patch import parse_patch
from executor.tools.v4a import is_v4a, parse_v4a

__all__ = ["replay_from_diff"]


def replay_from_diff(patch: bytes | str, *, source: str = "the patch",
                     answer: str = "Applied the patch.") -> str:
    """The replay (YAML text) whose child applies ``patch`` and answers ``answer``;
    ``source`` names the patch in errors."""
    if isinstance(patch, bytes):
        try:
            patch = patch.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExecutorError(
                f"{source} is not UTF-8 text (byte {exc.start})", code="bad_patch",
                operation="replay_from_diff", context={"patch": source},
                hint="apply_patch takes text diffs: a binary change needs write_file "
                "in a replay written by hand") from exc
    if not patch.strip():
        raise ExecutorError(f"{source} is empty", code="bad_patch",
                            operation="replay_from_diff", context={"patch": source},
                            hint="give a unified diff (git diff) or a '*** Begin Patch' patch")
    try:
        files = ([op.path for op in parse_v4a(patch)] if is_v4a(patch)
                 else [fp.path for fp in parse_patch(patch)])
    except ToolFailure as exc:
        raise ExecutorError(f"{source}: apply_patch would refuse it: {exc}", code="bad_patch",
                            operation="replay_from_diff", context={"patch": source},
                            hint="give a unified diff (git diff, diff -u) or a "
                            "'*** Begin Patch' patch") from exc
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "apply_patch", "arguments": {"patch": patch}}]},
        {"text": answer}]
    header = (f"# A replay that applies {len(files)} file(s): {', '.join(files)}\n"
              "# (corral replay from-diff); run it with --script.\n")
    return header + yaml.safe_dump(turns, sort_keys=False, allow_unicode=True, width=100)
