"""The web app of ``corral serve``: pages over the Python API, behind :class:`Guard`.

Every page is rendered on the server (Jinja2, autoescape on) and readable with
JavaScript off; ``static/live.js`` (served by the app itself, the CSP's ``'self'``)
only polls for partial updates while a run or fanout is going. Every value is
escaped, and first made visible text by :func:`shown` (controls, bidi overrides,
zero-width characters become escapes, as on a terminal: :mod:`executor.text`). A
``GET`` never changes state; each ``POST`` checks the form's token
(:func:`executor.web.guard.form_token_ok`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from executor.api import (
    Corral,
    CorralError,
    MergeRefused,
    PatchPlan,
    RunRecord,
    RunStatus,
    check_verdict,
)
from executor.text import printable
from executor.web.diffs import render_diff
from executor.web.guard import Guard, form_token_ok
from executor.web.starts import StartRequest, Starts
from executor.web.views import agents_page, event_view, fanout_page, runs_page

__all__ = ["WebApp", "build_app", "shown"]

HERE = Path(__file__).parent
#: The HTTP status of a CorralError by its exit code: a user's mistake, a refusal, a failure.
STATUS = {2: 400, 4: 409}


def shown(value: object) -> object:
    """Every value a template prints: text made visible (:func:`executor.text.printable`),
    then escaped by autoescape; ``None`` prints nothing; markup of the app's own as it is."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, str):
        return printable(value)
    return value


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      finalize=shown, trim_blocks=True, lstrip_blocks=True)
    env.filters["visible"] = lambda value: printable(str(value))
    env.filters["verdict"] = check_verdict  # one reading of a check record, as the CLI's
    return env


