"""Discovery as a whole: read every source in precedence order, keep the winners."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from policies.contract import AgentContract, AgentFormat, Scope
from policies.errors import PolicyError
from policies.loader.base import Options
from policies.loader.diagnostics import Diagnostic, Severity
from policies.loader.discovery import (
    Candidate,
    Environment,
    bounded,
    bundled_candidates,
    personal_candidates,
    project_candidates,
)
from policies.loader.files import MAX_FILES_PER_SCOPE
from policies.loader.single import FileOutcome, Status

if TYPE_CHECKING:
    from policies.loader.zuno_layers import ZunoSettings

__all__ = ["BUNDLED_SWITCH", "LoadResult", "bundled_wanted", "discover"]


@dataclass
class LoadResult:
    """Every agent that won, every file's outcome, every diagnostic."""

    agents: dict[str, AgentContract] = field(default_factory=dict)
    outcomes: list[FileOutcome] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: zuno ``default_agent``: the agent a run uses when none is named (checked to exist
    #: and be a primary agent; ``None`` otherwise).
    default_agent: str | None = None
    #: The lowest zuno ``subagent_depth`` of any configuration layer (it can only lower
    #: the user's own limit), or ``None``.
    subagent_depth: int | None = None
    #: The loader options (zuno layers are rebuilt with them when they merge).
    options: Options = field(default_factory=Options)
    #: The top-level keys of every zuno.json read, oldest layer first.
    zuno_settings: list[ZunoSettings] = field(default_factory=list)

    @property
    def rejected(self) -> bool:
        """Whether any definition (or the discovery itself) had an error."""
        return any(d.severity is Severity.ERROR for d in self.diagnostics)

    def get(self, name: str) -> AgentContract | None:
        """The winning contract of that exact name."""
        return self.agents.get(name)

    def _take(self, outcome: FileOutcome) -> None:
        self.outcomes.append(outcome)
        self.diagnostics.extend(outcome.diagnostics)
        if outcome.status is not Status.LOADED:
            return
        for contract in outcome.agents:
            old = self.agents.get(contract.name)
            if old is not None:
                if old.origin.format is contract.origin.format is AgentFormat.ZUNO:
                    # The zuno layers (and the zuno adapter) only when two zuno entries meet.
                    from policies.loader.zuno_layers import merge_layers  # noqa: PLC0415

                    merged, notes = merge_layers(old, contract, self.options)
                    self.diagnostics.extend(notes)
                    if merged is not None:  # zuno: a later layer merges over an earlier one
                        self.agents[contract.name] = merged
                        continue
                same_dir = (old.origin.scope == contract.origin.scope
                            and old.origin.format == contract.origin.format)
                # Two names written differently that normalise to one identity are never
                # merged silently: the warning names both spellings.
                spelled = old.display_name != contract.display_name and contract.name not in (
                    old.display_name, contract.display_name)
                self.diagnostics.append(Diagnostic(
                    file=contract.origin.source, line=contract.origin.line or 1, field="name",
                    severity=Severity.WARNING if same_dir or spelled else Severity.INFO,
                    code="collision",
                    reason=f"agent {contract.name!r} from {contract.origin.source} "
                    f"({contract.origin.scope.value}, {contract.origin.format.value}) replaces "
                    f"the one from {old.origin.source} ({old.origin.scope.value}, "
                    f"{old.origin.format.value})" + (
                        f": {contract.display_name!r} and {old.display_name!r} both normalise "
                        f"to {contract.name!r}" if spelled else ""),
                    hint="rename one of them so each agent keeps its own name" if spelled
                    else None,
                ))
            self.agents[contract.name] = contract


def _load_json_config(path: Path, display: str, scope: Scope, options: Options, *,
                      budget: int = MAX_FILES_PER_SCOPE) -> list[FileOutcome]:
    """:func:`policies.loader.ngnjson.load_json_config`, imported where an ngn JSON file is."""
    from policies.loader.ngnjson import load_json_config  # noqa: PLC0415

    return load_json_config(path, display, scope, options, budget=budget)


def _load_all(result: LoadResult, candidates: list[Candidate], scope: Scope,
              options: Options) -> None:
    for candidate in candidates:
        result._take(candidate.load(scope, options))
        if candidate.format is AgentFormat.ZUNO and candidate.path.suffix == ".json":
            from policies.loader.zuno_layers import read_settings  # noqa: PLC0415

            settings = read_settings(candidate.path, candidate.display)
            if settings is not None:
                result.zuno_settings.append(settings)


def discover(
    root: Path,
    *,
    trust_project: bool = False,
    personal: bool = True,
    bundled: bool | None = None,
    config_file: Path | None = None,
    options: Options | None = None,
    env: Environment | None = None,
) -> LoadResult:
    """Load every definition visible from ``root`` (see :mod:`policies.loader.discovery`):
    corral's bundled agents first, every later source replacing one of the same name.
    ``bundled=None`` reads ``CORRAL_BUNDLED_AGENTS`` (``0`` leaves them out)."""
    options = options or Options()
    env = env or Environment.from_env()
    root = root.resolve()
    if personal and (env.pi_dir / "settings.json").exists():
        # pi's settings file, for its roles, only where one is (its reader on demand).
        from policies.loader.pi_settings import read_pi_roles  # noqa: PLC0415

        pi_roles, pi_notes = read_pi_roles(env)
        options = replace(options, pi_roles=pi_roles)
    else:
        pi_notes = []
    result = LoadResult(options=options, diagnostics=list(pi_notes))
    if bundled_wanted() if bundled is None else bundled:
        _load_all(result, bundled_candidates(), Scope.BUNDLED, options)
    if personal:
        found, notes = personal_candidates(env)
        found, over = bounded(found, "personal", env.display(env.home))
        result.diagnostics += notes + over
        _load_all(result, found, Scope.PERSONAL, options)
        personal_json = env.xdg_config / "ngn" / "config.json"
        if personal_json.exists() or personal_json.is_symlink():
            for outcome in _load_json_config(personal_json, env.display(personal_json),
                                            Scope.PERSONAL, options,
                                            budget=MAX_FILES_PER_SCOPE - len(found)):
                result._take(outcome)
    found, notes = project_candidates(root)
    if trust_project:
        found, over = bounded(found, "project", ".")
        result.diagnostics += notes + over
        _load_all(result, found, Scope.PROJECT, options)
        project_json = root / ".ngn" / "config.json"
        if project_json.exists() or project_json.is_symlink():
            for outcome in _load_json_config(project_json, ".ngn/config.json", Scope.PROJECT,
                                            options, budget=MAX_FILES_PER_SCOPE - len(found)):
                result._take(outcome)
    elif found:
        result.diagnostics.append(Diagnostic(
            file=".", line=1, field="trust", severity=Severity.INFO, code="untrusted_project",
            reason=f"{len(found)} project definition file(s) not loaded: project discovery "
            "needs --trust-project",
        ))
    if config_file is not None:
        shown = _relative(config_file, root)
        for outcome in _load_json_config(config_file, shown, Scope.IMPORT, options):
            result._take(outcome)
    if result.zuno_settings:  # only a zuno.json sets these
        from policies.loader.zuno_layers import apply_presets, apply_settings  # noqa: PLC0415

        result.default_agent, result.subagent_depth, notes = apply_settings(
            result.zuno_settings, result.agents)
        routed, preset_notes = apply_presets(result.zuno_settings, result.agents)
        result.agents.update(routed)
        result.diagnostics += notes + preset_notes
    return result


#: ``CORRAL_BUNDLED_AGENTS``: whether discovery reads the agents corral ships.
BUNDLED_SWITCH = "CORRAL_BUNDLED_AGENTS"


def bundled_wanted(env: Mapping[str, str] | None = None) -> bool:
    """``CORRAL_BUNDLED_AGENTS`` as a switch: unset or ``1`` reads the bundled agents,
    ``0`` leaves them out; any other value is a :class:`PolicyError` naming it."""
    value = (os.environ if env is None else env).get(BUNDLED_SWITCH, "1").strip()
    if value not in ("0", "1"):
        raise PolicyError(f"{BUNDLED_SWITCH}={value!r} is neither 0 nor 1",
                          code="bad_environment_variable", operation="load_agents",
                          context={BUNDLED_SWITCH: value},
                          hint=f"set {BUNDLED_SWITCH}=0 to leave corral's bundled agents "
                          "out of discovery, or unset it")
    return value == "1"


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
