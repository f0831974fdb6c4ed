"""An environment's key (issue 29, item 5): what it holds, what it does not.

A fresh clone of the same project (same lock files, same setup) in another
directory reuses the layer: the key holds the workspace's path inside the
sandbox (``/workspaces/<name>``, what the layer's absolute paths name), not the
checkout's. A venv setup made runs its own scripts (``.venv/bin/pytest``) in the
second clone's child. A clone under another directory name gets its own layer
(its workspace is elsewhere in the sandbox, where the first layer's paths would
not hold). A change of a lock file listed in ``inputs`` builds again; a change
of any other file does not. On host the layer names no path a child has, and no
path is keyed. A Ray node, which unpacks each commit under its id, keys its
environment by the parent's directory name, so a new commit with the same lock
files reuses the node's layer. Through the CLI on real sandboxes (the node's
case through the calls a node makes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from exec_support import agent_file, call, git, invoke, script, write_config

from executor.fanout.remote import origin_of
from policies.environment import EnvironmentSpec
from sandbox.config import BubblewrapConfig
from sandbox.environment import prepare_environment
from sandbox.workspaces.bundle import bundle_snapshot, unpack_snapshot
from sandbox.workspaces.snapshot import acquire_snapshot, release_snapshot
from tests.backends import require_backend

ISOLATING = [pytest.param("bubblewrap", id="bubblewrap", marks=pytest.mark.bubblewrap),
             pytest.param("docker", id="docker", marks=pytest.mark.docker)]

VENV_SETUP = """
[environment]
setup = ["python3 -m venv .venv", ".venv/bin/pip install -q --disable-pip-version-check pytest"]
inputs = ["pyproject.toml"]
setup_network = true
"""


corral = invoke


def environments() -> list[dict[str, Any]]:
    code, out, err = corral("env", "show", "--json")
    assert code == 0, err
    return list(json.loads(out)["environments"])


def build(repo: Path, backend: str) -> dict[str, Any]:
    code, out, err = corral("env", "build", "--root", str(repo), "--backend", backend, "--json")
    assert code == 0, err
    return dict(json.loads(out))


def clone(origin: Path, into: Path) -> Path:
    """A fresh clone of ``origin`` at ``into`` (its ignored files, a venv, not there)."""
    into.parent.mkdir(parents=True, exist_ok=True)
    git(origin.parent, "clone", "-q", str(origin), str(into))
    return into


@pytest.fixture
def definitions(tmp_path: Path) -> str:
    """An ngn config importing agent ``w`` from outside every clone."""
    home = tmp_path / "defs"
    agent_file(home, "w", "tools: [shell, read_file]")
    path = tmp_path / "ngn.json"
    path.write_text(json.dumps({"agent_imports": [
        {"format": "native", "path": str(home / ".ngn" / "agents" / "w.md")}]}))
    return str(path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A Python project whose test needs pytest, at ``first/proj``."""
    repo = tmp_path / "first" / "proj"
    repo.mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\n')
    (repo / "requirements.txt").write_text("pytest==8.3.3\n")
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n.pytest_cache/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def shell_in(repo: Path, backend: str, definitions: str, tmp_path: Path,
             command: str) -> str:
    """What ``command`` printed in a child of ``corral run`` on ``repo``."""
    child = script(tmp_path, f"child-{os.urandom(4).hex()}", call("shell", command=command),
                   {"text": "done"})
    code, out, err = corral("run", "--root", str(repo), "--no-personal", "--config",
                            definitions, "--backend", backend, "--agent", "w", "--script",
                            child, "--json", "go")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    code, shown, err = corral("show", run_id, "--root", str(repo), "--json")
    assert code == 0, err
    return json.dumps(json.loads(shown)["audit"])


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
@pytest.mark.timeout(900)
def test_a_fresh_clone_elsewhere_reuses_the_layer_and_its_venv_runs(
        project: Path, tmp_path: Path, backend: str, definitions: str) -> None:
    """Setup makes a venv once; a clone of the same project in another directory (same name,
    same lock files) uses that layer without running setup again, and the venv's own scripts
    (which name their interpreter by its absolute path) run in that clone's child."""
    write_config(VENV_SETUP)
    first = build(project, backend)
    assert first["status"] == "ready"
    assert first["workspace"] == "/workspaces/proj"
    log = Path(first["log"]).read_text()
    assert log.count("$ .venv/bin/pip install") == 1
    second = clone(project, tmp_path / "elsewhere" / "deeper" / "proj")
    text = shell_in(second, backend, definitions, tmp_path,
                    ".venv/bin/pytest -q -p no:cacheprovider && head -1 .venv/bin/pytest")
    assert "1 passed" in text, text
    assert "#!/workspaces/proj/.venv/bin/python" in text, text  # the path the layer holds
    [env] = environments()  # one environment for both clones: setup did not run again
    assert env["key"] == first["key"] and env["created_at"] == first["created_at"]
    assert Path(env["log"]).read_text() == log
    assert env["repo"] == str(second) and env["repos"] == [str(project), str(second)]
    code, shown, _ = corral("env", "show", env["key"][:8])
    assert code == 0 and f"repository: {second}" in shown
    assert f"also used by: {project}" in shown
    assert not (second / ".venv").exists()  # the clone's checkout never got it


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_the_key_holds_the_workspace_path_in_the_sandbox_not_the_checkouts(
        project: Path, tmp_path: Path, backend: str, definitions: str) -> None:
    """Setup records where it ran; a clone of the same name elsewhere gets the same key and
    reads that record at the same path; a clone under another name is another workspace
    in the sandbox (``/workspaces/other``) and gets a layer of its own, made there."""
    write_config('[environment]\nsetup = ["pwd > where.txt"]\n')
    first = build(project, backend)
    same = clone(project, tmp_path / "b" / "proj")
    other = clone(project, tmp_path / "c" / "other")
    assert build(same, backend)["key"] == first["key"]
    renamed = build(other, backend)
    assert renamed["key"] != first["key"] and renamed["workspace"] == "/workspaces/other"
    assert "/workspaces/other" in shell_in(other, backend, definitions, tmp_path,
                                           "cat where.txt")
    text = shell_in(same, backend, definitions, tmp_path, "cat where.txt; cd /workspaces/proj "
                    "&& cat where.txt")
    assert text.count("/workspaces/proj") >= 2 and "/workspaces/other" not in text, text
    assert len(environments()) == 2


