"""What an agent definition says reaches the provider's wire, through a whole run.

A zuno agent runs end to end (host backend) against the strict local protocol
servers of both providers; the servers refuse anything malformed (a tool
block without tool definitions, an unexpected body key), and each test reads
the JSON bodies they received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from model_support import Harness
from servers import KEY

from executor.results import RunRecord, RunStatus, ledger_dir
from executor.runner import RunSettings, run_agent
from policies.config import ProviderConfig, UserConfig
from policies.loader import Environment, discover
from sandbox.config import HostConfig, Limits
from tests.backends import git


def _run(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         agents: dict[str, Any], agent: str = "a", *, model: str | None = None,
         variants: dict[str, dict[str, Any]] | None = None, **top: Any) -> RunRecord:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# Project\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    (repo / ".zuno").mkdir()
    (repo / ".zuno/zuno.json").write_text(json.dumps({**top, "agents": agents}))
    monkeypatch.setenv("CORRAL_TEST_KEY", KEY)
    provider = ProviderConfig(type=harness.protocol, base_url=harness.server.base_url,  # type: ignore[arg-type]
                              api_key_env="CORRAL_TEST_KEY", max_retries=0,
                              **({"variants": variants} if variants else {}))
    config = UserConfig(providers={"local": provider}, default_model="local/test-model")
    env = Environment(home=tmp_path / "home", xdg_config=tmp_path / "home/.config",
                      pi_dir=tmp_path / "home/.pi/agent")
    registry = discover(repo, trust_project=True, personal=False, env=env)
    settings = RunSettings(root=repo, backend=HostConfig(limits=Limits(timeout_seconds=60)),
                           config=config, registry=registry, ledger=ledger_dir(repo), env=env,
                           trust_project=True, state_root=tmp_path / "state",
                           model_override=model)
    return run_agent(settings, agent, "go")


READ_CALL = [("c1", "read_file", {"path": "README.md"})]


def test_finalization_request_defines_no_tools(harness: Harness, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec (zuno-custom-agents.md): When the limit is exhausted and the model still requests
    continuation, Zuno sends one additional text-only request with no tools, asking for a
    concise account of completed work, remaining work, evidence, and blockers.

    Both providers accept it: the conversation's tool calls are sent as text (Anthropic
    refuses tool blocks in a request without tools), and neither ``tools`` nor
    ``tool_choice`` is in the body.
    """
    harness.server.reply(harness.dialect.tool_calls(READ_CALL),
                         harness.dialect.text("Done: read README. Left: nothing."))
    record = _run(harness, tmp_path, monkeypatch, {"a": {"steps": 1,
                                                         "model": "local/test-model"}})
    assert record.status is RunStatus.STEP_LIMIT, record.error
    first, last = harness.body(0), harness.body(1)
    assert "tools" in first
    assert "tools" not in last and "tool_choice" not in last
    assert "read_file" in json.dumps(last["messages"])  # the call, written out as text
