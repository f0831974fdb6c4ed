"""Route resolution: which :class:`Model` runs an agent.

:func:`resolve_model` walks the route's candidates in order (the contract's
``model``, then its ``models`` fallbacks) and returns the first that is
available:

- ``inherit`` is the parent's model (unavailable when there is no parent);
- ``@role`` expands, in order, to the entries of ``roles[role]`` in the
  user's config (or, for a role only the definition's harness defines, the
  chain the route carries: pi's ``subagent.roles``); an entry may be
  ``provider/model``, a bare model id, ``inherit`` or another ``@role``. A
  cycle, an undefined or an empty role is a config error, before anything is
  contacted, never skipped to the next candidate or the parent's model;
- ``provider/model`` connects through ``providers[provider]`` of the user's
  config (the first ``/`` splits only when its left side names a configured
  provider; otherwise the whole text is a model id that needs an explicit
  provider: corral never guesses one);
- a bare model id uses the route's ``provider``, else ``default_provider``
  (an id that came out of a role uses ``default_provider``: the route's
  provider belongs to the agent's file, the role to the user's config); a
  route with ``inherit_connection`` (ngn: "provider ... omitted inherits the
  connection") runs it on the parent model's connection first (a top-level
  agent's parent is ``default_model``), ``default_provider`` only when the
  parent has none (a replay).

A provider's key is read from ``env[api_key_env]`` and from nothing else: not
from the agent's files, not from the config file itself. A provider whose key
variable is configured but unset (or empty) is unavailable, and the next
candidate is tried. A provider without ``api_key_env`` needs no key (Ollama,
llama.cpp). When nothing is available the error lists every candidate tried
and why.

A route that inherits but names a ``provider`` (ngn: "provider: Existing ngn
provider connection ID; omitted inherits the connection", with "model: ...
omitted inherits the selected model") runs the parent's model id on that
connection; a provider the user config does not define is a config error,
never a silent run on the parent's connection.

A route with ``parent_fallback`` (pi: "then the authenticated parent model")
falls back to the parent's model when no candidate is available; the error
then lists the parent too.

A foreign model name (``sonnet`` in a Claude file) is refused unless
``override`` is given; ``override`` (``corral run --model ROUTE``) replaces
the route entirely, ``provider`` included.

**Reasoning levels.** A ``:level`` suffix on the chosen candidate becomes
that model's reasoning level (:func:`with_level`). The session passes the
contract's ``reasoning`` in :class:`~executor.models.base.Sampling`; for the
candidate that matched, the suffix wins over it (as pi's ``@smart:high``
overrides the agent's ``thinking`` for that match). A suffix on a ``@role``
reference applies to every entry it expands to and wins over the entries' own
suffixes; otherwise an entry's own suffix applies.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from executor.errors import ModelError
from executor.models.base import (
    Message,
    Model,
    ModelLimits,
    ModelResponse,
    Sampling,
    ToolSchema,
    model_limits,
)
from policies.config import ProviderConfig, UserConfig
from policies.contract import ModelRef, ModelRoute
from policies.loader.models import parse_ref

__all__ = ["Attempt", "Candidate", "LeveledModel", "build_provider_model", "expand_candidates",
           "resolve_model", "route_roles", "with_level"]


@dataclass(frozen=True)
class Candidate:
    """One concrete candidate after role expansion: ``id`` is no ``@role`` any more."""

    id: str
    level: str | None = None
    via: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.id}:{self.level}" if self.level else self.id
        return f"{' -> '.join(self.via)} -> {text}" if self.via else text


@dataclass(frozen=True)
class Attempt:
    """A candidate that was not available, and why."""

    candidate: str
    reason: str

    def __str__(self) -> str:
        return f"{self.candidate}: {self.reason}"


class LeveledModel:
    """A model whose requests always carry a given reasoning level."""

    def __init__(self, inner: Model, level: str) -> None:
        self.inner = inner
        self.level = level

    @property
    def name(self) -> str:
        """``inner:level``."""
        return f"{self.inner.name}:{self.level}"

    @property
    def limits(self) -> ModelLimits:
        """The inner model's."""
        return model_limits(self.inner)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema], *,
                 sampling: Sampling) -> ModelResponse:
        """The inner model's answer, asked with ``reasoning=level``."""
        return self.inner.complete(messages, tools, sampling=replace(sampling,
                                                                     reasoning=self.level))


def with_level(model: Model, level: str | None) -> Model:
    """``model`` with ``level`` as its reasoning level (the model itself when ``None``)."""
    return model if level is None else LeveledModel(model, level)


