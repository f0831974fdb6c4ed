"""MCP tools in the policy layer: the user config, names, the read-only rule, the loader's
diagnostics, and no server process during discovery (``corral agents list/check/show``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from executor.cli import cli
from policies.capability import Capability, admit_listed, restrict
from policies.config import ConfigError, UserConfig, load_user_config
from policies.contract import AgentContract, AgentFormat, Origin, SandboxMode, Scope
from policies.mcp import parse_wire_id, providers, read_only_ids
from policies.permissions import Action, PermissionPolicy, PermissionRule
from tests.mcp_servers import SDK_SERVER

ORIGIN = Origin(format=AgentFormat.NGN, file="x.md", source="x.md", scope=Scope.PROJECT)
ID = "mcp__calc__add"


def contract(**fields: object) -> AgentContract:
    return AgentContract.model_validate({"name": "a", "id": "a", "display_name": "a",
                                         "origin": ORIGIN, **fields})


def test_config_reads_a_server_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('custom_tools = ["adder"]\n[mcp_servers.calc]\ncommand = "calc-mcp"\n'
                    'args = ["--stdio"]\nenv = ["CALC_TOKEN"]\nread_only_tools = ["add"]\n'
                    'provides = { adder = "add" }\n')
    config = load_user_config(path)
    server = config.mcp_servers["calc"]
    assert (server.command, server.args, server.env, server.confine) == (
        "calc-mcp", ("--stdio",), ("CALC_TOKEN",), True)
    assert read_only_ids(config.mcp_servers) == {ID, "adder"}
    assert providers(config.mcp_servers, [ID, "adder", "mcp__other__x", "shell"]) == {
        ID: ("calc", "add"), "adder": ("calc", "add")}


@pytest.mark.parametrize(("table", "expected"), [
    ('[mcp_servers."a__b"]\ncommand = "x"\n', "no '__'"),
    ('[mcp_servers.calc]\ncommand = "x"\nenv = ["TOKEN=abc"]\n', "variable NAMES"),
    ('[mcp_servers.calc]\ncommand = "x"\nprovides = { shell = "run" }\n', "native tool"),
    ('[mcp_servers.calc]\ncommand = "x"\nprovides = { mcp__calc__y = "y" }\n', "custom tool"),
    ('[mcp_servers.calc]\ncommand = "x"\nread_only_tools = ["a b"]\n', "ASCII letters"),
    ('[mcp_servers.calc]\ncommand = "x"\nshell = true\n', "Extra inputs"),
    ('[mcp_servers.calc]\nargs = ["x"]\n', "command"),
    ('[mcp_servers.a]\ncommand = "x"\nprovides = { t = "y" }\n'
     '[mcp_servers.b]\ncommand = "x"\nprovides = { t = "z" }\n', "provided by both"),
])
def test_bad_server_tables_are_refused_with_where(tmp_path: Path, table: str,
                                                  expected: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(table)
    with pytest.raises(ConfigError) as caught:
        load_user_config(path)
    assert "mcp_servers" in caught.value.message and expected in caught.value.message


def test_wire_ids_parse_one_way() -> None:
    assert parse_wire_id("mcp__calc__add") == ("calc", "add")
    assert parse_wire_id("mcp__calc__a__b") == ("calc", "a__b")
    assert parse_wire_id("mcp__calc__*") is None
    assert parse_wire_id("calc__add") is None


def test_read_only_agent_keeps_a_vouched_tool_only_by_exact_grant() -> None:
    """zuno: a read-only agent holds an MCP tool with an exact per-agent grant only; a
    pattern grant, or a tool the user did not vouch for, is removed."""
    parent = Capability.root(sandbox=SandboxMode.READ_ONLY, read_only_tools=[ID])
    parent = admit_listed(parent, contract(), [])  # the root itself drops custom tools
    listed = [ID, "mcp__calc__delete"]
    exact = admit_listed(parent, contract(tools=frozenset({ID, "mcp__calc__delete"})), listed)
    assert ID in exact.tools and "mcp__calc__delete" not in exact.tools
    pattern = admit_listed(parent, contract(tools=frozenset({"mcp__calc__*"})), listed)
    assert not {ID, "mcp__calc__delete"} & pattern.tools
    rule = PermissionPolicy(rules=(PermissionRule(tool=ID, action=Action.ALLOW),))
    by_rule = admit_listed(parent, contract(permission=rule), listed)
    assert ID in by_rule.tools and "mcp__calc__delete" not in by_rule.tools
    child = restrict(exact, contract(tools=frozenset({"mcp__calc__*"})))
    assert ID not in child.tools  # a child needs its own exact grant
    assert restrict(exact, contract(tools=frozenset({ID}))).is_within(exact)


def test_writable_agent_gets_listed_tools_its_contract_admits() -> None:
    root = Capability.root()
    got = admit_listed(root, contract(tools=frozenset({"read_file", "mcp__calc__*"}),
                                      denied_tools=frozenset({"mcp__calc__delete"})),
                       [ID, "mcp__calc__delete", "mcp__other__x"])
    assert {ID} == {t for t in got.tools if t.startswith("mcp__")}


def _cli(tmp_path: Path, config: str, *args: str) -> str:
    (tmp_path / "home" / ".config" / "corral").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.toml"
    path.write_text(config)
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False,
                                env={"CORRAL_CONFIG": str(path)})
    return result.output


def test_agents_list_check_show_start_no_server(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """ngn: no MCP processes run during discovery. The server would write its marker."""
    repo = tmp_path / "repo"
    (repo / ".ngn" / "agents").mkdir(parents=True)
    (repo / ".ngn" / "agents" / "calc-user.md").write_text(
        "---\nname: calc-user\ndescription: d\ntools: [read_file, mcp__calc__add, "
        "mcp__gone__x]\n---\nx\n")
    marker = tmp_path / "starts"
    config = (f'[mcp_servers.calc]\ncommand = "{sys.executable}"\n'
              f'args = ["{SDK_SERVER}", "{marker}"]\nconfine = false\n')
    monkeypatch.chdir(repo)
    listed = _cli(tmp_path, config, "agents", "list", "--trust-project")
    checked = _cli(tmp_path, config, "agents", "check", "--trust-project")
    shown = _cli(tmp_path, config, "agents", "show", "calc-user", "--trust-project", "--json")
    assert "calc-user" in listed
    assert "'mcp__gone__x' cannot run: no MCP server 'gone' is installed" in checked
    assert "mcp__calc__add" not in checked  # its server is installed
    assert '"mcp_servers": [\n      "calc"' in shown  # what a run would start
    assert not marker.exists()


def test_unprovided_custom_tool_is_a_load_time_warning(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / ".ngn" / "agents").mkdir(parents=True)
    (repo / ".ngn" / "agents" / "c.md").write_text(
        "---\nname: c\ndescription: d\ntools: [read_file, github_search]\n---\nx\n")
    monkeypatch.chdir(repo)
    checked = _cli(tmp_path, 'custom_tools = ["github_search"]\n', "agents", "check",
                   "--trust-project")
    assert "'github_search' cannot run: no installed MCP server provides this custom tool" \
        in checked
    assert "provides = { github_search = " in checked


def test_unknown_mcp_tool_is_side_effecting_by_default() -> None:
    assert UserConfig().mcp_servers == {}
    strict = PermissionPolicy(mode="strict")
    assert strict.decide(ID) is Action.DENY
