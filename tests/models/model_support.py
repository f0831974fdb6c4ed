"""The conformance harness: one provider against its strict protocol server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servers import KEY, ProtocolServer

from executor.models import AnthropicModel, Model, OpenAIChatModel, RetryPolicy

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
