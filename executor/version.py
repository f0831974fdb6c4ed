"""corral's version: the installed distribution's metadata, the one place it is read.

``pyproject.toml`` is the only source; ``corral --version``, the MCP server's and the MCP
client's ``serverInfo``/``clientInfo`` all print this.
"""

from __future__ import annotations

from functools import cache

__all__ = ["corral_version"]


@cache
def corral_version() -> str:
    """The installed ``corral`` distribution's version (``0+unknown`` when run from a
    source tree that was never installed: no metadata to read)."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - only when asked

    try:
        return version("corral")
    except PackageNotFoundError:
        return "0+unknown"
