"""``corral serve`` as a user starts it: a real process on 127.0.0.1, the URL it prints."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
from web_support import call, make_project, replay

from executor.api import Corral
from tests.timescale import scaled

REPO = Path(__file__).resolve().parents[2]


def test_serve_prints_a_token_url_on_loopback_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    project = make_project(tmp_path / "repo")
    env = os.environ | {"CORRAL_STATE_DIR": str(tmp_path / "state")}
    with subprocess.Popen(
            [sys.executable, "-m", "executor", "serve", "--root", str(project),
             "--trust-project", "--no-personal", "--port", "0"],
            cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) as process:
        _check(process)


def _check(process: subprocess.Popen[str]) -> None:
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # blocks until it prints (or exits: then "")
        found = re.search(r"http://127\.0\.0\.1:(\d+)/([A-Za-z0-9_-]{40,})/", line)
        assert found, line
        url = found.group(0)
        page = httpx.get(url + "agents", timeout=scaled(60))
        assert page.status_code == 200 and "patcher" in page.text
        assert httpx.get(f"http://127.0.0.1:{found.group(1)}/agents").status_code == 403
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=scaled(60)) == 0
        assert "stopped" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_help_does_not_load_the_web_stack() -> None:
    probe = ("import sys\nfrom executor.cli import main\ntry:\n    main(['--help'])\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in ('starlette', 'jinja2', 'uvicorn', 'pygments', "
             "'executor.web.app') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=scaled(60), check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "serve" in done.stdout


def test_ctrl_c_cancels_the_runs_it_started_and_records_them(tmp_path: Path) -> None:
    """A run started from the page and still going when the server stops ends
    ``cancelled`` with its diff recorded (as Ctrl-C on ``corral run``), never crashed."""
    project = make_project(tmp_path / "repo")
    script = replay(tmp_path, "forever", call("write_file", path="early.txt", content="x\n"),
                    call("shell", command="echo wai''ting; sleep 600"), {"text": "never"})
    env = os.environ | {"CORRAL_STATE_DIR": str(tmp_path / "state")}
    with subprocess.Popen(
            [sys.executable, "-m", "executor", "serve", "--root", str(project),
             "--trust-project", "--no-personal", "--backend", "host"],
            cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        while "http://" not in line and line:  # the host backend's warning comes first
            line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/([A-Za-z0-9_-]+)/", line)
        assert found, line
        url, token = found.group(0), found.group(1)
        origin = url.split("/" + token)[0]
        started = httpx.post(url + "start", headers={"Origin": origin}, timeout=scaled(120), data={
            "token": token, "agent": "patcher", "prompt": "wait", "scripts": script})
        assert started.status_code == 303, started.text
        run_id = started.headers["location"].rsplit("/", 1)[1]
        corral = Corral(project, state_dir=tmp_path / "state")
        for _ in range(int(scaled(1200))):  # bounded: until the command's output is journaled
            if any(e.kind == "output" for e in corral.journal(run_id)):
                break
            threading.Event().wait(0.05)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=scaled(120)) == 0
        assert "stopped" in process.stderr.read()
    shown = corral.show(run_id)
    assert shown.status.value == "cancelled"
    assert "early.txt" in shown.diff
