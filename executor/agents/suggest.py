"""What to say when a name matches no agent: a few close names, never the whole list.

A typo deserves "did you mean", the way ``git`` and ``gh`` answer: at most
:data:`MAX_SUGGESTIONS` names (close spellings, a different case, the display
name of an agent whose identity was normalised, such as ``Code Reviewer`` for
``code-reviewer``), the diagnostics of a rejected definition named like it, the
project file that defines it when the project is not trusted, and how to list
every agent. A collection of 154 agents is never dumped on one line.
"""

from __future__ import annotations

import difflib

from executor.errors import RunError
from executor.text import one_line
from policies.loader import LoadResult, Severity
from policies.loader.base import normalize_name

__all__ = ["MAX_SUGGESTIONS", "close_names", "unknown_agent"]

MAX_SUGGESTIONS = 3
_MAX_REJECTIONS = 3


def close_names(name: str, result: LoadResult) -> list[str]:
    """Up to :data:`MAX_SUGGESTIONS` loaded agent names close to ``name``, best first."""
    spellings: dict[str, str] = {}  # casefolded spelling -> agent name
    for agent, contract in sorted(result.agents.items()):
        for spelling in (agent, contract.display_name):
            spellings.setdefault(spelling.casefold(), agent)
    wanted = name.casefold()
    found: list[str] = []
    exact = spellings.get(wanted) or spellings.get(normalize_name(name) or "")
    if exact is not None:
        found.append(exact)
    for match in difflib.get_close_matches(wanted, list(spellings), n=2 * MAX_SUGGESTIONS,
                                           cutoff=0.6):
        if spellings[match] not in found:
            found.append(spellings[match])
    return found[:MAX_SUGGESTIONS]


def unknown_agent(name: str, result: LoadResult, *, trusted: bool = True,
                  untrusted: LoadResult | None = None) -> RunError:
    """The user error for an agent name that matches no loaded agent (exit 2).

    ``untrusted`` is what the project would load with ``--trust-project`` (when it
    was not given): a hint names the project file that defines ``name`` only then,
    never as a guess.
    """
    hints: list[str] = []
    suggestions = close_names(name, result)
    # One line each: a file name or a reason holding a newline cannot fake a line of the hint.
    if suggestions:
        hints.append("did you mean " + " or ".join(repr(s) for s in suggestions) + "?")
    rejected = [d for d in result.diagnostics
                if d.severity is Severity.ERROR and _names_it(name, d.file)]
    hints += [f"a definition named like it was rejected: {one_line(d.render())}"
              for d in rejected[:_MAX_REJECTIONS]]
    if not trusted and untrusted is not None and untrusted.get(name) is not None:
        source = untrusted.agents[name].origin.source
        hints.append(f"{one_line(source)} defines it, but project agents load only with "
                     "--trust-project")
    elif not trusted and untrusted is not None:
        hidden = len(set(untrusted.agents) - set(result.agents))
        if hidden:
            hints.append(f"the project defines {hidden} more agent(s), loaded only with "
                         "--trust-project")
    count = len(result.agents)
    hints.append(f"`corral agents list` lists the {count} agent(s) loaded" if count else
                 "no agent is loaded: `corral agents check` says what was found and why not")
    return RunError(f"no agent named {name!r}", code="unknown_agent",
                    context={"agents loaded": str(count)}, hint="\n".join(hints))


def _names_it(name: str, file: str) -> bool:
    """Whether a file's name holds the agent's name (the loader names rejected files,
    not the agents they would have defined)."""
    base = file.rsplit("/", 1)[-1].casefold()
    return name.casefold() in base or (normalize_name(name) or "\0") in base
