"""Fixtures for end-to-end executor runs (helpers live in exec_support)."""

from exec_support import backend, repo, run

__all__ = ["backend", "repo", "run"]
