"""web_fetch: one GET on the host side, only to what the user granted (issue 35).

Every test runs against real HTTP servers on 127.0.0.x (:mod:`fetch_support`) and
a test resolver for test names (``docs.test``, ``evil.test``), set as the
tool's resolver hook; the grant's ``allow_private = ["127.0.0.1"]`` is what
lets a granted *name* reach those servers at all. Each attack must be refused
before any request reaches a server that was not granted.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_support import BACKENDS, agent_file, call
from fetch_support import Names, Site, certificate, fetch, serve, use_names

from executor.ledger import JOURNAL, ledger_dir, read_journal
from executor.tools import web_fetch
from executor.tools.dispatch import ToolDenied, ToolFailure
from policies.config import UserConfig
from policies.network import NetworkConfig
from tests.timescale import scaled


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> Names:
    return use_names(monkeypatch)


@pytest.fixture
def site(names: Names) -> Iterator[Site]:
    """The granted site: ``docs.test`` -> 127.0.0.1; ``evil.test`` maps there too."""
    with serve() as served:
        names["docs.test"] = ["127.0.0.1"]
        names["evil.test"] = ["127.0.0.1"]
        names["docs.test.evil"] = ["127.0.0.1"]
        yield served


def _grant(site: Site) -> list[str]:
    return [f"docs.test:{site.port}"]


def _refused(url: str, site: Site, **options: object) -> str:
    """The reason web_fetch refuses ``url``; the server saw nothing of it."""
    before = list(site.seen)
    with pytest.raises(ToolDenied) as refused:
        fetch(url, allow=options.pop("allow", _grant(site)), **options)  # type: ignore[arg-type]
    assert site.seen == before, f"{url!r} reached the server: {site.seen[len(before):]}"
    assert refused.value.data["fetch"]["denied"]
    return refused.value.message


def test_a_granted_page_comes_back_as_markdown(site: Site) -> None:
    """The granted host's HTML comes back as text: headings, code, links and lists kept,
    scripts, styles and comments dropped; the name in the Host header."""
    out = fetch(f"http://docs.test:{site.port}/page", allow=_grant(site))
    assert not out.is_error
    assert "# Install guide" in out.content and "`make install`" in out.content
    assert "- first step" in out.content and "[the next page](/next)" in out.content
    assert "SCRIPT-TEXT" not in out.content and "COMMENT-TEXT" not in out.content
    assert "<h1>" not in out.content
    assert site.seen == [("/page", f"docs.test:{site.port}")]
    data = out.data["fetch"]
    assert data["status"] == 200 and data["final_url"] == f"http://docs.test:{site.port}/page"
    assert data["bytes"] > 100 and data["denied"] is None and data["address"] == "127.0.0.1"


def test_json_is_read_and_binary_is_refused(site: Site) -> None:
    assert '{"ok": true}' in fetch(f"http://docs.test:{site.port}/json",
                                   allow=_grant(site)).content
    with pytest.raises(ToolDenied, match="content type 'application/octet-stream'"):
        fetch(f"http://docs.test:{site.port}/binary", allow=_grant(site))


@pytest.mark.parametrize("host", ["evil.test", "docs.test.evil", "test", "xdocs.test"])
def test_an_unlisted_host_and_a_suffix_trick_are_refused(site: Site, host: str) -> None:
    assert "is not granted" in _refused(f"http://{host}:{site.port}/secret", site)


@pytest.mark.parametrize("url", [
    "http://docs.test\x00.evil.test:{port}/secret",
    "http://evil.test\x00docs.test:{port}/secret",
    "http://docs.test%00.evil.test:{port}/secret",
    "http://docs.test:{port}@evil.test:{port}/secret",
    "http://evil.test:{port}\\@docs.test:{port}/secret",
    "http://user@docs.test:{port}/secret",
    "http://docs.test :{port}/secret",
    "http://docs.test:{port}\n/secret",
])
def test_nul_userinfo_and_control_characters_are_refused(site: Site, url: str) -> None:
    _refused(url.format(port=site.port), site)


#: 127.0.0.1 and 169.254.169.254 in every form a URL parser might read as them.
LOOPBACK_FORMS = ["127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.0.0.1", "0x7f000001",
                  "127.1", "017700000001", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::1]",
                  "[0:0:0:0:0:0:0:1]", "[::127.0.0.1]", "[64:ff9b::127.0.0.1]",
                  "0.0.0.0"]  # noqa: S104 - a host to refuse, never bound
METADATA_FORMS = ["169.254.169.254", "2852039166", "0251.0376.0251.0376", "0xa9fea9fe",
                  "0xa9.0xfe.0xa9.0xfe", "169.254.43518", "[::ffff:169.254.169.254]",
                  "[::ffff:a9fe:a9fe]", "[fd00:ec2::254]"]


@pytest.mark.parametrize("host", LOOPBACK_FORMS + METADATA_FORMS)
def test_ip_literals_in_every_form_are_refused(site: Site, host: str) -> None:
    """Not granted as that exact literal: refused, whatever address it spells."""
    _refused(f"http://{host}:{site.port}/secret", site)


@pytest.mark.parametrize("host", ["169.254.169.254", "[fd00:ec2::254]",
                                  "[::ffff:169.254.169.254]"])
def test_a_metadata_address_is_refused_even_when_granted_exactly(site: Site,
                                                                 host: str) -> None:
    message = _refused(f"http://{host}/latest/meta-data/", site,
                       allow=[host], private=["127.0.0.1"])
    assert "metadata" in message


def test_an_ip_literal_needs_that_exact_literal_granted(site: Site) -> None:
    """A granted literal is fetched (127.0.0.1 here, which allow_private also lists); a
    literal granted but private, without allow_private, is refused after the grant."""
    url = f"http://127.0.0.1:{site.port}/secret"
    assert "PUBLIC-PAGE" in fetch(url, allow=[f"127.0.0.1:{site.port}"]).content
    assert "not a public address (loopback)" in _refused(
        url, site, allow=[f"127.0.0.1:{site.port}"], private=[])


def test_a_name_resolving_to_a_private_address_is_refused(site: Site, names: Names) -> None:
    """Every answer is checked: one private address among them refuses the fetch, and a
    name that resolves to the metadata service never reaches it."""
    names["docs.test"] = ["127.0.0.1", "10.0.0.7"]
    assert "10.0.0.7 is not a public address (private)" in _refused(
        f"http://docs.test:{site.port}/page", site)
    names["docs.test"] = ["169.254.169.254"]
    assert "metadata" in _refused(f"http://docs.test:{site.port}/page", site)
    names["docs.test"] = ["127.0.0.1"]
    assert "loopback" in _refused(f"http://docs.test:{site.port}/page", site, private=[])


@pytest.mark.parametrize("target", ["http://evil.test:{port}/secret",
                                    "http://127.0.0.1:{port}/secret",
                                    "http://[::1]:{port}/secret",
                                    "http://2130706433:{port}/secret",
                                    "http://docs.test:{port}@evil.test:{port}/secret",
                                    "file:///etc/passwd"])
def test_a_redirect_to_anything_not_granted_is_refused(site: Site, target: str) -> None:
    """A redirect is checked as a fetch of its own: the listed host's redirect to an
    unlisted host, or to 127.0.0.1 by IP, never reaches it."""
    to = target.format(port=site.port)
    with pytest.raises(ToolDenied) as refused:
        fetch(f"http://docs.test:{site.port}/redirect?to={to}", allow=_grant(site))
    assert site.paths() == [f"/redirect?to={to}"]  # the redirect only; never /secret
    assert refused.value.data["fetch"]["redirects"] == [{"status": 302, "to": to}]


def test_a_redirect_within_the_grant_is_followed_and_bounded(site: Site) -> None:
    out = fetch(f"http://docs.test:{site.port}/redirect?status=301&to=/page",
                allow=_grant(site))
    assert "# Install guide" in out.content
    assert out.data["fetch"]["final_url"] == f"http://docs.test:{site.port}/page"
    with pytest.raises(ToolDenied, match="more than 5 redirects"):
        fetch(f"http://docs.test:{site.port}/loop", allow=_grant(site))
    assert site.paths().count("/loop") == 6


def test_dns_rebinding_between_check_and_connect_cannot_move_the_request(
        names: Names) -> None:
    """The resolver answers the checked address once and an internal one after: the fetch
    resolves once and connects to the address it checked, so the internal server (the
    same port on 127.0.0.2, not in allow_private) never sees a request."""
    with serve("127.0.0.1") as public:
        internal = None
        for _ in range(20):  # the same port on 127.0.0.2 (bounded: another may hold it)
            try:
                internal_cm = serve("127.0.0.2", public.port)
                internal = internal_cm.__enter__()
                break
            except OSError:
                continue
        if internal is None:
            pytest.skip("127.0.0.2 has no free port matching 127.0.0.1's")
        try:
            internal.secret = "INTERNAL-SECRET"
            names["docs.test"] = lambda calls: ["127.0.0.1"] if calls == 1 else ["127.0.0.2"]
            out = fetch(f"http://docs.test:{public.port}/secret",
                        allow=[f"docs.test:{public.port}"])
            assert "PUBLIC-PAGE" in out.content and "INTERNAL" not in out.content
            assert internal.seen == [] and public.paths() == ["/secret"]
            assert names.calls == ["docs.test"]  # resolved once: the answer was pinned
        finally:
            internal_cm.__exit__(None, None, None)


def test_a_port_not_granted_is_refused(site: Site) -> None:
    with serve() as other:
        assert "port" in _refused(f"http://docs.test:{other.port}/secret", site)
        assert other.seen == []
    assert "port 80 is not granted" in _refused("http://docs.test/secret", site)
    # A grant without a port grants the web ports only.
    assert "port" in _refused(f"http://docs.test:{site.port}/secret", site,
                              allow=["docs.test"])


def test_deny_wins_over_allow(site: Site, names: Names) -> None:
    names["api.docs.test"] = ["127.0.0.1"]
    grant = [f"*.docs.test:{site.port}", f"docs.test:{site.port}"]
    assert "PUBLIC-PAGE" in fetch(f"http://api.docs.test:{site.port}/secret",
                                  allow=grant).content
    assert "denied by your [network] deny" in _refused(
        f"http://api.docs.test:{site.port}/secret", site, allow=grant,
        deny=[f"api.docs.test:{site.port}"])


def test_a_huge_body_is_truncated_at_the_bound_and_says_so(site: Site) -> None:
    started = time.monotonic()
    out = fetch(f"http://docs.test:{site.port}/huge?bytes={64 << 20}", allow=_grant(site),
                max_bytes=256 << 10)
    assert out.data["fetch"]["bytes"] == 256 << 10 and out.data["fetch"]["truncated"]
    assert f"truncated at the bound of {256 << 10} bytes" in out.content
    assert len(out.content) < 110_000  # the model sees a bounded text
    assert time.monotonic() - started < scaled(10)


def test_a_slow_body_is_stopped_at_the_time_bound(site: Site) -> None:
    started = time.monotonic()
    out = fetch(f"http://docs.test:{site.port}/slow", allow=_grant(site), timeout=1.0)
    elapsed = time.monotonic() - started
    assert out.data["fetch"]["timed_out"] and "stopped at the time bound of 1 s" in out.content
    assert 0.9 <= elapsed < 1.0 + scaled(2.0), elapsed
    assert 0 < out.data["fetch"]["bytes"] < 100


@pytest.mark.parametrize("url", ["ftp://docs.test/x", "file:///etc/passwd", "http:/docs.test/",
                                 "http:docs.test/", "javascript:alert(1)", "//docs.test/",
                                 "gopher://docs.test:70/"])
def test_only_http_and_https_urls_are_fetched(site: Site, url: str) -> None:
    assert "only http:// and https://" in _refused(url, site)


def test_an_unresolvable_name_is_a_failure_not_a_hang(site: Site) -> None:
    with pytest.raises(ToolFailure, match="does not resolve"):
        fetch(f"http://nowhere.test:{site.port}/", allow=[f"nowhere.test:{site.port}"])


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_child_granted_one_local_host_reads_a_page_there(run, repo: Path, site: Site,
                                                           backend: str) -> None:
    """End to end: the child's sandbox has no network, web_fetch runs in corral's process;
    the page's text is the tool result; an unlisted host is denied; both fetches are in the
    record's audit and the run's journal (url, final url, status, bytes, denied)."""
    agent_file(repo, "reader", "tools: [read_file, web_fetch]")
    config = UserConfig(network=NetworkConfig(allow=(f"docs.test:{site.port}",),
                                              allow_private=("127.0.0.1",)))
    record = run("reader", [call("web_fetch", url=f"http://docs.test:{site.port}/page"),
                            call("web_fetch", url=f"http://evil.test:{site.port}/secret"),
                            {"text": "read it"}], config=config)
    first, second = record.audit[0], record.audit[1]
    assert first["decision"] == "allowed" and "# Install guide" in first["result"]
    assert first["data"]["fetch"]["status"] == 200 and first["data"]["fetch"]["bytes"] > 100
    assert second["decision"] == "denied" and "not granted" in second["reason"]
    assert second["data"]["fetch"]["denied"]
    assert site.paths() == ["/page"]
    assert any("web_fetch may reach" in note for note in record.notes)
    journal = next(p for p in ledger_dir(repo).rglob(JOURNAL) if record.run_id in str(p))
    events, _ = read_journal(journal)
    fetches = [e["data"]["fetch"] for e in events
               if e["kind"] == "tool_result" and "data" in e]
    assert [f["url"] for f in fetches] == [f"http://docs.test:{site.port}/page",
                                          f"http://evil.test:{site.port}/secret"]
    assert fetches[0]["final_url"] and fetches[1]["denied"]


def test_https_connects_to_the_checked_address_and_checks_the_name(
        names: Names, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS goes to the pinned address with the granted name in the SNI, and the
    certificate is checked against that name: a server whose certificate is for another
    name fails the handshake (the connection is by address, the trust is by name)."""
    cert, key = certificate(tmp_path, "docs.test")
    other = certificate(tmp_path, "other.test")

    def trusting() -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(cert))
        context.load_verify_locations(cafile=str(other[0]))
        return context

    monkeypatch.setattr(web_fetch, "TLS_CONTEXT", trusting)
    names["docs.test"] = ["127.0.0.1"]
    with serve(tls=(cert, key)) as site:
        out = fetch(f"https://docs.test:{site.port}/page", allow=[f"docs.test:{site.port}"])
        assert "# Install guide" in out.content and out.data["fetch"]["status"] == 200
        assert site.seen == [("/page", f"docs.test:{site.port}")]
    with serve(tls=other) as site:
        with pytest.raises(ToolFailure, match=r"certificate|hostname"):
            fetch(f"https://docs.test:{site.port}/page", allow=[f"docs.test:{site.port}"])
        assert site.seen == []
