"""Network grants only the user gives, which a definition can only narrow (issue 35).

The grant is ``[network]`` of the user's corral config and ``--allow-net`` on the
command line; ``agents show`` prints the effective grant; without one, ``web_fetch``
(Claude's ``WebFetch``, OpenCode's ``webfetch``) is not offered and says how to grant
it. A definition narrows by its tools and by ``web_fetch`` rules over the URL (redirect
targets included); a rule that allows a host the user never granted opens nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fetch_support import Names, Site, serve, use_names

from executor.cli import cli
from policies.config import ConfigError, load_user_config
from policies.errors import CorralError
from policies.network import NetworkConfig, check_pattern, normalize_host


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> Names:
    return use_names(monkeypatch)


@pytest.fixture
def site(names: Names) -> Iterator[Site]:
    with serve() as served:
        names["docs.test"] = ["127.0.0.1"]
        names["evil.test"] = ["127.0.0.1"]
        yield served


def _config(text: str) -> Path:
    path = Path(os.environ["CORRAL_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _claude(repo: Path, name: str, tools: str) -> None:
    path = repo / ".claude" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: reads docs\ntools: {tools}\n---\nRead.\n")


def _show(repo: Path, name: str, *flags: str) -> tuple[dict[str, object], str]:
    base = ("agents", "show", name, "--root", str(repo), "--trust-project", "--no-personal")
    code, out, err = corral(*base, "--json", *flags)
    assert code == 0, err
    text = corral(*base, *flags)[1]
    return dict(json.loads(out)["effective"]), text


# -- the patterns ----------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "host", "port", "granted"), [
    ("docs.python.org", "docs.python.org", 443, True),
    ("docs.python.org", "docs.python.org", 80, True),
    ("docs.python.org", "docs.python.org", 8080, False),   # no port named: the web ports
    ("docs.python.org", "docs.python.org.evil", 443, False),
    ("docs.python.org", "evil-docs.python.org", 443, False),
    ("docs.python.org", "x.docs.python.org", 443, False),  # exact means exact
    ("*.pypi.org", "files.pypi.org", 443, True),
    ("*.pypi.org", "a.b.pypi.org", 443, True),
    ("*.pypi.org", "pypi.org", 443, False),                # subdomains only
    ("*.pypi.org", "evilpypi.org", 443, False),
    ("*.pypi.org", "pypi.org.evil", 443, False),
    ("host.test:8080", "host.test", 8080, True),
    ("host.test:8080", "host.test", 8081, False),
    ("host.test:8080", "host.test", 443, False),
    ("host.test:*", "host.test", 8081, True),
    ("Docs.Python.Org.", "docs.python.org", 443, True),    # case and the trailing dot
    ("bücher.example", "xn--bcher-kva.example", 443, True),
    ("203.0.113.7", "203.0.113.7", 443, True),
    ("203.0.113.7", "203.0.113.8", 443, False),
])
def test_patterns_match_exactly_or_subdomains_only(pattern: str, host: str, port: int,
                                                   granted: bool) -> None:
    grant = NetworkConfig(allow=(pattern,)).grant()
    assert (grant.refusal(normalize_host(host), port) is None) is granted


@pytest.mark.parametrize(("pattern", "says"), [
    ("*", "nothing grants every host"), ("*.com", "top-level"), ("docs.*.org", "may only"),
    ("https://docs.python.org", "a URL"), ("docs.python.org/path", "a URL"),
    ("2130706433", "non-standard"), ("0x7f.0.0.1", "non-standard"), ("docs.test:0", "port"),
    ("docs.test:99999", "port"), ("user@docs.test", "userinfo"), ("do\x00cs.test", "control"),
    ("*.127.0.0.1", "not an address"), ("", "empty"),
])
def test_a_bad_pattern_is_refused_with_what_to_write(pattern: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_pattern(pattern)


def test_the_user_config_section_is_checked_when_read() -> None:
    _config('[network]\nallow = ["*"]\n')
    with pytest.raises(ConfigError, match=r"network\.allow.*nothing grants every host"):
        load_user_config()
    _config('[network]\nallow = ["docs.test"]\nallow_private = ["169.254.169.254"]\n')
    with pytest.raises(ConfigError, match="metadata"):
        load_user_config()
    _config('[network]\nallow = ["docs.test"]\nallowed = ["x"]\n')
    with pytest.raises(ConfigError, match="allowed"):
        load_user_config()
    _config('[network]\nallow = ["DOCS.test", "*.pypi.org"]\ndeny = ["upload.pypi.org"]\n')
    network = load_user_config().network
    assert network.allow == ("docs.test", "*.pypi.org") and network.deny == ("upload.pypi.org",)


# -- what is offered, and agents show ---------------------------------------------------------

def test_a_claude_agent_listing_webfetch_gets_it_only_with_a_grant(repo: Path) -> None:
    """No grant: not offered, and `agents show` says why and how to grant it; --allow-net or
    [network] allow: offered, with the effective grant printed."""
    _claude(repo, "researcher", "Read, WebFetch")
    effective, text = _show(repo, "researcher")
    assert "web_fetch" not in effective["tools"] and effective["network"] is None
    why = effective["unavailable"]["web_fetch"]  # type: ignore[index]
    assert "--allow-net" in why and "[network] allow" in why
    assert "not offered web_fetch" in text and "--allow-net" in text

    effective, text = _show(repo, "researcher", "--allow-net", "docs.test:8080")
    assert "web_fetch" in effective["tools"]  # type: ignore[operator]
    assert effective["network"]["allow"] == ["docs.test:8080"]  # type: ignore[index]
    assert "network      web_fetch may reach docs.test:8080 (your grant)" in text

    _config('[network]\nallow = ["*.pypi.org"]\ndeny = ["upload.pypi.org"]\n')
    effective, text = _show(repo, "researcher", "--allow-net", "docs.test:8080")
    assert effective["network"]["allow"] == ["*.pypi.org", "docs.test:8080"]  # type: ignore[index]
    assert effective["network"]["deny"] == ["upload.pypi.org"]  # type: ignore[index]
    assert "denied     upload.pypi.org" in text


def test_an_agent_that_does_not_list_the_tool_never_gets_it(repo: Path) -> None:
    """Its tools narrow: a grant offers web_fetch only to an agent that holds it."""
    _config('[network]\nallow = ["docs.test"]\n')
    _claude(repo, "reader", "Read, Grep")
    effective, _ = _show(repo, "reader")
    assert "web_fetch" not in effective["tools"]  # type: ignore[operator]
    assert "web_fetch" not in effective["unavailable"]  # type: ignore[operator]


def test_a_bad_allow_net_is_a_usage_error_before_anything(repo: Path, tmp_path: Path) -> None:
    _claude(repo, "researcher", "Read, WebFetch")
    for command in (("agents", "show", "researcher"), ("run", "--backend", "host", "go")):
        result = CliRunner().invoke(cli, [*command, "--root", str(repo), "--no-personal",
                                          "--allow-net", "*"])
        assert result.exit_code == 2 and "--allow-net" in result.stderr, result.stderr
        assert "nothing grants every host" in result.stderr


def _turns(tmp_path: Path, *urls: str) -> Path:
    path = tmp_path / "turns.yaml"
    turns = [{"tool_calls": [{"name": "web_fetch", "arguments": {"url": url}}]} for url in urls]
    path.write_text(yaml.safe_dump([*turns, {"text": "done"}]))
    return path


def _run(repo: Path, script: Path, *flags: str) -> dict[str, object]:
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "researcher", "--backend", "host", "--json",
                            "--script", str(script), *flags, "read the docs")
    run_id = json.loads(out)["run_id"]
    shown = corral("show", run_id, "--root", str(repo), "--json")[1]
    return {"code": code, "err": err, **json.loads(shown)}


def test_a_run_fetches_with_allow_net_and_is_refused_without(repo: Path, tmp_path: Path,
                                                             site: Site) -> None:
    """Through the CLI: the Claude agent's WebFetch (mapped to web_fetch, the name its model
    is shown) fetches the granted host with --allow-net; without it the tool is not offered and the
    call is denied, naming how to grant it; nothing reached the server then."""
    _config('[network]\nallow_private = ["127.0.0.1"]\n')  # the test servers' address
    _claude(repo, "researcher", "Read, WebFetch")
    page = f"http://docs.test:{site.port}/page"
    script = _turns(tmp_path, page)
    refused = _run(repo, script)
    assert refused["code"] == 4 and site.seen == []
    denied = refused["denied_calls"][0]  # type: ignore[index]
    assert denied["tool"] == "web_fetch" and "--allow-net" in denied["reason"]

    granted = _run(repo, script, "--allow-net", f"docs.test:{site.port}")
    assert granted["code"] == 0, granted["err"]
    (entry,) = granted["audit"]  # type: ignore[misc]
    assert entry["decision"] == "allowed" and "# Install guide" in entry["result"]
    assert entry["data"]["fetch"]["final_url"] == page
    assert site.paths() == ["/page"]


def _opencode(repo: Path, port: int) -> None:
    """An OpenCode agent whose rules narrow web_fetch: no /secret on docs.test, and an
    'allow' for evil.test (which the user never granted)."""
    path = repo / ".opencode" / "agent" / "researcher.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\ndescription: reads docs\ntools:\n  webfetch: true\npermission:\n"
                    "  webfetch:\n    \"*\": allow\n"
                    f"    \"http://docs.test:{port}/secret*\": deny\n"
                    "    \"http://evil.test*\": allow\n---\nRead.\n")


def test_a_definition_only_narrows_the_grant(repo: Path, tmp_path: Path, site: Site) -> None:
    """Its rules take /secret out of the grant, directly and behind a redirect; its allow
    for evil.test opens nothing the user did not grant. `agents show` prints its rules."""
    _config(f'[network]\nallow = ["docs.test:{site.port}"]\nallow_private = ["127.0.0.1"]\n')
    _opencode(repo, site.port)
    base = f"http://docs.test:{site.port}"
    effective, text = _show(repo, "researcher")
    rules = effective["network"]["rules"]  # type: ignore[index]
    assert f"deny http://docs.test:{site.port}/secret*" in rules
    assert "this agent's web_fetch rules narrow it" in text
    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "web_fetch", "arguments": {"url": f"{base}/secret"}}]},
        {"tool_calls": [{"name": "web_fetch",
                         "arguments": {"url": f"{base}/redirect?to=/secret"}}]},
        {"tool_calls": [{"name": "web_fetch",
                         "arguments": {"url": f"http://evil.test:{site.port}/secret"}}]},
        {"tool_calls": [{"name": "web_fetch", "arguments": {"url": f"{base}/page"}}]},
        {"text": "done"}]))
    code, out, err = corral("run", "--root", str(repo), "--trust-project", "--no-personal",
                            "--agent", "researcher", "--backend", "host", "--json",
                            "--script", str(script), "read")
    record = json.loads(corral("show", json.loads(out)["run_id"], "--root", str(repo),
                               "--json")[1])
    decisions = [(a["decision"], a["reason"]) for a in record["audit"]]
    assert decisions[0][0] == "denied" and "permission rule denies" in decisions[0][1]
    assert decisions[1][0] == "denied" and "outside this agent's web_fetch rules" in decisions[1][1]
    assert decisions[2][0] == "denied" and "not granted" in decisions[2][1]
    assert decisions[3][0] == "allowed"
    assert site.paths() == ["/redirect?to=/secret", "/page"]  # never /secret, never evil.test
    assert code == 4, err


def test_a_repository_cannot_grant_network(repo: Path, tmp_path: Path) -> None:
    """The repository's .corral/environment.toml is not where grants live: a [network]
    table there grants nothing (`agents show`), and a run refuses the file, naming it."""
    (repo / ".corral").mkdir()
    (repo / ".corral" / "environment.toml").write_text('[network]\nallow = ["evil.test"]\n')
    _claude(repo, "researcher", "Read, WebFetch")
    effective, _ = _show(repo, "researcher")
    assert "web_fetch" not in effective["tools"] and effective["network"] is None
    ran = CliRunner().invoke(cli, ["run", "--root", str(repo), "--trust-project",
                                   "--no-personal", "--agent", "researcher", "--backend", "host",
                                   "--script", str(_turns(tmp_path)), "go"])
    assert isinstance(ran.exception, CorralError) and ran.exception.exit_code == 2
    assert ".corral/environment.toml: network" in ran.exception.message
