"""A carried venv whose interpreter lives outside ``/usr`` (issue 29, item 3).

pyenv, uv and conda put Python in a prefix of its own (``~/.pyenv/versions/3.11.7``,
``~/.local/share/uv/python/cpython-3.12-...``), and a venv made from it links there: with
``carry = [".venv"]`` and no ``ro_paths``, every check used to fail with 127 (bubblewrap:
the prefix is not in the sandbox) or 126 (docker: ``Permission denied`` on a directory the
container's uid cannot enter). corral now reads ``pyvenv.cfg`` and binds the prefix
read-only; an interpreter the sandbox still cannot run is refused before anything runs.

The interpreter here is built for real outside ``/usr``: this machine's ``python3.11``
and its standard library copied into a prefix of their own (the layout uv and pyenv
make), under a directory only root may enter (as ``/root/.pyenv`` is).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from exec_support import call, git, script

from tests.executor.test_environment import (
    ISOLATING,
    agents,
    candidates,
    corral,
    fanout,
    run_in,
    verdicts,
    write_config,
)
from tests.timescale import scaled

VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
SYSTEM_PYTHON = Path(f"/usr/bin/python{VERSION}")
CALC_WRONG = "def add(a, b):\n    return a - b\n"
CALC_RIGHT = "def add(a, b):\n    return a + b\n"
#: The project's own tests: unittest (no pytest), and a helper only the venv has.
TEST_CALC = ("import unittest\n\nimport demo_helper\nfrom calc import add\n\n\n"
             "class Add(unittest.TestCase):\n    def test_add(self):\n"
             "        self.assertEqual(add(2, 3), demo_helper.FIVE)\n")
CHECK = ".venv/bin/python -m unittest -q test_calc"
_LOADER = b"/lib64/ld-linux-x86-64.so.2"


def make_prefix(base: Path, *, link: bool = False) -> Path:
    """A Python installation outside /usr: ``<prefix>/bin/python3.X`` and
    ``<prefix>/lib/python3.X`` (found by Python from its own location, as uv's and pyenv's
    are), in a directory only root may traverse. ``link``: reached, as uv's are, through a
    minor-version link (``cpython-3.11-...`` -> ``cpython-3.11.2-...``), which is returned."""
    if not SYSTEM_PYTHON.is_file() or not Path("/usr/lib", f"python{VERSION}", "os.py").is_file():
        pytest.skip(f"no system {SYSTEM_PYTHON} with its standard library to copy")
    closed = base / "closed"
    closed.mkdir(mode=0o700)
    asked = "import platform; print(platform.python_version())"
    full = subprocess.run([str(SYSTEM_PYTHON), "-c", asked], capture_output=True, text=True,
                          check=True).stdout.strip()
    prefix = closed / f"cpython-{full}-linux-x86_64-gnu"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(SYSTEM_PYTHON, prefix / "bin" / f"python{VERSION}")
    (prefix / "bin" / "python3").symlink_to(f"python{VERSION}")
    shutil.copytree(f"/usr/lib/python{VERSION}", prefix / "lib" / f"python{VERSION}",
                    symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "test"))
    if not link:
        return prefix
    minor = closed / f"cpython-{VERSION}-linux-x86_64-gnu"
    minor.symlink_to(prefix.name)
    return minor


def make_project(repo: Path, prefix: Path) -> Path:
    """The project, and its venv made by ``<prefix>/bin/python3 -m venv``, with a helper
    module installed in it (the tests import it: they need the venv)."""
    (repo / "calc.py").write_text(CALC_WRONG)
    (repo / "test_calc.py").write_text(TEST_CALC)
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n")
    agents(repo.parent)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    venv = repo / ".venv"
    subprocess.run([str(prefix / "bin" / "python3"), "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=scaled(120))
    site = venv / "lib" / f"python{VERSION}" / "site-packages"
    (site / "demo_helper.py").write_text("FIVE = 5\n")
    return venv


@pytest.fixture(params=["prefix", "uv-link"])
def project(repo: Path, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """(repository, the interpreter's real prefix); its venv is made from the prefix, or
    through uv's minor-version link."""
    named = make_prefix(tmp_path, link=request.param == "uv-link")
    make_project(repo, named)
    return repo, named.resolve()


def test_the_venv_is_really_outside_usr(project: tuple[Path, Path]) -> None:
    """What the other tests stand on: the venv's python is the copied prefix's, and it runs
    the project's tests on the host (right code) with the venv's helper."""
    repo, prefix = project
    cfg = (repo / ".venv" / "pyvenv.cfg").read_text()
    assert "home = " in cfg and not cfg.split("home = ")[1].startswith("/usr")
    assert (repo / ".venv" / "bin" / "python").resolve().is_relative_to(prefix)
    done = subprocess.run([str(repo / ".venv/bin/python"), "-c",
                           "import sys, demo_helper; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True)
    assert Path(done.stdout.strip()).resolve() == prefix


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(600)
def test_a_venv_of_an_interpreter_outside_usr_checks_candidates(
        project: tuple[Path, Path], tmp_path: Path, backend: str) -> None:
    """carry = [".venv"], no ro_paths: the interpreter's prefix is bound read-only, the
    project's own tests tell the right candidate from the wrong ones, and a child cannot
    write the prefix."""
    repo, prefix = project
    write_config('[environment]\ncarry = [".venv"]\n')
    scripts = candidates(tmp_path, "calc.py", CALC_RIGHT, CALC_WRONG)
    _, result, err = fanout(repo, backend, scripts, CHECK)
    assert verdicts(result) == ["passed", "failed", "failed"], (err, result)
    before = sorted(p.name for p in (prefix / "bin").iterdir())
    vandal = script(tmp_path, "vandal", call("shell", command=(
        f"echo x > {prefix}/bin/pwned; rm -f {prefix}/bin/python3; "
        ".venv/bin/python -c 'import sys; print(\"base\", sys.base_prefix)'")),
        {"text": "done"})
    _code, out, err = run_in(repo, backend, "--agent", "w", "--script", vandal, "--json", "go")
    assert json.loads(out)["status"] == "completed", err
    assert sorted(p.name for p in (prefix / "bin").iterdir()) == before


def patched_loader(prefix: Path) -> Path:
    """The prefix's interpreter made to name an ELF loader no machine here has (as a musl
    build names ``/lib/ld-musl-x86_64.so.1``): a program nothing here can run."""
    binary = prefix / "bin" / f"python{VERSION}"
    data = binary.read_bytes()
    if data.count(_LOADER) != 1:
        pytest.skip(f"{binary} does not name {_LOADER.decode()} once")
    missing = b"/lib64/ld-corral-absent.so.2"[:len(_LOADER)].ljust(len(_LOADER), b"2")
    binary.write_bytes(data.replace(_LOADER, missing))
    return binary


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(300)
def test_an_interpreter_the_sandbox_cannot_run_is_refused_before_anything_runs(
        project: tuple[Path, Path], tmp_path: Path, backend: str) -> None:
    """An interpreter bound but not runnable in the sandbox (another libc): the run is
    refused before the child's first step, naming the interpreter, why, and the
    setup-command alternative, instead of 3 checks failing with 126/127."""
    repo, prefix = project
    binary = patched_loader(prefix)
    write_config('[environment]\ncarry = [".venv"]\n')
    marker = tmp_path / "ran"
    child = script(tmp_path, "child", call("shell", command=f"touch {marker}"), {"text": "x"})
    code, out, _ = run_in(repo, backend, "--agent", "w", "--script", child, "--json", "go")
    record = json.loads(out)
    error = record["error"]
    assert code == 3 and record["status"] == "failed" and record["steps"] == 0, (code, out)
    assert error["code"] == "interpreter_unrunnable", error
    said = json.dumps(error)
    assert str(binary) in said and ".venv" in said, said
    assert "ld-corral-absent" in said, said  # why: the ELF loader it names, absent there
    assert "setup = [" in error["hint"], error  # the alternative: a setup command
    assert not marker.exists()


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(300)
def test_pyvenv_cfg_cannot_show_a_child_a_host_directory(
        project: tuple[Path, Path], tmp_path: Path, backend: str) -> None:
    """``pyvenv.cfg`` is a file of the checkout (a repository may carry its venv): what it
    names is bound only when it is a Python installation, and never one holding the
    repository (or your home, or corral's state). A ``base-executable`` naming a directory
    of secrets, and a ``base-prefix`` naming a directory above the repository that looks
    like an installation, bind nothing: the child reads neither, and the run goes on."""
    repo, _prefix = project
    secrets = tmp_path / "secrets"
    (secrets / "bin").mkdir(parents=True)
    (secrets / "token.txt").write_text("s3cret\n")
    (secrets / "bin" / "python3").write_text("#!/bin/sh\n")  # named, and there
    above = repo.parent
    (above / "lib" / f"python{VERSION}").mkdir(parents=True)
    (above / "lib" / f"python{VERSION}" / "os.py").write_text("")
    (above / "token2.txt").write_text("s3cret2\n")
    cfg = repo / ".venv" / "pyvenv.cfg"
    cfg.write_text(cfg.read_text() + f"base-executable = {secrets}/bin/python3\n"
                   f"base-prefix = {above}\n")
    write_config('[environment]\ncarry = [".venv"]\n')
    child = script(tmp_path, "child", call("shell", command=(
        f"cat {secrets}/token.txt || echo unreadable; cat {above}/token2.txt || echo hidden; "
        f"{CHECK} 2>&1 | tail -1")), {"text": "x"})
    code, out, err = run_in(repo, backend, "--agent", "w", "--script", child, "--json", "go")
    assert code == 0, (out, err)
    record = json.loads(out)
    shown = json.dumps(corral("show", record["run_id"], "--root", str(repo), "--json")[1])
    assert "s3cret" not in shown and "unreadable" in shown and "hidden" in shown, shown
    assert "FAILED" in shown  # the venv still runs the project's tests (the code is wrong)


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(600)
def test_a_venv_of_this_machines_own_pyenv_or_uv_python(
        repo: Path, tmp_path: Path, backend: str) -> None:
    """The interpreter these tests run on, where it is outside /usr (pyenv here, under
    ``/root``, which docker's uid 1000 cannot enter: 126 ``Permission denied`` before):
    a venv of it, carried with no ro_paths, checks candidates on both backends."""
    base = Path(sys.base_prefix).resolve()
    if base.is_relative_to("/usr") or not (base / "bin" / f"python{VERSION}").is_file():
        pytest.skip(f"this Python's installation {base} is not a prefix outside /usr")
    make_project(repo, base)
    write_config('[environment]\ncarry = [".venv"]\n')
    scripts = candidates(tmp_path, "calc.py", CALC_RIGHT, CALC_WRONG)
    _, result, err = fanout(repo, backend, scripts, CHECK)
    assert verdicts(result) == ["passed", "failed", "failed"], (err, result)


def conda_env(repo: Path, tmp_path: Path) -> str:
    """A conda env in the repository whose ``bin/python`` is a soft link into conda's
    package cache (``pkgs/python-3.X-h0/``, an installation of its own): the command that
    runs it."""
    package = make_prefix(tmp_path)
    (package / "info").mkdir()
    (package / "info" / "index.json").write_text('{"name": "python"}\n')
    env = repo / "env"
    (env / "conda-meta").mkdir(parents=True)
    (env / "conda-meta" / "history").write_text("")
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(package / "bin" / f"python{VERSION}")
    return "env/bin/python -c 'import json, sys; print(\"conda-ok\", sys.prefix)'"


def linked_package(repo: Path, tmp_path: Path) -> str:
    """``node_modules`` whose package is ``npm link``-ed from outside the repository, its
    ``.bin`` link leading there: the command that runs it."""
    package = tmp_path / "closed-src" / "greet"
    (package / "bin").mkdir(parents=True)
    (tmp_path / "closed-src").chmod(0o700)
    (package / "package.json").write_text('{"name": "greet", "bin": "bin/greet"}\n')
    (package / "bin" / "greet").write_text("#!/bin/sh\necho node-ok\n")
    (package / "bin" / "greet").chmod(0o755)
    modules = repo / "node_modules"
    (modules / ".bin").mkdir(parents=True)
    (modules / "greet").symlink_to(package)
    (modules / ".bin" / "greet").symlink_to("../greet/bin/greet")
    return "node_modules/.bin/greet"


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.parametrize(("carried", "make", "said"), [
    ("env", conda_env, "conda-ok"), ("node_modules", linked_package, "node-ok")])
@pytest.mark.timeout(300)
def test_a_conda_env_and_linked_node_modules_carry_what_they_link_to(
        repo: Path, tmp_path: Path, backend: str, carried: str,
        make: Callable[[Path, Path], str], said: str) -> None:
    """A conda env's soft links into the package cache, and a ``node_modules/.bin`` link to
    a package linked from outside the repository: each installation is bound read-only."""
    (repo / ".gitignore").write_text(f"{carried}/\n")
    agents(repo.parent)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ignore")
    command = make(repo, tmp_path)
    assert said in subprocess.run(["sh", "-c", command], cwd=repo, capture_output=True,
                                  text=True, check=True).stdout
    write_config(f'[environment]\ncarry = ["{carried}"]\n')
    child = script(tmp_path, "child", call("shell", command=command), {"text": "x"})
    code, out, err = run_in(repo, backend, "--agent", "w", "--script", child, "--json", "go")
    assert code == 0, (out, err)
    shown = json.dumps(corral("show", json.loads(out)["run_id"], "--root", str(repo),
                              "--json")[1])
    assert said in shown, shown
