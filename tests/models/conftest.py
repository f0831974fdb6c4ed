"""Fixtures for the model layer: strict local protocol servers, one per test.

``harness`` is parametrized over both HTTP providers: the conformance suite
runs once against the OpenAI-compatible server and once against the Anthropic
one. Every server is stopped at teardown and the test fails if the client
sent anything malformed or left a scripted reply unconsumed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from model_support import Harness
from servers import DIALECTS, KEY, ProtocolServer

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


@pytest.fixture(params=["openai", "anthropic"])
def harness(request: pytest.FixtureRequest, make_server: ServerFactory) -> Harness:
    """The conformance harness, once per HTTP provider."""
    return Harness(request.param, make_server(request.param))
