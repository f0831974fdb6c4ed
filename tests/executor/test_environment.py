"""The project's environment under every child: checked candidates on real projects (issue 17).

Real projects, real registries (PyPI, npm: setup is granted network and uses
it), real sandboxes: a Python project whose setup makes a venv and installs its
test dependency; the same with a venv built on the host and carried in; a Node
project with ``npm ci``; a devcontainer with its own Dockerfile; corral's own
checkout. Each fanout has one correct and two wrong scripted candidates, and
the check must say passed, failed, failed. Attacks: setup has network only
when you grant it, a child never; a repository cannot grant itself network; a
secret reaches setup only; a child cannot write a carried venv.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exec_support import agent_file, call, git, invoke, script, write_config

from tests.backends import host_ipv4_addresses
from tests.timescale import scaled

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

CALC_WRONG = "def add(a, b):\n    return a - b\n"
CALC_RIGHT = "def add(a, b):\n    return a + b\n"
PY_CHECK = ".venv/bin/python -m pytest -q -p no:cacheprovider"


corral = invoke


def agents(tmp_path: Path, tools: str = "[write_file, read_file, shell]") -> str:
    """An ngn config importing agent ``w`` from outside every repository (so a test needs
    --trust-project only for the repository's environment, never for its agent)."""
    home = tmp_path / "defs"
    agent_file(home, "w", f"tools: {tools}")
    path = tmp_path / "ngn.json"
    path.write_text(json.dumps({"agent_imports": [
        {"format": "native", "path": str(home / ".ngn" / "agents" / "w.md")}]}))
    return str(path)


def ngn_config(repo: Path) -> str:
    """The ngn config :func:`agents` wrote next to ``repo``."""
    return str(repo.parent / "ngn.json")


def run_in(repo: Path, backend: str, *args: str) -> tuple[int, str, str]:
    """``corral run`` on ``repo`` with the imported agent."""
    return corral("run", "--root", str(repo), "--no-personal", "--config", ngn_config(repo),
                  "--backend", backend, *args)


def audit_of(repo: Path, out: str) -> str:
    """Every tool call of the run ``corral run --json`` printed ``out`` for, as text."""
    run_id = json.loads(out)["run_id"]
    code, shown, err = corral("show", run_id, "--root", str(repo), "--json")
    assert code == 0, err
    return json.dumps(json.loads(shown)["audit"])


def candidates(tmp_path: Path, path: str, right: str, wrong: str) -> list[str]:
    """One correct candidate and two wrong ones (one of them changes nothing)."""
    return [
        script(tmp_path, "right", call("write_file", path=path, content=right),
               {"text": "fixed"}),
        script(tmp_path, "wrong", call("write_file", path=path, content=wrong),
               {"text": "fixed?"}),
        script(tmp_path, "idle", {"text": "nothing to do"}),
    ]


def fanout(repo: Path, backend: str, scripts: list[str], check: str,
           *extra: str) -> tuple[int, dict[str, Any], str]:
    config = str(repo.parent / "ngn.json")
    args = ["fanout", "--root", str(repo), "--no-personal", "--config", config, "--backend",
            backend, "--json",
            "--agent", "w", "--check-cmd", check, "--check-timeout", "300", *extra]
    for path in scripts:
        args += ["--script", path]
    code, out, err = corral(*args, "Fix the bug")
    assert out, err
    return code, json.loads(out), err


def verdicts(result: dict[str, Any]) -> list[str]:
    return ["passed" if r["check"]["exit_code"] == 0 else "failed" for r in result["runs"]]


def environments() -> list[dict[str, Any]]:
    code, out, err = corral("env", "show", "--json")
    assert code == 0, err
    return list(json.loads(out)["environments"])


def tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(path)):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]):
            item = Path(dirpath) / name
            info = item.lstat()
            digest.update(f"{item.relative_to(path)} {info.st_mode} {info.st_size} "
                          f"{info.st_mtime_ns}\n".encode())
            if item.is_file() and not item.is_symlink():
                digest.update(item.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def pyproject(repo: Path) -> Path:
    """A Python project whose test needs pytest (a test dependency, not in the checkout)."""
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\n')
    (repo / "calc.py").write_text(CALC_WRONG)
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n.pytest_cache/\n")
    agents(repo.parent)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


SETUP = """
[environment]
setup = ["python3 -m venv .venv", ".venv/bin/pip install -q --disable-pip-version-check pytest"]
inputs = ["pyproject.toml"]
setup_network = true
"""


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(900)
def test_setup_makes_candidates_checkable_once_for_the_whole_fanout(
        pyproject: Path, tmp_path: Path, backend: str) -> None:
    """Without an environment every check fails (no pytest): with one, the check tells the
    right candidate from the wrong ones; setup ran once for three children, and a second
    fanout reuses it."""
    scripts = candidates(tmp_path, "calc.py", CALC_RIGHT, CALC_WRONG)
    _, bare, _ = fanout(pyproject, backend, scripts, PY_CHECK)
    assert verdicts(bare) == ["failed"] * 3  # no environment: nothing can be checked
    write_config(SETUP)
    _, result, err = fanout(pyproject, backend, scripts, PY_CHECK)
    assert verdicts(result) == ["passed", "failed", "failed"], err
    [env] = environments()
    assert env["status"] == "ready" and env["backend"] == backend
    log = Path(env["log"]).read_text()
    assert log.count("$ .venv/bin/pip install") == 1  # one setup for three children
    _, again, err = fanout(pyproject, backend, scripts, PY_CHECK)
    assert verdicts(again) == ["passed", "failed", "failed"], err
    [reused] = environments()
    assert reused["key"] == env["key"] and reused["created_at"] == env["created_at"]
    assert Path(env["log"]).read_text() == log  # not built again
    _code, shown, _ = corral("show", again["runs"][0]["run_id"], "--root", str(pyproject),
                            "--json")
    assert json.loads(shown)["environment"] == env["key"]
    assert not (pyproject / ".venv").exists()  # your checkout never got the environment


@pytest.fixture
def host_venv(pyproject: Path) -> Path:
    """A venv built on the host, with the system Python both backends also have."""
    venv = pyproject / ".venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                    "--disable-pip-version-check", "pytest"], check=True, timeout=scaled(300))
    return venv


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(600)
def test_a_carried_venv_checks_candidates_and_stays_untouched(
        host_venv: Path, pyproject: Path, tmp_path: Path, backend: str) -> None:
    """carry = [".venv"]: the host's own venv, read-only in every child at its place and at
    its original path (its scripts name their interpreter by absolute path); a child that
    writes into it changes nothing of yours."""
    write_config('[environment]\ncarry = [".venv"]\n')
    before = tree_digest(host_venv)
    scripts = candidates(tmp_path, "calc.py", CALC_RIGHT, CALC_WRONG)
    _, result, err = fanout(pyproject, backend, scripts,
                            PY_CHECK + " && .venv/bin/pytest -q -p no:cacheprovider")
    assert verdicts(result) == ["passed", "failed", "failed"], err
    vandal = script(tmp_path, "vandal", call("shell", command=(
        "echo x > .venv/pwned; rm -rf .venv/lib; echo y >> .venv/pyvenv.cfg; "
        f"echo z > {host_venv}/pwned2; ls .venv/lib >/dev/null && echo intact")),
        {"text": "done"})
    _code, out, err = run_in(pyproject, backend, "--agent", "w", "--script", vandal, "--json", "go")
    record = json.loads(out)
    assert record["status"] == "completed", err
    assert "intact" in audit_of(pyproject, out)  # it read the venv, and could not change it
    assert tree_digest(host_venv) == before


NODE_TEST = """const test = require('node:test');
const assert = require('node:assert');
const isNumber = require('is-number');
const { add } = require('./calc');

test('add', () => {
  assert.ok(isNumber(add(2, 3)));
  assert.strictEqual(add(2, 3), 5);
});
"""


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_a_node_project_with_npm_ci(repo: Path, tmp_path: Path) -> None:
    """setup = ["npm ci"] (from the lock file, with network), check = "npm test"."""
    from tests.backends import require_backend

    require_backend("docker")
    (repo / "package.json").write_text(json.dumps({
        "name": "demo", "version": "1.0.0", "private": True,
        "scripts": {"test": "node --test"}, "devDependencies": {"is-number": "7.0.0"}},
        indent=2) + "\n")
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed on the host to write the lock file"
    subprocess.run([npm, "install", "--package-lock-only", "--no-audit", "--no-fund"],
                   cwd=repo, check=True, timeout=scaled(300), capture_output=True)
    (repo / "calc.js").write_text("exports.add = (a, b) => a - b;\n")
    (repo / "calc.test.js").write_text(NODE_TEST)
    (repo / ".gitignore").write_text("node_modules/\n")
    agents(repo.parent)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "node project")
    write_config('[environment]\nsetup = ["npm ci --no-audit --no-fund"]\n'
                 'inputs = ["package-lock.json"]\nsetup_network = true\n')
    scripts = candidates(tmp_path, "calc.js", "exports.add = (a, b) => a + b;\n",
                         "exports.add = (a, b) => a * b;\n")
    _, result, err = fanout(repo, "docker", scripts, "npm test")
    assert verdicts(result) == ["passed", "failed", "failed"], err
    assert not (repo / "node_modules").exists()


