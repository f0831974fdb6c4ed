"""The user's corral config: trusted settings that never come from a repository.

Read from ``$CORRAL_CONFIG`` or ``$XDG_CONFIG_HOME/corral/config.toml``
(default ``~/.config/corral/config.toml``). A project cannot supply it: a
repository's files must never widen what its own agents may do.

.. code-block:: toml

    custom_tools = ["github_search"]      # installed custom tools, by exact name
    subagent_depth = 1                    # how deep delegation may nest
    default_model = "local/qwen2.5-coder" # what a top-level agent that inherits runs on
    [model_map.claude]                    # foreign model names -> exact routes
    sonnet = "anthropic/claude-sonnet-4-5"
    [roles]                               # @role aliases -> ordered fallbacks
    fast = ["local/qwen2.5-coder", "openai/gpt-4o-mini"]
    [providers.local]                     # provider connections
    type = "openai"                       # openai (chat completions) or anthropic
    base_url = "http://localhost:8000/v1"
    api_key_env = "LOCAL_API_KEY"         # the key is read from this variable
    [providers.local.variants.fast]       # a model variant (zuno `variant: fast`):
    reasoning_effort = "low"              # request fields it sends

A role's fallbacks may also be one comma-separated string (``fast = "a, b"``),
as pi's roles are ("string with commas, or array").

MCP servers you installed become tools of children (:mod:`policies.mcp`):

.. code-block:: toml

    [mcp_servers.github]
    command = "github-mcp"                # run inside the child's sandbox (confine = true)
    args = ["stdio"]
    env = ["GITHUB_TOKEN"]                # names of variables passed from your environment
    read_only_tools = ["search_issues"]   # tools you vouch never change anything
    provides = { github_search = "search_issues" }   # custom_tools names it implements
    confine = true                        # false: runs on the host, as you

The environment every child, check and reviewer runs in (:mod:`policies.environment`):

.. code-block:: toml

    [environment]
    setup = ["python3 -m venv .venv", ".venv/bin/pip install -e '.[test]'"]
    inputs = ["pyproject.toml"]           # their content keys the cache
    carry = []                            # ignored paths of your checkout to show children
    env = { PIP_DISABLE_PIP_VERSION_CHECK = "1" }
    setup_network = true                  # setup may download; children never can
    # setup_allow = ["pypi.org", "files.pythonhosted.org"]  # or: only these, via the proxy
    secrets = ["PIP_INDEX_URL"]           # your variables, passed to setup only
    ro_paths = ["/opt/toolchain"]         # host paths children may read (bubblewrap)

Shared snapshots of your checkout's state stay idle for the next run on the same state
(at most two per repository); ``corral gc`` removes the ones unused this long:

.. code-block:: toml

    [snapshots]
    prune_after_hours = 24

What every sandbox is given: its memory, all its processes together (a cgroup on
bubblewrap, the container's limit on docker; default half of this machine's memory,
``--memory`` for one command):

.. code-block:: toml

    [sandbox]
    memory = "4G"

The hosts ``web_fetch`` may reach (:mod:`policies.network`; nothing without an ``allow``;
``--allow-net DOMAIN`` adds one for one command; a definition can only narrow it):

.. code-block:: toml

    [network]
    allow = ["docs.python.org", "*.pypi.org"]
    deny = ["upload.pypi.org"]

Review commands: a read-only agent (a reviewer, Claude ``permissionMode: plan``, pi
``sandbox: read-only``) keeps the shell its definition gives it, and its commands run in a
throwaway copy-on-write layer over your checkout: it sees its own writes (a
``.pytest_cache``, a build dir), none reach your checkout or its diff (``--review-commands``
for one command; a definition can never grant it):

.. code-block:: toml

    [review]
    commands = true
    scratch_size = "1G"                   # the throwaway layer's size (default 1G)
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from policies.capability import DEFAULT_SUBAGENT_DEPTH
from policies.environment import EnvironmentConfig
from policies.errors import PolicyError
from policies.mcp import McpServerConfig, check_provided, check_server_name
from policies.network import NetworkConfig
from policies.tools import check_tool_name

__all__ = ["AgentSettings", "McpServerConfig", "ProviderConfig", "ReviewSettings",
           "SandboxSettings", "SnapshotsConfig", "UserConfig", "check_tool_choice",
           "config_path", "load_user_config", "parse_memory"]


class ProviderConfig(BaseModel):
    """One provider connection. Credentials come from an environment variable only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["openai", "anthropic"]
    base_url: str
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    #: Named model variants: request fields each sends (an agent's ``variant`` picks one).
    variants: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    #: What every tool request says about calling tools: ``auto``, ``required`` (the usual
    #: fix for small models that write calls as text; released after a tool result, so
    #: the model can still answer), ``none``, or one tool's name. ``[agents.NAME]`` wins.
    tool_choice: str = "auto"
    #: The model's context size in tokens (a local server's ``--n_ctx``): the answer's
    #: room comes off it, and auto-compacting memory compacts within the rest. ``None``:
    #: 100k tokens of conversation.
    context_window: int | None = Field(default=None, ge=256)
    #: The most tokens one answer may take (each request's ``max_tokens``); ``None``: a
    #: quarter of ``context_window``, at most 4096.
    max_tokens: int | None = Field(default=None, ge=1)
    #: Anthropic: mark the system prompt and the conversation's newest message as prompt
    #: cache breakpoints (``cache_control``). ``None``: on for ``api.anthropic.com`` only,
    #: since a translating proxy (LiteLLM) hands the marked blocks to an OpenAI-compatible
    #: server as content parts, which llama-cpp-python renders as text. OpenAI-compatible
    #: servers cache a repeated prefix by themselves.
    prompt_cache: bool | None = None

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str) -> str:
        return check_tool_choice(value)

    @model_validator(mode="after")
    def _answer_fits(self) -> ProviderConfig:
        if (self.context_window is not None and self.max_tokens is not None
                and self.max_tokens >= self.context_window):
            raise ValueError(
                f"max_tokens ({self.max_tokens}) must be below context_window "
                f"({self.context_window}): the prompt needs room too; lower max_tokens "
                "or raise context_window to the server's context size")
        return self


