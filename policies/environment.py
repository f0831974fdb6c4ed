"""A project's environment: what every child, check and reviewer of it needs besides the code.

A child's workspace holds the snapshot's tracked and untracked files; a
project's dependencies (``.venv``, ``node_modules``, ``target/``) are ignored,
so never in it, and a check such as ``pytest -q`` fails for every candidate.
An environment describes, once, how to make them:

- ``setup``: shell commands run once per environment key (:mod:`sandbox.environment`)
  in a sandbox over the snapshot; what they write in the workspace (a venv,
  ``node_modules``) becomes a read-only layer under every child;
- ``inputs``: files (lock files) whose content, with the description itself,
  keys the cache: the next run with the same lock files pays nothing;
- ``carry``: ignored paths of your checkout (a ready ``.venv``) shown to each
  child read-only, at the same path and at their original absolute path;
- ``env``: variables every command (setup, child, check) sees;
- ``image`` / ``dockerfile`` (+ ``context``, ``build_args``): the docker image;
- user-only grants, never from a repository: ``setup_network`` (setup may reach
  the network; children never do), ``setup_allow`` (instead, setup reaches only these
  hosts, patterns as ``[network] allow``, through corral's egress proxy), ``secrets``
  (names of your variables passed to setup only), ``ro_paths`` (read-only host paths such
  as a toolchain outside ``/usr``, for bubblewrap).

Where it comes from (:func:`load_environment`): the ``[environment]`` table of
your config, and, under ``--trust-project`` only (like project agents), the
repository's own ``.corral/environment.toml`` (the same keys) or
``.devcontainer/devcontainer.json`` (image, ``build.dockerfile``/``context``/
``args``, ``onCreateCommand``, ``updateContentCommand``, ``postCreateCommand``,
``containerEnv``, ``remoteEnv``). Your config's keys win over the
repository's; a grant a repository asks for is ignored with a diagnostic that
names the file and the field.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from policies.errors import PolicyError
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity

__all__ = [
    "DEVCONTAINER",
    "LOCK_FILES",
    "PROJECT_FILE",
    "USER_ONLY",
    "EnvironmentConfig",
    "EnvironmentInvalid",
    "EnvironmentSpec",
    "load_environment",
]

PROJECT_FILE = ".corral/environment.toml"
DEVCONTAINER = ".devcontainer/devcontainer.json"
#: Keys only your own config may set: a repository never grants itself these.
USER_ONLY = ("setup_network", "setup_allow", "secrets", "ro_paths")
#: Lock files that key a devcontainer's environment when they exist (a devcontainer names
#: none of its own inputs).
LOCK_FILES = ("requirements.txt", "requirements-dev.txt", "pyproject.toml", "poetry.lock",
              "uv.lock", "Pipfile.lock", "package.json", "package-lock.json", "yarn.lock",
              "pnpm-lock.yaml", "Cargo.lock", "go.sum", "Gemfile.lock", "composer.lock")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEVCONTAINER_USED = {"image", "build", "onCreateCommand", "updateContentCommand",
                      "postCreateCommand", "containerEnv", "remoteEnv", "name", "$schema"}
#: Devcontainer keys that would run on your machine or widen the sandbox: never honoured.
_DEVCONTAINER_REFUSED = {"initializeCommand", "runArgs", "mounts", "privileged", "capAdd",
                         "securityOpt", "forwardPorts", "appPort", "dockerComposeFile"}


class EnvironmentInvalid(PolicyError):
    """An environment description cannot be used (a user's input error)."""

    code = "environment_invalid"


def _relative(value: str, field: str) -> str:
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or value.startswith("~"):
        raise ValueError(f"{field}: {value!r} must be a path inside the repository")
    if path.parts and path.parts[0] == ".git":
        raise ValueError(f"{field}: {value!r} is inside .git")
    return str(path)


class _Keys(BaseModel):
    """An environment's keys, in order: what :class:`EnvironmentConfig` reads and
    :class:`EnvironmentSpec` resolves (each narrows the few it treats its own way)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    setup: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    carry: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    dockerfile: str | None = None
    context: str | None = None
    build_args: dict[str, str] = Field(default_factory=dict)
    #: How long setup may take, in all.
    setup_timeout: float = 1800.0
    setup_network: bool | None = None
    #: The hosts setup reaches through corral's filtering proxy (:mod:`sandbox.egress`) when
    #: ``setup_network`` is not true: a domain list instead of the whole network.
    setup_allow: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    ro_paths: tuple[str, ...] = ()
    #: ``corral gc`` removes an environment no run used for this many days.
    prune_after_days: float = 14.0


class EnvironmentConfig(_Keys):
    """The ``[environment]`` keys, as written (your config, or a repository's file)."""

    setup_timeout: float = Field(default=1800.0, gt=0)
    prune_after_days: float = Field(default=14.0, gt=0)

    @field_validator("setup")
    @classmethod
    def _commands(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for command in value:
            if not command.strip() or "\0" in command:
                raise ValueError("setup: every command must be a non-empty shell line")
        return value

    @field_validator("inputs", "carry")
    @classmethod
    def _paths(cls, value: tuple[str, ...], info: Any) -> tuple[str, ...]:
        return tuple(_relative(v, info.field_name) for v in value)

    @field_validator("dockerfile", "context")
    @classmethod
    def _file(cls, value: str | None, info: Any) -> str | None:
        return None if value is None else _relative(value, info.field_name)

    @field_validator("env", "build_args")
    @classmethod
    def _variables(cls, value: dict[str, str], info: Any) -> dict[str, str]:
        for name, text in value.items():
            if not _NAME.fullmatch(name) or "\0" in text:
                raise ValueError(f"{info.field_name}: {name!r} is not a variable name")
        return value

    @field_validator("setup_allow")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from policies.network import check_pattern  # noqa: PLC0415 - only when given

        try:
            return tuple(check_pattern(item) for item in value)
        except ValueError as exc:
            raise ValueError(f"setup_allow: {exc}") from exc

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _NAME.fullmatch(name):
                raise ValueError(f"secrets: {name!r} is not a variable name")
        return value

    @field_validator("ro_paths")
    @classmethod
    def _absolute(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
                raise ValueError(f"ro_paths: {path!r} must be an absolute path")
        return value


class EnvironmentSpec(_Keys):
    """One resolved environment: what :mod:`sandbox.environment` builds and children get."""

    setup_network: bool = False
    #: Where it was described: the files read, most important first.
    sources: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to build and nothing to show: no environment at all."""
        return not (self.setup or self.carry or self.env or self.image or self.dockerfile
                    or self.ro_paths)


def load_environment(root: Path, user: EnvironmentConfig | None, *, trust_project: bool,
                     network: bool | None = None) -> tuple[EnvironmentSpec | None,
                                                           list[Diagnostic]]:
    """The environment of the repository at ``root``: ``user`` (your config's table) over
    the repository's own description (read only under ``trust_project``); ``network``
    (``--setup-network``) overrides your config's grant. ``None`` when nothing describes
    one. Diagnostics name what was ignored; an unusable description raises
    :class:`EnvironmentInvalid` naming the file and the field."""
    diagnostics: list[Diagnostic] = []
    project: dict[str, Any] = {}
    sources: list[str] = []
    if trust_project:
        project, source = _project(root, diagnostics)
        if source:
            sources.append(source)
    merged: dict[str, Any] = dict(project)
    if user is not None:
        sources.insert(0, "your config [environment]")
        merged.update(user.model_dump(exclude_unset=True))
    if network is not None:
        merged["setup_network"] = network
    if not merged and not sources:
        return None, diagnostics
    if merged.get("setup_network") is None:
        merged["setup_network"] = False
    spec = EnvironmentSpec.model_validate({**merged, "sources": tuple(sources)})
    return (None if spec.empty else spec), diagnostics


def _project(root: Path, diagnostics: list[Diagnostic]) -> tuple[dict[str, Any], str | None]:
    own = root / PROJECT_FILE
    if own.is_file():
        return _project_toml(own, PROJECT_FILE, diagnostics), PROJECT_FILE
    devcontainer = root / DEVCONTAINER
    if devcontainer.is_file():
        return _devcontainer(root, devcontainer, diagnostics), DEVCONTAINER
    return {}, None


def _project_toml(path: Path, display: str, diagnostics: list[Diagnostic]) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EnvironmentInvalid(f"{display}: cannot read it: {exc}", operation="load_environment",
                               context={"file": display},
                               hint="fix the file, or run with --no-env") from exc
    data = data.get("environment", data)  # `[environment]` or top-level keys, either
    if not isinstance(data, dict):
        raise EnvironmentInvalid(f"{display}: environment must be a table",
                               operation="load_environment", context={"file": display})
    for key in (*USER_ONLY, "prune_after_days"):
        if key in data:
            diagnostics.append(_ignored(display, key, data.pop(key)))
    _validate(data, display)
    return data


def _ignored(display: str, key: str, value: object) -> Diagnostic:
    return Diagnostic(file=display, line=1, field=key, severity=Severity.WARNING,
                      code="environment",
                      reason=f"a repository cannot grant {key} ({value!r}); ignored",
                      hint="only your own config, or --setup-network on the command line, "
                      "grants network, secrets or host paths")


def _validate(data: dict[str, Any], display: str) -> None:
    try:
        EnvironmentConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "environment"
        raise EnvironmentInvalid(f"{display}: {where}: {first['msg']}",
                               operation="load_environment", context={"file": display},
                               hint="fix the file, or run with --no-env") from exc


def _devcontainer(root: Path, path: Path, diagnostics: list[Diagnostic]) -> dict[str, Any]:
    from policies.loader.formats.common import json_document  # noqa: PLC0415

    display = DEVCONTAINER
    try:
        data = json_document(path.read_text(encoding="utf-8"), jsonc=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvironmentInvalid(f"{display}: cannot read it: {exc}",
                               operation="load_environment", context={"file": display}) from exc
    except DefinitionRejected as exc:
        raise EnvironmentInvalid(f"{display}:{exc.line}: {exc.reason}",
                               operation="load_environment", context={"file": display},
                               hint="fix the file, or run with --no-env") from exc
    if not isinstance(data, dict):
        raise EnvironmentInvalid(f"{display}: the document must be an object",
                               operation="load_environment", context={"file": display})
    if "dockerComposeFile" in data:
        raise EnvironmentInvalid(
            f"{display}: dockerComposeFile: compose-based devcontainers are not supported",
            operation="load_environment", context={"file": display},
            hint="describe the environment in .corral/environment.toml, or run with --no-env")
    for key in sorted(set(data) - _DEVCONTAINER_USED):
        why = ("would run on your machine or widen the sandbox; never honoured"
               if key in _DEVCONTAINER_REFUSED else "not supported; ignored")
        diagnostics.append(Diagnostic(file=display, line=1, field=key,
                                      severity=Severity.WARNING, code="environment",
                                      reason=why))
    out: dict[str, Any] = {}
    base = PurePosixPath(".devcontainer")
    if isinstance(data.get("image"), str):
        out["image"] = data["image"]
    build = data.get("build")
    if isinstance(build, dict):
        if isinstance(build.get("dockerfile"), str):
            out["dockerfile"] = str(_normal(base / build["dockerfile"]))
            out["context"] = str(_normal(base / str(build.get("context", "."))))
        if isinstance(build.get("args"), dict):
            out["build_args"] = {str(k): str(v) for k, v in build["args"].items()}
    setup: list[str] = []
    for key in ("onCreateCommand", "updateContentCommand", "postCreateCommand"):
        setup += _commands(data.get(key), key, display)
    if setup:
        out["setup"] = setup
    env: dict[str, str] = {}
    for key in ("containerEnv", "remoteEnv"):
        value = data.get(key)
        if isinstance(value, dict):
            for name, text in value.items():
                if text is None:
                    continue
                resolved = _substitute(str(text), env, display, key, diagnostics)
                if resolved is not None:
                    env[str(name)] = resolved
    if env:
        out["env"] = env
    out["inputs"] = [name for name in (DEVCONTAINER, *LOCK_FILES) if (root / name).is_file()]
    if out.get("dockerfile"):
        out["inputs"].append(out["dockerfile"])
    _validate(out, display)
    return out


def _normal(path: PurePosixPath) -> PurePosixPath:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                raise EnvironmentInvalid(f"{DEVCONTAINER}: build: {path} leaves the repository",
                                       operation="load_environment")
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _commands(value: object, key: str, display: str) -> list[str]:
    """A lifecycle command: a shell string, an argv array, or named commands of either."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [shlex.join(value)] if value else []
    if isinstance(value, dict):
        found: list[str] = []
        for name in sorted(value):  # devcontainers run these in parallel; corral in order
            found += _commands(value[name], f"{key}.{name}", display)
        return found
    raise EnvironmentInvalid(f"{display}: {key}: a command is a string, an array of strings or "
                           "an object of those", operation="load_environment",
                           context={"file": display})


_VARIABLE = re.compile(r"\$\{(containerEnv|localEnv|containerWorkspaceFolder|"
                       r"localWorkspaceFolder)(?::([A-Za-z_][A-Za-z0-9_]*))?(?::[^}]*)?\}")


def _substitute(text: str, env: dict[str, str], display: str, key: str,
                diagnostics: list[Diagnostic]) -> str | None:
    """``${containerEnv:VAR}`` from what is set so far; ``${localEnv:...}`` (your machine's
    variables) is never read: a repository must not copy your environment into a child."""
    refused = False

    def replace(match: re.Match[str]) -> str:
        nonlocal refused
        kind, name = match.group(1), match.group(2)
        if kind == "containerEnv" and name:
            return env.get(name, "")
        refused = True
        return ""

    result = _VARIABLE.sub(replace, text)
    if refused:
        diagnostics.append(Diagnostic(
            file=display, line=1, field=key, severity=Severity.WARNING, code="environment",
            reason=f"{text!r} reads your machine's environment or paths; the variable is "
            "left out", hint="set it in your config's [environment] env"))
        return None
    return result
