"""Apply, check, branch and discard from the run page: ``corral apply``'s own checks and
review list (``Corral.apply`` / ``Corral.branch``), over real HTTP, on a real checkout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_support import Served, call, make_project, replay, serve

from executor.api import Corral
from tests.backends import git
from tests.timescale import scaled

WORKFLOW = ".github/workflows/ci.yml"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, str]]:
    """A run that changes src/app.py and adds a CI workflow (flagged for review)."""
    repo = make_project(tmp_path / "repo")
    corral = Corral(repo, trust_project=True, personal=False, backend="host",
                    state_dir=tmp_path / "state")
    script = replay(tmp_path, "w", call("write_file", path=WORKFLOW, content="on: push\n"),
                    call("write_file", path="src/app.py", content="def main():\n    return 2\n"),
                    {"text": "done"})
    run_id = corral.run("change", agent="patcher", script=script).run_id
    yield from ((s, run_id) for s in serve(corral))


def _post(app: Served, path: str, **data: str) -> httpx.Response:
    return httpx.post(app.url + path, data={"token": app.token, **data},
                      headers={"Origin": app.origin}, timeout=scaled(60))


def _review(html: str) -> list[str]:
    body = html.split('<table class="review">', 1)[1].split("</table>", 1)[0]
    return body.split("<tr")[2:]  # after the header row


def test_check_shows_the_review_list_and_changes_nothing(served: tuple[Served, str]) -> None:
    app, run_id = served
    response = _post(app, f"/runs/{run_id}/apply", action="check")
    assert response.status_code == 200
    assert "Would apply 2 file(s); 1 flagged file(s) need" in response.text
    rows = _review(response.text)
    flagged = [row for row in rows if row.startswith(' class="flagged"')]
    assert len(rows) == 2 and len(flagged) == 1 and WORKFLOW in flagged[0]
    assert not (app.corral.root / WORKFLOW).exists()
    assert app.corral.show(run_id).state == "pending"


def test_flagged_files_are_refused_without_yes_then_merged_with_it(
        served: tuple[Served, str]) -> None:
    app, run_id = served
    refused = _post(app, f"/runs/{run_id}/apply", action="apply")
    assert refused.status_code == 409
    assert "Refused: nothing was written." in refused.text
    assert WORKFLOW in refused.text  # the review list says which file
    assert not (app.corral.root / WORKFLOW).exists()
    assert (app.corral.root / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    applied = _post(app, f"/runs/{run_id}/apply", action="apply", yes="on")
    assert applied.status_code == 200, applied.text
    assert "Applied 2 file(s)." in applied.text
    assert (app.corral.root / WORKFLOW).read_text() == "on: push\n"
    assert app.corral.show(run_id).state == "applied"


def test_apply_as_branch_leaves_the_checkout_alone(served: tuple[Served, str]) -> None:
    app, run_id = served
    root = app.corral.root
    before = git(root, "status", "--porcelain").stdout
    response = _post(app, f"/runs/{run_id}/apply", action="branch", branch="corral/web")
    assert response.status_code == 200, response.text
    assert "Made branch" in response.text and "corral/web" in response.text
    shown = git(root, "show", "corral/web:src/app.py").stdout
    assert shown == "def main():\n    return 2\n"
    assert git(root, "status", "--porcelain").stdout == before
    again = _post(app, f"/runs/{run_id}/apply", action="branch", branch="corral/web")
    assert again.status_code == 409  # an existing branch is never moved


def test_discard_marks_the_run(served: tuple[Served, str]) -> None:
    app, run_id = served
    response = httpx.post(app.url + f"/runs/{run_id}/discard", data={"token": app.token},
                          headers={"Origin": app.origin}, timeout=scaled(60))
    assert response.status_code == 303
    assert app.corral.show(run_id).state == "discarded"
    page = httpx.get(app.url + f"/runs/{run_id}").text
    assert "This run was discarded" in page


def test_unknown_and_fanout_ids_on_the_run_page(served: tuple[Served, str]) -> None:
    app, _ = served
    unknown = httpx.get(app.url + "/runs/20990101-000000-abcdef")
    assert unknown.status_code == 400 and "unknown_run" in unknown.text
    moved = httpx.get(app.url + "/runs/f-20990101-000000-abcdef")
    assert moved.status_code == 303
    assert moved.headers["location"] == f"/{app.token}/fanouts/f-20990101-000000-abcdef"