def check_tool_choice(value: str) -> str:
    """``auto``, ``required``, ``none`` or a tool name; a :class:`ValueError` naming them."""
    if value in ("auto", "required", "none"):
        return value
    if value in ("any", "tool", "function"):  # a protocol's own spelling, not a tool
        raise ValueError(f"{value!r} is not a tool_choice: give auto, required, none or the "
                         "name of one tool (Anthropic's 'any' is required here)")
    try:
        return check_tool_name(value)
    except PolicyError as exc:
        raise ValueError(f"{value!r} is not a tool_choice: give auto, required, none or the "
                         f"name of one tool ({exc})") from exc


class AgentSettings(BaseModel):
    """``[agents.NAME]``: how corral drives one agent's model (never what it may do)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: As :attr:`ProviderConfig.tool_choice`, for this agent whichever provider runs it.
    tool_choice: str | None = None

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str | None) -> str | None:
        return None if value is None else check_tool_choice(value)


class SnapshotsConfig(BaseModel):
    """``[snapshots]``: how long idle shared snapshots stay on disk."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``corral gc`` removes an idle snapshot no run used for this many hours.
    prune_after_hours: float = Field(default=24.0, gt=0)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: The smallest memory cap a sandbox may be given (its supervisor needs some).
MIN_MEMORY = 16 << 20


