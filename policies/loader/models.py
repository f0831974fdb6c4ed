"""Model routes: corral-native route strings, and foreign model names.

Native route strings (ngn, zuno, pi, catalog) are exact model ids, optionally
``provider/model``, or ``@role`` aliases expanded by the user's config, each
with an optional ``:level`` suffix (``@smart:high``). ``inherit``, ``*`` and
``@default`` mean the parent's model.

A model name in a foreign harness's file (``sonnet``, ``GPT-5 (copilot)``)
belongs to that harness: corral never guesses which connection serves it. It
is resolved only by an explicit override (the ``model`` of an
``agent_imports`` entry, or ``model_map`` in the user's config); otherwise
the route keeps it as ``foreign`` and the agent cannot run until overridden.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.contract import AgentFormat, ModelRef, ModelRoute
from policies.loader.base import Reader
from policies.model_aliases import DEFAULT_ALIASES, fold

__all__ = ["INHERIT_WORDS", "LEVELS", "foreign_fix", "foreign_route", "native_route",
           "parse_ref"]

LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
INHERIT_WORDS = frozenset({"inherit", "*", "@default"})


def parse_ref(text: str) -> ModelRef:
    """``@smart:high`` -> (``@smart``, ``high``); a ``:tag`` that is no level stays in the id."""
    text = text.strip()
    head, sep, tail = text.rpartition(":")
    if sep and head and tail in LEVELS:
        return ModelRef(id="inherit" if head in INHERIT_WORDS else head, level=tail)
    return ModelRef(id="inherit" if text in INHERIT_WORDS else text)


def native_route(reader: Reader, key: str, values: Sequence[str], *,
                 provider: str | None = None, ngn: bool = False) -> ModelRoute:
    """A route from corral-native model strings, in order, duplicates dropped. ``ngn``: the
    format's "provider ... omitted inherits the connection" (so does an import's override
    without a provider)."""
    refs: list[ModelRef] = []
    for value in values:
        if not value.strip():
            reader.error(key, "model names must not be empty")
            continue
        ref = parse_ref(value)
        if ref not in refs:
            refs.append(ref)
    if refs and all(ref.id == "inherit" and ref.level is None for ref in refs):
        refs = []
    options = reader.ctx.options
    if options.model:
        refs = [parse_ref(options.model)]
        provider = options.provider or provider
        ngn = True  # an ngn JSON import's override: ngn's rule
    return ModelRoute(candidates=tuple(refs), provider=provider,
                      inherit_connection=ngn and provider is None)


def foreign_route(reader: Reader, key: str, value: str | None, fmt: AgentFormat) -> ModelRoute:
    """A route for a foreign harness's model selection (see module docstring)."""
    options = reader.ctx.options
    if options.model:  # an ngn JSON import's override: a connection omitted is inherited
        return ModelRoute(candidates=(parse_ref(options.model),), provider=options.provider,
                          inherit_connection=options.provider is None)
    if value is None or value.strip() in {"inherit", ""}:
        return ModelRoute()
    value = value.strip()
    mapped = options.model_map.get(fmt.value, {}).get(value) or options.default_models.get(
        fold(value))
    if mapped:
        return ModelRoute(candidates=(parse_ref(mapped),))
    reader.warn(
        key,
        f"model {value!r} belongs to {fmt.value}; corral does not guess which model serves it",
        hint=foreign_fix(value, fmt),
        code="foreign_model",
    )
    return ModelRoute(foreign=value, foreign_format=fmt)


def foreign_fix(value: str, fmt: AgentFormat | None) -> str:
    """What makes a foreign model name ``value`` (of format ``fmt``) run: the config line
    that maps it, a provider that serves a known alias, or ``--model``."""
    where = fmt.value if fmt is not None else "FORMAT"
    known = DEFAULT_ALIASES.get(fold(value))
    line = f'model_map.{where}."{value}" = "PROVIDER/MODEL"'
    if known is not None:
        vendor, model = known
        fix = (f"configure a {vendor} provider ([providers.{vendor}] in your corral config) "
               f"and it runs on {model}; or add `{line}`")
    else:
        fix = f"add `{line}` to your corral config"
    return (f"{fix} (or give model in an agent_imports entry); until then the agent runs "
            "only with an explicit --model")
