"""A failed setup names its cause (issue 29, item 5): real setups that fail each way.

Setup that needs the network it was not granted (a real ``pip download`` from
PyPI, Python's urllib to a registry) fails with the hint that grants it; a
command the sandbox's system lacks is named, with exit 127; a setup that
allocates past ``--memory`` is out of memory, with the cap. The cause is in the
error (exit 5, ``cause`` in its context, ``--json`` too), the setup log, and
``corral env show``. Through the CLI, on real sandboxes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from exec_support import cli_main, git, invoke, write_config

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

NEEDS_NETWORK = ("setup needs the network: grant `setup_network = true` in your config's "
                 "[environment] or pass --setup-network")


corral = invoke


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / "requirements.txt").write_text("pytest\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lock file")
    return repo


def failed_build(capsys: pytest.CaptureFixture[str], repo: Path, backend: str,
                 *extra: str) -> tuple[dict[str, Any], str]:
    """``corral env build`` that fails: the error's JSON, and the failed environment as
    ``corral env show KEY`` prints it."""
    code, out, err = cli_main(capsys, "env", "build", "--root", str(repo), "--backend", backend,
                              "--json", *extra)
    assert code == 5, (code, out, err)
    error = dict(json.loads(out or err)["error"])
    assert error["code"] == "environment_setup_failed", error
    key = error["context"]["environment"]
    code, shown, err = corral("env", "show", key)
    assert code == 0, err
    return error, shown


def shown_json(key: str) -> dict[str, Any]:
    code, out, err = corral("env", "show", key, "--json")
    assert code == 0, err
    return dict(json.loads(out))


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(300)
def test_pip_without_the_network_says_to_grant_it(
        project: Path, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A real ``pip download`` from PyPI in a setup that was not granted network."""
    write_config('[environment]\nsetup = ["python3 -m venv .venv", ".venv/bin/pip download '
                 '--disable-pip-version-check --retries 1 --timeout 5 --no-deps -d dl '
                 '-r requirements.txt"]\ninputs = ["requirements.txt"]\n')
    error, shown = failed_build(capsys, project, backend)
    assert error["context"]["cause"] == "no_network"
    assert "setup has no network" in error["message"]
    assert error["hint"].startswith(NEEDS_NETWORK)
    assert "fix the setup or its inputs" not in error["hint"]
    assert "cause: no_network" in shown and NEEDS_NETWORK in shown
    assert "name resolution" in shown or "Network is unreachable" in shown  # the log says so
    info = shown_json(error["context"]["environment"])
    assert info["status"] == "failed" and info["cause"] == "no_network"


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_urllib_and_pip_with_no_retries_without_the_network(
        project: Path, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Python's urllib to a registry host; pip with ``--retries 0``, which prints only
    ``(from versions: none)``: both are the network that was not granted."""
    write_config('[environment]\nsetup = ["python3 -c \'import urllib.request; '
                 'urllib.request.urlopen(\\"https://registry.npmjs.org/\\", timeout=10)\'"]\n')
    code, _, err = cli_main(capsys, "env", "build", "--root", str(project), "--backend",
                            backend)
    assert code == 5 and "setup has no network" in err and "cause: no_network" in err, err
    assert f"hint: {NEEDS_NETWORK}" in err  # the CLI's message says it as the JSON does
    write_config('[environment]\nsetup = ["python3 -m venv .venv && .venv/bin/pip download '
                 '--disable-pip-version-check --retries 0 --no-deps -d dl pytest"]\n')
    error, _ = failed_build(capsys, project, backend)
    assert error["context"]["cause"] == "no_network", error


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_command_setup_lacks_is_named(
        project: Path, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    write_config('[environment]\nsetup = ["echo first", "no-such-tool --x"]\n')
    error, shown = failed_build(capsys, project, backend)
    assert error["context"]["cause"] == "command_not_found"
    assert error["context"]["command"] == "no-such-tool"
    assert "`no-such-tool --x` exited 127" in error["message"]
    assert "a command of setup was not found: no-such-tool" in error["hint"]
    assert ("corral-sandbox" in error["hint"]) == (backend == "docker")  # the image lacks it
    assert "cause: command_not_found" in shown


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_setup_past_the_memory_cap_is_out_of_memory(
        project: Path, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A real allocation (256 MiB, written) past ``--memory 64M``: the memory cgroup kills
    it, and the cause says so with the cap; the sandbox and this process go on."""
    write_config('[environment]\nsetup = ["python3 -c \'data = bytes(1) * (256 << 20); '
                 'print(len(data))\'"]\n')
    error, shown = failed_build(capsys, project, backend, "--memory", "64M")
    assert error["context"]["cause"] == "out_of_memory", error
    assert "the cap is 64 MiB" in error["message"]
    assert "raise [sandbox] memory" in error["hint"] and "--memory" in error["hint"]
    assert "cause: out_of_memory" in shown
    write_config('[environment]\nsetup = ["python3 -c \'data = bytes(1) * (16 << 20)\'"]\n')
    code, _, err = corral("env", "build", "--root", str(project), "--backend", backend,
                          "--memory", "64M")
    assert code == 0, err  # under the cap it builds


def test_a_plain_failure_keeps_its_plain_hint(project: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    write_config('[environment]\nsetup = ["echo about to fail", "exit 3"]\n')
    error, shown = failed_build(capsys, project, "host")
    assert error["context"]["cause"] == "command_failed"
    assert "`exit 3` exited 3" in error["message"] and "fix the setup" in error["hint"]
    assert "cause: command_failed" in shown and "about to fail" in shown
