"""A real local model server for the tests, a proxy, and a wire log in front of them.

:func:`llama_server` is llama-cpp-python's OpenAI-compatible server, started as a user
runs it, on ``127.0.0.1`` with the SmolLM2-135M GGUF that ``scripts/local_model.sh``
installs; :func:`anthropic_proxy` is LiteLLM's proxy serving the Anthropic protocol in
front of it. :class:`WireLog` is a small forwarding proxy on ``127.0.0.1``
that records every request body and the status and body of every answer, so a test
can show what went over the wire (what corral's own record cannot: the tools offered,
the server's verdict on each request).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.backends import LocalModel
from tests.timescale import scaled

__all__ = ["PROXY_ENV", "SERVER_FLAGS", "Exchange", "Service", "WireLog", "anthropic_proxy",
           "llama_server"]

#: How the server is started (docs/models.md, "A local model"): chatml-function-calling is the
#: llama-cpp-python chat format that offers tools to any chatml model; a small context
#: keeps a turn of the 135M model at a second or two. One thread, not the README's one per
#: core: llama.cpp's threads meet at spinning barriers, so on a busy machine two threads
#: wait for each other's time slices (measured at load 20 on 2 cores: a 13-token answer
#: took 6-11 s with two threads, 1 s with one; a 49-token turn took 168 s with two).
SERVER_FLAGS = ("--chat_format", "chatml-function-calling", "--n_ctx", "2048",
                "--n_threads", "1", "--n_threads_batch", "1", "--model_alias", "smollm2")
#: LiteLLM's proxy offline: its bundled model cost map (no fetch), /v1/messages through
#: the server's /v1/chat/completions (not OpenAI's Responses API, which the server lacks),
#: and a placeholder key (its OpenAI client wants one; the server takes any).
PROXY_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES": "true",
             "OPENAI_API_KEY": "none"}
_START_TIMEOUT = scaled(120.0)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Service:
    """A server process on 127.0.0.1 and a free port, its output in ``log``; ready when
    ``ready_path`` answers 200."""

    def __init__(self, command: list[str], *, port: int, ready_path: str, log: Path,
                 env: dict[str, str] | None = None) -> None:
        self.log = log
        self.port = port
        self._command = command
        self._ready = self.root + ready_path
        self._env = {**os.environ, **(env or {})}
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """An OpenAI-compatible provider's ``base_url``."""
        return self.root + "/v1"

    def start(self) -> Service:
        with self.log.open("wb") as out:
            self._process = subprocess.Popen(self._command, stdout=out, env=self._env,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self._command[0]} exited ({self._process.returncode}):\n"
                                   + self.tail())
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self._ready, timeout=scaled(2)).status_code == 200:
                    return self
            time.sleep(0.1)  # polling the server's own readiness answer
        self.stop()
        raise RuntimeError(f"{self._command[0]} did not answer in {_START_TIMEOUT:g}s:\n"
                           + self.tail())

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=scaled(20))
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=scaled(20))

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def llama_server(local: LocalModel, log: Path) -> Service:
    """``python -m llama_cpp.server`` with the packaged model."""
    port = _free_port()
    return Service([str(local.python), "-m", "llama_cpp.server", "--model", str(local.gguf),
                    "--host", "127.0.0.1", "--port", str(port), *SERVER_FLAGS],
                   port=port, ready_path="/v1/models", log=log)


def anthropic_proxy(local: LocalModel, server: Service, log: Path) -> Service:
    """LiteLLM's proxy: the Anthropic protocol (``/v1/messages``) in front of ``server``."""
    port = _free_port()
    return Service([str(local.litellm), "--model", "openai/smollm2", "--api_base",
                    server.base_url, "--host", "127.0.0.1", "--port", str(port)],
                   port=port, ready_path="/health/liveliness", log=log, env=PROXY_ENV)


@dataclass(frozen=True)
class Exchange:
    """One request through the wire log and the server's answer."""

    path: str
    request: Any
    status: int
    response: Any


class WireLog:
    """Forward every POST to ``upstream`` (a server root URL); record each exchange."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _forwarder(self))
        self._httpd.daemon_threads = False
        self._httpd.block_on_close = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> WireLog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _forwarder(log: WireLog) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {key: value for key, value in self.headers.items()
                       if key.lower() not in {"host", "content-length", "connection"}}
            answer = httpx.post(log.upstream + self.path, content=raw, headers=headers,
                                timeout=scaled(300))
            log.record(Exchange(self.path, _decoded(raw), answer.status_code,
                                _decoded(answer.content)))
            self.send_response(answer.status_code)
            self.send_header("content-type", answer.headers.get("content-type",
                                                                "application/json"))
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, format: str, *args: object) -> None:
            """Silent: tests read ``log.exchanges``."""

    return Forward
