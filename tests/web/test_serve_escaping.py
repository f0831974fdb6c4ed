"""Everything a child, a definition, a file name or a model produced is shown as text.

One test per field and payload (a script, HTML, bidi and invisible characters): the
page that shows the field has it escaped for HTML, its controls and bidi characters
made visible (``\\u202e``, as the CLI shows them: :mod:`executor.text`), and nothing of
any payload as it is. ``test_serve_browser.py`` checks the same pages in Chromium: no
payload ever runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape

import httpx
import pytest
from payloads import FIELDS, PAYLOADS, RAW, Carried, file_name, labelled, make_hostile
from web_support import Served, make_project, serve

from executor.api import Corral
from executor.text import printable
from tests.timescale import scaled

#: Which page shows each field: agents, the run, the fanout, the live journal.
PAGES = {"description": "agents", "definition": "agents", "prompt": "run",
         "final_text": "run", "tool_arguments": "run", "tool_output": "journal",
         "file_name": "fanout", "file_content": "run", "check_output": "fanout"}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[Served, dict[str, Carried]]]:
    base = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(base / "home"))
        patch.setenv("CORRAL_CONFIG", str(base / "home" / "config.toml"))
        repo = make_project(base / "repo")
        corral = Corral(repo, trust_project=True, personal=False, backend="host",
                        state_dir=base / "state")
        carried = make_hostile(repo, base, corral)
        for served in serve(corral):
            yield served, carried


def _page(served: Served, carried: Carried, page: str) -> str:
    path = {"agents": "/agents", "run": f"/runs/{carried.run_id}",
            "journal": f"/runs/{carried.run_id}/journal?after=0",
            "fanout": f"/fanouts/{carried.fanout.fanout_id}"}[page]
    response = httpx.get(served.url + path, timeout=scaled(60))
    assert response.status_code == 200, response.text
    return response.text


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("field", FIELDS)
def test_a_field_is_shown_as_text(hostile: tuple[Served, dict[str, Carried]], field: str,
                                  payload: str) -> None:
    served, carried = hostile
    html = _page(served, carried[payload], PAGES[field])
    text = file_name(PAYLOADS[payload]) if field == "file_name" else labelled(
        PAYLOADS[payload], field)
    shown = printable(text)
    if field == "tool_arguments":  # inside the call's JSON (quotes, controls as JSON has them)
        shown = printable(json.dumps(text, ensure_ascii=False)[1:-1])
    assert [raw for raw in RAW if raw in html] == []  # nothing of it as it is
    # What a reader sees (the page's text, its tags and entities gone) is the field, whole.
    assert shown in unescape(re.sub(r"<[^>]*>", "", html)), (field, shown)
    if payload == "bidi":
        assert "\\u202e" in shown and ("\\x1b" in shown or "\\u001b" in shown)  # visible
