"""Issue 19: "Harness model aliases: a shipped, documented default mapping of well-known
harness model names and aliases to provider model ids, used only where the user has
configured that provider, overridable in `model_map`; `agents list` shows whether each
agent can run now and, if not, the one line of config that would fix it." """

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from executor.cli import cli
from policies.model_aliases import default_model_map, fold


def _write(root: Path, name: str, model: str) -> None:
    path = root / ".claude" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: d\nmodel: {model}\n---\nb\n")


def _config(text: str) -> None:
    config = Path(os.environ["CORRAL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


def _routes(root: Path) -> dict[str, list[str]]:
    done = CliRunner().invoke(cli, ["agents", "list", "--root", str(root), "--trust-project",
                                    "--no-personal", "--json"])
    assert done.exit_code == 0, done.output
    names = [a["name"] for a in json.loads(done.stdout)["agents"]]
    routes = {}
    for name in names:
        shown = CliRunner().invoke(cli, ["agents", "show", name, "--root", str(root),
                                         "--trust-project", "--no-personal", "--json"])
        routes[name] = shown and json.loads(shown.stdout)["model_route"]["candidates"]
    return routes


ANTHROPIC = '[providers.anthropic]\ntype = "anthropic"\nbase_url = "https://api.anthropic.com"\n'


def test_aliases_map_only_where_a_provider_is_configured(tmp_path: Path) -> None:
    _write(tmp_path, "a", "sonnet")
    _write(tmp_path, "b", "Claude Sonnet 4.5 (copilot)")
    _write(tmp_path, "c", "gemini-2.5-pro")
    listed = CliRunner().invoke(cli, ["agents", "list", "--root", str(tmp_path),
                                      "--trust-project", "--no-personal"])
    lines = listed.stdout.splitlines()
    line = lines[next(i for i, li in enumerate(lines) if li.startswith("a ")) + 1]
    assert "[not runnable: no model for 'sonnet': configure a anthropic provider" in line
    assert 'model_map.claude."sonnet" = "PROVIDER/MODEL"' in line
    assert all(not r for r in _routes(tmp_path).values())  # nothing guessed

    _config(ANTHROPIC)
    routes = _routes(tmp_path)
    assert "anthropic/claude-sonnet-4-5" in json.dumps(routes["a"])
    assert "anthropic/claude-sonnet-4-5" in json.dumps(routes["b"])
    assert routes["c"] == []  # no google provider: not mapped

    _config(ANTHROPIC + '[model_map.claude]\nsonnet = "anthropic/claude-opus-4-1"\n')
    assert "anthropic/claude-opus-4-1" in json.dumps(_routes(tmp_path)["a"])  # yours win


def test_two_anthropic_typed_providers_are_ambiguous() -> None:
    assert default_model_map({"work": "anthropic", "home": "anthropic"}) == {}
    one = default_model_map({"proxy": "anthropic", "local": "openai"})
    assert one["sonnet"] == "proxy/claude-sonnet-4-5" and "gpt-5" not in one
    assert default_model_map({"openai": "openai"})["gpt-4.1"] == "openai/gpt-4.1"
    assert fold("  GPT-4.1 ") == "gpt-4.1" and fold("Claude Haiku 4.5 (copilot)") == \
        "claude haiku 4.5"
