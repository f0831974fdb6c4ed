"""A provider's token limits (issue 31, D7): ``[providers.NAME] context_window`` and
``max_tokens``, on the wire of both protocols and through a whole run.

Before, every request asked for 4096 answer tokens and the conversation had a fixed
100k-token budget, whatever the server: the docs' own ``--n_ctx 2048`` local model
could never take a request's answer room. The strict local protocol servers record each
request body, so the tests read what was really sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from model_support import Harness
from pydantic import ValidationError
from servers import KEY

from executor.ledger import RunStatus
from executor.models import AnthropicModel, Message, OpenAIChatModel, Sampling
from executor.models.base import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_MAX_TOKENS,
    ModelLimits,
    model_limits,
)
from executor.models.routing import with_level
from executor.run import run_agent
from executor.run import session as session_module
from executor.run.memory import request_view
from policies.config import ProviderConfig, load_user_config
from tests.timescale import scaled

START = [Message("system", "Be brief."), Message("user", "Say hi")]


def test_the_answer_room_comes_from_the_provider_and_the_rest_is_the_conversations() -> None:
    assert ModelLimits().output_tokens() == DEFAULT_MAX_TOKENS
    assert ModelLimits().input_budget() == DEFAULT_BUDGET_TOKENS
    small = ModelLimits(context_window=2048)
    assert small.output_tokens() == 512  # a quarter of the window
    assert small.input_budget() == 2048 - 512
    assert ModelLimits(context_window=200_000).output_tokens() == DEFAULT_MAX_TOKENS
    both = ModelLimits(context_window=8192, max_tokens=1000)
    assert (both.output_tokens(), both.input_budget()) == (1000, 7192)
    assert ModelLimits(max_tokens=300).input_budget() == DEFAULT_BUDGET_TOKENS


def test_a_model_without_limits_has_the_defaults_and_a_level_keeps_its_models() -> None:
    assert model_limits(object()) == ModelLimits()
    inner = OpenAIChatModel(model="m", base_url="http://127.0.0.1:1/v1",
                            limits=ModelLimits(context_window=4096))
    assert model_limits(with_level(inner, "low")) == ModelLimits(context_window=4096)


def test_an_answer_that_cannot_fit_the_window_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError) as caught:
        ProviderConfig(type="openai", base_url="http://127.0.0.1:1/v1",
                       context_window=2048, max_tokens=2048)
    assert "max_tokens (2048) must be below context_window (2048)" in str(caught.value)
    with pytest.raises(ValidationError):
        ProviderConfig(type="openai", base_url="http://127.0.0.1:1/v1", context_window=10)


def test_the_config_file_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'
                    "context_window = 2048\nmax_tokens = 256\n")
    provider = load_user_config(path).providers["local"]
    assert (provider.context_window, provider.max_tokens) == (2048, 256)


@pytest.mark.parametrize("tokens", [None, 2048])
def test_each_protocol_sends_the_requests_own_cap(harness: Harness, tokens: int | None) -> None:
    cls: Any = OpenAIChatModel if harness.protocol == "openai" else AnthropicModel
    model = cls(model="test-model", base_url=harness.server.base_url, api_key=KEY,
                provider="local", timeout=scaled(5.0), max_retries=0)
    harness.server.reply(harness.dialect.text("hi"))
    sampling = Sampling() if tokens is None else Sampling(max_tokens=tokens)
    model.complete(START, [], sampling=sampling)
    assert harness.body(0)["max_tokens"] == (tokens or DEFAULT_MAX_TOKENS)


@pytest.mark.parametrize(("window", "cap", "sent"), [(None, None, DEFAULT_MAX_TOKENS),
                                                     (2048, None, 512), (2048, 300, 300)])
def test_a_run_asks_for_what_the_providers_window_leaves(
        harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        window: int | None, cap: int | None, sent: int) -> None:
    settings = harness.run_settings(tmp_path, monkeypatch, tools="read_file",
                                    context_window=window, max_tokens=cap)
    budgets: list[int] = []

    def spy(messages: Any, memory: Any, *, budget_tokens: int) -> Any:
        budgets.append(budget_tokens)
        return request_view(messages, memory, budget_tokens=budget_tokens)

    monkeypatch.setattr(session_module, "request_view", spy)
    harness.server.reply(harness.dialect.text("done"))
    record = run_agent(settings, "a", "Say what this is")
    assert record.status is RunStatus.COMPLETED, record.error
    assert harness.body(0)["max_tokens"] == sent
    assert budgets == [ModelLimits(window, cap).input_budget()]
