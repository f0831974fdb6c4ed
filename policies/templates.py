"""Template variables of a catalog ``systemPrompt``.

agent-definition-json.md: "systemPrompt string The agent's role and
instructions. Supports template vars like {{ current_date }}." The spec names
exactly one variable, and corral implements exactly that one:

- ``{{ current_date }}``: the date the session starts, in the user's local
  time zone, as ISO 8601 ``YYYY-MM-DD`` (the spec gives no format; ISO is the
  one no reader misreads).

Spaces inside the braces are optional. Any other ``{{ ... }}`` is refused when
the definition loads, naming it: the spec does not say what an unknown
variable becomes, and sending it literally would give the model a prompt its
author never meant.
"""

from __future__ import annotations

import re
from datetime import date

__all__ = ["VARIABLES", "render", "unknown_variables"]

VARIABLES = ("current_date",)
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def unknown_variables(text: str) -> list[str]:
    """Every ``{{ ... }}`` in ``text`` that is not a supported variable, as written."""
    return [match.group(0) for match in _PLACEHOLDER.finditer(text)
            if match.group(1).strip() not in VARIABLES]


def render(text: str, *, today: date) -> str:
    """``text`` with every supported variable filled in (unknown ones never load)."""
    values = {"current_date": today.isoformat()}
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1).strip(), m.group(0)), text)
