"""The loader: every harness's agent files, through one discovery, into contracts.

Public entry points: :func:`discover` (everything visible from a root, with
precedence and collisions) and :func:`load_file` (one file as one format).
"""

from policies.loader.base import Options
from policies.loader.diagnostics import Diagnostic, Severity
from policies.loader.discovery import Environment
from policies.loader.registry import LoadResult, discover
from policies.loader.single import FileOutcome, Status, load_file

__all__ = [
    "Diagnostic",
    "Environment",
    "FileOutcome",
    "LoadResult",
    "Options",
    "Severity",
    "Status",
    "discover",
    "load_file",
]