def expand_candidates(refs: Sequence[ModelRef], *, roles: Mapping[str, Sequence[str]],
                      ) -> list[Candidate]:
    """``refs`` with every ``@role`` expanded, in order. An undefined or empty role is a
    config error (:class:`ModelError`, code ``config``), never skipped: a fallback past it
    would silently run another model than the one the user named.

    Duplicates (same id and level) are kept once, at their first place.
    """
    found: list[Candidate] = []

    def walk(ref: ModelRef, level: str | None, via: tuple[str, ...]) -> None:
        level = level or ref.level
        if not ref.is_role:
            candidate = Candidate(ref.id, level, via)
            if all((c.id, c.level) != (ref.id, level) for c in found):
                found.append(candidate)
            return
        chain = " -> ".join((*via, ref.id))
        if ref.id in via:
            raise ModelError(
                f"role {ref.id} refers to itself: {chain}", code="config",
                operation="resolve_model", context={"roles": chain},
                hint="break the cycle in [roles] of your corral config")
        entries = roles.get(ref.id[1:])
        if not entries:
            why = "is not defined" if entries is None else "is empty"
            raise ModelError(
                f"role {ref.id} {why}: no model runs in its place", code="config",
                operation="resolve_model", context={"roles": chain},
                hint=f"define {ref.id[1:]} under [roles] in your corral config (a pi agent's "
                "roles may also come from subagent.roles of ~/.pi/agent/settings.json)")
        for entry in entries:
            walk(parse_ref(entry), level, (*via, ref.id))

    for ref in refs:
        walk(ref, None, ())
    return found


def route_roles(route: ModelRoute, config: UserConfig) -> dict[str, tuple[str, ...]]:
    """The role chains ``route`` resolves through: its own harness's (pi's settings), under
    the user config's ``[roles]``, which win."""
    return {**route.roles, **config.roles}


def build_provider_model(provider: str, config: ProviderConfig, model: str, *,
                         env: Mapping[str, str], variant: str | None = None) -> Model:
    """A connection to ``model`` through ``config``; ``unavailable`` when its key is unset.

    ``variant`` names one of the provider's ``variants``: its request fields go with
    every request; a variant the provider does not define is a config error.
    """
    defaults: dict[str, Any] = {}
    if variant is not None:
        if variant not in config.variants:
            defined = ", ".join(sorted(config.variants)) or "none"
            raise ModelError(
                f"variant {variant!r} is not defined for provider {provider!r} (defined: "
                f"{defined})", code="variant", operation="resolve_model",
                context={"provider": provider, "variant": variant},
                hint=f"add [providers.{provider}.variants.{variant}] with the request fields "
                "it sends to your corral config, or remove variant from the agent")
        defaults = dict(config.variants[variant])
    api_key: str | None = None
    if config.api_key_env:
        api_key = env.get(config.api_key_env) or None
        if api_key is None:
            raise ModelError(
                f"provider {provider!r} is unavailable: ${config.api_key_env} is not set",
                code="unavailable", operation="resolve_model",
                context={"provider": provider, "api_key_env": config.api_key_env},
                hint=f"export {config.api_key_env}=... before running")
    # The providers (httpx, their wire models) only when one is built: scripted runs never are.
    from executor.models.anthropic import AnthropicModel  # noqa: PLC0415
    from executor.models.openai import OpenAIChatModel  # noqa: PLC0415

    common: dict[str, Any] = {
        "model": model, "base_url": config.base_url, "api_key": api_key,
        "provider": provider, "timeout": config.timeout_seconds,
        "max_retries": config.max_retries, "defaults": defaults,
        "tool_choice": config.tool_choice,
        "limits": ModelLimits(config.context_window, config.max_tokens)}
    if config.type == "openai":
        return OpenAIChatModel(**common)
    return AnthropicModel(**common, prompt_cache=config.prompt_cache)


