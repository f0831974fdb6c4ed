"""The MCP server: corral's tools over stdio or streamable HTTP (the official ``mcp`` SDK).

Built on the SDK's low-level :class:`mcp.server.lowlevel.Server`: the tools'
schemas come from :mod:`executor.mcpserver.arguments`, their work from
:mod:`executor.mcpserver.handlers`. Every result is a JSON object, sent both as
``structuredContent`` and as its serialized text (for clients that read only
text). Every failure is a tool result with ``isError`` carrying corral's error
object (``{"error": {code, message, context, hint, retryable, operation,
exit_code}}``, as ``--json`` prints it), never a crashed server or a bare
protocol error: bad arguments are ``bad_arguments``, an unknown tool
``unknown_tool``, a bug ``internal`` (its traceback on the server's stderr).

The long tools (``run_agent``, ``fanout``) are awaited through
:class:`executor.api.AsyncCorral`: progress notifications while a child runs
(:mod:`executor.mcpserver.progress`, when the client sent a progressToken), and a
``notifications/cancelled`` from the client stops the child the way Ctrl-C does,
its diff recorded.

Over HTTP the server listens on 127.0.0.1 only, and every request must carry
``Authorization: Bearer TOKEN`` (the token is ``$CORRAL_MCP_TOKEN``, or one
generated at start and printed on stderr): any local user or process can reach
a loopback port, and this one runs agents and reads your repository. A request
naming another ``Host`` (DNS rebinding) or carrying another ``Origin`` (a web
page, another local port's included) is refused first (:class:`BearerAuth`);
the SDK's own Host and Origin checks stay on behind it.

This module is imported only by ``corral mcp``: nothing else pays for the SDK.
"""

from __future__ import annotations

import hmac
import json
import secrets
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from executor.api import CorralError, corral_version, error_json
from executor.api.serving import LOOPBACK, loopback_socket
from executor.mcpserver import handlers
from executor.mcpserver.arguments import TOOLS, ToolSpec
from executor.mcpserver.handlers import ServerOptions

__all__ = ["TOKEN_ENV", "build_server", "serve_http", "serve_stdio"]

#: Where the HTTP transport's bearer token comes from (generated when unset).
TOKEN_ENV = "CORRAL_MCP_TOKEN"  # noqa: S105 - the name of a variable, not a secret
#: A shorter token from the environment is refused: it could be guessed.
MIN_TOKEN_CHARS = 16

_SPECS = {spec.name: spec for spec in TOOLS}
_QUICK: dict[str, Callable[[ServerOptions, Any], dict[str, Any]]] = {
    "list_agents": handlers.list_agents_tool, "list_runs": handlers.list_runs_tool,
    "show_run": handlers.show_run_tool,
    "diff_run": handlers.diff_run_tool, "apply_run": handlers.apply_run_tool,
    "discard_run": handlers.discard_run_tool,
}
_LONG: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "run_agent": handlers.run_agent_tool, "fanout": handlers.fanout_tool,
}
_INSTRUCTIONS = (
    "corral runs the agents defined in this repository (and the user's own) in isolated "
    "sandboxes and returns their diffs; nothing reaches the checkout until apply_run (or "
    "the user's `corral apply`) merges a diff. list_agents names the agents; run_agent runs "
    "one; fanout runs one task in several children and compares them.")


def _result(data: Mapping[str, Any]) -> types.CallToolResult:
    body = dict(data)
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(body, indent=2))],
                                structured_content=body)


def error_result(error: Mapping[str, Any], exit_code: int) -> types.CallToolResult:
    """A failure as a tool result (``isError``), corral's JSON error object inside."""
    body = error_json(error, exit_code)
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(body, indent=2))],
                                structured_content=body, is_error=True)


def _bad_arguments(spec: ToolSpec, exc: ValidationError) -> dict[str, Any]:
    problems = {".".join(str(p) for p in e["loc"]) or "(arguments)": e["msg"]
                for e in exc.errors()}
    fields = ", ".join(spec.input_schema()["properties"]) or "none"
    return {"code": "bad_arguments", "operation": "check_arguments",
            "message": f"the arguments of {spec.name} are not valid: "
                       + "; ".join(f"{where}: {why}" for where, why in problems.items()),
            "context": problems,
            "hint": f"{spec.name} takes: {fields} (its input schema in tools/list says which "
                    "are required and what each takes)"}


def _tool(spec: ToolSpec, options: ServerOptions) -> types.Tool:
    ceilings = {name: limit for name, (limit, _) in options.ceilings().items()}
    return types.Tool(
        name=spec.name, description=spec.description,
        input_schema=spec.input_schema(ceilings),
        annotations=types.ToolAnnotations(
            read_only_hint=spec.read_only, destructive_hint=spec.destructive,
            idempotent_hint=spec.read_only, open_world_hint=False))


def _progress_sender(ctx: ServerRequestContext[Any, Any]) -> Callable[[str], Awaitable[None]]:
    """This request's progress notifications: the SDK sends them only when the client asked
    (a progressToken), numbered from 1."""
    count = 0

    async def send(line: str) -> None:
        nonlocal count
        count += 1
        await ctx.session.report_progress(count, None, line)

    return send


