"""Attacks on ``corral serve``, sent for real (httpx) to the real app on a real port.

A request without the token, with a wrong one, from a foreign ``Origin`` or
``Sec-Fetch-Site``, naming a foreign ``Host`` (DNS rebinding), or a ``POST`` whose
form lacks the token is refused, and the checkout's bytes and the run's record are
exactly as before. A ``GET`` never changes state. Every response carries the
security headers. The control: the same ``POST``, done right, applies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_support import Served, call, make_project, replay, serve

from executor.api import Corral
from executor.web.guard import CSP
from tests.timescale import scaled


def _digest(root: Path) -> str:
    """Every file of the checkout (``.git`` included): names, modes and bytes."""
    digest = hashlib.sha256()
    for item in sorted(root.rglob("*")):
        info = item.lstat()
        digest.update(f"{item.relative_to(root)}\0{info.st_mode}\0".encode())
        if item.is_file() and not item.is_symlink():
            digest.update(item.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, str]]:
    repo = make_project(tmp_path / "repo")
    corral = Corral(repo, trust_project=True, personal=False, backend="host")
    script = replay(tmp_path, "writes", call("write_file", path="out.txt", content="child\n"),
                    {"text": "done"})
    run_id = corral.run("write out.txt", agent="patcher", script=script).run_id
    yield from ((s, run_id) for s in serve(corral))


def _state(served: Served, run_id: str) -> tuple[str, dict[str, Any]]:
    return _digest(served.corral.root), served.corral.show(run_id).record.model_dump()


def _post(served: Served, path: str, data: dict[str, str], **headers: str) -> httpx.Response:
    own = {"Origin": served.origin} | headers
    return httpx.post(served.url + path, data=data, headers=own, timeout=scaled(60))


def test_a_request_without_the_token_is_refused(served: tuple[Served, str]) -> None:
    app, run_id = served
    token = app.token
    wrong = ["", "/", "/runs", f"/{token[:-1]}/runs", f"/{token}x/runs",
             f"/{token[:-1]}{chr(ord(token[-1]) + 1)}/runs", f"/runs/{token}",
             f"/{token.upper()}/runs"]
    for path in wrong:
        response = httpx.get(app.origin + path)
        assert response.status_code == 403, path
        assert run_id not in response.text
    assert httpx.get(app.url + "/runs").status_code == 200  # the control


def test_a_foreign_host_is_refused_dns_rebinding(served: tuple[Served, str]) -> None:
    app, run_id = served
    for host in ("evil.example", f"evil.example:{app.port}", f"127.0.0.1:{app.port + 1}",
                 f"localhost.evil.example:{app.port}", ""):
        response = httpx.get(app.url + f"/runs/{run_id}", headers={"Host": host})
        assert response.status_code == 400, host
        assert run_id not in response.text
    before = _state(app, run_id)
    response = _post(app, f"/runs/{run_id}/apply", {"token": app.token, "action": "apply"},
                     Host=f"evil.example:{app.port}")
    assert response.status_code == 400
    assert _state(app, run_id) == before
    for host in (f"127.0.0.1:{app.port}", f"localhost:{app.port}"):
        assert httpx.get(app.url + "/runs", headers={"Host": host}).status_code == 200


def test_a_foreign_origin_cannot_change_anything(served: tuple[Served, str]) -> None:
    app, run_id = served
    before = _state(app, run_id)
    form = {"token": app.token, "action": "apply", "yes": "on"}
    for origin in ("http://evil.example", f"http://127.0.0.1:{app.port + 1}",
                   f"https://127.0.0.1:{app.port}", "null"):
        for path in (f"/runs/{run_id}/apply", f"/runs/{run_id}/discard"):
            response = _post(app, path, form, Origin=origin)
            assert response.status_code == 403, (origin, path)
    for site in ("cross-site", "same-site"):
        response = _post(app, f"/runs/{run_id}/apply", form, **{"Sec-Fetch-Site": site})
        assert response.status_code == 403, site
        # An opaque origin (a sandboxed frame, a data: URL) passes only from the app's pages.
        response = _post(app, f"/runs/{run_id}/apply", form,
                         **{"Origin": "null", "Sec-Fetch-Site": site})
        assert response.status_code == 403, site
    response = httpx.get(app.url + "/runs", headers={"Origin": "http://evil.example"})
    assert response.status_code == 403  # nothing is served to another origin
    assert _state(app, run_id) == before
    assert not (app.corral.root / "out.txt").exists()


def test_a_post_without_the_form_token_changes_nothing(served: tuple[Served, str]) -> None:
    app, run_id = served
    before = _state(app, run_id)
    for data in ({"action": "apply"}, {"token": "", "action": "apply"},
                 {"token": app.token[:-1], "action": "apply"},
                 {"token": app.token + "=", "action": "apply"}):
        assert _post(app, f"/runs/{run_id}/apply", data).status_code == 403, data
        assert _post(app, f"/runs/{run_id}/discard", data).status_code == 403, data
    assert _post(app, "/start", {"prompt": "x", "agent": "patcher"}).status_code == 403
    assert _state(app, run_id) == before
    assert len(app.corral.runs().runs) == 1  # nothing started


def test_a_get_never_changes_state(served: tuple[Served, str]) -> None:
    app, run_id = served
    before = _state(app, run_id)
    for path in (f"/runs/{run_id}/apply?action=apply&yes=on&token={app.token}",
                 f"/runs/{run_id}/discard?token={app.token}"):
        assert httpx.get(app.url + path).status_code == 405
    for method in ("PUT", "DELETE", "PATCH"):
        assert httpx.request(method, app.url + f"/runs/{run_id}/apply").status_code == 405
    assert _state(app, run_id) == before


def test_every_response_carries_the_security_headers(served: tuple[Served, str]) -> None:
    app, run_id = served
    responses = [httpx.get(app.url + "/runs"), httpx.get(app.url + f"/runs/{run_id}"),
                 httpx.get(app.url + "/static/live.js"), httpx.get(app.origin + "/runs"),
                 httpx.get(app.url + "/runs", headers={"Host": "evil.example"})]
    for response in responses:
        headers = response.headers
        assert headers["content-security-policy"] == CSP, response.url
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
        assert "access-control-allow-origin" not in headers
    assert "frame-ancestors 'none'" in CSP and "script-src 'self';" in CSP
    assert "unsafe" not in CSP
    page = responses[1].text
    assert "<script>" not in page and " on" not in page.split("<main>")[0]  # no inline code
    assert page.count("<script") == 1 and 'src="/' in page


def test_the_same_post_done_right_applies(served: tuple[Served, str]) -> None:
    """The control: the refusals above are the guard's, not a broken route."""
    app, run_id = served
    response = _post(app, f"/runs/{run_id}/apply", {"token": app.token, "action": "apply"})
    assert response.status_code == 200, response.text
    assert (app.corral.root / "out.txt").read_text() == "child\n"
    assert app.corral.show(run_id).state == "applied"
