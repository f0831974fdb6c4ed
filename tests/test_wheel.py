"""The wheel stands alone: built from the source, installed into a fresh venv, run from a
directory outside the checkout (no ``PYTHONPATH``, no checkout on ``sys.path``).

The venv has the wheel alone (``--no-deps``); its dependencies come from the interpreter
running the tests, whose site-packages a ``.pth`` file appends (a plain path: that
directory's own ``.pth`` files, an editable install of corral among them, are not run).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.backends import git

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("policies", "sandbox", "executor")
FILES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The venv the wheel is installed in."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    for package in PACKAGES:
        shutil.copytree(REPO / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in FILES:
        shutil.copy2(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(base / "dist"), str(src)], check=True, timeout=300)
    [wheel] = (base / "dist").glob("corral-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")],
                   check=True, timeout=120)
    python = base / "venv/bin/python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=300)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return base / "venv"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A git repository outside the checkout (its cwd for every command)."""
    repo = tmp_path / "outside"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


Corral = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def corral(venv: Path, outside: Path, tmp_path: Path) -> Corral:
    """Run the venv's ``corral`` in ``outside``, with an environment of its own."""
    home = tmp_path / "home"
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "CORRAL_BUNDLED_AGENTS", "VIRTUAL_ENV")}
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "CORRAL_CONFIG": str(tmp_path / "config.toml"),
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}

    def run(*args: str, check: bool = True, timeout: float = 120,
            **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(venv / "bin/corral"), *args], cwd=outside,
                              env=env | extra, capture_output=True, text=True,
                              timeout=timeout, check=False)
        if check:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    return run


def _child(corral: Corral, tmp_path: Path, backend: str, **env: str) -> Any:
    (tmp_path / "writer.md").write_text(
        "---\nname: writer\ndescription: writes one file\ntools: read, write\n---\nWrite.\n")
    (tmp_path / "agents.json").write_text(json.dumps(
        {"agent_imports": [{"path": "writer.md", "format": "pi"}]}))
    (tmp_path / "write.yaml").write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "b.txt", "content": "from the wheel\n"}}]},
        {"text": "wrote b.txt"}]))
    done = corral("run", "--backend", backend, "--config", str(tmp_path / "agents.json"),
                  "--agent", "writer", "--script", str(tmp_path / "write.yaml"), "--json",
                  "write b", **env)
    data = json.loads(done.stdout)
    assert data["status"] == "completed", data
    assert [f["path"] for f in data["changed_files"]] == ["b.txt"]
    assert "+from the wheel" in data["diff"]
    return data


def test_the_wheel_holds_its_data_and_imports_from_the_venv(venv: Path, corral: Corral,
                                                            outside: Path) -> None:
    assert corral("--version").stdout.strip() == f"corral, version {VERSION}"
    probe = subprocess.run(
        [str(venv / "bin/python"), "-c", "import executor, sandbox.image, policies.agents; "
         "from executor.version import corral_version; print(executor.__file__); "
         "print(sandbox.image.IMAGE_DIR); print(policies.agents.BUNDLED_DIR); "
         "print(corral_version())"],
        cwd=outside, capture_output=True, text=True, check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    module, image_dir, agents_dir, version = probe.stdout.split("\n")[:4]
    assert Path(module).is_relative_to(venv), module  # not the checkout
    assert version == VERSION
    assert (Path(image_dir) / "Dockerfile").read_bytes() == \
        (REPO / "sandbox/image/Dockerfile").read_bytes()
    assert os.access(Path(image_dir) / "build.sh", os.R_OK)
    assert sorted(p.stem for p in Path(agents_dir).glob("*.md")) == sorted(
        p.stem for p in (REPO / "policies/agents").glob("*.md"))
    [info] = Path(module).parent.parent.glob("corral-*.dist-info")
    assert "MIT License" in (info / "licenses/LICENSE").read_text()


def test_agents_list_shows_the_bundled_agents(corral: Corral) -> None:
    data = json.loads(corral("agents", "list", "--json").stdout)
    assert {a["name"] for a in data["agents"]} >= {"reviewer", "worker", "fixer"}
    assert {a["scope"] for a in data["agents"]} == {"bundled"}


def test_a_host_run_of_a_scripted_child(corral: Corral, tmp_path: Path) -> None:
    _child(corral, tmp_path, "host")


@pytest.mark.requires("bubblewrap")
def test_a_bubblewrap_run_of_a_scripted_child(corral: Corral, tmp_path: Path) -> None:
    _child(corral, tmp_path, "bubblewrap")


def test_image_build_refuses_a_bad_tag_before_anything(corral: Corral) -> None:
    done = corral("image", "build", "--tag", "Not A Tag", "--json", check=False)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "bad_image_tag"


@pytest.mark.requires("docker")
def test_image_build_with_a_tag_of_its_own_then_a_docker_run(corral: Corral,
                                                             tmp_path: Path) -> None:
    """The packaged builder makes ``corral-sandbox:wheel-test-*`` (never the shared
    ``latest``), and a child runs in it on the docker backend; the tag is removed after."""
    tag = f"corral-sandbox:wheel-test-{uuid.uuid4().hex[:8]}"
    try:
        built = json.loads(corral("image", "build", "--tag", tag, "--json",
                                  timeout=1800).stdout)
        assert built["image"] == tag and built["image_id"].startswith("sha256:")
        shown = subprocess.run(["docker", "image", "inspect", "-f",
                                '{{index .Config.Labels "org.corral.dockerfile-sha256"}}',
                                tag], capture_output=True, text=True, check=True)
        assert shown.stdout.strip() == hashlib.sha256(
            (REPO / "sandbox/image/Dockerfile").read_bytes()).hexdigest()
        (tmp_path / "config.toml").write_text(f'[environment]\nimage = "{tag}"\n')
        _child(corral, tmp_path, "docker")
    finally:
        subprocess.run(["docker", "image", "rm", tag], capture_output=True, check=False)


def test_the_sdist_holds_the_project_and_its_unit_tests_pass_from_it(tmp_path: Path) -> None:
    """``python -m build --sdist`` from a clean export of the checkout (what git tracks);
    unpacked elsewhere, its own unit tests run against its own sources."""
    export = tmp_path / "export"
    export.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "HEAD"],
                             capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(export)], input=archive, check=True, timeout=120)
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o",
                            str(tmp_path / "dist"), str(export)], capture_output=True,
                           cwd=tmp_path,  # not the checkout, whose build/ shadows `build`
                           text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [sdist] = (tmp_path / "dist").glob("corral-*.tar.gz")
    subprocess.run(["tar", "-xzf", str(sdist), "-C", str(tmp_path)], check=True, timeout=120)
    unpacked = tmp_path / f"corral-{VERSION}"
    for part in ("Dockerfile", "LICENSE", ".ci/run", "mkdocs.yml", "docs/index.md",
                 "examples", "scripts/mutate_defences.py", "tests/test_wheel.py"):
        assert (unpacked / part).exists(), part
    env = {key: value for key, value in os.environ.items() if key != "CORRAL_REQUIRE"}
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_layering.py", "tests/test_capability.py",
                          "tests/test_wire_schema.py", "tests/test_bundled_agents.py"],
                         cwd=unpacked, env=env | {"PYTHONPATH": str(unpacked)},
                         capture_output=True, text=True, timeout=900, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout
