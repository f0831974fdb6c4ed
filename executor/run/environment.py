"""The project's environment for a run or a fanout: found, built once, put in the settings.

Every front door calls :func:`with_environment` before anything runs: it reads
the description (:func:`policies.environment.load_environment`: your config's
``[environment]`` over the repository's, the latter only under
``--trust-project``), prepares it (:func:`sandbox.environment.prepare_environment`:
setup runs once per key, its output streams to ``on_output``), and returns the
settings with :attr:`RunSettings.environment` set, so every child, check and
reviewer of the run gets it. A failed setup raises
:class:`sandbox.errors.EnvironmentSetupFailed` (exit code 5) before any run
record exists: it is never blamed on a child.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from executor.run.settings import RunSettings
from policies.environment import EnvironmentSpec, load_environment
from policies.loader import Diagnostic
from sandbox.environment import prepare_environment

__all__ = ["describe", "with_environment"]


def describe(settings: RunSettings, *, network: bool | None = None
             ) -> tuple[EnvironmentSpec | None, list[Diagnostic]]:
    """The environment described for ``settings.root`` (``None``: none), with what was
    ignored of it."""
    return load_environment(settings.root, settings.config.environment,
                            trust_project=settings.trust_project, network=network)


def with_environment(settings: RunSettings, *, no_env: bool = False,
                     network: bool | None = None,
                     on_output: Callable[[str], None] | None = None,
                     warn: Callable[[Diagnostic], None] | None = None,
                     rebuild: bool = False) -> RunSettings:
    """``settings`` with the project's environment prepared (unchanged with ``no_env`` or
    when none is described)."""
    if no_env:
        return settings
    spec, diagnostics = describe(settings, network=network)
    if warn is not None:
        for diagnostic in diagnostics:
            warn(diagnostic)
    if spec is None:
        return settings
    ref = prepare_environment(spec, repo=settings.root, config=settings.backend,
                              state_root=settings.state_root, on_output=on_output,
                              rebuild=rebuild)
    return replace(settings, environment=ref)
