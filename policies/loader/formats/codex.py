"""OpenAI Codex roles (``.codex/agents/*.toml``, declared in ``.codex/config.toml``).

Supported: ``name`` (or the ``[agents.<name>]`` key that declares the file
through ``config_file``), ``description`` (or the declaration's),
``developer_instructions`` (required), ``nickname_candidates`` (display
only), ``model`` and ``model_provider`` (foreign), ``sandbox_mode``
(``read-only`` narrows to reviewer; ngn's adapter supports no other mode:
``workspace-write`` is a warning and is not applied, since where a child
writes is the user's ``--mode``, ``danger-full-access`` rejects),
``model_reasoning_effort`` (a reasoning setting, which ngn's adapter does
not support: a warning, kept in ``extras``, never sent) and
``approval_policy`` (``untrusted`` is strict, ``on-request``/``on-failure``
standard, ``never`` removes prompts but never restrictions). MCP servers
(they come from the user config's ``[mcp_servers.NAME]``), profiles, network
access and extra writable roots reject. Any other key is a Codex config key:
a warning, kept in ``extras``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from policies.contract import AgentContract, AgentFormat, AgentMode, ModelRoute, SandboxMode
from policies.loader.base import Context, FieldRules, Reader, Source, tolerant_name
from policies.loader.diagnostics import DefinitionRejected
from policies.loader.files import decode_text, read_bounded
from policies.loader.formats.common import build, key_line
from policies.loader.models import foreign_route
from policies.mcp import DEFINITION_SERVERS
from policies.permissions import PermissionMode, PermissionPolicy

__all__ = ["CodexAdapter", "declared_roles", "parse_declarations"]

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
APPROVALS = {"untrusted": PermissionMode.STRICT, "on-request": PermissionMode.STANDARD,
             "on-failure": PermissionMode.STANDARD, "never": PermissionMode.ALLOW_ALL}
RULES = FieldRules(
    cosmetic=frozenset({"nickname_candidates"}),
    unsupported={
        "mcp_servers": DEFINITION_SERVERS,
        "profile": "profiles are session overrides corral cannot apply to a child",
        "profiles": "profiles are session overrides corral cannot apply to a child",
        "agent": "an [agent] table is not Codex's role schema: write name, description and "
        "developer_instructions at the top level",
    },
    near_miss={"instructions": "developer_instructions", "sandbox": "sandbox_mode",
               "approval": "approval_policy", "reasoning_effort": "model_reasoning_effort"},
    restricting=frozenset({"sandbox_mode", "approval_policy", "developer_instructions", "model"}),
)


def declared_roles(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """The roles a ``config.toml`` declares with a ``config_file``, in order:
    ``(name, config_file, {name, description})``. ``[agents]`` settings such as
    ``max_threads`` are not roles.

    Raises DefinitionRejected when the file is not valid TOML.
    """
    agents = _toml(text).get("agents")
    out: list[tuple[str, str, dict[str, str]]] = []
    if not isinstance(agents, dict):
        return out
    for name, entry in agents.items():
        if isinstance(entry, dict) and isinstance(entry.get("config_file"), str):
            declared = {"name": name}
            if isinstance(entry.get("description"), str):
                declared["description"] = entry["description"]
            out.append((name, entry["config_file"], declared))
    return out


def parse_declarations(text: str) -> dict[str, dict[str, str]]:
    """Roles a ``config.toml`` declares: ``{config_file: {name, description}}``.

    Raises DefinitionRejected when the file is not valid TOML.
    """
    return {config_file: declared for _, config_file, declared in declared_roles(text)}


def role_file(config: Path, config_file: str) -> Path | None:
    """Where a declared ``config_file`` lies (relative to the ``config.toml``), or ``None``
    when it would leave the config's directory (corral reads no role from elsewhere)."""
    if Path(config_file).is_absolute() or ".." in Path(config_file).parts:
        return None
    return config.parent / config_file


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        single = text.strip()
        hint = None
        if "\n" not in single and "/" in single and single.endswith(".toml"):
            hint = "this looks like a symlink stored as a text blob; copy the real file here"
        raise DefinitionRejected("file", f"invalid TOML: {exc}", line=line, hint=hint,
                                 code="toml") from exc


