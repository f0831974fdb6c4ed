"""What the ``corral serve`` tests share: a project with agents and replays, the real app
served by uvicorn on a free 127.0.0.1 port in a thread, and headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml

from executor.api import Corral
from executor.api.serving import loopback_socket
from executor.web.app import build_app
from tests.backends import git, require
from tests.timescale import scaled

SCREENSHOTS = "CORRAL_SCREENSHOTS"


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def replay(directory: Path, name: str, *turns: dict[str, Any]) -> str:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(list(turns)), encoding="utf-8")
    return str(path)


def agent_file(repo: Path, name: str, header: str, body: str = "Do the task.",
               description: str | None = None) -> Path:
    path = repo / ".ngn" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = description if description is not None else f"test agent {name}"
    path.write_text(f"---\nname: {name}\ndescription: {json.dumps(text)}\n"
                    f"{header}\n---\n{body}\n", encoding="utf-8")
    return path


def make_project(root: Path) -> Path:
    """A committed repository with one agent that may write files and run commands."""
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Project\n\nhello\n")
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    agent_file(root, "patcher", "tools: [write_file, shell]")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


@dataclass
class Served:
    """The app served for a test: its base URL (token included), token, port, Corral."""

    corral: Corral
    token: str
    port: int

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/{self.token}"


def serve(corral: Corral, token: str = "t0ken-" + "x" * 37) -> Iterator[Served]:
    """``corral``'s app on a free loopback port, in a thread, until the generator closes."""
    sock = loopback_socket(0, operation="serve", option="--port P")
    port = sock.getsockname()[1]
    web = build_app(corral, token, port=port)
    server = uvicorn.Server(uvicorn.Config(web.app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        started = threading.Event()
        for _ in range(600):  # bounded: the server says when it is up
            if server.started or not thread.is_alive():
                break
            started.wait(0.05)
        assert server.started, "uvicorn did not start"
        yield Served(corral, token, port)
    finally:
        server.should_exit = True
        thread.join(scaled(30))
        sock.close()
        assert web.starts.close() == []


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium driven by Selenium (Debian's chromium and chromium-driver)."""
    yield from _chromium(javascript=True)


@pytest.fixture
def browser_without_js() -> Iterator[Any]:
    """The same, with JavaScript turned off."""
    yield from _chromium(javascript=False)


def _chromium(*, javascript: bool) -> Iterator[Any]:
    require("chromium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--disable-gpu"):
        options.add_argument(flag)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(options=options,
                              service=Service(shutil.which("chromedriver") or "chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: Any, name: str) -> None:
    """Save a screenshot of the page as ``$CORRAL_SCREENSHOTS/NAME.png`` when that is set."""
    where = os.environ.get(SCREENSHOTS)
    if not where:
        return
    Path(where).mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(int(height), 700), 2400))
    driver.save_screenshot(str(Path(where) / f"{name}.png"))
    driver.set_window_size(1400, 1000)
