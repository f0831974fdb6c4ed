"""mkdocs hooks for the docs site (``mkdocs.yml``: ``hooks``).

corral's docstrings use Sphinx roles (``:class:`Corral```, ``:meth:`~Corral.apply```),
which mkdocstrings renders as the role's text followed by the code. The role's
name is dropped, and a ``~`` target shows its last part, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|const):(?=<code>)")
_TILDE = re.compile(r"<code>~(?:[\w]+\.)*([\w]+)</code>")


def on_page_content(html: str, **_: Any) -> str:
    """Sphinx roles in rendered docstrings, shown as Sphinx shows them."""
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))