class CodexAdapter:
    """Codex role files, and the role declarations in ``config.toml``."""

    format = AgentFormat.CODEX

    def load(self, source: Source, ctx: Context) -> list[AgentContract]:
        """A role file is one agent; ``config.toml`` only declares roles."""
        if source.path.name == "config.toml" or source.location_name == "config":
            names = ", ".join(sorted(name for name, _, _ in declared_roles(source.text)))
            ctx.info("agents", f"Codex config: declares roles ({names})" if names else
                     "Codex config: declares no roles", code="codex_config")
            return []
        data = _toml(source.text)
        lines = {key: key_line(source.text, key) for key in data}
        reader = Reader(ctx, data, lines)
        declared = dict(source.declared) or _declared_by_layer(source, ctx)
        name = reader.string("name") or declared.get("name")
        if name is None:
            reader.error("name", "is required (or declare the role in .codex/config.toml as "
                         "[agents.<name>] with config_file)")
            name = source.location_name
        elif declared.get("name") and declared["name"] != name:
            reader.warn("name", f"config.toml declares this file as {declared['name']!r}")
        display = name
        name = tolerant_name(reader, "name", name)
        description = reader.string("description") or declared.get("description")
        if description is None:
            reader.error("description", "is required (here or in the config.toml declaration)")
        instructions = reader.string("developer_instructions", required=True) or ""
        mode, sandbox = AgentMode.BUILD, None
        raw_sandbox = reader.string("sandbox_mode")
        if raw_sandbox == "read-only":
            mode, sandbox = AgentMode.REVIEWER, SandboxMode.READ_ONLY
        elif raw_sandbox == "workspace-write":
            reader.warn("sandbox_mode", "workspace-write is not supported (ngn's Codex adapter "
                        "supports read-only only): not applied; where the role writes is your "
                        "--mode (worktree unless you pass --mode workspace-write)",
                        code="unsupported_field")
        elif raw_sandbox == "danger-full-access":
            reader.error("sandbox_mode", "danger-full-access cannot be granted: corral always "
                         "sandboxes children")
        elif raw_sandbox is not None:
            reader.error("sandbox_mode", f"unknown sandbox mode {raw_sandbox!r}")
        _sandbox_table(reader)
        approval = reader.choice("approval_policy", APPROVALS)
        model = _model(reader)
        reasoning = reader.choice("model_reasoning_effort", EFFORTS)
        if reasoning is not None:
            reader.warn("model_reasoning_effort", "reasoning settings are not supported "
                        "(ngn's Codex adapter): kept in extras, never sent",
                        code="unsupported_field")
        extras = reader.leftovers(RULES)
        if reasoning is not None:
            extras["model_reasoning_effort"] = reasoning
        return [build(
            reader, source,
            name=name, id=name, display_name=display, description=description,
            instructions=instructions, model=model, mode=mode,
            sandbox=sandbox,
            permission=PermissionPolicy(mode=APPROVALS[approval] if approval else
                                        PermissionMode.STANDARD),
            extras=extras,
        )]


def _declared_by_layer(source: Source, ctx: Context) -> dict[str, str]:
    """What ``<layer>/config.toml`` declares about ``<layer>/agents/<file>``, if anything."""
    agents_dir = source.path.parent
    if agents_dir.name != "agents":
        return {}
    config = agents_dir.parent / "config.toml"
    try:
        text = decode_text(read_bounded(config))
    except DefinitionRejected as exc:
        if exc.diag_code != "file_missing":
            ctx.warn("name", f"role declarations in {config.name} not read: {exc.reason}")
        return {}
    try:
        declarations = parse_declarations(text)
    except DefinitionRejected as exc:
        ctx.warn("name", f"role declarations in {config.name} not read: {exc.reason}")
        return {}
    key = f"agents/{source.path.name}"
    return declarations.get(key) or declarations.get(f"./{key}") or {}


def _sandbox_table(reader: Reader) -> None:
    table = reader.mapping("sandbox_workspace_write")
    if not table:
        return
    if table.get("network_access"):
        reader.error("sandbox_workspace_write", "network_access cannot be granted: corral "
                     "sandboxes have no network")
    if table.get("writable_roots"):
        reader.error("sandbox_workspace_write", "writable_roots cannot be granted: only the "
                     "workspace is writable")


def _model(reader: Reader) -> ModelRoute:
    model = reader.string("model")
    provider = reader.string("model_provider")
    text = f"{provider}/{model}" if provider and model else model
    if provider and not model:
        reader.warn("model_provider", "a provider without a model; the parent's model is kept")
    return foreign_route(reader, "model", text, AgentFormat.CODEX)