DEVCONTAINER = """{
  // a devcontainer, as many repositories have one (JSONC)
  "name": "demo",
  "build": { "dockerfile": "Dockerfile", "context": "." },
  "containerEnv": { "DEV_FLAG": "yes" },
  "postCreateCommand": "echo created > .created",
  "initializeCommand": "touch /tmp/ran-on-your-machine",
  "forwardPorts": [8000],
}
"""


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_a_devcontainer_runs_its_children_in_its_image_with_its_setup(
        repo: Path, tmp_path: Path) -> None:
    """Under --trust-project a repository's .devcontainer (its Dockerfile, its
    postCreateCommand, its containerEnv) is the children's environment; its
    initializeCommand (which would run on your machine) never runs; without
    --trust-project it is not read at all."""
    from tests.backends import require_backend

    require_backend("docker")
    dev = repo / ".devcontainer"
    dev.mkdir()
    (dev / "devcontainer.json").write_text(DEVCONTAINER)
    (dev / "Dockerfile").write_text(
        "FROM corral-sandbox:latest\nUSER root\nRUN echo devcontainer > /opt/devmarker\n"
        "USER corral\n")
    (repo / ".gitignore").write_text(".created\n")
    agents(repo.parent)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "devcontainer")
    check = ('test "$(cat /opt/devmarker)" = devcontainer && test -f .created '
             '&& test "$DEV_FLAG" = yes')
    scripts = [script(tmp_path, "idle", {"text": "ok"})]
    _, trusted, err = fanout(repo, "docker", scripts, check, "--trust-project", "-n", "1")
    assert verdicts(trusted) == ["passed"], err
    assert "initializeCommand" in err and "never honoured" in err
    assert not Path("/tmp/ran-on-your-machine").exists()
    _, untrusted, _ = fanout(repo, "docker", scripts, check, "-n", "1")
    assert verdicts(untrusted) == ["failed"]


