"""How a child runs, and corral's Python API: ``from executor import Corral``.

The public names are :mod:`executor.api`'s (:class:`~executor.api.Corral`,
:class:`~executor.api.AsyncCorral`, the results, inputs and errors), loaded when
first used: ``corral --help`` imports none of them.

Inside, by seam (each a package, imports going one way, top to bottom):
:mod:`executor.cli` and :mod:`executor.mcpserver` (the front doors, over the
API); :mod:`executor.api`; :mod:`executor.fanout`; :mod:`executor.run`;
:mod:`executor.agents` and :mod:`executor.apply`; :mod:`executor.ledger` and
:mod:`executor.tools`; :mod:`executor.models`, :mod:`executor.mcpclient` and
:mod:`executor.scheduling`; :mod:`executor.errors` and :mod:`executor.text`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Light: executor.api's names are a table, each module imported on first use.
from executor import api

if TYPE_CHECKING:
    # The same names with their types; a star import re-exports them under --strict.
    from executor.api import *  # noqa: F403

__all__ = api.__all__


def __getattr__(name: str) -> object:
    """An API name, loaded on first use (by :mod:`executor.api`, which keeps the table)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
