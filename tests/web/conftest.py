"""Fixtures of the ``corral serve`` tests (helpers live in web_support)."""

from web_support import browser

__all__ = ["browser"]
