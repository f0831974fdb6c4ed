"""ngn-agent-definitions.md: the native format, its field table, JSON profiles,
explicit imports and model mapping, the adapter subset and the common mappings.

Each test's docstring opens with the spec sentence it checks, verbatim (only
re-wrapped). Discovery and precedence live in ``test_discovery_spec.py``, the
capability rules in ``test_capability_spec.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.errors import ExecutorError, ModelError
from executor.run.prepare import agent_model
from policies.capability import Capability, DelegationDenied, check_delegation, restrict
from policies.config import UserConfig
from policies.contract import AgentFormat, AgentMode, SandboxMode, Scope
from policies.loader import Options, Severity
from policies.permissions import Action, PermissionMode, PermissionPolicy, PermissionRule
from policies.tools import NATIVE_TOOLS, ToolGroup, group_of

NGN = AgentFormat.NGN


def _shell_asks() -> PermissionPolicy:
    return PermissionPolicy(rules=(PermissionRule(tool="shell", action=Action.ASK),))


def _target(fs, name: str = "helper"):
    path = fs.md(f".ngn/agents/{name}.md", "description: A delegation target.")
    return fs.agent(path, NGN)


# --- Native format -----------------------------------------------------------------------


def test_native_file_must_be_utf8(fs) -> None:
    """Spec (ngn-agent-definitions.md): Use UTF-8 Markdown with a YAML header enclosed by ---,
    followed by nonempty instructions.

    A Latin-1 file is rejected with an encoding diagnostic naming the file.
    """
    path = fs.write(".ngn/agents/latin.md", "---\ndescription: caf\xe9\n---\nDo it.\n"
                    .encode("latin-1"))
    diag = fs.rejected_with(fs.load(path, NGN), "file")
    assert diag.code == "encoding"
    assert diag.file == ".ngn/agents/latin.md"


def test_native_file_needs_a_yaml_header(fs) -> None:
    """Spec (ngn-agent-definitions.md): Use UTF-8 Markdown with a YAML header enclosed by ---,
    followed by nonempty instructions."""
    no_header = fs.write(".ngn/agents/plain.md", "description: x\n\nDo it.\n")
    assert fs.rejected_with(fs.load(no_header, NGN), "frontmatter").code == "no_frontmatter"
    unclosed = fs.write(".ngn/agents/open.md", "---\ndescription: x\nDo it.\n")
    assert fs.rejected_with(fs.load(unclosed, NGN), "frontmatter").code == "frontmatter"


@pytest.mark.parametrize("body", ["", "\n\n", "   \n\t\n"])
def test_native_instructions_must_be_nonempty(fs, body: str) -> None:
    """Spec (ngn-agent-definitions.md): Use UTF-8 Markdown with a YAML header enclosed by ---,
    followed by nonempty instructions."""
    path = fs.md(".ngn/agents/empty.md", "description: Has no body.", body)
    fs.rejected_with(fs.load(path, NGN), "instructions")


def test_native_multiline_yaml_strings(fs) -> None:
    """Spec (ngn-agent-definitions.md): Multiline YAML strings work; line endings normalize to
    LF."""
    path = fs.md(".ngn/agents/multi.md", """
        description: |
          First line.
          Second line.
        model: >-
          openai/gpt-4o
    """)
    contract = fs.agent(path, NGN)
    assert contract.description == "First line.\nSecond line."
    assert contract.model.candidates[0].id == "openai/gpt-4o"


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "lone-cr"])
def test_native_line_endings_normalize_to_lf(fs, newline: str) -> None:
    """Spec (ngn-agent-definitions.md): Multiline YAML strings work; line endings normalize to
    LF."""
    text = ("---\ndescription: |\n  one\n  two\ntools: [read_file]\n---\n"
            "Line one.\nLine two.\n").replace("\n", newline)
    contract = fs.agent(fs.write(".ngn/agents/eol.md", text), NGN)
    assert contract.description == "one\ntwo"
    assert contract.instructions == "Line one.\nLine two."
    assert "\r" not in contract.instructions
    assert contract.tools == frozenset({"read_file"})


def test_native_utf8_bom_tolerated(fs) -> None:
    """Spec (formats.md): BOM or no BOM; LF, CRLF and lone CR."""
    text = "\ufeff---\r\ndescription: d\r\n---\r\nDo it.\r\n"
    contract = fs.agent(fs.write(".ngn/agents/bom.md", text), NGN)
    assert (contract.name, contract.description, contract.instructions) == ("bom", "d", "Do it.")


def test_native_name_falls_back_to_basename(fs) -> None:
    """Spec (ngn-agent-definitions.md): The file's basename supplies the name when name is
    omitted; research/agent.md uses the directory name."""
    fs.md(".ngn/agents/research.md", "description: Basename.")
    fs.md(".ngn/agents/helper/agent.md", "description: Directory name.")
    fs.md(".ngn/agents/other.md", "name: renamed\ndescription: Explicit name wins.")
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"research", "helper", "renamed"}
    assert result.agents["research"].origin.source == ".ngn/agents/research.md"
    assert result.agents["helper"].origin.source == ".ngn/agents/helper/agent.md"


# --- Field table -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "research", "A_b-9", "UPPER", "x" * 128])
def test_name_accepts_letters_digits_underscores_hyphens(fs, name: str) -> None:
    """Spec (ngn-agent-definitions.md): Letters, digits, underscores, or hyphens; at most 128
    characters. assistant is reserved."""
    path = fs.md(".ngn/agents/n.md", f"name: {name}\ndescription: d")
    assert fs.agent(path, NGN).name == name


@pytest.mark.parametrize("name", [
    "'has space'", "dot.name", "slash/name", "colon:name", "'caf\u00e9'", "'\u0430gent'",
    "x" * 129, "'@fast'",
], ids=["space", "dot", "slash", "colon", "non-ascii-letter", "cyrillic-homoglyph", "129-chars",
        "at-sign"])
def test_name_rejects_other_characters_and_long_names(fs, name: str) -> None:
    """Spec (ngn-agent-definitions.md): Letters, digits, underscores, or hyphens; at most 128
    characters. assistant is reserved.

    "Letters" is read as ASCII letters: the documented choice of ``check_name``
    (a homoglyph in a delegation target must never match).
    """
    path = fs.md(".ngn/agents/n.md", f"name: {name}\ndescription: d")
    fs.rejected_with(fs.load(path, NGN), "name")


@pytest.mark.parametrize("how", ["field", "basename", "directory"])
def test_name_assistant_is_reserved(fs, how: str) -> None:
    """Spec (ngn-agent-definitions.md): Letters, digits, underscores, or hyphens; at most 128
    characters. assistant is reserved.

    The reservation holds whether the name is written or taken from the file's location.
    """
    if how == "field":
        fs.md(".ngn/agents/x.md", "name: assistant\ndescription: d")
    elif how == "basename":
        fs.md(".ngn/agents/assistant.md", "description: d")
    else:
        fs.md(".ngn/agents/assistant/agent.md", "description: d")
    result = fs.discover(trust_project=True, personal=False)
    assert "assistant" not in result.agents
    assert fs.errors(result.diagnostics, "name")


@pytest.mark.parametrize("header", [
    "tools: [read_file]", "description:", "description: ''", "description: '   '",
    "description: 42", "description: [a, b]",
], ids=["missing", "null", "empty", "blank", "number", "list"])
def test_description_required_and_nonempty(fs, header: str) -> None:
    """Spec (ngn-agent-definitions.md): Required, nonempty description for selection and
    delegation."""
    path = fs.md(".ngn/agents/nodesc.md", header)
    fs.rejected_with(fs.load(path, NGN), "description")


def test_descriptions_appear_in_the_picker(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Descriptions appear in the picker and the model's
    delegation tool schema.

    corral's picker is ``agents list``: each agent's description is a column of its row
    (its first line, escaped, cut to the terminal's width with a marker: ``agents show``
    has it whole).
    """
    fs.md(".ngn/agents/research.md", "description: Find evidence and report it with file "
          "references.")
    fs.md(".ngn/agents/long.md", "description: " + "word " * 40)
    out = cli("agents", "list", "--root", str(fs.repo), "--trust-project", "--no-personal")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "FLAGS", "FORMAT", "DESCRIPTION"]
    research = next(line for line in lines if line.startswith("research "))
    assert research.endswith(" Find evidence and report it with file references.")
    long = next(line for line in lines if line.startswith("long "))
    assert long.endswith("...") and len(long) <= 120


