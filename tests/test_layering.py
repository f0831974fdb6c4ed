"""Imports go one way: executor -> sandbox -> policies. Foreign libraries at one boundary."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = {"policies": {"sandbox", "executor"}, "sandbox": {"executor"}}
#: A foreign library is imported by at most one module (errors translated there).
ONE_BOUNDARY = ("docker", "git", "httpx", "ray")


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


# -- executor/ by seam ---------------------------------------------------------------------
#
# executor/ is a few packages, one per seam, and imports go one way between them: a seam
# imports only the seams below it. The front doors (the CLI, the MCP server, and later the
# web view and remote workers) stand on the API, never on each other.

EXECUTOR = REPO / "executor"
#: The seams of executor/, top to bottom; a seam imports only seams on lower lines.
SEAMS = (
    ("__main__", "executor"),
    ("cli", "mcpserver", "web"),
    ("api",),
    ("fanout",),
    ("run",),
    ("agents", "apply"),
    ("ledger", "tools"),
    ("models", "mcpclient", "scheduling", "options"),
    ("errors", "text", "version"),
)
FRONT_DOORS = ("cli", "mcpserver", "web")
#: Files allowed over MAX_LINES, and why (none today).
LONG_FILES: dict[str, str] = {}
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in EXECUTOR.rglob("*.py")}


def _executor_imports(path: Path) -> set[str]:
    """The executor modules ``path`` imports, anywhere but under ``if TYPE_CHECKING``
    (a function's lazy import is an arrow too). ``from pkg import sub`` is an arrow to
    the submodule, not to the package."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(node.module)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child])
                elif isinstance(child, ast.ExceptHandler):
                    visit(child.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {name for name in found if name in MODULES} - {_module_name(path)}


GRAPH = {name: _executor_imports(path) for name, path in MODULES.items()}


def _seam(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "executor"


def _level(seam: str) -> int:
    return next(i for i, seams in enumerate(SEAMS) if seam in seams)


def test_executor_is_a_few_seams_not_a_flat_folder() -> None:
    top = sorted(p.name for p in EXECUTOR.glob("*.py"))
    assert len(top) <= 10, top
    prefixes = [name for name in top if "_" in Path(name).stem.strip("_")]
    assert prefixes == [], "group by folder, not by name prefix"
    packages = {p.name for p in EXECUTOR.iterdir() if (p / "__init__.py").is_file()}
    listed = {seam for seams in SEAMS for seam in seams}
    assert packages | {p.stem for p in EXECUTOR.glob("*.py")} - {"__init__"} <= listed, (
        "a new seam needs its place in SEAMS")


def test_seams_import_one_way() -> None:
    wrong = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets
                   if _seam(a) != _seam(b) and _level(_seam(b)) <= _level(_seam(a)))
    assert wrong == []


def test_front_doors_stand_on_the_api_not_on_each_other() -> None:
    for door in FRONT_DOORS:
        modules = [m for m in GRAPH if _seam(m) == door]
        used = {_seam(b) for m in modules for b in GRAPH[m]} - {door}
        assert "api" in used, door
        assert not used & set(FRONT_DOORS), f"{door} imports {used & set(FRONT_DOORS)}"
        # Below the API only what renders its results: errors, options, text.
        assert used <= {"api", "errors", "options", "text"}, (door, sorted(used))


def test_no_import_circle_in_executor() -> None:
    """No module reaches itself by its imports (Tarjan's strongly connected components);
    a module never imports its own package's __init__, which imports it back."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            connect(node)
    assert circles == []


def test_no_executor_module_over_400_lines() -> None:
    long = {str(path.relative_to(REPO)): n for path in EXECUTOR.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long.keys() <= LONG_FILES.keys(), long


def test_the_layer_checks_see_a_circle_and_an_upward_arrow() -> None:
    """The checks above would catch what they guard: a planted circle and arrow."""
    saved = {name: set(targets) for name, targets in GRAPH.items()}
    try:
        GRAPH["executor.ledger.records"].add("executor.run.agent")
        with pytest.raises(AssertionError):
            test_seams_import_one_way()
        GRAPH["executor.run.agent"].add("executor.run.top")
        with pytest.raises(AssertionError):
            test_no_import_circle_in_executor()
        GRAPH["executor.mcpserver.handlers"].add("executor.cli.app")
        with pytest.raises(AssertionError):
            test_front_doors_stand_on_the_api_not_on_each_other()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)