class Pages:
    """The handlers, over one Corral."""

    def __init__(self, corral: Corral, token: str) -> None:
        self.corral = corral
        self.token = token
        self.base = f"/{token}"
        self.env = _environment()
        self.starts = Starts(corral)

    def page(self, name: str, status: int = 200, headers: dict[str, str] | None = None,
             **context: Any) -> HTMLResponse:
        template = self.env.get_template(name)
        html = template.render(base=self.base, token=self.token, root=str(self.corral.root),
                               **context)
        return HTMLResponse(html, status_code=status, headers=headers)

    def error(self, exc: CorralError, **context: Any) -> HTMLResponse:
        return self.page("error.html", STATUS.get(exc.exit_code, 500), error=exc.to_dict(),
                         **context)

    async def form(self, request: Request) -> FormData | None:
        form = await request.form()
        return form if form_token_ok(form.get("token"), self.token) else None

    def refused(self) -> Response:
        return Response("the form's token is missing or wrong: reload the page\n", 403,
                        media_type="text/plain")

    # -- pages -----------------------------------------------------------------------------

    def agents(self, request: Request) -> Response:
        return self.page("agents.html", tab="agents", **agents_page(self.corral))

    def runs(self, request: Request) -> Response:
        query = request.query_params
        return self.page("runs.html", tab="runs", **runs_page(
            self.corral, status=query.get("status", ""), agent=query.get("agent", ""),
            state=query.get("state", ""), after=query.get("after", "")))

    def run(self, request: Request) -> Response:
        if request.path_params["run_id"].startswith("f-"):  # a fanout's id: its own page
            return RedirectResponse(f"{self.base}/fanouts/{request.path_params['run_id']}", 303)
        result = self.corral.show(request.path_params["run_id"])
        events = self.corral.journal(result.run_id)
        running = result.status is RunStatus.RUNNING
        files, left = render_diff(self.corral.diff(result.run_id).patch) if not running \
            else ([], 0)
        return self.page("run.html", tab="runs", run=result, record=result.record,
                         events=[event_view(e) for e in events], count=len(events),
                         running=running, files=files, left=left)

    def journal(self, request: Request) -> Response:
        """The events after ``after`` as HTML rows, for live.js; headers say how many there
        are and whether the run is still going."""
        run_id = request.path_params["run_id"]
        try:
            after = max(0, int(request.query_params.get("after", "0")))
        except ValueError:
            after = 0
        running = self.corral.show(run_id).status is RunStatus.RUNNING
        events = self.corral.journal(run_id)
        html = self.env.get_template("events.html").render(
            events=[event_view(e) for e in events[after:]])
        return HTMLResponse(html, headers={"X-Corral-Count": str(len(events)),
                                           "X-Corral-Running": "1" if running else "0"})

    def _fanout(self, fanout_id: str) -> dict[str, Any]:
        result = self.corral.show_fanout(fanout_id)
        diffs = {c.run_id: render_diff(c.run.record.diff.encode("utf-8", "surrogateescape"))
                 for c in result.children if c.run is not None}
        return {"diffs": diffs, **fanout_page(result)}

    def fanout(self, request: Request) -> Response:
        return self.page("fanout.html", tab="runs", **self._fanout(
            request.path_params["fanout_id"]))

    def fanout_live(self, request: Request) -> Response:
        """The candidates as HTML, for live.js while the fanout runs; a header says
        whether it still does."""
        context = self._fanout(request.path_params["fanout_id"])
        html = self.env.get_template("fanout_live.html").render(
            base=self.base, token=self.token, **context)
        return HTMLResponse(html, headers={"X-Corral-Running": "1" if context["running"]
                                           else "0"})

    def start_form(self, request: Request) -> Response:
        return self.page("start.html", tab="start", agents=self.corral.agents().names,
                         values={})

    # -- changes (POST) --------------------------------------------------------------------

    async def start(self, request: Request) -> Response:
        form = await self.form(request)
        if form is None:
            return self.refused()
        values = {key: str(form.get(key) or "") for key in
                  ("agent", "prompt", "n", "check", "scripts", "model", "mode")}
        scripts = tuple(line.strip() for line in values["scripts"].splitlines() if line.strip())
        try:
            n = int(values["n"] or "1")
        except ValueError:
            n = 0
        problem = ("the prompt is empty" if not values["prompt"].strip() else
                   "N is a number from 1 to 64" if not 1 <= n <= 64 else None)
        if problem is None:
            n = len(scripts) if n == 1 and len(scripts) > 1 else n
            started = await _threaded(self.starts.start, StartRequest(
                prompt=values["prompt"], agent=values["agent"] or None, n=n,
                check=values["check"].strip() or None, scripts=scripts,
                model=values["model"].strip() or None, mode=values["mode"] or "worktree"))
            if started.error is None and started.ident is not None:
                where = "runs" if started.kind == "run" else "fanouts"
                return RedirectResponse(f"{self.base}/{where}/{started.ident}", 303)
            error = started.error or {"message": "it did not start in time"}
        else:
            error = {"code": "usage_error", "message": problem}
        return self.page("start.html", 400, tab="start", agents=self.corral.agents().names,
                         values=values, error=error)

    def _apply(self, run_id: str, form: FormData) -> tuple[Any, PatchPlan | None,
                                                            dict[str, Any] | None]:
        """Apply (or check, or branch) run ``run_id`` as the form says, as ``corral apply``
        does: the same validation, the same review list. (report, plan, error)."""
        seen: list[PatchPlan] = []

        def on_plan(record: RunRecord, plan: PatchPlan) -> None:
            seen.append(plan)

        def on(key: str) -> bool:
            return form.get(key) == "on"

        allow = {"allow_symlinks": on("allow_symlinks"), "allow_binary": on("allow_binary"),
                 "allow_git_dirs": on("allow_git_dirs"),
                 "allow_unverified": on("allow_unverified")}
        action = str(form.get("action") or "apply")
        try:
            if action == "branch":
                made = self.corral.branch(run_id, str(form.get("branch") or "").strip(), **allow)
                return made, made.plan, None
            report = self.corral.apply(
                run_id, check_only=action == "check", three_way=on("three_way"), yes=on("yes"),
                on_plan=on_plan, allow_symlinks=allow["allow_symlinks"],
                allow_binary=allow["allow_binary"], allow_git_dirs=allow["allow_git_dirs"],
                allow_unverified=allow["allow_unverified"])
            return report, report.plan, None
        except CorralError as exc:
            return None, seen[0] if seen else None, exc.to_dict() | {
                "refused": isinstance(exc, MergeRefused)}

    async def apply(self, request: Request) -> Response:
        form = await self.form(request)
        if form is None:
            return self.refused()
        run_id = request.path_params["run_id"]
        report, plan, error = await _threaded(self._apply, run_id, form)
        return self.page("apply.html", 409 if error else 200, tab="runs", run_id=run_id,
                         action=str(form.get("action") or "apply"), report=report, plan=plan,
                         error=error)

    async def discard(self, request: Request) -> Response:
        form = await self.form(request)
        if form is None:
            return self.refused()
        run_id = request.path_params["run_id"]
        await _threaded(self.corral.discard, run_id)
        return RedirectResponse(f"{self.base}/runs/{run_id}", 303)

    async def pick(self, request: Request) -> Response:
        """Apply one candidate of a fanout, as ``corral apply FANOUT --pick N`` does: the
        siblings whose diffs conflict with it are then ``superseded`` (the apply page lists
        them); the others stay pending (they still apply)."""
        form = await self.form(request)
        if form is None:
            return self.refused()
        fanout_id = request.path_params["fanout_id"]
        try:
            index = int(str(form.get("index")))
            run_id = await _threaded(self.corral.pick, fanout_id, index)
        except (ValueError, CorralError) as exc:
            message = exc.message if isinstance(exc, CorralError) else "no such candidate"
            return self.page("error.html", 400, error={"message": message})
        report, plan, error = await _threaded(self._apply, run_id, form)
        return self.page("apply.html", 409 if error else 200, tab="runs", run_id=run_id,
                         action="apply", report=report, plan=plan, error=error,
                         fanout_id=fanout_id)

    async def discard_fanout(self, request: Request) -> Response:
        form = await self.form(request)
        if form is None:
            return self.refused()
        fanout_id = request.path_params["fanout_id"]
        fanout = await _threaded(self.corral.show_fanout, fanout_id)
        for child in fanout.children:
            if child.run is not None and child.run.state == "pending":
                await _threaded(self.corral.discard, child.run_id)
        return RedirectResponse(f"{self.base}/fanouts/{fanout_id}", 303)


