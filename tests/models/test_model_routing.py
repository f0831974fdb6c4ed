"""Route resolution: fallbacks, roles, inherit, unavailable providers, overrides, credentials."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from servers import ProtocolServer

from executor.errors import ModelError
from executor.models import (
    AnthropicModel,
    LeveledModel,
    Message,
    Model,
    OpenAIChatModel,
    Sampling,
    ScriptedModel,
    resolve_model,
)
from policies.config import UserConfig
from policies.contract import AgentFormat, ModelRef, ModelRoute
from policies.loader.models import parse_ref

PARENT = ScriptedModel([{"text": "parent"}], source="parent.yaml")
ENV = {"CLOUD_KEY": "sk-cloud", "ANTH_KEY": "sk-anth"}


def _config(**extra: Any) -> UserConfig:
    return UserConfig.model_validate({
        "providers": {
            "local": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"},
            "cloud": {"type": "openai", "base_url": "https://cloud.invalid/v1",
                      "api_key_env": "CLOUD_KEY"},
            "anth": {"type": "anthropic", "base_url": "https://anth.invalid",
                     "api_key_env": "ANTH_KEY"},
            "gone": {"type": "openai", "base_url": "https://gone.invalid/v1",
                     "api_key_env": "GONE_KEY"},
        },
        **extra,
    })


def _route(*texts: str, provider: str | None = None) -> ModelRoute:
    return ModelRoute(candidates=tuple(parse_ref(text) for text in texts), provider=provider)


def _resolve(route: ModelRoute, *, config: UserConfig | None = None,
             parent: Model | None = PARENT, env: dict[str, str] | None = None,
             override: str | None = None) -> Model:
    return resolve_model(route, config=config or _config(), parent=parent,
                         override=override, env=ENV if env is None else env)


def test_first_available_candidate_wins_in_order() -> None:
    model = _resolve(_route("gone/m1", "cloud/m2", "local/m3"))
    assert isinstance(model, OpenAIChatModel) and model.name == "cloud/m2"
    assert _resolve(_route("anth/claude-x", "cloud/m2")).name == "anth/claude-x"
    assert isinstance(_resolve(_route("anth/claude-x")), AnthropicModel)


def test_a_provider_without_a_key_variable_needs_no_key() -> None:
    assert _resolve(_route("local/qwen2.5-coder"), env={}).name == "local/qwen2.5-coder"


def test_nothing_available_lists_every_attempt() -> None:
    with pytest.raises(ModelError) as caught:
        _resolve(_route("gone/m1", "nowhere/m2", "bare", "@spare"),
                 config=_config(roles={"spare": ["gone/m3"]}), env={})
    error = caught.value
    assert error.code == "unavailable"
    assert error.context["attempts"] == [
        "gone/m1: provider 'gone' is unavailable: $GONE_KEY is not set",
        "nowhere/m2: no provider 'nowhere' in the user config",
        "bare: a bare model id needs a provider: write provider/model or set default_provider "
        "in the user config",
        "@spare -> gone/m3: provider 'gone' is unavailable: $GONE_KEY is not set",
    ]
    assert "gone/m1" in error.message and "--model" in str(error.hint)


@pytest.mark.parametrize("roles", [{}, {"missing": []}], ids=["undefined", "empty"])
def test_an_undefined_or_empty_role_is_a_config_error_never_skipped(
        roles: dict[str, list[str]]) -> None:
    """A role the config does not define is a mistake, not an unavailable model: the
    route never skips past it to the next candidate (nor to the parent's model)."""
    with pytest.raises(ModelError) as caught:
        _resolve(_route("@missing", "local/m"), config=_config(roles=roles))
    assert caught.value.code == "config" and "@missing" in caught.value.message
    parented = ModelRoute(candidates=(ModelRef(id="@missing"),), parent_fallback=True)
    with pytest.raises(ModelError, match="@missing"):
        _resolve(parented, config=_config(roles=roles))


def test_roles_expand_in_order_and_nest() -> None:
    config = _config(roles={"fast": ["gone/tiny", "@cheap"], "cheap": ["cloud/mini:low"]})
    model = _resolve(_route("@fast"), config=config)
    assert isinstance(model, LeveledModel)
    assert (model.inner.name, model.level) == ("cloud/mini", "low")


def test_a_reference_level_wins_over_the_role_entry_level() -> None:
    config = _config(roles={"smart": ["cloud/big:low"]})
    model = _resolve(_route("@smart:high"), config=config)
    assert isinstance(model, LeveledModel) and model.level == "high"
    assert model.name == "cloud/big:high"


def test_role_cycles_are_config_errors() -> None:
    config = _config(roles={"a": ["@b"], "b": ["gone/x", "@a"]})
    with pytest.raises(ModelError) as caught:
        _resolve(_route("@a"), config=config)
    assert caught.value.code == "config"
    assert "@a -> @b -> @a" in caught.value.message


def test_role_entries_may_inherit() -> None:
    config = _config(roles={"default": ["gone/x", "inherit"]})
    assert _resolve(_route("@default"), config=config) is PARENT


def test_inherit() -> None:
    assert _resolve(ModelRoute()) is PARENT
    leveled = _resolve(_route("inherit:high"))
    assert isinstance(leveled, LeveledModel) and leveled.inner is PARENT
    assert _resolve(_route("gone/x", "*")) is PARENT
    with pytest.raises(ModelError) as caught:
        _resolve(ModelRoute(), parent=None)
    assert caught.value.code == "config"
    with pytest.raises(ModelError) as unavailable:
        _resolve(_route("inherit"), parent=None)
    assert unavailable.value.context["attempts"] == [
        "inherit: there is no parent model to inherit"]


def test_bare_ids_use_the_route_provider_then_the_default() -> None:
    assert _resolve(_route("m", provider="cloud")).name == "cloud/m"
    config = _config(default_provider="anth")
    assert _resolve(_route("m"), config=config).name == "anth/m"
    assert _resolve(_route("m", provider="cloud"), config=config).name == "cloud/m"
    # an id with a slash whose prefix is no provider is a model id, on an explicit provider
    assert _resolve(_route("Qwen/Qwen2.5-Coder", provider="local")).name == (
        "local/Qwen/Qwen2.5-Coder")


def test_an_unknown_prefix_is_never_guessed_onto_the_default_provider() -> None:
    with pytest.raises(ModelError) as caught:
        _resolve(_route("openai/gpt-4o"), config=_config(default_provider="cloud"))
    assert caught.value.context["attempts"] == [
        "openai/gpt-4o: no provider 'openai' in the user config"]


def test_a_foreign_model_needs_an_override() -> None:
    route = ModelRoute(foreign="sonnet", foreign_format=AgentFormat.CLAUDE)
    assert route.needs_override
    with pytest.raises(ModelError) as caught:
        _resolve(route)
    assert caught.value.code == "config"
    assert "sonnet" in caught.value.message and "claude" in caught.value.message
    assert "--model" in str(caught.value.hint)
    assert _resolve(route, override="anth/claude-sonnet-4-5").name == "anth/claude-sonnet-4-5"
    with pytest.raises(ModelError) as unknown:
        _resolve(ModelRoute(foreign="fast"))
    assert "another harness" in unknown.value.message and unknown.value.hint == (
        "pass --model ROUTE")


def test_the_override_replaces_the_route() -> None:
    route = _route("cloud/m1", provider="cloud")
    assert _resolve(route, override="anth/other").name == "anth/other"
    assert _resolve(route, override="inherit") is PARENT
    leveled = _resolve(route, override="local/q:max")
    assert isinstance(leveled, LeveledModel) and leveled.level == "max"
    with pytest.raises(ModelError) as caught:  # the route's provider is replaced too
        _resolve(route, override="bare")
    assert caught.value.code == "unavailable"
    with pytest.raises(ModelError):
        _resolve(route, override=" ")


def test_credentials_come_only_from_the_env_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUD_KEY", "from-os-environ")
    with pytest.raises(ModelError):
        _resolve(_route("cloud/m"), env={"OTHER": "x"})
    monkeypatch.setenv("GONE_KEY", "from-os-environ")
    # env=None is the process environment, and only then
    model = resolve_model(_route("gone/m"), config=_config(), parent=None)
    assert model.name == "gone/m"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_resolved_client_sends_the_env_key(make_server: Callable[..., ProtocolServer],
                                               protocol: str) -> None:
    server = make_server(protocol, api_key="sk-from-env")
    server.reply(server.dialect.text("hi"))
    config = UserConfig.model_validate({"providers": {"p": {
        "type": protocol, "base_url": server.base_url, "api_key_env": "P_KEY",
        "max_retries": 0}}})
    model = resolve_model(_route("p/test-model"), config=config, parent=None,
                          env={"P_KEY": "sk-from-env"})
    assert model.complete([Message("user", "hi")], [], sampling=Sampling()).text == "hi"


def test_duplicates_are_tried_once() -> None:
    with pytest.raises(ModelError) as caught:
        _resolve(ModelRoute(candidates=(ModelRef(id="gone/x"), ModelRef(id="@r"))),
                 config=_config(roles={"r": ["gone/x"]}), env={})
    assert len(caught.value.context["attempts"]) == 1