def parse_memory(value: object) -> int:
    """A memory size (``"4G"``, ``"512M"``, ``"1.5GiB"``, ``4294967296``; binary units, as
    docker reads them) in bytes; :class:`ValueError` naming the accepted forms otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        size = int(float(match[1]) * _UNITS[match[2].lower()])
    else:
        raise ValueError(f"{value!r} is not a memory size: give one such as \"4G\", "
                         "\"512M\" or \"1.5GiB\" (K, M, G, T are powers of 1024)")
    if size < MIN_MEMORY:
        raise ValueError(f"{value!r} is below the smallest memory cap, 16M")
    return size


class ReviewSettings(BaseModel):
    """``[review]``: what read-only agents may do (only the user grants it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: A read-only agent's shell runs in a throwaway layer instead of being removed.
    commands: bool = False
    #: The throwaway layer's size (``"1G"``): a write past it fails with ``ENOSPC``.
    scratch_size: int = 1 << 30

    @field_validator("scratch_size", mode="before")
    @classmethod
    def _scratch_size(cls, value: object) -> int:
        return parse_memory(value)


class SandboxSettings(BaseModel):
    """``[sandbox]``: what every sandbox corral opens is given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Memory one sandbox may use, all its processes together (``"4G"``); ``None``: half
    #: of this machine's memory. ``--memory`` overrides it for one command.
    memory: int | None = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: object) -> int | None:
        return None if value is None else parse_memory(value)


class UserConfig(BaseModel):
    """Everything the user (never a project) configures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    custom_tools: tuple[str, ...] = ()
    subagent_depth: int = Field(default=DEFAULT_SUBAGENT_DEPTH, ge=0, le=8)
    model_map: dict[str, dict[str, str]] = Field(default_factory=dict)
    roles: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    default_provider: str | None = None
    #: The model of a top-level run whose agent inherits (``provider/model`` or ``@role``).
    default_model: str | None = None
    #: MCP servers whose tools children may be given (``[mcp_servers.NAME]``).
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    #: The environment under every child (:mod:`policies.environment`): setup, carry,
    #: env, image; and the grants only you give (network for setup, secrets, host paths).
    environment: EnvironmentConfig | None = None
    #: How long idle shared snapshots stay (``[snapshots]``).
    snapshots: SnapshotsConfig = Field(default_factory=SnapshotsConfig)
    #: What every sandbox is given (``[sandbox]``: its memory).
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    #: How corral drives each agent's model (``[agents.NAME]``: tool_choice).
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    #: The hosts ``web_fetch`` may reach (``[network]``: allow, deny, allow_private).
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    #: What read-only agents may do (``[review]``: commands in a throwaway layer).
    review: ReviewSettings = Field(default_factory=ReviewSettings)

    @field_validator("mcp_servers")
    @classmethod
    def _servers(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in value:
            check_server_name(name)
        check_provided(value)
        return value

    @field_validator("custom_tools")
    @classmethod
    def _tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_tool_name(name) for name in value)

    @field_validator("roles", mode="before")
    @classmethod
    def _role_chains(cls, value: object) -> object:
        """A role's chain may be a comma-separated string (pi), split in order."""
        if not isinstance(value, dict):
            return value
        return {role: [part.strip() for part in chain.split(",") if part.strip()]
                if isinstance(chain, str) else chain for role, chain in value.items()}


class ConfigError(PolicyError):
    """The user config cannot be read."""

    code = "config_error"


def config_path(env: dict[str, str] | None = None) -> Path:
    """Where the user config lives."""
    env = dict(os.environ) if env is None else env
    if env.get("CORRAL_CONFIG"):
        return Path(env["CORRAL_CONFIG"])
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path(
        env.get("HOME", str(Path.home()))) / ".config"
    return base / "corral" / "config.toml"


def load_user_config(path: Path | None = None) -> UserConfig:
    """Read the user config; a missing file is an empty config."""
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return UserConfig()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", operation="load_config",
                          hint="fix the file or point CORRAL_CONFIG elsewhere") from exc
    try:
        return UserConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: {where}: {first['msg']}", operation="load_config") from exc
