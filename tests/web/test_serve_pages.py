"""What the pages read from the API agrees with the API (and so with the CLI)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import httpx
import pytest
from web_support import Served, make_project, serve

from executor.api import Corral
from executor.api.agents import show_all
from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    repo = make_project(tmp_path / "repo")
    shutil.copytree(REPO / "examples", repo / "examples")
    corral = Corral(repo, trust_project=True, personal=False, backend="host",
                    config_file=repo / "examples" / "agents.json", state_dir=tmp_path / "state")
    yield from serve(corral)


def test_show_all_is_show_for_every_agent(served: Served) -> None:
    corral = served.corral
    views = show_all(corral.sources())
    assert [view.contract.name for view in views] == corral.agents().names
    for view in views:
        assert view.to_json() == corral.agent(view.contract.name).to_json()


def _cell(row: str, css: str) -> str:
    found = re.search(f'<td class="{css}">([^<]*)<', row)
    assert found is not None, css
    return unescape(found.group(1))


def test_the_agents_page_lists_each_agents_effective_tools(served: Served) -> None:
    html = httpx.get(served.url + "/agents", timeout=scaled(60)).text
    shown = {_cell(row, "name"): _cell(row, "tools")
             for row in html.split('<tr class="agent">')[1:]}
    expected = {name: ", ".join(served.corral.agent(name).to_json()["effective"]["tools"])
                or "(none)" for name in served.corral.agents().names}
    assert shown == expected
    assert len(shown) == 3  # patcher (the project's, over the example's), auditor, lead
