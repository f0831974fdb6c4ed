"""The project's environment for a run or a fanout: found, built once, put in the settings.

Every front door calls :func:`with_environment` before anything runs: it reads
the description (:func:`policies.environment.load_environment`: your config's
``[environment]`` over the repository's, the latter only under ``--trust-project``
or a ``corral trust`` whose digest still matches), prepares it
(:func:`sandbox.environment.prepare_environment`: setup runs once per key, its
output streams to ``on_output``), and returns the settings with
:attr:`RunSettings.environment` set, so every child, check and reviewer of the run
gets it. A failed setup raises :class:`sandbox.errors.EnvironmentSetupFailed` (exit
code 5) before any run record exists: it is never blamed on a child.

A repository environment file that is there but not read (the project is not
trusted, or its trust lapsed) is said: a warning, and
:attr:`RunSettings.environment_note` (every run record of the run says it, with the
``corral trust`` command that enables it).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace

from executor.agents.trust import trust_state
from executor.run.settings import RunSettings
from policies.environment import DEVCONTAINER, PROJECT_FILE, EnvironmentSpec, load_environment
from policies.loader import Diagnostic, Severity
from sandbox.environment import prepare_environment

__all__ = ["describe", "skipped_project_environment", "with_environment"]


def _project_file(settings: RunSettings) -> str | None:
    """The repository's own environment file a trusted run reads, if there is one."""
    for name in (PROJECT_FILE, DEVCONTAINER):
        if (settings.root / name).is_file():
            return name
    return None


def _trusted(settings: RunSettings) -> tuple[bool, Diagnostic | None]:
    """Whether the repository's environment file is read (``--trust-project``, or a
    ``corral trust`` that still matches), and, when one is there and is not, why."""
    if settings.trust_project:
        return True, None
    found = _project_file(settings)
    if found is None:
        return False, None
    state = trust_state(settings.root, state_root=settings.state_root)
    if state.state == "trusted":
        return True, None
    command = f"corral trust {shlex.quote(str(settings.root))}"
    if state.state == "changed":
        what = ("its definitions" if state.changed == ("definitions",)
                else "its environment" if state.changed else "it")
        why = f"the project's trust lapsed: {what} changed since you trusted it " \
              f"({state.trusted_at})"
        hint = (f"read what changed (git log -p -- .corral .devcontainer), then `{command}`;"
                " or pass --trust-project for one command")
    else:
        why = "the project is not trusted"
        hint = f"read it, then `{command}`; or pass --trust-project for one command"
    return False, Diagnostic(
        file=found, line=1, field="environment", severity=Severity.WARNING,
        code="environment_untrusted",
        reason=f"the repository's environment file is not used: {why}", hint=hint)


def skipped_project_environment(settings: RunSettings) -> Diagnostic | None:
    """Why the repository's environment file is not read for ``settings`` (``None``: it
    is, or there is none)."""
    return _trusted(settings)[1]


def describe(settings: RunSettings, *, network: bool | None = None
             ) -> tuple[EnvironmentSpec | None, list[Diagnostic]]:
    """The environment described for ``settings.root`` (``None``: none), with what was
    ignored of it (a repository environment file not read among it)."""
    trusted, skipped = _trusted(settings)
    spec, diagnostics = load_environment(settings.root, settings.config.environment,
                                         trust_project=trusted, network=network)
    if skipped is not None:
        diagnostics.insert(0, skipped)
    return spec, diagnostics


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
    skipped = next((d for d in diagnostics if d.code == "environment_untrusted"), None)
    if skipped is not None:
        settings = replace(settings, environment_note=f"{skipped.file}: {skipped.reason} "
                           f"({skipped.hint})")
    if spec is None:
        return settings
    ref = prepare_environment(spec, repo=settings.root, config=settings.backend,
                              state_root=settings.state_root, on_output=on_output,
                              rebuild=rebuild)
    return replace(settings, environment=ref)
