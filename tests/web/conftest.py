"""Fixtures of the ``corral serve`` tests (helpers live in web_support)."""

from web_support import browser, browser_without_js

__all__ = ["browser", "browser_without_js"]