def test_show_prints_the_source_file_and_its_loading_diagnostics(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Web settings show the selected source file and
    expandable loading diagnostics. Terminal diagnostics also include parsing failures and
    collisions.

    corral's settings view is ``agents show``: the selected source, then the diagnostics
    of that agent's own file (here the collision that made it win over a personal
    definition, and a granted custom tool nothing provides), never another file's.
    """
    fs.md(fs.env.xdg_config / "ngn/agents/research.md", "description: personal")
    fs.md(".ngn/agents/research.md", "description: project\ntools: [read_file, repo_lookup]")
    fs.md(".ngn/agents/other.md", "description: other\ntools: [repo_lookup]")
    config = fs.write(fs.tmp / "corral.toml", 'custom_tools = ["repo_lookup"]\n')
    args = ("--root", str(fs.repo), "--trust-project")
    out = cli("agents", "show", "research", *args, corral_config=config)
    assert out.exit_code == 0, out.output
    assert "source       .ngn/agents/research.md  [ngn, project]" in out.output
    shown = [line for line in out.output.splitlines() if line.startswith("  ")
             and (": .ngn/" in line or ": ~/" in line)]
    assert shown and all(".ngn/agents/research.md:" in line for line in shown), shown
    assert any("replaces the one from ~/.config/ngn/agents/research.md" in line
               for line in shown)
    assert any("repo_lookup" in line for line in shown)
    data = json.loads(cli("agents", "show", "research", "--json", *args,
                          corral_config=config).output)
    assert {d["file"] for d in data["diagnostics"]} == {".ngn/agents/research.md"}
    assert {d["code"] for d in data["diagnostics"]} >= {"collision"}


def test_mode_build_is_default_reviewer_allowed(fs) -> None:
    """Spec (ngn-agent-definitions.md): build (default) or reviewer. Reviewer prohibits writes,
    shell, and custom tools.

    (The prohibition itself is tested in ``test_capability_spec.py``.)
    """
    default = fs.agent(fs.md(".ngn/agents/a.md", "description: d"), NGN)
    build = fs.agent(fs.md(".ngn/agents/b.md", "description: d\nmode: build"), NGN)
    reviewer = fs.agent(fs.md(".ngn/agents/c.md", "description: d\nmode: reviewer"), NGN)
    assert default.mode is AgentMode.BUILD
    assert build.mode is AgentMode.BUILD
    assert reviewer.mode is AgentMode.REVIEWER
    assert reviewer.is_read_only
    for bad in ("plan", "Reviewer", "readonly"):
        path = fs.md(".ngn/agents/bad.md", f"description: d\nmode: {bad}")
        fs.rejected_with(fs.load(path, NGN), "mode")


def test_model_exact_id_or_inherit(fs) -> None:
    """Spec (ngn-agent-definitions.md): Exact model ID; omitted inherits the selected model.
    Applies to delegated children too.

    A native model is used exactly as written (no foreign-model override needed);
    omission inherits.
    """
    exact = fs.agent(fs.md(".ngn/agents/a.md", "description: d\nmodel: openai/gpt-4o-2024"), NGN)
    assert [str(ref) for ref in exact.model.candidates] == ["openai/gpt-4o-2024"]
    assert not exact.model.needs_override
    assert exact.model.foreign is None
    omitted = fs.agent(fs.md(".ngn/agents/b.md", "description: d"), NGN)
    assert omitted.model.inherit
    assert omitted.model.candidates == ()


def test_provider_connection_or_inherit(fs) -> None:
    """Spec (ngn-agent-definitions.md): Existing ngn provider connection ID; omitted inherits the
    connection. Credentials remain in ngn.

    A credential field in a definition is not a field of the format: rejected.
    """
    chosen = fs.agent(fs.md(".ngn/agents/a.md", "description: d\nmodel: m1\nprovider: local"),
                      NGN)
    assert chosen.model.provider == "local"
    omitted = fs.agent(fs.md(".ngn/agents/b.md", "description: d\nmodel: m1"), NGN)
    assert omitted.model.provider is None
    secret = fs.md(".ngn/agents/c.md", "description: d\nprovider: local\napi_key: sk-123")
    fs.rejected_with(fs.load(secret, NGN), "api_key")


def test_provider_must_be_an_existing_connection(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): provider Existing ngn provider connection ID; omitted
    inherits the connection. Credentials remain in ngn.

    ``provider: nosuch`` (no model) is an error naming the file and the field when the
    user's connections are known (``agents check``), and it never runs on the default
    connection: ``corral run`` refuses it before anything runs.
    """
    fs.md(".ngn/agents/a.md", "description: d\nprovider: nosuch")
    config = fs.write(fs.tmp / "corral.toml", 'default_model = "local/qwen"\n'
                      '[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n')
    args = ("--root", str(fs.repo), "--trust-project", "--no-personal")
    checked = cli("agents", "check", *args, corral_config=config)
    assert checked.exit_code == 1
    assert "error: .ngn/agents/a.md:3: provider: 'nosuch' is not a provider connection" in \
        checked.stdout
    ran = cli("run", "--agent", "a", "--backend", "host", *args, "go", corral_config=config)
    error = ran.exception
    assert isinstance(error, ExecutorError) and error.exit_code == 2
    assert "nosuch" in f"{error.message} {error.context} {error.hint}"
    outcome = fs.load(fs.repo / ".ngn/agents/a.md", NGN,
                      options=Options(providers=frozenset({"local"})))
    fs.rejected_with(outcome, "provider")


def test_provider_without_model_runs_the_inherited_model_on_that_connection(fs) -> None:
    """Spec (ngn-agent-definitions.md): model Exact model ID; omitted inherits the selected
    model. ... provider Existing ngn provider connection ID; omitted inherits the connection.

    ``provider: cloud`` without ``model``: the selected model's id on the ``cloud``
    connection (not the parent's connection), and a provider the config lacks is an
    error, never the default connection.
    """
    config = UserConfig.model_validate({
        "default_model": "local/qwen",
        "providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"},
                      "cloud": {"type": "openai", "base_url": "http://127.0.0.1:8/v1"}}})
    moved = fs.agent(fs.md(".ngn/agents/a.md", "description: d\nprovider: cloud"), NGN)
    assert agent_model(moved, config=config, script=None, override=None,
                       parent=None).name == "cloud/qwen"
    kept = fs.agent(fs.md(".ngn/agents/b.md", "description: d"), NGN)
    assert agent_model(kept, config=config, script=None, override=None,
                       parent=None).name == "local/qwen"
    lost = fs.agent(fs.md(".ngn/agents/c.md", "description: d\nprovider: nosuch"), NGN)
    with pytest.raises(ModelError, match="'nosuch' is not a provider connection"):
        agent_model(lost, config=config, script=None, override=None, parent=None)


