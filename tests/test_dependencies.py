"""Every runtime dependency pyproject declares is one corral's code imports.

A declared but unused dependency is installed on every user's machine for
nothing; ``gitpython`` was one (git runs as a hardened subprocess, see the
"gitpython" notes of docs/deviations.md for why it was dropped).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: distribution name -> the top-level module it provides.
MODULES = {"pydantic": "pydantic", "pyyaml": "yaml", "docker": "docker", "psutil": "psutil",
           "watchdog": "watchdog", "click": "click", "rich": "rich", "httpx": "httpx",
           "mcp": "mcp", "anyio": "anyio", "uvicorn": "uvicorn",
           "starlette": "starlette", "jinja2": "jinja2", "pygments": "pygments",
           "idna": "idna", "beautifulsoup4": "bs4", "markdownify": "markdownify"}


def _imported() -> set[str]:
    names: set[str] = set()
    for package in ("policies", "sandbox", "executor"):
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module.split(".")[0])
    return names


def test_every_declared_dependency_is_imported() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower() for spec in declared]
    unmapped = [name for name in names if name not in MODULES]
    assert unmapped == [], f"add the module these distributions provide to MODULES: {unmapped}"
    unused = [name for name in names if MODULES[name] not in _imported()]
    assert unused == [], f"declared but never imported: {unused}"


def test_no_git_library() -> None:
    """git runs as a hardened subprocess (sandbox/gitsafe.py), never through a library that
    would read the repository's config (and run the programs it names) on its own."""
    assert not {"git", "pygit2", "dulwich"} & _imported()