async def _call(options: ServerOptions, spec: ToolSpec, args: Any,
                ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    if spec.name in _LONG:
        return await _LONG[spec.name](options, args, send=_progress_sender(ctx))
    return await anyio.to_thread.run_sync(_QUICK[spec.name], options, args)


def build_server(options: ServerOptions) -> Server[Any]:
    """The low-level server with corral's tools, bound to ``options``."""

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(spec, options) for spec in TOOLS])

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = _SPECS.get(params.name)
        if spec is None:
            return error_result({
                "code": "unknown_tool", "operation": "call_tool",
                "message": f"corral has no tool named {params.name!r}",
                "hint": "its tools are: " + ", ".join(_SPECS)}, 2)
        try:
            args = spec.arguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            return error_result(_bad_arguments(spec, exc), 2)
        try:
            return _result(await _call(options, spec, args, ctx))
        except CorralError as exc:
            return error_result(exc.to_dict(), exc.exit_code)
        except Exception as exc:  # a bug: the server and the other calls go on
            traceback.print_exc(file=sys.stderr)
            return error_result({
                "code": "internal", "operation": spec.name,
                "message": f"internal error in corral (a bug): {type(exc).__name__}: {exc}",
                "hint": "the traceback is on the server's stderr; please report it"}, 3)

    return Server("corral", version=corral_version(), instructions=_INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def _stop_on_sigterm(scope: anyio.CancelScope) -> None:
    """SIGTERM (a client shutting its server down) cancels what runs, as Ctrl-C does: each
    running child is cancelled and recorded, its diff kept, before the process exits."""
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def serve_stdio(options: ServerOptions) -> None:
    """Serve one client over this process's stdin and stdout until stdin closes (or a
    SIGTERM); a run still going then is cancelled and recorded first."""
    server = build_server(options)
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_sigterm, group.cancel_scope)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()


def http_token(environ: Mapping[str, str]) -> tuple[str, bool]:
    """The bearer token HTTP clients must send, and whether it was generated here."""
    given = environ.get(TOKEN_ENV)
    if given is None:
        return secrets.token_urlsafe(32), True
    if len(given.strip()) < MIN_TOKEN_CHARS or given != given.strip():
        raise CorralError(
            f"${TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} characters, without spaces "
            "around it", code="weak_token", operation="serve_http",
            hint=f"unset it (a token is generated and printed), or set a long random one: "
            f"export {TOKEN_ENV}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return given, False


class BearerAuth:
    """ASGI middleware in front of the SDK's app, for every HTTP request:

    - its ``Host`` must be this server's own address (``127.0.0.1:PORT`` or
      ``localhost:PORT``), or it gets 421: a DNS-rebinding page reaches the port under
      another name;
    - an ``Origin`` it carries must be this server's own (``http://127.0.0.1:PORT`` or
      ``http://localhost:PORT``, the exact port: a page served by another local port is a
      foreign origin too), or it gets 403: a browser adds it to every cross-origin request;
    - it must carry ``Authorization: Bearer <token>``, or it gets 401. The scheme is
      matched case-insensitively (RFC 9110 11.1, RFC 6750 2.1), the token whole, in
      constant time (``hmac.compare_digest``: a prefix of it, or it with a byte more, is
      another token).

    The SDK's own Host and Origin checks (any port of a loopback name) stay on behind it.
    """

    def __init__(self, app: Any, token: str, *, port: int) -> None:
        self.app = app
        self.token = token.encode()
        hosts = (f"{LOOPBACK}:{port}", f"localhost:{port}")
        self.hosts = frozenset(host.encode() for host in hosts)
        self.origins = frozenset(f"http://{host}".encode() for host in hosts)

    def _authorized(self, values: list[bytes]) -> bool:
        given = values[0] if len(values) == 1 else b""
        scheme, _, credentials = given.partition(b" ")
        token = credentials.lstrip(b" ") if scheme.lower() == b"bearer" else b""
        return hmac.compare_digest(token, self.token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers: dict[bytes, list[bytes]] = {}
            for name, value in scope.get("headers") or []:
                headers.setdefault(name.lower(), []).append(value)
            refusal = None
            if not (len(headers.get(b"host", [])) == 1 and headers[b"host"][0] in self.hosts):
                refusal = (421, "wrong_host", "the request names another host",
                           "connect to the URL `corral mcp --http` printed")
            elif any(origin not in self.origins for origin in headers.get(b"origin", [])):
                refusal = (403, "foreign_origin", "requests from another origin (a web "
                           "page) are refused", "connect from a local MCP client, not a "
                           "browser page")
            elif not self._authorized(headers.get(b"authorization", [])):
                refusal = (401, "unauthorized", "missing or wrong bearer token",
                           "send the header 'Authorization: Bearer <token>' that `corral "
                           "mcp --http` printed (or $CORRAL_MCP_TOKEN)")
            if refusal is not None:
                status, code, message, hint = refusal
                body = json.dumps({"error": {"code": code, "message": message,
                                             "hint": hint}}).encode()
                extra = [(b"www-authenticate", b'Bearer realm="corral"')] if status == 401 \
                    else []
                await send({"type": "http.response.start", "status": status, "headers": [
                    (b"content-type", b"application/json"), *extra]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve_http(options: ServerOptions, *, port: int, token: str,
                     announce: Callable[[str], None]) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:PORT/mcp`` until interrupted."""
    server = build_server(options)
    sock = loopback_socket(port, operation="serve_http", option="--http PORT")
    bound = sock.getsockname()[1]
    app = BearerAuth(server.streamable_http_app(host=LOOPBACK), token, port=bound)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    announce(f"http://{LOOPBACK}:{bound}/mcp")
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
