"""POST JSON to a model provider: timeouts, retries, and error translation.

This is the one module that imports :mod:`httpx`, and only when a
:class:`HttpClient` is built (a scripted run never loads it). Every httpx exception and
every non-2xx answer becomes a :class:`~executor.errors.ModelError` here, with
a stable code, ``retryable``, and context (provider, URL without credentials,
status, the provider's error type, a short excerpt of the body, attempts):

- 401, 403: ``auth``, not retryable;
- 429: ``rate_limited``, retryable;
- 408, connect/read/write timeouts: ``timeout``, retryable;
- 5xx (Anthropic's 529 ``overloaded_error`` included): ``server``, retryable, unless
  its body says the request was invalid (llama-cpp-python's server answers 500 to a
  request its validation refuses): then ``bad_request``, not retryable;
- any other 4xx: ``bad_request``, not retryable.

A ``bad_request`` names what the server refused: ``context["field"]`` (``messages[2].content``,
from OpenAI's ``param``, FastAPI's or pydantic's ``loc``, or the path that leads an
Anthropic message) when the server named one, and ``context["reason"]``
(:mod:`executor.models._rejection`). Other failures:
- refused, reset or dropped connections: ``connection``, retryable;
- a 3xx, or a 2xx whose body is not a JSON object: ``protocol``, not retryable;
- a URL httpx cannot use: ``config``, not retryable.

Retryable failures are retried at most ``max_retries`` times: after an answer
carrying ``Retry-After`` seconds or date (or ``retry-after-ms``, as OpenAI
sends) the client waits exactly that long, capped at ``retry_after_max``;
otherwise it backs off exponentially with jitter (``backoff_base * 2**n``,
capped at ``backoff_max``, times a random factor in [0.5, 1]). The sleep
function is injectable, so tests observe the waits without waiting. The API
key is never logged, and every secret handed to the client is scrubbed from
every error text before it is raised.

One pooled ``httpx.Client`` serves every attempt and turn of a :class:`HttpClient`
(its TLS context and keep-alive connections are built once, not per request: 28.9 ms
of CPU each, measured). :meth:`HttpClient.close` drops it (idempotent; a later request
opens a new one), and a client nobody closed is closed when it is collected.
"""

from __future__ import annotations

import json
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from executor.errors import ModelError
from executor.models._rejection import rejection

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpClient", "RetryPolicy", "Sleep", "redact_url"]

Sleep = Callable[[float], None]
_EXCERPT = 300
_JITTER = random.SystemRandom()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts (seconds)."""

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_max: float = 60.0

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (0-based) when the server said nothing."""
        ceiling = min(self.backoff_max, self.backoff_base * 2.0 ** retry)
        return ceiling * _JITTER.uniform(0.5, 1.0)