@pytest.mark.bubblewrap
@pytest.mark.timeout(900)
def test_corrals_own_checkout_passes_a_slice_of_its_own_suite(tmp_path: Path) -> None:
    """corral's own checkout, its own venv carried in (its interpreter's installation
    outside /usr given as a read-only path): an unchanged candidate passes a slice of
    corral's own test suite as its check."""
    from tests.backends import require_backend

    require_backend("bubblewrap")
    here = Path(__file__).resolve().parents[2]
    venv = here / ".venv"
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"corral's checkout has no .venv at {venv}")
    base = Path(sys.base_prefix)
    ro = [] if base.is_relative_to("/usr") else [str(base)]
    write_config(f'[environment]\ncarry = [".venv"]\nro_paths = {json.dumps(ro)}\n')
    agent_file(tmp_path, "w", "tools: [read_file]")  # a definition outside the checkout
    _code, out, err = corral(
        "fanout", "--root", str(here), "--no-personal", "--backend", "bubblewrap", "--json",
        "--config", agents(tmp_path, "[read_file]"), "--agent", "w", "-n", "1", "--script",
        script(tmp_path, "idle", {"text": "nothing to change"}), "--check-cmd",
        ".venv/bin/python -m pytest -q -p no:cacheprovider tests/test_capability.py "
        "tests/test_loader_names.py", "--check-timeout", "600", "look")
    result = json.loads(out)
    [row] = result["runs"]
    assert row["check"]["exit_code"] == 0, (row["check"]["output_tail"], err)
    assert " passed" in row["check"]["output_tail"]


