"""``--net allow`` end to end: a run's commands reach the user's grant through the proxy.

A scripted agent's shell command fetches a granted test host and an unlisted one
through the proxy variables, in a real bubblewrap or docker sandbox; the record's
``network`` and the run's journal hold both decisions, ``run --json`` (what the MCP
``run_agent`` tool returns) and the web view list the denied request; a definition
narrows it (no shell, or ``WebFetch`` disallowed: no proxy); without ``--net allow``
nothing changes. Servers on 127.0.0.1 only, reached through the proxy's test-only
resolver and loopback hook (``tests/sandbox/egress_support.py``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shlex
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner
from exec_support import Runner, agent_file, call, script
from fetch_support import Names, Site, serve

from executor.api import Corral, CorralError
from executor.api.results import RunResult
from executor.cli import cli
from executor.ledger import JOURNAL, ledger_dir, read_journal
from executor.mcpserver.arguments import RunAgentArgs, ShowRunArgs
from executor.mcpserver.handlers import ServerOptions, run_agent_tool, show_run_tool
from policies.config import UserConfig
from policies.environment import EnvironmentConfig, load_environment
from policies.network import NetworkConfig
from sandbox.egress import checks
from tests.backends import host_ipv4_addresses, require_backend
from tests.sandbox.egress_support import pip_argv, serve_index
from tests.web.web_support import serve as serve_web

ISOLATING = [pytest.param("bubblewrap", marks=pytest.mark.bubblewrap, id="bubblewrap"),
             pytest.param("docker", marks=pytest.mark.docker, id="docker")]
#: GET each URL through the proxy variables; print "status body" per URL.
FETCH = ("python3 -c \"import sys, urllib.request as u, urllib.error as e\n"
         "for url in sys.argv[1:]:\n"
         "    try: r = u.urlopen(url, timeout=20); print(r.status, r.read().decode())\n"
         "    except e.HTTPError as x: print(x.code, x.read().decode()[:80])\n\"")


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    names = Names()
    monkeypatch.setattr(checks, "RESOLVER", names)
    monkeypatch.setattr(checks, "TEST_LOOPBACK", frozenset({ipaddress.ip_address("127.0.0.1")}))
    with serve() as served:
        names["docs.test"] = names["evil.test"] = ["127.0.0.1"]
        yield served


def _config(site: Site) -> UserConfig:
    return UserConfig(network=NetworkConfig(allow=(f"docs.test:{site.port}",)))


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_commands_reach_the_grant_and_the_record_keeps_every_request(
        run: Runner, repo: Path, site: Site, backend: str) -> None:
    agent_file(repo, "builder", "tools: [shell]")
    urls = f"http://docs.test:{site.port}/secret http://evil.test:{site.port}/secret"
    record = run("builder", [call("shell", command=f"{FETCH} {urls}"), {"text": "done"}],
                 config=_config(site), egress=True)
    output = record.audit[0]["result"]
    assert "200 PUBLIC-PAGE" in output and "403 corral egress refused" in output
    assert site.paths() == ["/secret"]
    network = record.network
    assert network is not None and network["grant"]["allow"] == [f"docs.test:{site.port}"]
    assert [(c["host"], c["allowed"]) for c in network["connections"]] == [
        ("docs.test", True), ("evil.test", False)]
    assert network["denied"] == 1
    assert any(note.startswith("--net allow: commands reach") for note in record.notes)
    view = RunResult(record).to_json()["network"]
    assert view["denied"] == [{"protocol": "http", "host": "evil.test", "port": site.port,
                               "reason": network["connections"][1]["reason"]}]
    journal = next(p for p in ledger_dir(repo).rglob(JOURNAL) if record.run_id in str(p))
    events, _ = read_journal(journal)
    assert [(e["host"], e["allowed"]) for e in events if e["kind"] == "egress"] == [
        ("docs.test", True), ("evil.test", False)]


@pytest.mark.parametrize("backend", ["bubblewrap"], indirect=True)
def test_without_net_allow_nothing_changes(run: Runner, repo: Path, site: Site) -> None:
    agent_file(repo, "builder", "tools: [shell]")
    record = run("builder", [call("shell", command=f"env; {FETCH} http://docs.test:"
                                  f"{site.port}/secret"), {"text": "done"}],
                 config=_config(site))
    assert "PROXY" not in record.audit[0]["result"].upper().split("TRACEBACK")[0]
    assert record.network is None and site.seen == []
    assert RunResult(record).to_json()["network"] is None


@pytest.mark.parametrize("backend", ["bubblewrap"], indirect=True)
@pytest.mark.parametrize(("name", "header", "why"), [
    ("reader", "tools: [read_file]", "no shell"),
])
def test_a_definition_without_the_shell_gets_no_proxy(run: Runner, repo: Path, site: Site,
                                                      name: str, header: str, why: str
                                                      ) -> None:
    agent_file(repo, name, header)
    record = run(name, [{"text": "done"}], config=_config(site), egress=True)
    assert record.network is None
    assert any(why in note for note in record.notes)


@pytest.mark.parametrize("backend", ["bubblewrap"], indirect=True)
def test_a_definition_denying_web_fetch_keeps_its_commands_offline(
        run: Runner, repo: Path, site: Site) -> None:
    path = repo / ".claude/agents/offline.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: offline\ndescription: d\ntools: Bash\n"
                    "disallowedTools: WebFetch\n---\nx\n")
    record = run("offline", [call("shell", command=f"{FETCH} http://docs.test:{site.port}/x"),
                             {"text": "done"}], config=_config(site), egress=True)
    assert record.network is None and site.seen == []
    assert any("deny web_fetch outright" in note for note in record.notes)


def test_net_allow_with_nothing_granted_is_a_usage_error(repo: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("CORRAL_CONFIG", str(config))
    with pytest.raises(CorralError) as caught:
        Corral(repo, net="allow", state_dir=tmp_path / "state").run(
            "go", script=script(tmp_path, "s", {"text": "done"}))
    assert caught.value.code == "usage_error" and "granted no host" in caught.value.message
    with pytest.raises(CorralError) as bad:
        Corral(repo, net="everything")
    assert bad.value.code == "usage_error"


def _corral(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.bubblewrap
def test_cli_run_net_allow_and_agents_show(repo: Path, tmp_path: Path, site: Site) -> None:
    """``corral run --net allow --allow-net HOST``: the command's request reaches it, the
    JSON names the denied one; ``agents show`` prints what --net allow would open."""
    require_backend("bubblewrap")
    agent_file(repo, "builder", "tools: [shell]")
    urls = f"http://docs.test:{site.port}/secret http://evil.test:{site.port}/x"
    turns = script(tmp_path, "t", call("shell", command=f"{FETCH} {urls}"), {"text": "done"})
    flags = ("--root", str(repo), "--trust-project", "--no-personal")
    code, out, err = _corral("run", *flags, "--agent", "builder", "--backend", "bubblewrap",
                             "--json", "--script", turns, "--net", "allow", "--allow-net",
                             f"docs.test:{site.port}", "go")
    assert code == 0, err
    shown = json.loads(out)["network"]
    assert shown["allow"] == [f"docs.test:{site.port}"]
    assert [(d["host"], d["port"]) for d in shown["denied"]] == [("evil.test", site.port)]
    assert site.paths() == ["/secret"]
    run_id = json.loads(out)["run_id"]
    shown_text = _corral("show", run_id, "--root", str(repo))[2]
    logs = _corral("logs", run_id, "--root", str(repo))[1]
    assert f"egress allowed docs.test:{site.port} (http)" in logs
    assert f"egress denied evil.test:{site.port} (http): the host evil.test" in logs
    assert f"egress denied: evil.test:{site.port} (http): the host evil.test" in shown_text
    for served in serve_web(Corral(repo, trust_project=True, personal=False)):  # the web view
        page = httpx.get(f"{served.url}/runs/{json.loads(out)['run_id']}", timeout=60).text
        assert 'id="denied-requests"' in page and "evil.test" in page
        assert f"egress denied evil.test:{site.port} (http)" in page  # the journal's event
        assert f"docs.test:{site.port}" in page.split('id="network-grant"')[1][:400]
    code, text, err = _corral("agents", "show", "builder", *flags, "--allow-net",
                              f"docs.test:{site.port}")
    assert code == 0, err
    assert f"egress       with --net allow its commands reach docs.test:{site.port}" in text
    agent_file(repo, "reader", "tools: [read_file]")
    text = _corral("agents", "show", "reader", *flags, "--allow-net", "docs.test")[1]
    assert "egress       --net allow opens nothing: this agent has no shell" in text
    code, _, err = _corral("run", *flags, "--net", "sideways", "go")
    assert code == 2 and "sideways" in err


#: A SOCKS5 request and an HTTP CONNECT whose host names carry a terminal title escape, a
#: bell and markup: the child's bytes, refused, on their way to the record and its views.
HOSTILE = (
    "import socket\n"
    "name = b'\\x1b]0;pwned\\x07<script>alert(1)</script>.test'\n"
    "s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
    "s.sendall(b'\\x05\\x01\\x00'); s.recv(2)\n"
    "s.sendall(b'\\x05\\x01\\x00\\x03' + bytes([len(name)]) + name + b'\\x00\\x50')\n"
    "print(s.recv(10))\n"
    "c = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
    "c.sendall(b'CONNECT evil\\x1b[2J<b>x</b>.test:443 HTTP/1.1\\r\\n\\r\\n')\n"
    "print(c.recv(200))\n")


@pytest.mark.bubblewrap
def test_hostile_host_names_reach_no_terminal_and_no_page_raw(
        repo: Path, tmp_path: Path, site: Site) -> None:
    agent_file(repo, "builder", "tools: [shell]")
    turns = script(tmp_path, "t", call("shell", command=f"python3 -c {shlex.quote(HOSTILE)}"),
                   {"text": "done"})
    flags = ("--root", str(repo), "--trust-project", "--no-personal")
    code, out, err = _corral("run", *flags, "--agent", "builder", "--backend", "bubblewrap",
                             "--json", "--script", turns, "--net", "allow", "--allow-net",
                             f"docs.test:{site.port}", "go")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    hosts = [d["host"] for d in json.loads(out)["network"]["denied"]]
    assert len(hosts) == 2 and all("\x1b" in host for host in hosts), hosts  # kept as sent
    shown = _corral("show", run_id, "--root", str(repo))
    logs = _corral("logs", run_id, "--root", str(repo))
    for text in (err, shown[1], shown[2], logs[1], logs[2]):
        assert "\x1b" not in text and "\x07" not in text
    assert "egress denied" in shown[2] and "egress denied" in logs[1]
    for served in serve_web(Corral(repo, trust_project=True, personal=False)):
        page = httpx.get(f"{served.url}/runs/{run_id}", timeout=60).text
        assert 'id="denied-requests"' in page
        assert "<script>alert" not in page and "<b>x</b>" not in page


@pytest.mark.bubblewrap
def test_mcp_run_agent_net_allow_shows_the_grant_and_the_denied_request(
        repo: Path, tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MCP ``run_agent`` tool, in process (the test hooks reach its proxy): ``net:
    allow`` opens the user's grant and its answer lists the denied request; ``show_run``
    has every connection."""
    require_backend("bubblewrap")
    config = tmp_path / "corral.toml"
    config.write_text(f'[network]\nallow = ["docs.test:{site.port}"]\n')
    monkeypatch.setenv("CORRAL_CONFIG", str(config))
    agent_file(repo, "builder", "tools: [shell]")
    urls = f"http://docs.test:{site.port}/secret http://evil.test:{site.port}/x"
    turns = [call("shell", command=f"{FETCH} {urls}"), {"text": "done"}]
    options = ServerOptions(root=repo, trust_project=True, no_personal=True,
                            backend="bubblewrap")
    answer = asyncio.run(run_agent_tool(options, RunAgentArgs(
        prompt="go", agent="builder", script_text=yaml.safe_dump(turns), net="allow")))
    assert answer["exit_code"] == 0, answer
    assert answer["network"]["allow"] == [f"docs.test:{site.port}"]
    assert [d["host"] for d in answer["network"]["denied"]] == ["evil.test"]
    shown = show_run_tool(options, ShowRunArgs(run_id=answer["run_id"]))
    assert [c["allowed"] for c in shown["network"]["connections"]] == [True, False]
    offline = asyncio.run(run_agent_tool(options, RunAgentArgs(
        prompt="go", agent="builder", script_text=yaml.safe_dump(turns))))
    assert offline["network"] is None and site.paths() == ["/secret"]


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_setup_with_a_domain_list_goes_through_the_proxy(
        repo: Path, tmp_path: Path, site: Site, backend: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``[environment] setup_allow``: setup reaches those hosts through the same proxy (pip
    from a local index), an unlisted one is refused and said in the setup's log; the
    setup gets no other network (no slirp: a raw socket reaches nothing)."""
    checks.RESOLVER["index.test"] = ["127.0.0.1"]  # type: ignore[index]
    with serve_index() as index:
        pip = " ".join(shlex.quote(a) for a in pip_argv(
            backend, "download", "--index-url", f"http://index.test:{index.port}/simple/",
            "--trusted-host", "index.test", "--no-deps", "-d", "deps", index.name))
        outside = socket.socket()
        outside.bind(("0.0.0.0", 0))  # noqa: S104 - where a leak would land
        outside.listen(4)
        address = next(a for a in host_ipv4_addresses().values() if not a.startswith("127."))
        raw = (f"python3 -c \"import socket; s = socket.socket(); s.settimeout(3); print("
               f"'raw', s.connect_ex(('{address}', {outside.getsockname()[1]})) == 0)\"")
        config = tmp_path / "corral.toml"
        config.write_text(
            "[environment]\n"
            f"setup = [{json.dumps(pip)}, {json.dumps(f'{FETCH} http://evil.test:{site.port}/x')},"
            f" {json.dumps(raw)}]\n"
            f'setup_allow = ["index.test:{index.port}"]\n')
        monkeypatch.setenv("CORRAL_CONFIG", str(config))
        lines: list[str] = []
        built = Corral(repo, personal=False, backend=backend).build_environment(
            on_output=lines.append)
        assert built is not None
        log = "".join(lines)
        assert f"/files/{index.filename}" in index.seen, log
        assert "403 corral egress refused" in log and "egress refused: evil.test" in log
        assert "raw False" in log
        assert site.seen == []
        outside.setblocking(False)
        with pytest.raises(BlockingIOError):
            outside.accept()
        outside.close()


def test_a_repository_cannot_grant_its_setup_hosts(repo: Path) -> None:
    """``setup_allow`` is the user's only: a repository's file asking for it is ignored,
    with a diagnostic naming the file and the key; a bad pattern in the user's is refused."""
    (repo / ".corral").mkdir()
    (repo / ".corral" / "environment.toml").write_text(
        'setup = ["true"]\nsetup_allow = ["evil.test"]\n')
    spec, diagnostics = load_environment(repo, None, trust_project=True)
    assert spec is not None and spec.setup_allow == ()
    assert any("setup_allow" in d.render() and ".corral/environment.toml" in d.render()
               for d in diagnostics)
    with pytest.raises(ValueError, match="setup_allow"):
        EnvironmentConfig(setup_allow=("https://pypi.org/simple",))


@pytest.mark.bubblewrap
def test_fanout_children_each_get_the_proxy(repo: Path, tmp_path: Path, site: Site,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``corral fanout --net allow``: every child's commands reach the grant (a proxy of its
    own), and each child's JSON lists its own denied request."""
    require_backend("bubblewrap")
    config = tmp_path / "corral.toml"
    config.write_text(f'[network]\nallow = ["docs.test:{site.port}"]\n')
    monkeypatch.setenv("CORRAL_CONFIG", str(config))
    agent_file(repo, "builder", "tools: [shell]")
    urls = f"http://docs.test:{site.port}/secret http://evil.test:{site.port}/x"
    turns = script(tmp_path, "t", call("shell", command=f"{FETCH} {urls}"), {"text": "done"})
    result = Corral(repo, trust_project=True, personal=False, backend="bubblewrap",
                    net="allow").fanout("go", agents=["builder"], n=2, scripts=[turns])
    children = result.to_json()["runs"]
    assert len(children) == 2
    for child in children:
        assert [d["host"] for d in child["network"]["denied"]] == ["evil.test"]
    assert site.paths() == ["/secret", "/secret"]