def redact_url(url: str) -> str:
    """``url`` without user info, query or fragment (where credentials hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _Failure(Exception):
    """One failed attempt, before retry decisions (internal)."""

    def __init__(self, error: ModelError, wait: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.wait = wait


class HttpClient:
    """POST JSON to one provider with timeouts, bounded retries and translated errors."""

    def __init__(self, *, provider: str, timeout: float, retry: RetryPolicy | None = None,
                 headers: Mapping[str, str] | None = None, secrets: Sequence[str] = (),
                 sleep: Sleep = time.sleep) -> None:
        import httpx  # noqa: PLC0415, F401 - loaded with the first real provider, never at start-up
        self._provider = provider
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._headers = {"content-type": "application/json", "accept": "application/json",
                         **(headers or {})}
        self._secrets = tuple(secret for secret in secrets if secret)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._closer: weakref.finalize[Any, Any] | None = None

    def _pooled(self) -> httpx.Client:
        """The client's one connection pool, opened at its first request."""
        import httpx  # noqa: PLC0415 - in sys.modules since __init__; see there
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout, follow_redirects=False)
                self._closer = weakref.finalize(self, self._client.close)
            return self._client

    def close(self) -> None:
        """Close the pooled connections (a later request opens new ones)."""
        with self._lock:
            closer, self._client, self._closer = self._closer, None, None
        if closer is not None:
            closer()

    def post_json(self, url: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``url``; the decoded JSON object of a 2xx answer."""
        payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        retries = 0
        while True:
            try:
                return self._attempt(url, payload)
            except _Failure as failure:
                error = failure.error
                error.context["attempts"] = retries + 1
                if not error.retryable or retries >= self._retry.max_retries:
                    raise error from failure.__cause__
                wait = failure.wait if failure.wait is not None else self._retry.backoff(retries)
                retries += 1
                self._sleep(wait)

    # -- one attempt -------------------------------------------------------------------

    def _attempt(self, url: str, payload: bytes) -> dict[str, Any]:
        import httpx  # noqa: PLC0415 - in sys.modules since __init__; see there
        try:
            response = self._pooled().post(url, content=payload, headers=self._headers)
        except httpx.TimeoutException as exc:
            raise _Failure(self._error(
                "timeout", f"no answer within {self._timeout:g}s ({type(exc).__name__})",
                url, retryable=True)) from exc
        except httpx.UnsupportedProtocol as exc:
            raise _Failure(self._error("config", f"unsupported URL: {exc}", url)) from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
            raise _Failure(self._error(
                "connection", f"cannot reach the server: {_describe(exc)}", url,
                retryable=True)) from exc
        except httpx.HTTPError as exc:
            raise _Failure(self._error(
                "protocol", f"HTTP failure: {_describe(exc)}", url)) from exc
        except httpx.InvalidURL as exc:
            raise _Failure(self._error("config", f"invalid URL: {exc}", url)) from exc
        return self._decode(url, response)

    def _decode(self, url: str, response: httpx.Response) -> dict[str, Any]:
        status = response.status_code
        text = self._scrub(response.text)  # before any excerpt can cut a secret in half
        if 200 <= status < 300:
            try:
                data = json.loads(text)
            except (ValueError, RecursionError) as exc:
                raise _Failure(self._error(
                    "protocol", "the answer is not JSON", url, status=status, body=text)) from exc
            if not isinstance(data, dict):
                raise _Failure(self._error(
                    "protocol", "the answer is not a JSON object", url, status=status, body=text))
            return data
        code, retryable = _classify(status)
        detail, error_type = _error_detail(text)
        reason = response.reason_phrase or "error"
        message = f"HTTP {status} {reason}" + (f": {detail}" if detail else "")
        refused = rejection(status, text) if code in ("bad_request", "server") else None
        if refused is not None:  # the same request would fail the same way: never retried
            code, retryable = "bad_request", False
            named = f"{refused.field}: " if refused.field else ""
            message = (f"HTTP {status} {reason}: the server refused the request as invalid: "
                       f"{named}{refused.reason}")
        wait = _retry_after(response.headers, self._retry.retry_after_max) if retryable else None
        error = self._error(code, message, url, status=status, body=text,
                            error_type=error_type, retryable=retryable)
        if refused is not None:
            if refused.field:
                error.context["field"] = refused.field
            error.context["reason"] = self._scrub(refused.reason)
        raise _Failure(error, wait)

    def _error(self, code: str, message: str, url: str, *, status: int | None = None,
               body: str | None = None, error_type: str | None = None,
               retryable: bool = False) -> ModelError:
        context: dict[str, Any] = {"provider": self._provider, "url": redact_url(url)}
        if status is not None:
            context["status"] = status
        if error_type:
            context["error_type"] = self._scrub(error_type)
        if body:
            context["body"] = self._scrub(_excerpt(body))
        return ModelError(
            f"provider {self._provider!r}: {self._scrub(message)}", code=code,
            operation="model_request", context=context, hint=_HINTS.get(code),
            retryable=retryable)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


_HINTS = {
    "auth": "check the API key variable (api_key_env) of this provider in your corral config",
    "bad_request": "the server refused the request, so a retry cannot help: check the model "
                   "name and the base_url; a local server that refuses a field corral sends: "
                   "see docs/models.md, 'A local model', for the servers and flags that work",
    "rate_limited": "the provider is rate limiting; wait, or raise max_retries",
    "server": "the provider failed; retry later or fall back to another model",
    "timeout": "the provider is slow; raise timeout_seconds in your corral config",
    "connection": "is the server running and base_url right?",
    "protocol": "base_url may point at something that is not this kind of API",
    "config": "fix base_url of this provider in your corral config",
}


def _classify(status: int) -> tuple[str, bool]:
    if status in (401, 403):
        return "auth", False
    if status == 429:
        return "rate_limited", True
    if status == 408:
        return "timeout", True
    if status >= 500:
        return "server", True
    if 400 <= status < 500:
        return "bad_request", False
    return "protocol", False


def _error_detail(text: str) -> tuple[str, str | None]:
    """The message and type of an error body: OpenAI, Anthropic, vLLM and Ollama shapes."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _excerpt(text.strip()), None
    if not isinstance(data, dict):
        return "", None
    error = data.get("error")
    if isinstance(error, str):
        return _excerpt(error), None
    source = error if isinstance(error, dict) else data
    message = source.get("message")
    kind = source.get("type")
    return (_excerpt(message) if isinstance(message, str) else "",
            kind if isinstance(kind, str) else None)


def _retry_after(headers: httpx.Headers, cap: float) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``Retry-After``), capped."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return min(cap, max(0.0, float(millis) / 1000))
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = moment.timestamp() - time.time()
    return min(cap, max(0.0, seconds))


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."