def test_model_without_provider_runs_on_the_parent_connection(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): provider Existing ngn provider connection ID; omitted
    inherits the connection. ... model ... Applies to delegated children too.

    A bare ``model`` and no ``provider``: a delegated child runs that id on its parent's
    connection, a top-level agent on the selected model's (``default_model``), never on
    ``default_provider`` while a connection is there to inherit; a parent without one (a
    replay) leaves ``default_provider``, else an error saying what was looked for.
    """
    config = UserConfig.model_validate({
        "default_model": "local/qwen", "default_provider": "spare",
        "providers": {name: {"type": "openai", "base_url": f"http://127.0.0.1:{port}/v1"}
                      for name, port in (("local", 9), ("cloud", 8), ("spare", 7))}})
    child = fs.agent(fs.md(".ngn/agents/child.md", "description: d\nmodel: m1"), NGN)
    assert child.model.inherit_connection
    shown = cli("agents", "show", "child", "--root", str(fs.repo), "--trust-project",
                "--no-personal")
    assert "model        m1 (a bare id on the parent's connection)" in shown.stdout
    parent = agent_model(fs.agent(fs.md(".ngn/agents/p.md", "description: d\nmodel: big\n"
                                        "provider: cloud"), NGN),
                         config=config, script=None, override=None, parent=None)
    assert parent.name == "cloud/big"
    assert agent_model(child, config=config, script=None, override=None,
                       parent=parent).name == "cloud/m1"
    assert agent_model(child, config=config, script=None, override=None,
                       parent=None).name == "local/m1"
    slashed = fs.agent(fs.md(".ngn/agents/s.md", "description: d\nmodel: org/m2"), NGN)
    assert agent_model(slashed, config=config, script=None, override=None,
                       parent=parent).name == "cloud/org/m2"
    named = fs.agent(fs.md(".ngn/agents/n.md", "description: d\nmodel: m1\nprovider: spare"),
                     NGN)
    assert not named.model.inherit_connection
    assert agent_model(named, config=config, script=None, override=None,
                       parent=parent).name == "spare/m1"
    bare = config.model_copy(update={"default_model": None, "default_provider": None})
    with pytest.raises(ModelError, match="parent's connection, but the parent model"):
        agent_model(child, config=bare, script=None, override=None, parent=None)
    assert agent_model(child, config=bare.model_copy(update={"default_provider": "spare"}),
                       script=None, override=None, parent=None).name == "spare/m1"


def test_an_imports_model_without_provider_inherits_the_connection(fs) -> None:
    """Spec (ngn-agent-definitions.md): Any other foreign model requires an explicit override
    using an exact model ID and, when needed, a named provider connection.

    The override without ``provider`` runs on the parent's connection.
    """
    fs.md(".claude/agents/research.md", "name: research\ndescription: d\nmodel: sonnet")
    config_file = fs.json(fs.tmp / "imports.json", {"agent_imports": [
        {"path": "repo/.claude/agents/research.md", "format": "claude", "model": "m3"}]})
    imported = fs.discover(config_file=config_file).agents["research"]
    assert imported.model.inherit_connection
    config = UserConfig.model_validate({"providers": {
        "cloud": {"type": "openai", "base_url": "http://127.0.0.1:8/v1"}}})
    parent = agent_model(fs.agent(fs.md(".ngn/agents/p.md", "description: d\nmodel: big\n"
                                        "provider: cloud"), NGN),
                         config=config, script=None, override=None, parent=None)
    assert agent_model(imported, config=config, script=None, override=None,
                       parent=parent).name == "cloud/m3"


def test_tools_list_or_comma_string(fs) -> None:
    """Spec (ngn-agent-definitions.md): Allowlist of ngn tool names, as a YAML list or
    comma-separated string. Omitted inherits; [] permits no tools."""
    as_list = fs.agent(fs.md(".ngn/agents/a.md", "description: d\ntools: [read_file, find]"), NGN)
    block = fs.agent(fs.md(".ngn/agents/b.md", "description: d\ntools:\n  - read_file\n  - find"),
                     NGN)
    comma = fs.agent(fs.md(".ngn/agents/c.md", "description: d\ntools: read_file, find"), NGN)
    assert as_list.tools == block.tools == comma.tools == frozenset({"read_file", "find"})


def test_tools_omitted_inherits_empty_permits_none(fs) -> None:
    """Spec (ngn-agent-definitions.md): Allowlist of ngn tool names, as a YAML list or
    comma-separated string. Omitted inherits; [] permits no tools."""
    root = Capability.root()
    omitted = fs.agent(fs.md(".ngn/agents/a.md", "description: d"), NGN)
    empty = fs.agent(fs.md(".ngn/agents/b.md", "description: d\ntools: []"), NGN)
    assert omitted.tools is None
    assert restrict(root, omitted).tools == root.tools
    assert empty.tools == frozenset()
    assert restrict(root, empty).tools == frozenset()
    assert restrict(root, empty).visible_tools() == []


@pytest.mark.parametrize("tools", ["[read_fil]", "[Read_File]", "[Read]", "[bash]",
                                   "read_file, nope"])
def test_tools_names_are_ngn_tool_names(fs, tools: str) -> None:
    """Spec (ngn-agent-definitions.md): Allowlist of ngn tool names, as a YAML list or
    comma-separated string. Omitted inherits; [] permits no tools.

    A name that is not an ngn tool (a misspelling, a case variant, another harness's
    name) rejects the definition.
    """
    path = fs.md(".ngn/agents/t.md", f"description: d\ntools: {tools}")
    fs.rejected_with(fs.load(path, NGN), "tools")


def test_denied_tools_subtract_from_inherited_or_explicit(fs) -> None:
    """Spec (ngn-agent-definitions.md): Tool names to subtract from the inherited or explicit
    allowlist."""
    root = Capability.root()
    inherited = fs.agent(fs.md(".ngn/agents/a.md", "description: d\ndenied_tools: [shell]"), NGN)
    explicit = fs.agent(fs.md(".ngn/agents/b.md", """
        description: d
        tools: [read_file, shell, edit]
        denied_tools: shell, edit
    """), NGN)
    assert restrict(root, inherited).tools == root.tools - {"shell"}
    assert restrict(root, explicit).tools == frozenset({"read_file"})
    assert restrict(root, inherited).decide("shell", "ls") is Action.DENY




def test_tools_mcp_wire_id_is_exact(fs) -> None:
    """Spec (ngn-agent-definitions.md): Allowlist of ngn tool names, as a YAML list or
    comma-separated string. Omitted inherits; [] permits no tools.

    An installed MCP tool named by its canonical id grants exactly that tool.
    """
    contract = fs.agent(fs.md(".ngn/agents/a.md", "description: d\ntools: [mcp__gh__query]"), NGN)
    assert contract.tools == frozenset({"mcp__gh__query"})
    parent = Capability.root(custom_tools=["mcp__gh__query"])
    assert restrict(parent, contract).decide("mcp__gh__query") is Action.ALLOW


def test_denied_mcp_tool_is_subtracted(fs) -> None:
    """Spec (ngn-agent-definitions.md): Tool names to subtract from the inherited or explicit
    allowlist.

    Denying an installed MCP tool by its canonical id must remove it.
    """
    contract = fs.agent(fs.md(".ngn/agents/a.md", "description: d\n"
                              "denied_tools: [mcp__gh__delete_repo]"), NGN)
    parent = Capability.root(custom_tools=["mcp__gh__delete_repo", "mcp__gh__query"])
    child = restrict(parent, contract)
    assert child.decide("mcp__gh__delete_repo") is Action.DENY
    assert child.decide("mcp__gh__query") is Action.ALLOW


def test_denied_mcp_server_pattern_is_subtracted(fs) -> None:
    """Spec (ngn-agent-definitions.md): Tool names to subtract from the inherited or explicit
    allowlist.

    A whole MCP server (``mcp__gh__*``) can be subtracted.
    """
    contract = fs.agent(fs.md(".ngn/agents/a.md", "description: d\ndenied_tools: [mcp__gh__*]"),
                        NGN)
    parent = Capability.root(custom_tools=["mcp__gh__delete_repo", "mcp__other__q"])
    child = restrict(parent, contract)
    assert child.decide("mcp__gh__delete_repo") is Action.DENY
    assert child.decide("mcp__other__q") is Action.ALLOW


def test_allowed_agents_targets_inherit_or_none(fs) -> None:
    """Spec (ngn-agent-definitions.md): Permitted delegation targets. Omitted inherits; []
    disables delegation."""
    root = Capability.root()
    helper, other = _target(fs, "helper"), _target(fs, "other")
    some = fs.agent(fs.md(".ngn/agents/a.md", "description: d\nallowed_agents: [helper]"), NGN)
    none = fs.agent(fs.md(".ngn/agents/b.md", "description: d\nallowed_agents: []"), NGN)
    omitted = fs.agent(fs.md(".ngn/agents/c.md", "description: d"), NGN)
    assert some.delegates == frozenset({"helper"})
    check_delegation(restrict(root, some), helper)
    with pytest.raises(DelegationDenied):
        check_delegation(restrict(root, some), other)
    assert none.delegates == frozenset()
    for target in (helper, other):
        with pytest.raises(DelegationDenied):
            check_delegation(restrict(root, none), target)
    assert omitted.delegates is None
    check_delegation(restrict(root, omitted), other)


def test_user_invocable_defaults_true(fs) -> None:
    """Spec (ngn-agent-definitions.md): Whether the user can select this agent (default true)."""
    default = fs.agent(fs.md(".ngn/agents/a.md", "description: d"), NGN)
    off = fs.agent(fs.md(".ngn/agents/b.md", "description: d\nuser_invocable: false"), NGN)
    assert default.user_invocable is True
    assert off.user_invocable is False
    not_bool = fs.md(".ngn/agents/c.md", "description: d\nuser_invocable: 'no'")
    fs.rejected_with(fs.load(not_bool, NGN), "user_invocable")


def test_subagent_available_defaults_true(fs) -> None:
    """Spec (ngn-agent-definitions.md): Whether another agent can delegate to it (default true)."""
    root = Capability.root()
    default = fs.agent(fs.md(".ngn/agents/a.md", "description: d"), NGN)
    off = fs.agent(fs.md(".ngn/agents/b.md", "description: d\nsubagent_available: false"), NGN)
    assert default.subagent_available is True
    check_delegation(root, default)
    assert off.subagent_available is False
    with pytest.raises(DelegationDenied):
        check_delegation(root, off)


@pytest.mark.parametrize("field", [
    "color: red", "temperature: 0.2", "hooks: {}", "maxTurns: 3", "instructions: x",
    "Tools: [read_file]", "allowedTools: [read_file]",
])
def test_native_unsupported_fields_rejected(fs, field: str) -> None:
    """Spec (ngn-agent-definitions.md): Symlinks, special files, duplicate YAML keys, aliases,
    explicit tags, and unsupported fields are rejected.

    Any field outside the native field table rejects the file and names the field.
    """
    path = fs.md(".ngn/agents/extra.md", f"description: d\n{field}")
    fs.rejected_with(fs.load(path, NGN), field.split(":", 1)[0])


# --- JSON profiles -----------------------------------------------------------------------


def test_json_profiles_support_the_same_fields(fs) -> None:
    """Spec (ngn-agent-definitions.md): Existing JSON profiles support the same fields, with
    instructions in the JSON object and arrays for tool/agent lists."""
    config = fs.json("conf/ngn.json", {"profiles": {"research": {
        "description": "Find evidence.", "instructions": "Investigate.", "mode": "reviewer",
        "model": "openai/gpt-4o", "provider": "local", "tools": ["read_file", "search"],
        "denied_tools": ["search"], "allowed_agents": ["helper"], "user_invocable": False,
        "subagent_available": False,
    }}})
    result = fs.discover(personal=False, config_file=config)
    contract = result.agents["research"]
    assert contract.instructions == "Investigate."
    assert contract.mode is AgentMode.REVIEWER
    assert [str(r) for r in contract.model.candidates] == ["openai/gpt-4o"]
    assert contract.model.provider == "local"
    assert contract.tools == frozenset({"read_file", "search"})
    assert contract.denied_tools == frozenset({"search"})
    assert contract.delegates == frozenset({"helper"})
    assert (contract.user_invocable, contract.subagent_available) == (False, False)
    assert contract.origin.scope is Scope.IMPORT


@pytest.mark.parametrize("profile", [
    {"instructions": "x", "tools": "read_file, search"},
    {"instructions": "x", "allowed_agents": "helper"},
    {"instructions": "x", "color": "red"},
], ids=["comma-tools", "comma-agents", "unsupported-field"])
def test_json_profiles_use_arrays_and_only_the_same_fields(fs, profile: dict[str, str]) -> None:
    """Spec (ngn-agent-definitions.md): Existing JSON profiles support the same fields, with
    instructions in the JSON object and arrays for tool/agent lists."""
    config = fs.json("conf/ngn.json", {"profiles": {"research": profile}})
    result = fs.discover(personal=False, config_file=config)
    assert "research" not in result.agents
    assert fs.errors(result.diagnostics)
    assert all(d.file == "conf/ngn.json" for d in fs.errors(result.diagnostics))


@pytest.mark.parametrize("key", ["assistant", "has space", "x" * 129, "dot.name"])
def test_json_profile_names_follow_name_rules(fs, key: str) -> None:
    """Spec (ngn-agent-definitions.md): Letters, digits, underscores, or hyphens; at most 128
    characters. assistant is reserved.

    The profile key is the name, under the same rules.
    """
    config = fs.json("conf/ngn.json", {"profiles": {key: {"instructions": "x"}}})
    result = fs.discover(personal=False, config_file=config)
    assert result.agents == {}
    assert fs.errors(result.diagnostics)


def test_json_profiles_may_omit_description(fs) -> None:
    """Spec (ngn-agent-definitions.md): JSON profiles may omit description."""
    config = fs.json("conf/ngn.json", {"profiles": {"quiet": {"instructions": "Work."}}})
    result = fs.discover(personal=False, config_file=config)
    assert result.agents["quiet"].description is None
    assert not fs.errors(result.diagnostics)


def test_json_profile_instructions_file_is_literal_text(fs) -> None:
    """Spec (ngn-agent-definitions.md): Designer YAML remains separate; instructions.file still
    reads literal prompt text and does not interpret Markdown frontmatter."""
    prompt = "---\nname: evil\ntools: [shell]\nmode: build\n---\nReview only.\n"
    fs.write("conf/prompt.md", prompt)
    config = fs.json("conf/ngn.json", {"profiles": {"auditor": {
        "instructions": {"file": "prompt.md"}, "tools": ["read_file"], "mode": "reviewer"}}})
    result = fs.discover(personal=False, config_file=config)
    assert set(result.agents) == {"auditor"}
    contract = result.agents["auditor"]
    assert contract.instructions == prompt.strip()
    assert contract.tools == frozenset({"read_file"})
    assert contract.mode is AgentMode.REVIEWER


# --- Explicit imports and model mapping --------------------------------------------------


@pytest.mark.parametrize(("fmt", "rel", "header"), [
    (AgentFormat.CLAUDE, ".claude/agents/r.md", "name: r\ndescription: d\nmodel: sonnet"),
    (AgentFormat.GEMINI, ".gemini/agents/r.md", "name: r\ndescription: d\nmodel: pro"),
    (AgentFormat.CURSOR, ".cursor/agents/r.md", "name: r\ndescription: d\nmodel: fast"),
    (AgentFormat.COPILOT, ".github/agents/r.agent.md", "description: d\nmodel: GPT-5 (copilot)"),
    (AgentFormat.OPENCODE, ".opencode/agents/r.md",
     "description: d\nmodel: anthropic/claude-sonnet-4"),
    (AgentFormat.ANTIGRAVITY, ".agents/agents/r.md", "name: r\ndescription: d\nmodel: flash"),
])
def test_foreign_model_names_are_never_guessed(fs, fmt: AgentFormat, rel: str,
                                               header: str) -> None:
    """Spec (ngn-agent-definitions.md): Foreign model names belong to their original harness. ngn
    never guesses which connection implements sonnet, pro, or another foreign model selection."""
    outcome = fs.load(fs.md(rel, header), fmt)
    assert outcome.status.value == "loaded"
    route = outcome.agents[0].model
    assert route.candidates == ()
    assert route.foreign is not None
    assert route.foreign_format is fmt
    assert route.needs_override
    assert not route.inherit
    warning = [d for d in outcome.diagnostics if d.code == "foreign_model"]
    assert warning
    assert warning[0].field == "model"


def test_foreign_codex_model_is_never_guessed(fs) -> None:
    """Spec (ngn-agent-definitions.md): Foreign model names belong to their original harness. ngn
    never guesses which connection implements sonnet, pro, or another foreign model selection."""
    path = fs.write(".codex/agents/r.toml", 'name = "r"\ndescription = "d"\n'
                    'developer_instructions = "x"\nmodel = "gpt-5.1-codex"\n')
    route = fs.agent(path, AgentFormat.CODEX).model
    assert route.foreign == "gpt-5.1-codex"
    assert route.needs_override


@pytest.mark.parametrize(("fmt", "rel", "header"), [
    (AgentFormat.CLAUDE, ".claude/agents/r.md", "name: r\ndescription: d"),
    (AgentFormat.CLAUDE, ".claude/agents/r.md", "name: r\ndescription: d\nmodel: inherit"),
    (AgentFormat.CURSOR, ".cursor/agents/r.md", "name: r\ndescription: d\nmodel: inherit"),
    (AgentFormat.GEMINI, ".gemini/agents/r.md", "name: r\ndescription: d\nmodel: inherit"),
    (AgentFormat.COPILOT, ".github/agents/r.agent.md", "description: d"),
])
def test_omission_and_inherit_keep_the_parent_model(fs, fmt: AgentFormat, rel: str,
                                                    header: str) -> None:
    """Spec (ngn-agent-definitions.md): Omission and documented inherit retain ngn's model."""
    outcome = fs.load(fs.md(rel, header), fmt)
    assert outcome.status.value == "loaded"
    route = outcome.agents[0].model
    assert route.inherit
    assert not route.needs_override
    assert not [d for d in outcome.diagnostics if d.code == "foreign_model"]