class Listener:
    """A TCP listener on the host (its loopback by default) that records who connected."""

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.address = address
        self.sock = socket.socket()
        self.sock.bind((address, 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        #: What accept raised other than the close (an aborted connection is still a hit:
        #: the kernel completed it, so whoever connected reached the host's loopback).
        self.errors: list[str] = []
        self.closed = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except ConnectionAbortedError as exc:
                self.hits += 1
                self.errors.append(repr(exc))
                continue
            except OSError as exc:
                if not self.closed:
                    self.errors.append(repr(exc))
                return
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


@pytest.fixture
def outside() -> Iterator[Listener]:
    """A listener on this machine's own non-loopback address: what a network reaches."""
    address = next((a for name, a in host_ipv4_addresses().items()
                    if not a.startswith("127.") and not name.startswith("docker")), None)
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to listen on")
    found = Listener(address)
    yield found
    found.close()


def _reach(port: int, address: str = "127.0.0.1") -> str:
    return (f"python3 -c \"import socket; s = socket.socket(); s.settimeout(3); "
            f"print('reached' if s.connect_ex(('{address}', {port})) == 0 else 'no network')\"")


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(600)
def test_setup_has_network_only_when_granted_and_a_child_never(
        pyproject: Path, tmp_path: Path, backend: str, listener: Listener,
        outside: Listener) -> None:
    """Setup reaches the network only with setup_network; a child of that very environment
    (and a repository that asks for network itself) never does. The granted network is a
    namespace of its own (slirp4netns, on bubblewrap's supervisor and on the docker
    container): this machine's address is reached as any host is, its loopback (``corral
    serve``, an MCP server, a Ray head) never."""
    # The host's loopback as itself, as slirp4netns's gateway would map it, and from outside.
    probe = (f"{_reach(listener.port)}; {_reach(listener.port, '10.0.2.2')}; "
             f"{_reach(outside.port, outside.address)}")
    (pyproject / ".corral").mkdir()
    (pyproject / ".corral" / "environment.toml").write_text(
        f'setup = ["{{ {probe.replace(chr(34), chr(92) + chr(34))}; }} > net.txt"]\n'
        'setup_network = true\n')
    git(pyproject, "add", "-A")
    git(pyproject, "commit", "-qm", "repository environment asking for network")
    child = script(tmp_path, "child", call("shell", command=f"cat net.txt; {probe}"),
                   {"text": "done"})
    _, out, err = run_in(pyproject, backend, "--agent", "w", "--trust-project", "--script", child,
                            "--json", "go")
    assert "cannot grant setup_network" in err  # the repository's own grant is ignored
    text = audit_of(pyproject, out)
    # neither setup (its net.txt) nor the child reached either
    assert "stdout ---\\n" + "no network\\n" * 5 + "no network" in text, text
    assert listener.hits == outside.hits == 0
    # The grant is not part of the key (a setup that worked offline is reused): rebuild.
    assert corral("env", "prune", "--all")[0] == 0
    _code, out, err = run_in(pyproject, backend, "--agent", "w", "--trust-project",
                             "--setup-network", "--script", child, "--json", "go")
    text = audit_of(pyproject, out)
    # setup did (not this machine's loopback); the child did not
    assert ("stdout ---\\nno network\\nno network\\nreached\\n" + "no network\\n" * 2
            + "no network") in text, text
    # The kernel completes a connect before the listener's thread accepts it: under load
    # the count lags the "reached" the setup printed.
    deadline = time.monotonic() + scaled(10)
    while outside.hits < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert outside.hits == 1, (outside.errors, text)
    assert listener.hits == 0, listener.errors


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_secret_reaches_setup_and_no_child(pyproject: Path, tmp_path: Path, backend: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_TOKEN", "s3cret-value")
    write_config('[environment]\nsetup = ["printf %s \\"$DEMO_TOKEN\\" | sha256sum > '
                 'token.sha"]\nsecrets = ["DEMO_TOKEN"]\nenv = { PLAIN = "visible" }\n')
    child = script(tmp_path, "child", call("shell", command="cat token.sha; env | sort"),
                   {"text": "done"})
    _code, out, _err = run_in(pyproject, backend, "--agent", "w", "--script", child, "--json", "go")
    text = audit_of(pyproject, out)
    expected = hashlib.sha256(b"s3cret-value").hexdigest()
    assert expected in text  # setup saw it
    assert "s3cret-value" not in text and "DEMO_TOKEN" not in text  # the child did not
    assert "PLAIN=visible" in text


def test_a_failed_setup_is_its_own_error_with_its_log(pyproject: Path, tmp_path: Path) -> None:
    """A setup that fails exits 5, names its log, creates no run record, and `corral env
    show` has it; nothing is blamed on a child."""
    write_config('[environment]\nsetup = ["echo about to fail", "exit 3"]\n')
    child = script(tmp_path, "child", {"text": "never runs"})
    done = subprocess.run([sys.executable, "-m", "executor", "run", "--root", str(pyproject),
                           "--no-personal", "--config", ngn_config(pyproject), "--backend", "host",
                           "--agent", "w", "--script",
                           child, "go"], capture_output=True, text=True, timeout=scaled(300),
                          check=False)
    assert done.returncode == 5, done.stderr
    assert "environment's setup failed: `exit 3` exited 3" in done.stderr
    assert "setup.log" in done.stderr
    code, out, _ = corral("runs", "--root", str(pyproject), "--json")
    assert json.loads(out) == []
    [env] = environments()
    assert env["status"] == "failed" and "about to fail" in Path(env["log"]).read_text()
    code, shown, _ = corral("env", "show", env["key"][:6])
    assert code == 0 and "failed" in shown and "about to fail" in shown
    code, _, _ = run_in(pyproject, "host", "--agent", "w", "--script", child, "--no-env", "go")
    assert code == 0  # --no-env runs without it


def test_env_build_show_prune_and_gc(pyproject: Path) -> None:
    write_config('[environment]\nsetup = ["echo built > built.txt"]\nprune_after_days = 1\n')
    code, out, err = corral("env", "build", "--root", str(pyproject), "--backend", "host",
                            "--json")
    assert code == 0, err
    built = json.loads(out)
    assert built["status"] == "ready" and (Path(built["directory"]) / "layer" /
                                          "built.txt").read_text() == "built\n"
    code, out, _ = corral("env", "show")
    assert built["key"] in out and "ready" in out
    code, out, _ = corral("gc")
    assert built["key"] not in out  # used just now: kept
    info_file = Path(built["directory"]) / "env.json"
    data = json.loads(info_file.read_text())
    info_file.write_text(json.dumps(data | {"last_used": time.time() - 3 * 86400}))
    code, out, _ = corral("gc")
    assert f"env removed    {built['key']}" in out
    assert not Path(built["directory"]).exists()
    corral("env", "build", "--root", str(pyproject), "--backend", "host")
    code, out, _ = corral("env", "prune", "--all")
    assert code == 0 and "removed" in out and environments() == []


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_the_layer_adds_what_the_snapshot_lacks_and_changes_nothing_of_it(
        pyproject: Path, tmp_path: Path, backend: str) -> None:
    """Setup that rewrites a tracked file and adds an ignored one: every child sees the
    snapshot's file as it is (the layer is under the snapshot: an overlay child, as a
    fanout's; bound only where the worktree lacks a path: a plain run's worktree) and the
    added one; its diff has neither (the layer is the base, not the child's work)."""
    write_config('[environment]\nsetup = ["echo from-setup > calc.py", "mkdir -p .venv && '
                 'echo dep > .venv/marker"]\n')
    child = script(tmp_path, "child", call("shell", command="cat calc.py .venv/marker"),
                   {"text": "done"})
    code, out, err = run_in(pyproject, backend, "--agent", "w", "--script", child, "--json",
                            "go")
    assert code == 0, err
    text = audit_of(pyproject, out)
    assert "return a - b" in text and "from-setup" not in text and "dep" in text
    assert json.loads(out)["diff"] == ""
    _, result, err = fanout(pyproject, backend, [script(tmp_path, "idle", {"text": "ok"})],
                            "cat calc.py .venv/marker", "-n", "1")
    [row] = result["runs"]
    tail = row["check"]["output_tail"]
    assert "return a - b" in tail and "from-setup" not in tail and "dep" in tail, err