@pytest.mark.parametrize("backend", ISOLATING, indirect=True)
def test_a_changed_lock_file_builds_again_and_another_file_does_not(
        project: Path, tmp_path: Path, backend: str, definitions: str) -> None:
    """``inputs`` key the layer: a new ``requirements.txt`` is set up again (its child sees
    the new one); a change of a file that is not an input reuses the layer."""
    write_config('[environment]\nsetup = ["cp requirements.txt seen.txt"]\n'
                 'inputs = ["requirements.txt"]\n')
    first = build(project, backend)
    (project / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    git(project, "commit", "-qam", "not an input")
    assert build(project, backend)["key"] == first["key"]
    (project / "requirements.txt").write_text("pytest==8.3.4\n")
    git(project, "commit", "-qam", "new lock file")
    again = build(project, backend)
    assert again["key"] != first["key"] and again["created_at"] > first["created_at"]
    text = shell_in(project, backend, definitions, tmp_path, "cat seen.txt")
    assert "pytest==8.3.4" in text and "8.3.3" not in text, text
    assert sorted(e["key"] for e in environments()) == sorted([first["key"], again["key"]])


def test_on_host_the_layer_names_no_checkout_and_no_path_is_keyed(
        project: Path, tmp_path: Path) -> None:
    """On host setup runs in a worktree of its own that no child has: the layer holds no
    path a child sees, so clones under any name share one key (and no workspace is named)."""
    write_config('[environment]\nsetup = ["echo built > built.txt"]\n')
    first = build(project, "host")
    assert first["workspace"] is None
    other = clone(project, tmp_path / "c" / "other")
    assert build(other, "host")["key"] == first["key"]
    [env] = environments()
    assert env["repos"] == [str(project), str(other)]


@pytest.mark.bubblewrap
def test_a_node_keys_its_environment_by_the_parents_name_not_the_commit(
        project: Path, tmp_path: Path) -> None:
    """What a node does (:class:`executor.fanout.remote.RemoteChild`): unpack the parent's
    snapshot under its commit id and prepare the environment there. Two commits with the
    same lock file: one key, one setup, the workspace named as the parent's."""
    require_backend("bubblewrap")
    spec = EnvironmentSpec(setup=("pwd > where.txt",), inputs=("requirements.txt",))
    node = tmp_path / "node"
    refs = []
    for change in ("one", "two"):
        (project / "calc.py").write_text(f"# {change}\n")
        git(project, "commit", "-qam", change)
        snapshot = acquire_snapshot(project, state_root=tmp_path / "parent-state")
        try:
            origin = origin_of(snapshot, spec)
            cargo = bundle_snapshot(origin.git_dir, origin.commit)
        finally:
            release_snapshot(snapshot)
        repo = unpack_snapshot(cargo, into=node / "repos", commit=origin.commit,
                               head=origin.head)
        assert repo.name == origin.commit and origin.name == "proj"
        refs.append(prepare_environment(spec, repo=repo, config=BubblewrapConfig(),
                                        state_root=node / "state", name=origin.name))
    assert refs[0].key == refs[1].key and refs[1].alias == Path("/workspaces/proj")
    [built] = (node / "state" / "environments").glob("*/env.json")
    info = json.loads(built.read_text())
    assert info["workspace"] == "/workspaces/proj" and len(info["repos"]) == 2
    assert refs[1].layer is not None
    assert (refs[1].layer / "where.txt").read_text() == "/workspaces/proj\n"


def test_a_carried_path_that_setup_sees_keys_the_checkout(tmp_path: Path) -> None:
    """Setup sees a carried path at its absolute path in the checkout, which another clone
    does not have: with one present the checkout is keyed, without one it is not."""
    from sandbox.environment import _key

    spec = EnvironmentSpec(setup=("python3 -m venv --system-site-packages env",),
                           carry=(".venv",))
    clones = [tmp_path / "a" / "proj", tmp_path / "b" / "proj"]
    for repo in clones:
        repo.mkdir(parents=True)

    def keys() -> set[str]:
        return {_key(spec, backend="bubblewrap", repo=repo, owner=(0, 0), image=None)
                for repo in clones}

    assert len(keys()) == 1
    for repo in clones:
        (repo / ".venv").mkdir()
    assert len(keys()) == 2
