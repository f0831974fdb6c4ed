"""``corral serve`` as a user starts it: a real process on 127.0.0.1, the URL it prints."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from web_support import make_project

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
        page = httpx.get(url + "agents", timeout=60)
        assert page.status_code == 200 and "patcher" in page.text
        assert httpx.get(f"http://127.0.0.1:{found.group(1)}/agents").status_code == 403
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
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
                          text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "serve" in done.stdout