def test_foreign_model_explicit_override_with_provider(fs) -> None:
    """Spec (ngn-agent-definitions.md): Any other foreign model requires an explicit override
    using an exact model ID and, when needed, a named provider connection:"""
    fs.md(".claude/agents/research.md", "name: research\ndescription: d\nmodel: sonnet")
    config = fs.json("conf/ngn.json", {"agent_imports": [{
        "path": "../.claude/agents/research.md", "format": "claude",
        "model": "your-model-id", "provider": "your-connection",
    }]})
    result = fs.discover(personal=False, config_file=config)
    route = result.agents["research"].model
    assert [str(r) for r in route.candidates] == ["your-model-id"]
    assert route.provider == "your-connection"
    assert not route.needs_override
    assert not [d for d in result.diagnostics if d.code == "foreign_model"]


def test_foreign_model_without_override_cannot_resolve(fs, cli) -> None:
    """Spec (ngn-agent-definitions.md): Any other foreign model requires an explicit override
    using an exact model ID and, when needed, a named provider connection:

    Without the override, ``agents show`` reports that the route still needs one.
    """
    fs.md(".claude/agents/research.md", "name: research\ndescription: d\nmodel: sonnet")
    shown = cli("agents", "show", "research", "--root", str(fs.repo), "--trust-project",
                "--no-personal")
    assert shown.exit_code == 0, shown.output
    assert "sonnet (claude model: needs an override)" in shown.output


def test_import_paths_resolve_beside_the_json(fs, monkeypatch) -> None:
    """Spec (ngn-agent-definitions.md): Paths resolve beside the JSON configuration; absolute paths
    are also accepted.

    The relative path is resolved against the JSON file's directory, not the working
    directory or the repository root.
    """
    fs.md("shared/agents/research.md", "name: research\ndescription: beside the JSON")
    fs.md("agents/research.md", "name: research\ndescription: decoy beside the root")
    config = fs.json("shared/conf/ngn.json", {"agent_imports": [
        {"path": "../agents/research.md", "format": "claude"}]})
    monkeypatch.chdir(fs.tmp)
    result = fs.discover(personal=False, config_file=config)
    assert result.agents["research"].description == "beside the JSON"
    imported = Path(result.agents["research"].origin.file).resolve()
    assert imported == (fs.repo / "shared/agents/research.md").resolve()


