"""The docs site (``mkdocs.yml``, ``docs/``) builds, and what its pages claim is the code's.

- ``mkdocs build --strict`` passes: a broken link or anchor, a page the nav names that
  does not exist, or a Python API reference mkdocstrings cannot resolve fails it (the
  ``docs`` requirement: CI installs the tools with the ``dev`` extra);
- each format page's tool-name table is :data:`policies.aliases.TABLES`, row for row;
- each format page's example, written where its format is found, loads with no warning;
- every page under ``docs/`` is in the nav (mkdocs only notes one that is not).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from policies.aliases import TABLES
from policies.contract import AgentFormat
from policies.loader import Environment, Severity, discover
from policies.tools import NATIVE_TOOLS

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
FORMATS = DOCS / "formats"
#: Folders of ``docs/`` that hold no pages of the nav: text waiting to be folded into the
#: pages (``docs/incoming/``, when an engineer drops some there) and the screenshots.
NOT_PAGES = ("incoming", "screenshots")
#: Each format's page.
PAGES = {
    AgentFormat.CLAUDE: "claude.md", AgentFormat.CODEX: "codex.md",
    AgentFormat.COPILOT: "copilot.md", AgentFormat.OPENCODE: "opencode.md",
    AgentFormat.CURSOR: "cursor.md", AgentFormat.GEMINI: "gemini.md",
    AgentFormat.ANTIGRAVITY: "antigravity.md", AgentFormat.PI: "pi.md",
    AgentFormat.NGN: "ngn.md", AgentFormat.ZUNO: "zuno.md", AgentFormat.CATALOG: "catalog.md",
}
TABLE_HEADER = "| corral tool | this format's names |"


def tool_table(fmt: AgentFormat) -> str:
    """The format's tool names as its page lists them: one row per corral tool (in the
    native catalog's order), then the names that grant nothing; empty when the format
    has no tool names of its own (Codex)."""
    names = TABLES[fmt].names
    if not names:
        return ""
    rows = [TABLE_HEADER, "|---|---|"]
    for tool in NATIVE_TOOLS:
        granting = [name for name, tools in names.items() if tool in tools]
        if granting:
            rows.append(f"| `{tool}` | " + ", ".join(f"`{n}`" for n in granting) + " |")
    nothing = [name for name, tools in names.items() if not tools]
    if nothing:
        rows.append("| nothing (a warning: no corral equivalent) | "
                    + ", ".join(f"`{n}`" for n in nothing) + " |")
    return "\n".join(rows)


def _listed_table(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    if TABLE_HEADER not in text:
        return ""
    start = text.index(TABLE_HEADER)
    return text[start:].split("\n\n", 1)[0].rstrip("\n")


@pytest.mark.requires("docs")
def test_the_site_builds_with_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    # The API reference was rendered from the code, not left as a `:::` line.
    api = (site / "python-api" / "index.html").read_text(encoding="utf-8")
    assert ":::" not in api
    for anchor in ("corral.Corral", "corral.Corral.fanout", "corral.Corral.apply",
                   "aio.AsyncCorral", "results.RunResult", "fanouts.FanoutResult",
                   "errors.error_json"):
        assert f'id="executor.api.{anchor}"' in api, anchor
    assert 'id="policies.errors.CorralError"' in api
    # Sphinx roles of the docstrings are shown as code, not as ":meth:" text.
    assert re.search(r":(class|meth|func|mod|attr):<code>", api) is None
    assert (site / "screenshots" / "fanout.png").is_file()


@pytest.mark.parametrize("fmt", list(PAGES), ids=lambda fmt: fmt.value)
def test_a_format_page_lists_its_tool_names_as_the_code_has_them(fmt: AgentFormat) -> None:
    assert _listed_table(FORMATS / PAGES[fmt]) == tool_table(fmt)


def _example(page: Path) -> tuple[str, str]:
    found = re.search(r'^```\w+ title="([^"]+)"\n(.+?)\n```$', page.read_text(encoding="utf-8"),
                      re.DOTALL | re.MULTILINE)
    assert found is not None, f"{page.name}: no example with a title"
    return found.group(1), found.group(2) + "\n"


@pytest.mark.parametrize("fmt", list(PAGES), ids=lambda fmt: fmt.value)
def test_a_format_page_example_loads_without_a_warning(fmt: AgentFormat, tmp_path: Path) -> None:
    path, text = _example(FORMATS / PAGES[fmt])
    repo, home = tmp_path / "repo", tmp_path / "home"
    (repo / path).parent.mkdir(parents=True)
    (repo / path).write_text(text, encoding="utf-8")
    env = Environment(home=home, xdg_config=home / ".config", pi_dir=home / ".pi" / "agent")
    result = discover(repo, trust_project=True, personal=False, env=env)
    noted = [f"{d.severity.value}: {d.message}" for d in result.diagnostics
             if d.severity is not Severity.INFO]
    assert noted == []
    assert list(result.agents) == ["reviewer"]
    assert result.agents["reviewer"].origin.format is fmt


def _nav_pages(entries: object) -> set[str]:
    """Every page a ``nav`` (a list of titles mapped to a page or to a list) names."""
    if isinstance(entries, str):
        return {entries}
    if isinstance(entries, list):
        return set().union(*(_nav_pages(entry) for entry in entries))
    if isinstance(entries, dict):
        return set().union(*(_nav_pages(value) for value in entries.values()))
    return set()


def test_every_page_is_in_the_nav() -> None:
    """A page written and left out of ``mkdocs.yml``'s nav is only an ``info`` line of the
    build (and no reader finds it): name it here, with the nav's line to add."""
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")
             if path.relative_to(DOCS).parts[0] not in NOT_PAGES}
    assert sorted(pages - nav) == [], "add each to the nav of mkdocs.yml: - Title: PAGE"
    assert sorted(nav - pages) == [], "the nav of mkdocs.yml names pages docs/ does not have"
