"""``corral serve`` in a real headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium), against the real app on a real 127.0.0.1 port.

A diagnostic expands and shows its line; a running child's journal grows on screen
(the page is not reloaded: a marker set on it survives); a fanout shows three
candidates with their checks, the "Apply #N" button only on those whose check passed
(the failed one's behind "apply anyway"), and applying one changes the checkout and marks
the others, whose diffs conflict with it, superseded; a child-written ``<script>`` never
runs; a page of another origin that knows the token still cannot apply. With
``CORRAL_SCREENSHOTS=DIR`` the tests save a screenshot of each page there (docs/web.md's,
in docs/screenshots).

Every wait is a bounded poll on what the page shows (``WebDriverWait``), never a sleep.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from payloads import PAYLOADS, make_hostile
from web_support import Served, call, make_project, replay, screenshot, serve

from executor.api import Corral
from tests.timescale import scaled

pytestmark = pytest.mark.requires("chromium")

WAIT = scaled(60)  # seconds: a bound, not an expectation (CI runs the whole suite beside)


def _wait(driver: Any, condition: Any, timeout: float = WAIT) -> Any:
    """Poll ``condition`` until it holds (at most ``timeout`` s); else fail, showing the page."""
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.support.ui import WebDriverWait

    # A live page reloads itself (a fanout while it runs, a run once it ends): an element
    # read just before a reload is stale, one read during it not there yet; poll again.
    wait = WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(
        NoSuchElementException, StaleElementReferenceException))
    try:
        return wait.until(condition)
    except TimeoutException:
        pytest.fail(f"timed out waiting on {driver.current_url}:\n"
                    + str(driver.execute_script("return document.body.innerText"))[:3000])


def _by_css(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css)


def _all_css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    repo = make_project(tmp_path / "repo")
    broken = repo / ".ngn" / "agents" / "broken.md"
    broken.write_text("---\nname: broken\ndescription: uses a tool nobody has\n"
                      "tools: [read_file, no_such_tool]\n---\nDo it.\n", encoding="utf-8")
    corral = Corral(repo, trust_project=True, personal=False, backend="host",
                    state_dir=tmp_path / "state")
    yield from serve(corral)


def test_a_diagnostic_expands_and_shows_its_line(browser: Any, served: Served) -> None:
    browser.get(served.url + "/agents")
    rows = [row.text for row in _all_css(browser, "tr.agent td.name")]
    assert any(row.startswith("patcher") for row in rows)
    group = _by_css(browser, "details.diagnostic-file")
    assert "broken.md" in group.text and "error" in group.text
    marked = _by_css(browser, "details.diagnostic .line.marked")
    assert not marked.is_displayed()  # closed: only the file's summary shows
    _by_css(browser, "details.diagnostic-file > summary").click()
    diagnostic = _by_css(browser, "details.diagnostic > summary")
    _wait(browser, lambda d: diagnostic.is_displayed())
    assert "no_such_tool" in diagnostic.text
    assert not marked.is_displayed()
    diagnostic.click()
    _wait(browser, lambda d: marked.is_displayed())
    assert "tools: [read_file, no_such_tool]" in marked.text
    assert _by_css(marked, ".no").text == "4"  # its line number, in the file as written
    screenshot(browser, "agents")


def _journal(driver: Any) -> str:
    return str(_by_css(driver, "#journal").text)


def test_a_running_childs_journal_grows_on_screen(browser: Any, served: Served,
                                                  tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    wait_for = "while [ ! -e {0} ]; do sleep 0.05; done"
    # The output's words are not in the command as written (shown in the journal too).
    command = "; ".join(["echo fir''st-line", wait_for.format(gates / "one"),
                         "echo sec''ond-line", wait_for.format(gates / "two"),
                         "echo la''st-line"])
    script = replay(tmp_path, "slow", call("shell", command=command),
                    call("write_file", path="src/app.py",
                         content="def main():\n    return 2  # the child's\n"),
                    {"text": "changed main"})
    browser.get(served.url + "/start")
    screenshot(browser, "start")
    from selenium.webdriver.support.ui import Select

    Select(_by_css(browser, "select[name=agent]")).select_by_value("patcher")
    _by_css(browser, "textarea[name=prompt]").send_keys("change main, slowly")
    _by_css(browser, "form.start details > summary").click()
    _by_css(browser, "textarea[name=scripts]").send_keys(script)
    _by_css(browser, "form.start button[type=submit]").click()

    _wait(browser, lambda d: "first-line" in _journal(d))
    assert "/runs/" in browser.current_url
    assert _by_css(browser, "#run-status").text == "running"
    assert _by_css(browser, "html").get_attribute("data-live") == "on"
    browser.execute_script("window.__same_page = 'yes';")
    assert "second-line" not in _journal(browser)
    screenshot(browser, "run-live")
    (gates / "one").touch()
    _wait(browser, lambda d: "second-line" in _journal(d))
    # It grew on the page as it was: no reload (the marker would be gone).
    assert browser.execute_script("return window.__same_page") == "yes"
    (gates / "two").touch()
    _wait(browser, lambda d: _by_css(d, "#run-status").text == "completed")
    assert "last-line" in _journal(browser)
    added = [line.text for line in _all_css(browser, "pre.diff .dl.add")]
    assert "+    return 2  # the child's" in added
    assert _all_css(browser, "pre.diff .dl.add .tok-k")  # coloured as Python: `return`
    screenshot(browser, "run")


def test_a_fanout_shows_three_candidates_and_applying_one_marks_the_others(
        browser: Any, served: Served, tmp_path: Path) -> None:
    scripts = [replay(tmp_path, f"c{i}", call("write_file", path="NOTES.md", content=text),
                      {"text": f"candidate {i}"})
               for i, text in enumerate(["# Notes\n\ngood: one\n", "# Notes\n\nbad\n",
                                         "# Notes\n\ngood: three\n"], 1)]
    browser.get(served.url + "/start")
    from selenium.webdriver.support.ui import Select

    Select(_by_css(browser, "select[name=agent]")).select_by_value("patcher")
    _by_css(browser, "textarea[name=prompt]").send_keys("write the notes")
    n = _by_css(browser, "input[name=n]")
    n.clear()
    n.send_keys("3")
    _by_css(browser, "input[name=check]").send_keys("grep -q good NOTES.md")
    _by_css(browser, "form.start details > summary").click()
    _by_css(browser, "textarea[name=scripts]").send_keys("\n".join(scripts))
    _by_css(browser, "form.start button[type=submit]").click()

    _wait(browser, lambda d: "/fanouts/" in d.current_url
          and _by_css(d, "#fanout-status").text == "completed")
    candidates = _all_css(browser, "section.candidate")
    assert len(candidates) == 3
    checks = [_by_css(browser, f"#candidate-{i} .check") for i in (1, 2, 3)]
    assert [c.get_attribute("class").split()[-1] for c in checks] == [
        "passed", "failed", "passed"]
    assert "failed (exit 1)" in checks[1].text
    assert "conflict: NOTES.md" in _by_css(browser, "table.matrix").text
    # The green button only where the check passed; the failed one's behind a disclosure.
    shown = [b.text for b in _all_css(browser, "button.pick") if b.is_displayed()]
    assert shown == ["Apply #1", "Apply #3"]
    assert [e.text for e in _all_css(browser, "#candidate-1 .badge.best")] == ["best"]
    anyway = _by_css(browser, "#candidate-2 details.apply-anyway")
    assert "its check failed (exit 1)" in anyway.text
    hidden = _by_css(browser, "#candidate-2 button.pick")
    assert not hidden.is_displayed() and "primary" not in hidden.get_attribute("class")
    screenshot(browser, "fanout")
    _by_css(browser, "#candidate-2 details.apply-anyway > summary").click()
    _wait(browser, lambda d: hidden.is_displayed())
    assert hidden.text == "Apply #2 anyway"

    _by_css(browser, "#candidate-3 button.pick").click()
    _wait(browser, lambda d: _all_css(d, "#outcome"))
    assert _by_css(browser, "#outcome").text.startswith("Applied 1 file(s).")
    assert len(_all_css(browser, "#superseded code")) == 2
    screenshot(browser, "apply")
    assert (served.corral.root / "NOTES.md").read_text() == "# Notes\n\ngood: three\n"
    fanout = served.corral.show_fanout(served.corral.runs().fanouts[0].fanout_id)
    assert [c.run.state for c in fanout.children if c.run] == [
        "superseded", "superseded", "applied"]

    browser.get(served.url + f"/fanouts/{fanout.fanout_id}")
    classes = [_by_css(browser, f"#candidate-{i}").get_attribute("class") for i in (1, 2, 3)]
    assert classes == ["candidate superseded", "candidate superseded", "candidate chosen"]
    # Nothing left to apply but by choice: no button shows until "apply anyway" opens.
    assert not [b for b in _all_css(browser, "button.pick") if b.is_displayed()]
    assert "superseded by #3 (applied)" in _by_css(browser, "#candidate-1").text
    screenshot(browser, "fanout-applied")
    browser.get(served.url + "/runs")
    assert len(_all_css(browser, "tr.run")) == 3
    screenshot(browser, "runs")
    browser.get(served.url + "/runs?state=applied")
    assert len(_all_css(browser, "tr.run")) == 1


def test_a_child_written_script_never_runs(browser: Any, served: Served,
                                           tmp_path: Path) -> None:
    carried = make_hostile(served.corral.root, tmp_path, served.corral)
    pages = ["/agents", "/runs"]
    for item in carried.values():
        pages += [f"/runs/{item.run_id}", f"/fanouts/{item.fanout.fanout_id}"]
    for page in pages:
        browser.get(served.url + page)
        _wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")
        assert browser.execute_script("return typeof window.__pwned") == "undefined", page
        assert not _all_css(browser, "main script, main img, main b, main a[href^=javascript]")
    browser.get(served.url + f"/runs/{carried['script'].run_id}")
    text = _by_css(browser, "main").text
    assert PAYLOADS["script"] + " [final_text]" in text  # shown, as text
    assert "\\u202e" not in text  # (the script payload has none)
    browser.get(served.url + f"/runs/{carried['bidi'].run_id}")
    assert "safe\\u202etxt.exe\\u2066" in _by_css(browser, "main").text


def test_a_page_of_another_origin_cannot_apply_even_with_the_token(
        browser: Any, served: Served, tmp_path: Path) -> None:
    """A local page on another port (another origin) that even knows the token posts the
    apply form: the browser sends its Origin, the app refuses, nothing changes."""
    script = replay(tmp_path, "w", call("write_file", path="out.txt", content="x\n"),
                    {"text": "ok"})
    run_id = served.corral.run("write", agent="patcher", script=script).run_id
    attack = (f'<form method="post" action="{served.url}/runs/{run_id}/apply">'
              f'<input name="token" value="{served.token}"><input name="yes" value="on">'
              '<button name="action" value="apply">go</button></form>'
              "<script>document.forms[0].submit()</script>")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text(attack, encoding="utf-8")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path / "site"), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=evil.serve_forever, daemon=True)
    thread.start()
    try:
        browser.get(f"http://127.0.0.1:{evil.server_address[1]}/index.html")
        _wait(browser, lambda d: served.url.split("/")[2] in d.current_url)
        _wait(browser, lambda d: "another origin" in _by_css(d, "body").text)
    finally:
        evil.shutdown()
        thread.join(scaled(30))
        evil.server_close()
    assert not (served.corral.root / "out.txt").exists()
    assert served.corral.show(run_id).state == "pending"


def test_every_page_reads_with_javascript_off(browser_without_js: Any, served: Served,
                                              tmp_path: Path) -> None:
    driver = browser_without_js
    script = replay(tmp_path, "w", call("shell", command="echo from-the-child"),
                    call("write_file", path="out.txt", content="x\n"), {"text": "ok"})
    result = served.corral.fanout("write", agents=["patcher"], scripts=[script], n=2,
                                  check="test -f out.txt")
    run_id = result.children[0].run_id
    driver.get(served.url + f"/runs/{run_id}")
    # JavaScript is really off: live.js, which marks the page, did not run.
    assert _by_css(driver, "html").get_attribute("data-live") is None
    assert "from-the-child" in _journal(driver)
    assert [line.text for line in _all_css(driver, "pre.diff .dl.add")] == ["+x"]
    driver.get(served.url + f"/fanouts/{result.fanout_id}")
    assert len(_all_css(driver, "section.candidate .check.passed")) == 2
    driver.get(served.url + "/agents")
    _by_css(driver, "details.diagnostic-file > summary").click()  # <details>: no script
    _by_css(driver, "details.diagnostic > summary").click()
    assert _by_css(driver, "details.diagnostic .line.marked").is_displayed()


def test_a_running_fanouts_candidates_update_on_screen(browser: Any, served: Served,
                                                      tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    scripts = [replay(tmp_path, f"c{i}",
                      call("shell", command=f"while [ ! -e {gates / str(i)} ]; do sleep 0.05; "
                           f"done; echo {i} > n.txt"), {"text": f"candidate {i}"})
               for i in (1, 2)]
    browser.get(served.url + "/start")
    from selenium.webdriver.support.ui import Select

    Select(_by_css(browser, "select[name=agent]")).select_by_value("patcher")
    _by_css(browser, "textarea[name=prompt]").send_keys("wait, then write")
    _by_css(browser, "input[name=check]").send_keys("test -f n.txt")
    _by_css(browser, "form.start details > summary").click()
    _by_css(browser, "textarea[name=scripts]").send_keys("\n".join(scripts))
    _by_css(browser, "form.start button[type=submit]").click()

    def status(driver: Any, index: int) -> str:
        return str(_by_css(driver, f"#candidate-{index} .status").text)

    _wait(browser, lambda d: "/fanouts/" in d.current_url
          and status(d, 1) == status(d, 2) == "running")
    assert _by_css(browser, "#fanout-status").text == "running"
    browser.execute_script("window.__same_page = 'yes';")
    (gates / "1").touch()
    _wait(browser, lambda d: status(d, 1) == "completed")
    assert "passed" in _by_css(browser, "#candidate-1 .check").get_attribute("class")
    assert status(browser, 2) == "running"
    assert browser.execute_script("return window.__same_page") == "yes"  # updated in place
    screenshot(browser, "fanout-live")
    (gates / "2").touch()
    _wait(browser, lambda d: _by_css(d, "#fanout-status").text == "completed")
    assert len(_all_css(browser, "section.candidate .check.passed")) == 2
