"""Fixtures for the model layer: strict local protocol servers, one per test.

``harness`` is parametrized over both HTTP providers: the conformance suite
runs once against the OpenAI-compatible server and once against the Anthropic
one. Every server is stopped at teardown and the test fails if the client
sent anything malformed or left a scripted reply unconsumed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from servers import DIALECTS, KEY, ProtocolServer

from executor.models import AnthropicModel, Model, OpenAIChatModel, RetryPolicy

ServerFactory = Callable[..., ProtocolServer]


@pytest.fixture
def make_server() -> Iterator[ServerFactory]:
    """Start strict servers on demand; stop and check them all at teardown."""
    started: list[ProtocolServer] = []

    def make(protocol: str, *, api_key: str | None = KEY) -> ProtocolServer:
        server = ProtocolServer(DIALECTS[protocol], api_key=api_key).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()
    problems = [problem for server in started for problem in server.problems]
    unconsumed = [reply for server in started for reply in server.pending]
    assert problems == [], "the client sent malformed requests"
    assert unconsumed == [], "scripted replies were never requested"


@dataclass
class Harness:
    """One provider against its protocol server, with a fake sleep that records waits."""

    protocol: str
    server: ProtocolServer
    sleeps: list[float] = field(default_factory=list)

    @property
    def dialect(self) -> Any:
        return self.server.dialect

    def model(self, *, api_key: str | None = KEY, timeout: float = 5.0, max_retries: int = 2,
              retry: RetryPolicy | None = None, base_url: str | None = None) -> Model:
        cls = OpenAIChatModel if self.protocol == "openai" else AnthropicModel
        return cls(model="test-model", base_url=base_url or self.server.base_url,
                   api_key=api_key, provider="local", timeout=timeout,
                   max_retries=max_retries, retry=retry, sleep=self.sleeps.append)

    def body(self, n: int) -> dict[str, Any]:
        """The JSON body of the ``n``-th request the server received (0-based)."""
        body = self.server.received[n].body
        assert isinstance(body, dict)
        return body


@pytest.fixture(params=["openai", "anthropic"])
def harness(request: pytest.FixtureRequest, make_server: ServerFactory) -> Harness:
    """The conformance harness, once per HTTP provider."""
    return Harness(request.param, make_server(request.param))
