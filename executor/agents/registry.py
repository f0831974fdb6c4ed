"""The agents of a repository: discovered with the user's config, looked up by name.

:func:`load` runs discovery (:func:`policies.loader.discover`) as every front
door does: personal definitions (unless left out), the project's own under
``trust_project``, an explicit ngn JSON config, with the user's custom tools,
model map and MCP servers. :func:`find_agent` returns one agent or the user
error it is not there, with a few close names (:mod:`executor.agents.suggest`),
the rejected definition named like it, or the untrusted project file that
defines it. Both are user errors (exit 2) raised before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from executor.errors import ExecutorError
from policies.config import load_user_config
from policies.contract import AgentContract
from policies.loader import Diagnostic, Environment, LoadResult, Options, Severity, discover
from policies.model_aliases import default_model_map

__all__ = ["Sources", "find_agent", "load"]


@dataclass(frozen=True)
class Sources:
    """Where definitions come from: the repository, whether its own definitions are
    trusted, an ngn JSON config of imports and profiles, strictness, personal ones;
    and the hosts ``--allow-net`` grants on top of your config's ``[network] allow``."""

    root: Path
    trust_project: bool = False
    config_file: Path | None = None
    strict: bool = False
    personal: bool = True
    allow_net: tuple[str, ...] = ()


def load(sources: Sources) -> LoadResult:
    """Run discovery with the user's config.

    A root that is not a directory, or a config file that is not there, is a user
    error: silently loading nothing from it would answer every later question (which
    agents, why not) wrongly.
    """
    user = load_user_config()
    options = Options(strict=sources.strict, custom_tools=frozenset(user.custom_tools),
                      model_map=user.model_map, mcp_servers=frozenset(user.mcp_servers),
                      default_models=default_model_map(
                          {name: p.type for name, p in user.providers.items()}),
                      providers=frozenset(user.providers), roles=frozenset(user.roles),
                      provided_tools=frozenset(custom for server in user.mcp_servers.values()
                                               for custom in server.provides),
                      network=bool(user.network.allow or sources.allow_net))
    root, config_file = sources.root, sources.config_file
    if not root.is_dir():
        raise ExecutorError(f"{root} is not a directory", code="not_a_directory",
                            operation="load_agents", context={"root": str(root.absolute())},
                            hint="the root is the repository whose agents are discovered "
                            "(--root DIR on the command line)")
    if config_file is not None and not (config_file.exists() or config_file.is_symlink()):
        raise ExecutorError(
            f"the --config file {config_file} does not exist", code="config_not_found",
            context={"looked for": str(config_file.absolute())},
            hint="--config names an ngn JSON file of agent_imports and profiles, e.g. "
            "--config examples/agents.json in corral's own repository")
    trusted, lapsed = sources.trust_project, None
    if not trusted:  # `corral trust`: while the definitions are the ones you read
        from executor.agents.trust import trust_state  # noqa: PLC0415 - hashing on demand

        state = trust_state(root)
        trusted = state.state == "trusted"
        lapsed = state if state.state == "changed" else None
    result = discover(root, trust_project=trusted, personal=sources.personal,
                      config_file=config_file, options=options, env=Environment.from_env())
    if lapsed is not None:
        what = {("environment",): "environment (.corral/, .devcontainer/)",
                ("definitions", "environment"): "definitions and environment"}.get(
                    lapsed.changed, "definitions")
        result.diagnostics.append(Diagnostic(
            file=".", line=1, field="trust", severity=Severity.WARNING, code="trust_changed",
            reason=f"the project's {what} changed since you trusted them "
            f"({lapsed.trusted_at}): its definitions are not loaded and its environment "
            "file is not used",
            hint="read what changed (git log -p -- .claude .ngn .corral .devcontainer ...), "
            "then `corral trust` again; or pass --trust-project for one command"))
    return result


def find_agent(name: str, result: LoadResult, sources: Sources) -> AgentContract:
    """The loaded agent ``name``, or a user error with a few close names, the rejected
    definition named like it, or the untrusted project file that defines it."""
    contract = result.get(name)
    if contract is not None:
        return contract
    from executor.agents.suggest import unknown_agent  # noqa: PLC0415 - difflib only for a miss

    untrusted = None
    if not sources.trust_project and any(d.code == "untrusted_project"
                                         for d in result.diagnostics):
        untrusted = load(replace(sources, trust_project=True))
    raise unknown_agent(name, result, trusted=sources.trust_project, untrusted=untrusted)