def resolve_model(route: ModelRoute, *, config: UserConfig, parent: Model | None,
                  override: str | None = None, env: Mapping[str, str] | None = None,
                  variant: str | None = None) -> Model:
    """The first available model of ``route`` (see the module docstring for the rules);
    ``variant`` applies to a model the route connects (never to an inherited one)."""
    env = os.environ if env is None else env
    if override is not None:
        if not override.strip():
            raise ModelError("--model needs a route (provider/model, @role or inherit)",
                             code="config", operation="resolve_model")
        route = ModelRoute(candidates=(parse_ref(override),))
    elif route.needs_override:
        fmt = route.foreign_format.value if route.foreign_format else None
        raise ModelError(
            f"model {route.foreign!r} belongs to {fmt or 'another harness'}; corral does not "
            "guess which model serves it", code="config", operation="resolve_model",
            context={"model": route.foreign, "format": fmt or "unknown"},
            hint="pass --model ROUTE" + (f", or map it under [model_map.{fmt}] in your corral "
                                         "config" if fmt else ""))
    if route.inherit and route.provider is not None:
        return _inherited_on(route.provider, config=config, parent=parent, env=env,
                             variant=variant)
    if route.inherit:
        if parent is None:
            raise ModelError("the agent inherits its parent's model, but there is no parent "
                             "model", code="config", operation="resolve_model",
                             hint="pass --model ROUTE (or --script FILE)")
        return parent
    attempts: list[Attempt] = []
    for candidate in expand_candidates(route.candidates, roles=route_roles(route, config)):
        try:
            model = _connect(candidate, route=route, config=config, parent=parent, env=env,
                             variant=variant)
        except ModelError as exc:
            if exc.code != "unavailable":
                raise
            attempts.append(Attempt(str(candidate), exc.message))
            continue
        return with_level(model, candidate.level)
    if route.parent_fallback:
        if parent is not None:
            return parent
        attempts.append(Attempt("the parent's model", "there is no parent model (set "
                                "default_model in the user config)"))
    listed = "; ".join(str(attempt) for attempt in attempts)
    raise ModelError(
        f"no model candidate is available ({listed})", code="unavailable",
        operation="resolve_model",
        context={"attempts": [str(attempt) for attempt in attempts]},
        hint="set the provider's key variable, add the provider to your corral config, "
             "or pass --model ROUTE")


def _inherited_on(provider: str, *, config: UserConfig, parent: Model | None,
                  env: Mapping[str, str], variant: str | None) -> Model:
    """The parent's model id on the connection ``provider`` (ngn: model omitted, provider
    named)."""
    if provider not in config.providers:
        known = ", ".join(sorted(config.providers)) or "none"
        raise ModelError(
            f"provider {provider!r} is not a provider connection of the user config "
            f"(connections: {known})", code="config", operation="resolve_model",
            context={"provider": provider},
            hint=f"add [providers.{provider}] to your corral config, or name an existing "
            "connection in the agent's provider field")
    level: str | None = None
    inner = parent
    if isinstance(parent, LeveledModel):
        inner, level = parent.inner, parent.level
    head, sep, model_id = (inner.name if inner is not None else "").partition("/")
    if inner is None or not (sep and head and model_id):
        raise ModelError(
            f"the agent inherits its parent's model on provider {provider!r}, but the parent "
            f"model ({inner.name if inner is not None else 'none'}) has no model id to run "
            "there", code="config", operation="resolve_model",
            context={"provider": provider},
            hint="give the agent a model, or set default_model in your corral config")
    model = build_provider_model(provider, config.providers[provider], model_id, env=env,
                                 variant=variant)
    return with_level(model, level)


def _parent_connection(parent: Model | None, config: UserConfig) -> str | None:
    """The provider connection ``parent`` runs on (``provider/model``), if it has one."""
    inner = parent.inner if isinstance(parent, LeveledModel) else parent
    head, sep, _ = (inner.name if inner is not None else "").partition("/")
    return head if sep and head in config.providers else None


def _connect(candidate: Candidate, *, route: ModelRoute, config: UserConfig,
             parent: Model | None, env: Mapping[str, str], variant: str | None) -> Model:
    if candidate.id == "inherit":
        if parent is None:
            raise ModelError("there is no parent model to inherit", code="unavailable")
        return parent
    if not candidate.id.strip():
        raise ModelError("an empty model id", code="unavailable")
    head, sep, tail = candidate.id.partition("/")
    if sep and head in config.providers and tail:
        return build_provider_model(head, config.providers[head], tail, env=env,
                                    variant=variant)
    explicit = None if candidate.via else route.provider
    inherited = (_parent_connection(parent, config)
                 if explicit is None and route.inherit_connection and not candidate.via
                 else None)
    provider = explicit or inherited or (None if sep else config.default_provider)
    if provider is None:
        reason = (f"no provider {head!r} in the user config" if sep else
                  "a bare model id needs a provider: write provider/model or set "
                  "default_provider in the user config")
        if route.inherit_connection:
            reason += ("; it would run on its parent's connection, but the parent model "
                       f"({parent.name if parent is not None else 'none'}) has none")
        raise ModelError(reason, code="unavailable")
    if provider not in config.providers:
        raise ModelError(f"no provider {provider!r} in the user config", code="unavailable")
    return build_provider_model(provider, config.providers[provider], candidate.id, env=env,
                                variant=variant)
