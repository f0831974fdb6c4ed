"""Approval handlers: who answers when a call needs a human's yes.

* :func:`policy_handler` for ``--approve never`` and ``--approve always-for=a,b``
  (non-interactive: approves exactly the named tools, nothing else);
* :func:`prompt_handler` asks on the terminal, saying which answers it takes;
* any ``Callable[[ApprovalRequest], bool]`` is a library callback.

A non-interactive run with no handler denies every call that asks.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from executor.errors import ExecutorError
from executor.text import one_line, printable
from executor.tools.dispatch import ApprovalHandler, ApprovalRequest
from policies.tools import check_tool_name

__all__ = ["parse_approve", "policy_handler", "prompt_handler"]


def policy_handler(always_for: frozenset[str]) -> ApprovalHandler:
    """Approve calls to exactly these tools; refuse the rest."""

    def handler(request: ApprovalRequest) -> bool:
        return request.tool in always_for

    return handler


def prompt_handler(ask: Callable[[str], bool]) -> ApprovalHandler:
    """Ask a person through ``ask`` (for example ``click.confirm``)."""

    def handler(request: ApprovalRequest) -> bool:
        # In full and escaped: nothing of the call may be hidden from the person asked, and
        # no value may fake a line of the question (a newline in a subject is shown as \x0a).
        subjects = "".join(f"\n  subject: {one_line(s)}" for s in request.subjects)
        arguments = printable(json.dumps(dict(request.arguments), ensure_ascii=False,
                                         indent=2, sort_keys=True))
        return ask(f"[{one_line(request.agent)}] wants to call {one_line(request.tool)} "
                   f"({one_line(request.reason)}){subjects}\n  arguments: {arguments}\n"
                   f"  answer y to run this one call, n or Enter to deny it (the agent is told "
                   f"and goes on), Ctrl-C to cancel the run\nallow?")

    return handler


def parse_approve(value: str | None) -> frozenset[str] | None:
    """``never`` -> empty set; ``always-for=a,b`` -> {a, b}; None -> None (no policy)."""
    if value is None:
        return None
    if value == "never":
        return frozenset()
    if value.startswith("always-for="):
        names = [name.strip() for name in value.removeprefix("always-for=").split(",")]
        if not all(names):
            raise ExecutorError("--approve always-for= needs tool names, e.g. always-for=shell",
                                code="bad_option")
        return frozenset(check_tool_name(name) for name in names)
    raise ExecutorError(f"--approve must be never or always-for=TOOLS, got {value!r}",
                        code="bad_option")
