"""The conformance harness: one provider against its strict protocol server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from servers import KEY, ProtocolServer

from executor.models import AnthropicModel, Model, OpenAIChatModel, RetryPolicy
from executor.run import RunSettings
from policies.config import AgentSettings, ProviderConfig, UserConfig
from policies.loader import Environment, discover
from sandbox.config import HostConfig, Limits
from tests.backends import git
from tests.timescale import scaled

__all__ = ["Harness"]


@dataclass
class Harness:
    """One provider against its protocol server, with a fake sleep that records waits."""

    protocol: str
    server: ProtocolServer
    sleeps: list[float] = field(default_factory=list)

    @property
    def dialect(self) -> Any:
        return self.server.dialect

    def model(self, *, api_key: str | None = KEY, timeout: float = scaled(5.0),
              max_retries: int = 2, retry: RetryPolicy | None = None,
              base_url: str | None = None) -> Model:
        cls = OpenAIChatModel if self.protocol == "openai" else AnthropicModel
        return cls(model="test-model", base_url=base_url or self.server.base_url,
                   api_key=api_key, provider="local", timeout=timeout,
                   max_retries=max_retries, retry=retry, sleep=self.sleeps.append)

    def run_settings(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
                     tools: str = "read_file, write_file",
                     agents: dict[str, AgentSettings] | None = None,
                     **provider: Any) -> RunSettings:
        """Settings for a whole run of ngn agent ``a`` (``tools``) in a fresh repository,
        on the host backend, its model ``local/test-model`` on this server; ``provider``
        are the provider's own config fields."""
        repo = tmp_path / "repo"
        (repo / ".ngn/agents").mkdir(parents=True)
        (repo / "README.md").write_text("# Project\n")
        (repo / ".ngn/agents/a.md").write_text(
            f"---\nname: a\ndescription: test agent\ntools: {tools}\n---\nWork.\n")
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "init")
        monkeypatch.setenv("CORRAL_TEST_KEY", KEY)
        config = UserConfig(
            providers={"local": ProviderConfig(type=self.protocol,  # type: ignore[arg-type]
                                               base_url=self.server.base_url,
                                               api_key_env="CORRAL_TEST_KEY", max_retries=0,
                                               **provider)},
            default_model="local/test-model", agents=agents or {})
        env = Environment(home=tmp_path / "home", xdg_config=tmp_path / "home/.config",
                          pi_dir=tmp_path / "home/.pi/agent")
        registry = discover(repo, trust_project=True, personal=False, env=env)
        return RunSettings(root=repo, backend=HostConfig(limits=Limits(timeout_seconds=60)),
                           config=config, registry=registry, ledger=tmp_path / "ledger",
                           env=env, trust_project=True, state_root=tmp_path / "state")

    def body(self, n: int) -> dict[str, Any]:
        """The JSON body of the ``n``-th request the server received (0-based)."""
        body = self.server.received[n].body
        assert isinstance(body, dict)
        return body
