"""Imports go one way: executor -> sandbox -> policies. Foreign libraries at one boundary."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = {"policies": {"sandbox", "executor"}, "sandbox": {"executor"}}
#: A foreign library is imported by at most one module (errors translated there).
ONE_BOUNDARY = ("docker", "git", "httpx")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_never_imports_upward(package: str) -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(_imports(path) & FORBIDDEN[package])
        for path in (REPO / package).rglob("*.py")
        if _imports(path) & FORBIDDEN[package]
    }
    assert offenders == {}


@pytest.mark.parametrize("library", ONE_BOUNDARY)
def test_foreign_library_is_imported_in_one_module(library: str) -> None:
    users = [str(path.relative_to(REPO)) for package in ("policies", "sandbox", "executor")
             for path in (REPO / package).rglob("*.py") if library in _imports(path)]
    assert len(users) <= 1, users