async def _threaded(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a worker thread: the API blocks (runs, applies, git)."""
    return await run_in_threadpool(func, *args)


@dataclass(frozen=True)
class WebApp:
    """The guarded ASGI app, and the runs it started (:meth:`Starts.close` them at the end)."""

    app: Guard
    starts: Starts


def build_app(corral: Corral, token: str, *, port: int) -> WebApp:
    """The app for ``corral`` at ``http://127.0.0.1:PORT/TOKEN/``, guarded."""
    pages = Pages(corral, token)

    async def on_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, CorralError)  # noqa: S101 - registered for CorralError only
        return pages.error(exc)

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{pages.base}/runs", 303)

    routes = [
        Route("/", home),
        Route("/agents", pages.agents),
        Route("/runs", pages.runs),
        Route("/runs/{run_id}", pages.run),
        Route("/runs/{run_id}/journal", pages.journal),
        Route("/runs/{run_id}/apply", pages.apply, methods=["POST"]),
        Route("/runs/{run_id}/discard", pages.discard, methods=["POST"]),
        Route("/fanouts/{fanout_id}", pages.fanout),
        Route("/fanouts/{fanout_id}/live", pages.fanout_live),
        Route("/fanouts/{fanout_id}/pick", pages.pick, methods=["POST"]),
        Route("/fanouts/{fanout_id}/discard", pages.discard_fanout, methods=["POST"]),
        Route("/start", pages.start_form),
        Route("/start", pages.start, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static")),
    ]
    app = Starlette(routes=[Mount(f"/{token}", routes=routes)],
                    exception_handlers={CorralError: on_error})
    return WebApp(Guard(app, token, port=port), pages.starts)