def test_import_paths_absolute_accepted(fs) -> None:
    """Spec (ngn-agent-definitions.md): Paths resolve beside the JSON configuration; absolute paths
    are also accepted."""
    elsewhere = fs.md(fs.tmp / "outside" / "research.md", "name: research\ndescription: abs")
    config = fs.json("conf/ngn.json", {"agent_imports": [
        {"path": str(elsewhere), "format": "claude"}]})
    result = fs.discover(personal=False, config_file=config)
    assert result.agents["research"].description == "abs"
    assert Path(result.agents["research"].origin.file) == elsewhere


@pytest.mark.parametrize("target", ["../.claude/agents", "../.claude/agents/*.md"])
def test_import_entry_selects_one_file(fs, target: str) -> None:
    """Spec (ngn-agent-definitions.md): Each entry selects one file.

    A directory or a glob is not expanded into several definitions.
    """
    fs.minimal(AgentFormat.CLAUDE, ".claude/agents", "a")
    fs.minimal(AgentFormat.CLAUDE, ".claude/agents", "b")
    config = fs.json("conf/ngn.json", {"agent_imports": [{"path": target, "format": "claude"}]})
    result = fs.discover(personal=False, config_file=config)
    assert result.agents == {}
    assert fs.errors(result.diagnostics, "file")


@pytest.mark.parametrize("fmt_name", ["native", "claude", "copilot", "opencode", "codex",
                                      "cursor", "gemini", "antigravity"])
def test_import_format_names(fs, fmt_name: str) -> None:
    """Spec (ngn-agent-definitions.md): format is one of native, claude, copilot, opencode, codex,
    cursor, gemini, or antigravity."""
    fmt = AgentFormat.NGN if fmt_name == "native" else AgentFormat(fmt_name)
    path = fs.minimal(fmt, "shared", "imported")
    config = fs.json("ngn.json", {"agent_imports": [
        {"path": path.relative_to(fs.repo).as_posix(), "format": fmt_name}]})
    result = fs.discover(personal=False, config_file=config)
    assert not fs.errors(result.diagnostics)
    assert result.agents["imported"].origin.format is fmt


@pytest.mark.parametrize("fmt_name", ["vscode", "Claude", "markdown", "", None])
def test_import_format_other_names_rejected(fs, fmt_name: str | None) -> None:
    """Spec (ngn-agent-definitions.md): format is one of native, claude, copilot, opencode, codex,
    cursor, gemini, or antigravity."""
    fs.minimal(AgentFormat.CLAUDE, "shared", "imported")
    config = fs.json("ngn.json", {"agent_imports": [
        {"path": "shared/imported.md", "format": fmt_name}]})
    result = fs.discover(personal=False, config_file=config)
    assert result.agents == {}
    assert fs.errors(result.diagnostics, "agent_imports[0]")


def test_neutral_file_imported_as_native(fs) -> None:
    """Spec (ngn-agent-definitions.md): Use .ngn/agents for ngn-native semantics, or explicitly
    import a neutral shared file as native.

    The same file under ``.agents/agents`` has Antigravity semantics (omitted tools:
    none); imported as native, omitted tools inherit.
    """
    fs.md(".agents/agents/shared.md", "name: shared\ndescription: neutral")
    discovered = fs.discover(trust_project=True, personal=False)
    assert discovered.agents["shared"].origin.format is AgentFormat.ANTIGRAVITY
    assert discovered.agents["shared"].tools == frozenset()
    config = fs.json("ngn.json", {"agent_imports": [
        {"path": ".agents/agents/shared.md", "format": "native"}]})
    imported = fs.discover(personal=False, config_file=config)
    assert imported.agents["shared"].origin.format is AgentFormat.NGN
    assert imported.agents["shared"].tools is None


def test_foreign_tools_map_explicitly(fs) -> None:
    """Spec (ngn-agent-definitions.md): Foreign tools are mapped explicitly to ngn tools."""
    path = fs.md(".claude/agents/r.md", "name: r\ndescription: d\ntools: Read, Bash, Edit")
    assert fs.agent(path, AgentFormat.CLAUDE).tools == frozenset({"read_file", "shell", "edit"})


def test_tool_map_names_installed_custom_tool(fs) -> None:
    """Spec (ngn-agent-definitions.md): For an installed custom tool, add a trusted tool_map, for
    example "tool_map": {"repo_lookup": ["github_search"]}."""
    fs.md(".claude/agents/research.md", "name: research\ndescription: d\ntools: Read, repo_lookup")
    installed = Options(custom_tools=frozenset({"github_search"}))
    bare = fs.json("bare.json", {"agent_imports": [
        {"path": ".claude/agents/research.md", "format": "claude"}]})
    without_map = fs.discover(personal=False, config_file=bare, options=installed)
    assert "research" not in without_map.agents
    assert "repo_lookup" in fs.errors(without_map.diagnostics, "tools")[0].reason
    mapped = fs.json("mapped.json", {"agent_imports": [{
        "path": ".claude/agents/research.md", "format": "claude",
        "tool_map": {"repo_lookup": ["github_search"]}}]})
    result = fs.discover(personal=False, config_file=mapped, options=installed)
    contract = result.agents["research"]
    assert contract.tools == frozenset({"read_file", "github_search"})
    parent = Capability.root(custom_tools=["github_search"])
    assert restrict(parent, contract).decide("github_search") is Action.ALLOW


def test_tool_map_installs_nothing(fs) -> None:
    """Spec (ngn-agent-definitions.md): This names an already installed tool; it does not install
    or start anything.

    A ``tool_map`` target that is neither native nor installed rejects the import; and a
    parent that lacks the tool never gains it through a child.
    """
    fs.md(".claude/agents/research.md", "name: research\ndescription: d\ntools: repo_lookup")
    config = fs.json("ngn.json", {"agent_imports": [{
        "path": ".claude/agents/research.md", "format": "claude",
        "tool_map": {"repo_lookup": ["github_search"]}}]})
    result = fs.discover(personal=False, config_file=config)
    assert "research" not in result.agents
    assert "github_search" in fs.errors(result.diagnostics, "tools")[0].reason
    installed = fs.discover(personal=False, config_file=config,
                            options=Options(custom_tools=frozenset({"github_search"})))
    contract = installed.agents["research"]
    child = restrict(Capability.root(), contract)
    assert child.tools == frozenset()
    assert child.decide("github_search") is Action.DENY


@pytest.mark.parametrize(("fmt", "rel", "header"), [
    (NGN, ".ngn/agents/r.md", "description: d\ndenied_tools: [shel]"),
    (NGN, ".ngn/agents/r.md", "description: d\ndenied_tools: [Shell]"),
    (AgentFormat.CLAUDE, ".claude/agents/r.md", "name: r\ndescription: d\ndisallowedTools: Bsh"),
    (AgentFormat.CLAUDE, ".claude/agents/r.md", "name: r\ndescription: d\ndisallowedTools: bash"),
    (AgentFormat.OPENCODE, ".opencode/agents/r.md", "description: d\ntools: {bsh: false}"),
    (AgentFormat.OPENCODE, ".opencode/agents/r.md", "description: d\npermission: {bsh: deny}"),
    (AgentFormat.ZUNO, ".zuno/agents/r.md", "description: d\npermission:\n  rules: {shel: deny}"),
    (AgentFormat.PI, ".pi/agents/r.md", "name: r\ndescription: d\ntools: read, bsh"),
])
def test_unknown_tool_names_reject_so_misspelled_deny_cannot_grant(fs, fmt: AgentFormat,
                                                                   rel: str, header: str) -> None:
    """Spec (ngn-agent-definitions.md): Unknown tool names reject the definition so a misspelled
    deny cannot grant access.

    The rejected definition also never replaces a valid personal one of the same name.
    """
    fs.md(fs.env.xdg_config / "ngn/agents/r.md", "description: personal\ntools: [read_file]")
    fs.md(rel, header)
    result = fs.discover(trust_project=True)
    assert result.agents["r"].description == "personal"
    assert result.agents["r"].tools == frozenset({"read_file"})
    assert any(d.file == rel for d in fs.errors(result.diagnostics))


# --- Adapter subset ----------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "rel", "header", "field"), [
    (AgentFormat.CLAUDE, ".claude/agents/r.md",
     "name: r\ndescription: d\nhooks:\n  Stop: []", "hooks"),
    (AgentFormat.CLAUDE, ".claude/agents/r.md",
     "name: r\ndescription: d\nmcpServers: [github]", "mcpServers"),
    (AgentFormat.COPILOT, ".github/agents/r.agent.md",
     "description: d\nhandoffs:\n  - label: go\n    agent: x", "handoffs"),
    (AgentFormat.COPILOT, ".github/agents/r.agent.md",
     "description: d\nmcp-servers: {}", "mcp-servers"),
    (AgentFormat.OPENCODE, ".opencode/agents/r.md",
     "description: d\ndisallowedTools: [bash]", "disallowedTools"),
    (AgentFormat.CURSOR, ".cursor/agents/r.md", "name: r\ndescription: d\ntools: Read", "tools"),
    (AgentFormat.GEMINI, ".gemini/agents/r.md",
     "name: r\ndescription: d\nmcp_servers: {}", "mcp_servers"),
    (AgentFormat.ANTIGRAVITY, ".agents/agents/r.md",
     "name: r\ndescription: d\nplugins: [x]", "plugins"),
])
def test_unsupported_fields_produce_a_diagnostic_naming_file_and_field(
        fs, fmt: AgentFormat, rel: str, header: str, field: str) -> None:
    """Spec (ngn-agent-definitions.md): These are data adapters, not emulations of other harnesses.
    Unsupported fields produce a diagnostic identifying the file and field."""
    diag = fs.rejected_with(fs.load(fs.md(rel, header), fmt), field)
    assert diag.file == rel
    assert diag.line > 1


