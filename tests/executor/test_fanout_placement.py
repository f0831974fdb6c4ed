"""Where a fanout's children run, as a user names it: ``--on``, ``on=``, ``--fanout-on``.

No cluster here (``test_fanout_ray.py`` has one): these are the refusals that
come before anything runs, with or without Ray installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from exec_support import agent_file, git

from executor.api import Corral, CorralError
from executor.cli import cli
from executor.ledger import ledger_dir
from tests.timescale import scaled

HIDDEN = ("import sys; sys.modules['ray'] = None; sys.argv[0] = 'corral'; "
          "from executor.cli import main; main()")


@pytest.fixture
def project(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    agent_file(repo, "w", "tools: [write_file]")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent")
    replay = tmp_path / "a.yaml"
    replay.write_text(yaml.safe_dump([{"text": "a"}]))
    return repo, replay


def test_without_ray_on_ray_fails_before_anything_saying_how_to_install_it(
        project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    repo, replay = project
    # The command itself, in a process where `import ray` raises ImportError.
    done = subprocess.run([sys.executable, "-c", HIDDEN, "fanout", "--root", str(repo),
                           "--trust-project", "--no-personal", "--backend", "host", "--agent",
                           "w", "--script", str(replay), "-n", "2", "--on", "ray", "go"],
                          capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 2, done.stderr
    assert "needs the ray package, which is not installed" in done.stderr
    assert "pip install 'corral[ray]'" in done.stderr
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(CorralError) as caught:
        Corral(repo, trust_project=True, personal=False, backend="host").fanout(
            "go", agents=["w"], scripts=[replay], n=2, on="ray://127.0.0.1:6379")
    assert caught.value.code == "ray_unavailable" and caught.value.exit_code == 2
    assert not (ledger_dir(repo) / "fanouts").exists()  # refused before anything


def test_a_place_that_is_not_one_is_a_usage_error(project: tuple[Path, Path]) -> None:
    repo, replay = project
    for on in ("elsewhere", "ray:/x", "ray://"):
        with pytest.raises(CorralError) as caught:
            Corral(repo, trust_project=True, personal=False, backend="host").fanout(
                "go", agents=["w"], scripts=[replay], n=2, on=on)
        assert caught.value.exit_code == 2 and "--on" in caught.value.message, on
    result = CliRunner().invoke(cli, ["mcp", "--root", str(repo), "--fanout-on", "nowhere"])
    error = result.exception  # main renders it; the server never started
    assert isinstance(error, CorralError) and error.exit_code == 2
    assert "--on 'nowhere'" in error.message
    assert not (ledger_dir(repo) / "fanouts").exists()