def test_unsupported_codex_field_diagnostic(fs) -> None:
    """Spec (ngn-agent-definitions.md): Unsupported fields produce a diagnostic identifying the
    file and field. Remove them only after deciding how their intended behavior should be
    expressed in ngn."""
    path = fs.write(".codex/agents/r.toml", 'name = "r"\ndescription = "d"\n'
                    'developer_instructions = "x"\n[mcp_servers.docs]\ncommand = "docs-mcp"\n')
    diag = fs.rejected_with(fs.load(path, AgentFormat.CODEX), "mcp_servers")
    assert diag.file == ".codex/agents/r.toml"


# Claude ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "field"), [
    ("description: d", "name"), ("name: r", "description"), ("name: r\ndescription: ''",
                                                             "description"),
])
def test_claude_requires_name_and_description(fs, header: str, field: str) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description; tools and disallowedTools in
    list or comma form; permissionMode: default keeps host approvals and plan narrows to
    reviewer."""
    fs.rejected_with(fs.load(fs.md(".claude/agents/r.md", header), AgentFormat.CLAUDE), field)


def test_claude_tools_and_disallowed_tools_list_or_comma(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description; tools and disallowedTools in
    list or comma form; permissionMode: default keeps host approvals and plan narrows to
    reviewer."""
    comma = fs.agent(fs.md(".claude/agents/a.md", """
        name: a
        description: d
        tools: Read, Grep, Bash
        disallowedTools: Bash, Write
    """), AgentFormat.CLAUDE)
    listed = fs.agent(fs.md(".claude/agents/b.md", """
        name: b
        description: d
        tools: [Read, Grep, Bash]
        disallowedTools:
          - Bash
          - Write
    """), AgentFormat.CLAUDE)
    for contract in (comma, listed):
        assert contract.tools == frozenset({"read_file", "search", "shell"})
        assert contract.denied_tools == frozenset({"shell", "write_file"})
        assert restrict(Capability.root(), contract).tools == frozenset({"read_file", "search"})


def test_claude_disallowed_mcp_tool_is_denied(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description; tools and disallowedTools in
    list or comma form; permissionMode: default keeps host approvals and plan narrows to
    reviewer.

    ``disallowedTools: mcp__github__delete_repo`` must deny that installed tool.
    """
    contract = fs.agent(fs.md(".claude/agents/a.md", "name: a\ndescription: d\n"
                              "disallowedTools: mcp__github__delete_repo"), AgentFormat.CLAUDE)
    parent = Capability.root(custom_tools=["mcp__github__delete_repo"])
    assert restrict(parent, contract).decide("mcp__github__delete_repo") is Action.DENY


def test_claude_permission_mode_default_keeps_host_approvals(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description; tools and disallowedTools in
    list or comma form; permissionMode: default keeps host approvals and plan narrows to
    reviewer."""
    contract = fs.agent(fs.md(".claude/agents/a.md", "name: a\ndescription: d\n"
                              "permissionMode: default"), AgentFormat.CLAUDE)
    assert contract.mode is AgentMode.BUILD
    assert contract.permission.mode is PermissionMode.STANDARD
    child = restrict(Capability.root(policy=_shell_asks()), contract)
    assert child.decide("shell", "make test") is Action.ASK


def test_claude_permission_mode_plan_narrows_to_reviewer(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description; tools and disallowedTools in
    list or comma form; permissionMode: default keeps host approvals and plan narrows to
    reviewer."""
    contract = fs.agent(fs.md(".claude/agents/a.md", "name: a\ndescription: d\n"
                              "tools: Read, Edit, Bash\npermissionMode: plan"), AgentFormat.CLAUDE)
    assert contract.mode is AgentMode.REVIEWER
    child = restrict(Capability.root(), contract)
    assert child.tools == frozenset({"read_file"})
    assert child.sandbox is SandboxMode.READ_ONLY


# Copilot -----------------------------------------------------------------------------------


def test_copilot_filename_fallback(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename fallback; description, tools, user-invocable,
    disable-model-invocation, agents. tools: ['*'] inherits; empty tools/agents remain empty.
    Handoffs and MCP configuration are unsupported."""
    fs.md(".github/agents/planner.agent.md", "description: d")
    fs.md(".github/agents/tester.md", "name: Test Runner 1.0\ndescription: d")
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"planner", "tester"}
    assert result.agents["tester"].display_name == "Test Runner 1.0"


def test_copilot_supported_fields(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename fallback; description, tools, user-invocable,
    disable-model-invocation, agents. tools: ['*'] inherits; empty tools/agents remain empty.
    Handoffs and MCP configuration are unsupported."""
    contract = fs.agent(fs.md(".github/agents/p.agent.md", """
        description: Plans work.
        tools: [read, search]
        user-invocable: false
        disable-model-invocation: true
        agents: [helper, tester]
    """), AgentFormat.COPILOT)
    assert contract.description == "Plans work."
    assert contract.tools is not None
    assert "read_file" in contract.tools
    assert contract.user_invocable is False
    assert contract.subagent_available is False
    assert contract.delegates == frozenset({"helper", "tester"})
    fs.rejected_with(fs.load(fs.md(".github/agents/q.agent.md", "tools: [read]"),
                             AgentFormat.COPILOT), "description")


def test_copilot_star_inherits_empty_stays_empty(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename fallback; description, tools, user-invocable,
    disable-model-invocation, agents. tools: ['*'] inherits; empty tools/agents remain empty.
    Handoffs and MCP configuration are unsupported."""
    star = fs.agent(fs.md(".github/agents/a.agent.md", "description: d\ntools: ['*']"),
                    AgentFormat.COPILOT)
    empty = fs.agent(fs.md(".github/agents/b.agent.md", "description: d\ntools: []\nagents: []"),
                     AgentFormat.COPILOT)
    assert star.tools is None
    assert restrict(Capability.root(), star).tools == Capability.root().tools
    assert empty.tools == frozenset()
    assert empty.delegates == frozenset()
    assert restrict(Capability.root(), empty).tools == frozenset()


@pytest.mark.parametrize("header", [
    "description: d\nhandoffs:\n  - label: Implement\n    agent: implementer\n    prompt: go",
    "description: d\nmcp-servers:\n  github:\n    type: local\n    command: gh-mcp",
], ids=["handoffs", "mcp-servers"])
def test_copilot_handoffs_and_mcp_unsupported(fs, header: str) -> None:
    """Spec (ngn-agent-definitions.md): Filename fallback; description, tools, user-invocable,
    disable-model-invocation, agents. tools: ['*'] inherits; empty tools/agents remain empty.
    Handoffs and MCP configuration are unsupported."""
    field = header.split("\n")[1].split(":", maxsplit=1)[0]
    fs.rejected_with(fs.load(fs.md(".github/agents/a.agent.md", header), AgentFormat.COPILOT),
                     field)


# OpenCode ----------------------------------------------------------------------------------


def test_opencode_filename_identity(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename identity, description, mode:
    primary/subagent/all, boolean tool map, simple permission allow/deny entries. ask, patterns,
    and policy groups that ngn cannot enforce are rejected. allow never bypasses ngn approval."""
    fs.md(".opencode/agents/reviewer.md", "name: Someone Else\ndescription: Reviews.")
    result = fs.discover(trust_project=True, personal=False)
    assert set(result.agents) == {"reviewer"}
    assert result.agents["reviewer"].description == "Reviews."


@pytest.mark.parametrize(("mode", "user", "sub"), [
    ("primary", True, False), ("subagent", False, True), ("all", True, True)])
def test_opencode_mode_reachability(fs, mode: str, user: bool, sub: bool) -> None:
    """Spec (ngn-agent-definitions.md): Filename identity, description, mode:
    primary/subagent/all, boolean tool map, simple permission allow/deny entries. ask, patterns,
    and policy groups that ngn cannot enforce are rejected. allow never bypasses ngn approval."""
    contract = fs.agent(fs.md(".opencode/agents/a.md", f"description: d\nmode: {mode}"),
                        AgentFormat.OPENCODE)
    assert (contract.user_invocable, contract.subagent_available) == (user, sub)


def test_opencode_boolean_tool_map(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename identity, description, mode:
    primary/subagent/all, boolean tool map, simple permission allow/deny entries. ask, patterns,
    and policy groups that ngn cannot enforce are rejected. allow never bypasses ngn approval."""
    only = fs.agent(fs.md(".opencode/agents/a.md", """
        description: d
        tools: {"*": false, read: true, grep: true}
    """), AgentFormat.OPENCODE)
    minus = fs.agent(fs.md(".opencode/agents/b.md", "description: d\ntools: {bash: false}"),
                     AgentFormat.OPENCODE)
    root = Capability.root()
    assert restrict(root, only).tools == frozenset({"read_file", "search"})
    assert restrict(root, minus).tools == root.tools - {"shell"}


def test_opencode_simple_permission_allow_deny(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename identity, description, mode:
    primary/subagent/all, boolean tool map, simple permission allow/deny entries. ask, patterns,
    and policy groups that ngn cannot enforce are rejected. allow never bypasses ngn approval."""
    contract = fs.agent(fs.md(".opencode/agents/a.md", """
        description: d
        permission:
          edit: deny
          bash: allow
    """), AgentFormat.OPENCODE)
    child = restrict(Capability.root(), contract)
    assert child.decide("edit", "src/a.py") is Action.DENY
    assert child.decide("write_file", "src/a.py") is Action.DENY
    assert child.decide("shell", "ls") is Action.ALLOW
    assert "edit" not in child.visible_tools()


def test_opencode_ask_and_patterns_are_enforced(fs) -> None:
    """Spec (ngn-agent-definitions.md): ask, patterns, and policy groups that ngn cannot enforce
    are rejected.

    Documented choice (``policies/loader/formats/opencode.py``): corral *can* enforce
    ``ask`` and argument patterns (last match wins), so they load and are enforced.
    """
    contract = fs.agent(fs.md(".opencode/agents/a.md", """
        description: d
        permission:
          bash:
            "*": ask
            "git *": allow
            "rm *": deny
    """), AgentFormat.OPENCODE)
    child = restrict(Capability.root(), contract)
    assert child.decide("shell", "git status") is Action.ALLOW
    assert child.decide("shell", "make") is Action.ASK
    assert child.decide("shell", "rm -rf /") is Action.DENY


@pytest.mark.parametrize("entry", ["external_directory: ask", "external_directory: allow",
                                   "external_directory:\n    '/tmp/*': allow"])
def test_opencode_unenforceable_policy_groups_rejected(fs, entry: str) -> None:
    """Spec (ngn-agent-definitions.md): ask, patterns, and policy groups that ngn cannot enforce
    are rejected."""
    path = fs.md(".opencode/agents/a.md", f"description: d\npermission:\n  {entry}")
    fs.rejected_with(fs.load(path, AgentFormat.OPENCODE), "permission")


@pytest.mark.parametrize("entry", ["doom_loop: ask", "skill: ask"])
def test_opencode_unenforceable_ask_groups_rejected(fs, entry: str) -> None:
    """Spec (ngn-agent-definitions.md): ask, patterns, and policy groups that ngn cannot enforce
    are rejected.

    ``doom_loop: ask`` asks a human when a loop is detected; corral has no such check,
    so ignoring it would drop a restriction the author wrote.
    """
    path = fs.md(".opencode/agents/a.md", f"description: d\npermission:\n  {entry}")
    fs.rejected_with(fs.load(path, AgentFormat.OPENCODE), "permission")


def test_opencode_allow_never_bypasses_approval(fs) -> None:
    """Spec (ngn-agent-definitions.md): allow never bypasses ngn approval."""
    contract = fs.agent(fs.md(".opencode/agents/a.md", "description: d\npermission:\n"
                              "  bash: allow\n  '*': allow"), AgentFormat.OPENCODE)
    child = restrict(Capability.root(policy=_shell_asks()), contract)
    assert child.decide("shell", "make") is Action.ASK


# Codex -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("toml", "field"), [
    ('description = "d"\ndeveloper_instructions = "x"\n', "name"),
    ('name = "r"\ndeveloper_instructions = "x"\n', "description"),
    ('name = "r"\ndescription = "d"\n', "developer_instructions"),
    ('name = "r"\ndescription = "d"\ndeveloper_instructions = "  "\n', "developer_instructions"),
])
def test_codex_required_fields(fs, toml: str, field: str) -> None:
    """Spec (ngn-agent-definitions.md): Required name, description, developer_instructions;
    optional mapped model. sandbox_mode: read-only narrows to reviewer. Other sandbox modes,
    reasoning settings, MCP and session overrides are unsupported."""
    path = fs.write(".codex/agents/r.toml", toml)
    fs.rejected_with(fs.load(path, AgentFormat.CODEX), field)


def test_codex_optional_mapped_model(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name, description, developer_instructions;
    optional mapped model. sandbox_mode: read-only narrows to reviewer. Other sandbox modes,
    reasoning settings, MCP and session overrides are unsupported."""
    fs.write(".codex/agents/r.toml", 'name = "r"\ndescription = "d"\n'
             'developer_instructions = "x"\nmodel = "gpt-5"\n')
    bare = fs.discover(trust_project=True, personal=False)
    assert bare.agents["r"].model.needs_override
    mapped = fs.discover(personal=False, options=Options(model_map={"codex": {"gpt-5": "o/x"}}),
                         trust_project=True)
    assert [str(r) for r in mapped.agents["r"].model.candidates] == ["o/x"]


def test_codex_read_only_narrows_to_reviewer(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name, description, developer_instructions;
    optional mapped model. sandbox_mode: read-only narrows to reviewer. Other sandbox modes,
    reasoning settings, MCP and session overrides are unsupported."""
    path = fs.write(".codex/agents/r.toml", 'name = "r"\ndescription = "d"\n'
                    'developer_instructions = "x"\nsandbox_mode = "read-only"\n')
    contract = fs.agent(path, AgentFormat.CODEX)
    assert contract.mode is AgentMode.REVIEWER
    child = restrict(Capability.root(custom_tools=["mcp__gh__q"]), contract)
    assert child.read_only
    assert not {"shell", "edit", "write_file", "apply_patch", "mcp__gh__q"} & child.tools


_CODEX_BASE = 'name = "r"\ndescription = "d"\ndeveloper_instructions = "x"\n'


@pytest.mark.parametrize(("extra", "field"), [
    ('sandbox_mode = "danger-full-access"\n', "sandbox_mode"),
    ('[mcp_servers.docs]\ncommand = "docs"\n', "mcp_servers"),
    ('profile = "fast"\n', "profile"),
], ids=["danger-full-access", "mcp", "profile"])
def test_codex_other_modes_reasoning_mcp_overrides_unsupported(fs, extra: str,
                                                               field: str) -> None:
    """Spec (ngn-agent-definitions.md): Required name, description, developer_instructions;
    optional mapped model. sandbox_mode: read-only narrows to reviewer. Other sandbox modes,
    reasoning settings, MCP and session overrides are unsupported.

    Read with "Unsupported fields produce a diagnostic identifying the file and field":
    each of these must at least produce a diagnostic on its field.
    """
    outcome = fs.load(fs.write(".codex/agents/r.toml", _CODEX_BASE + extra), AgentFormat.CODEX)
    found = fs.problems(outcome.diagnostics, field)
    assert found, [d.render() for d in outcome.diagnostics]
    assert found[0].file == ".codex/agents/r.toml"


def test_codex_workspace_write_and_reasoning_are_unsupported_with_a_diagnostic(fs) -> None:
    """Spec (ngn-agent-definitions.md): sandbox_mode: read-only narrows to reviewer. Other
    sandbox modes, reasoning settings, MCP and session overrides are unsupported.

    And "Unsupported fields produce a diagnostic identifying the file and field":
    ``sandbox_mode = "workspace-write"`` and ``model_reasoning_effort = "high"`` each get
    a warning on their field (they no longer load silently); neither is applied (the
    reasoning level is kept in extras and never sent; where the role writes is the
    user's ``--mode``).
    """
    extra = 'sandbox_mode = "workspace-write"\nmodel_reasoning_effort = "high"\n'
    outcome = fs.load(fs.write(".codex/agents/r.toml", _CODEX_BASE + extra), AgentFormat.CODEX)
    for field in ("sandbox_mode", "model_reasoning_effort"):
        (found,) = fs.problems(outcome.diagnostics, field)
        assert found.severity is Severity.WARNING and found.file == ".codex/agents/r.toml"
        assert "not supported" in found.reason
    (contract,) = outcome.agents
    assert contract.sandbox is None and contract.reasoning is None
    assert contract.extras["model_reasoning_effort"] == "high"


# Cursor ------------------------------------------------------------------------------------


def test_cursor_filename_fallback(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename fallback, description, mapped model, readonly.
    Background scheduling is unsupported; use ngn delegation."""
    fs.md(".cursor/agents/helper.md", "description: Helps.")
    result = fs.discover(trust_project=True, personal=False)
    assert not fs.errors(result.diagnostics)
    assert result.agents["helper"].description == "Helps."


def test_cursor_description_model_readonly(fs) -> None:
    """Spec (ngn-agent-definitions.md): Filename fallback, description, mapped model, readonly.
    Background scheduling is unsupported; use ngn delegation.

    ``readonly: true`` narrows to reviewer: no writes, no shell, no custom (MCP) tools.
    """
    contract = fs.agent(fs.md(".cursor/agents/a.md", """
        name: a
        description: Audits.
        model: fast
        readonly: true
    """), AgentFormat.CURSOR)
    assert contract.description == "Audits."
    assert contract.model.foreign == "fast"
    assert contract.mode is AgentMode.REVIEWER
    child = restrict(Capability.root(custom_tools=["mcp__gh__q"]), contract)
    assert not {"shell", "edit", "write_file", "apply_patch", "mcp__gh__q"} & child.tools
    writable = fs.agent(fs.md(".cursor/agents/b.md", "name: b\ndescription: d\nreadonly: false"),
                        AgentFormat.CURSOR)
    assert writable.mode is AgentMode.BUILD


def test_cursor_background_unsupported(fs) -> None:
    """Spec (ngn-agent-definitions.md): Background scheduling is unsupported; use ngn
    delegation."""
    outcome = fs.load(fs.md(".cursor/agents/a.md", "name: a\ndescription: d\nis_background: true"),
                      AgentFormat.CURSOR)
    found = fs.problems(outcome.diagnostics, "is_background")
    assert found
    assert found[0].file == ".cursor/agents/a.md"


# Gemini ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "field"), [
    ("description: d", "name"), ("name: r", "description"), ("name: R\ndescription: d", "name"),
    ("name: r\ndescription: d\nkind: remote", "kind"),
    ("name: r\ndescription: d\ntools: read_file, glob", "tools"),
    ("name: r\ndescription: d\nmcp_servers:\n  x: {command: srv}", "mcp_servers"),
], ids=["no-name", "no-description", "not-a-slug", "remote", "comma-tools", "inline-mcp"])
def test_gemini_rejections(fs, header: str, field: str) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description, kind: local, tool list, mapped
    model. No recursive delegation. Remote agents and inline MCP configuration are unsupported.

    A comma string is not a tool *list* (Gemini itself demands an array; documented in
    ``gemini.py``), and names are Gemini slugs.
    """
    fs.rejected_with(fs.load(fs.md(".gemini/agents/r.md", header), AgentFormat.GEMINI), field)


def test_gemini_local_tool_list_mapped_model(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description, kind: local, tool list, mapped
    model. No recursive delegation. Remote agents and inline MCP configuration are unsupported."""
    contract = fs.agent(fs.md(".gemini/agents/r.md", """
        kind: local
        name: r
        description: d
        tools: [read_file, grep_search, run_shell_command]
        model: gemini-2.5-pro
    """), AgentFormat.GEMINI)
    assert contract.tools == frozenset({"read_file", "search", "shell"})
    assert contract.model.foreign == "gemini-2.5-pro"


def test_gemini_no_recursive_delegation(fs) -> None:
    """Spec (ngn-agent-definitions.md): No recursive delegation."""
    contract = fs.agent(fs.md(".gemini/agents/r.md", "name: r\ndescription: d\n"
                              "tools: [read_file, invoke_agent]"), AgentFormat.GEMINI)
    child = restrict(Capability.root(depth=3), contract)
    with pytest.raises(DelegationDenied):
        check_delegation(child, _target(fs))


# Antigravity -------------------------------------------------------------------------------


def test_antigravity_fields(fs) -> None:
    """Spec (ngn-agent-definitions.md): Required name/description, tools, mainAgent, subagent,
    mapped model. Omitted tools mean no tools, matching its documented default. Command policies,
    plugins, skills and MCP settings are unsupported."""
    contract = fs.agent(fs.md(".agents/agents/a.md", """
        name: a
        description: d
        tools: [view_file, run_command]
        mainAgent: false
        subagent: true
        model: gemini-3-pro
    """), AgentFormat.ANTIGRAVITY)
    assert contract.tools == frozenset({"read_file", "shell"})
    assert (contract.user_invocable, contract.subagent_available) == (False, True)
    assert contract.model.foreign == "gemini-3-pro"
    no_sub = fs.agent(fs.md(".agents/agents/b.md", "name: b\ndescription: d\nsubagent: false"),
                      AgentFormat.ANTIGRAVITY)
    with pytest.raises(DelegationDenied):
        check_delegation(Capability.root(), no_sub)
    for header, field in (("description: d", "name"), ("name: c", "description")):
        fs.rejected_with(fs.load(fs.md(".agents/agents/c.md", header), AgentFormat.ANTIGRAVITY),
                         field)


def test_antigravity_omitted_tools_mean_no_tools(fs) -> None:
    """Spec (ngn-agent-definitions.md): Omitted tools mean no tools, matching its documented
    default."""
    contract = fs.agent(fs.md(".agents/agents/a.md", "name: a\ndescription: d"),
                        AgentFormat.ANTIGRAVITY)
    assert contract.tools == frozenset()
    assert restrict(Capability.root(), contract).visible_tools() == []


@pytest.mark.parametrize("field", ["commandPolicies", "plugins", "skills", "mcpServers"])
def test_antigravity_policies_plugins_skills_mcp_unsupported(fs, field: str) -> None:
    """Spec (ngn-agent-definitions.md): Command policies, plugins, skills and MCP settings are
    unsupported."""
    path = fs.md(".agents/agents/a.md", f"name: a\ndescription: d\n{field}: [x]")
    fs.rejected_with(fs.load(path, AgentFormat.ANTIGRAVITY), field)


# --- Common mappings ---------------------------------------------------------------------


def test_common_mapping_claude(fs) -> None:
    """Spec (ngn-agent-definitions.md): Common mappings include Claude Read/Glob/Grep/Bash/Task to
    read_file/find/search/shell/delegate; Copilot read, search, and edit map to the corresponding
    ngn file-tool groups; OpenCode bash/task map to shell/delegate; Gemini run_shell_command/replace
    map to shell/edit; Antigravity view_file/run_command map to read_file/shell."""
    for claude, native in (("Read", "read_file"), ("Glob", "find"), ("Grep", "search"),
                           ("Bash", "shell"), ("Task", "delegate")):
        path = fs.md(".claude/agents/m.md", f"name: m\ndescription: d\ntools: {claude}")
        assert fs.agent(path, AgentFormat.CLAUDE).tools == frozenset({native}), claude


def test_common_mapping_copilot_file_tool_groups(fs) -> None:
    """Spec (ngn-agent-definitions.md): Copilot read, search, and edit map to the corresponding
    ngn file-tool groups"""
    def tools(name: str) -> frozenset[str]:
        path = fs.md(".github/agents/m.agent.md", f"description: d\ntools: [{name}]")
        found = fs.agent(path, AgentFormat.COPILOT).tools
        assert found is not None
        return found

    read, search, edit = tools("read"), tools("search"), tools("edit")
    assert "read_file" in read
    assert {group_of(t) for t in read} == {ToolGroup.READ}
    assert {"find", "search"} <= search
    assert {group_of(t) for t in search} == {ToolGroup.READ}
    assert edit == frozenset(t for t in NATIVE_TOOLS if group_of(t) is ToolGroup.WRITE)


def test_common_mapping_opencode_gemini_antigravity(fs) -> None:
    """Spec (ngn-agent-definitions.md): OpenCode bash/task map to shell/delegate; Gemini
    run_shell_command/replace map to shell/edit; Antigravity view_file/run_command map to
    read_file/shell."""
    root = Capability.root()
    opencode = fs.agent(fs.md(".opencode/agents/m.md", 'description: d\ntools: {"*": false, '
                              "bash: true, task: true}"), AgentFormat.OPENCODE)
    assert restrict(root, opencode).tools == frozenset({"shell", "delegate"})
    gemini = fs.agent(fs.md(".gemini/agents/m.md", "name: m\ndescription: d\n"
                            "tools: [run_shell_command, replace]"), AgentFormat.GEMINI)
    assert gemini.tools == frozenset({"shell", "edit"})
    antigravity = fs.agent(fs.md(".agents/agents/m.md", "name: m\ndescription: d\n"
                                 "tools: [view_file, run_command]"), AgentFormat.ANTIGRAVITY)
    assert antigravity.tools == frozenset({"read_file", "shell"})


@pytest.mark.parametrize(("fmt", "rel", "header"), [
    (AgentFormat.CLAUDE, ".claude/agents/m.md", "name: m\ndescription: d\ntools: Read, RepoLookup"),
    (AgentFormat.COPILOT, ".github/agents/m.agent.md", "description: d\ntools: [read, lookup]"),
    (AgentFormat.GEMINI, ".gemini/agents/m.md", "name: m\ndescription: d\ntools: [read_file, zz]"),
    (AgentFormat.ANTIGRAVITY, ".agents/agents/m.md",
     "name: m\ndescription: d\ntools: [view_file, read_file]"),
])
def test_parser_reports_unmapped_names(fs, fmt: AgentFormat, rel: str, header: str) -> None:
    """Spec (ngn-agent-definitions.md): The parser reports unmapped names rather than treating them
    as installed tools."""
    diag = fs.rejected_with(fs.load(fs.md(rel, header), fmt), "tools")
    assert diag.severity is Severity.ERROR
