"""Where definitions live, in which order they are read, and which one wins.

Precedence follows ``shared/spec/ngn-agent-definitions.md``. Later sources win:

0. the agents corral ships (:mod:`policies.agents`, pi files: pi's bundled agents are
   below its user and project ones), so any definition of the same name replaces one;
1. personal files, in the personal format order (Claude, Copilot, Codex,
   Cursor, Gemini, OpenCode, Antigravity, then pi and zuno, then native);
2. personal JSON imports, then personal JSON profiles;
3. trusted project files, in the workspace format order (Antigravity, Claude,
   Copilot, OpenCode, Codex, Cursor, Gemini, then pi, zuno and the catalog,
   then native);
4. trusted project JSON imports, then profiles;
5. explicit JSON imports, then profiles (``--config FILE``).

pi, zuno and the catalog are not in the ngn tables; corral places them just
before native, in both orders. Project discovery needs ``trust_project``;
an explicitly selected JSON file's own imports load without it. Files are
sorted by path; each scope reads at most 256 files; symlinked files and
directories are reported and never followed.

The project places are one table, :data:`policies.places.PROJECT_PLACES`, which
:func:`project_candidates` iterates and the review flags of a child's diff are
derived from (:data:`sandbox.names.REVIEW_RULES`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from policies.contract import AgentFormat, Scope
from policies.loader.base import Options
from policies.loader.diagnostics import DefinitionRejected, Diagnostic, Severity
from policies.loader.files import MAX_FILES_PER_SCOPE, decode_text, read_bounded
from policies.loader.single import FileOutcome, Status, load_file
from policies.places import DISCOVERED, PROJECT_PLACES, ProjectPlace

__all__ = ["Candidate", "Environment", "personal_candidates", "project_candidates"]

WORKSPACE_ORDER = (
    AgentFormat.ANTIGRAVITY, AgentFormat.CLAUDE, AgentFormat.COPILOT, AgentFormat.OPENCODE,
    AgentFormat.CODEX, AgentFormat.CURSOR, AgentFormat.GEMINI, AgentFormat.PI, AgentFormat.ZUNO,
    AgentFormat.CATALOG, AgentFormat.NGN,
)
PERSONAL_ORDER = (
    AgentFormat.CLAUDE, AgentFormat.COPILOT, AgentFormat.CODEX, AgentFormat.CURSOR,
    AgentFormat.GEMINI, AgentFormat.OPENCODE, AgentFormat.ANTIGRAVITY, AgentFormat.PI,
    AgentFormat.ZUNO, AgentFormat.NGN,
)
_MAX_DEPTH = 8
#: The places project discovery reads, by format, in the table's order.
_PLACES: dict[AgentFormat, tuple[ProjectPlace, ...]] = {
    fmt: tuple(place for place in PROJECT_PLACES
               if place.format == fmt.value and place.layout in DISCOVERED)
    for fmt in WORKSPACE_ORDER}


@dataclass(frozen=True)
class Environment:
    """The personal directories, from ``HOME`` and ``XDG_CONFIG_HOME``."""

    home: Path
    xdg_config: Path
    pi_dir: Path

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Environment:
        """Read the environment (``os.environ`` by default)."""
        env = dict(os.environ) if env is None else env
        home = Path(env.get("HOME") or Path.home())
        xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
        pi_dir = Path(env["PI_CODING_AGENT_DIR"]) if env.get("PI_CODING_AGENT_DIR") else (
            home / ".pi" / "agent")
        return cls(home=home, xdg_config=xdg, pi_dir=pi_dir)

    def display(self, path: Path) -> str:
        """``~/...`` for paths under HOME, else the absolute path."""
        try:
            return "~/" + path.relative_to(self.home).as_posix()
        except ValueError:
            return path.as_posix()


@dataclass
class Candidate:
    """One file discovery found, with everything needed to load it."""

    path: Path
    format: AgentFormat
    display: str
    location_name: str
    skip_non_agents: bool = True
    declared: dict[str, str] = field(default_factory=dict)

    def load(self, scope: Scope, options: Options) -> FileOutcome:
        """Load the candidate."""
        return load_file(self.path, self.format, scope=scope, display=self.display,
                         location_name=self.location_name, options=options,
                         declared=self.declared, skip_non_agents=self.skip_non_agents)


@dataclass
class _Walk:
    """Collects candidates and notes for one scope."""

    root: Path
    show: object  # Callable[[Path], str]
    notes: list[Diagnostic] = field(default_factory=list)
    found: list[Candidate] = field(default_factory=list)

    def name(self, path: Path) -> str:
        return self.show(path)  # type: ignore[operator,no-any-return]

    def note(self, path: Path, reason: str, severity: Severity = Severity.INFO,
             code: str = "discovery") -> None:
        self.notes.append(Diagnostic(file=self.name(path), line=1, field="file",
                                     severity=severity, reason=reason, code=code))

    def problem(self, path: Path, field: str, line: int, reason: str, *,
                hint: str | None = None, code: str = "declaration") -> None:
        """An error about ``path`` found while discovering (not while loading a file)."""
        self.notes.append(Diagnostic(file=self.name(path), line=line, field=field,
                                     severity=Severity.ERROR, reason=reason, hint=hint,
                                     code=code))

    def safe_dir(self, anchor: Path, relative: str) -> bool:
        """Whether ``anchor/relative`` is a real directory, no component below the anchor
        being a symlink (the anchor itself, HOME or the root, is the user's choice)."""
        probe = anchor
        for part in Path(relative).parts:
            probe = probe / part
            try:
                info = probe.lstat()
            except OSError:
                return False
            if stat.S_ISLNK(info.st_mode):
                self.note(probe, "a symlinked directory is not followed", Severity.WARNING,
                          "symlink")
                return False
            if not stat.S_ISDIR(info.st_mode):
                return False
        return True

    def entries(self, directory: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as it:
                return sorted(it, key=lambda entry: entry.name)
        except OSError as exc:
            self.note(directory, f"cannot list the directory: {exc.strerror}", Severity.WARNING)
            return []

    def files(self, fmt: AgentFormat, anchor: Path, relative: str, *, recursive: bool = False,
              nested_agent_md: bool = False) -> None:
        """Add the files of ``anchor/relative`` (and below) as candidates of ``fmt``,
        sorted by path."""
        if not self.safe_dir(anchor, relative):
            return
        directory = anchor / relative
        before = len(self.found)
        self._scan(fmt, directory, directory, recursive, nested_agent_md, 0)
        self.found[before:] = sorted(self.found[before:], key=lambda c: c.path.as_posix())

    def _scan(self, fmt: AgentFormat, directory: Path, base: Path, recursive: bool,
              nested: bool, depth: int) -> None:
        subdirs: list[Path] = []
        for entry in self.entries(directory):
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if entry.is_symlink():
                if entry.is_dir():
                    self.note(path, "a symlinked directory is not followed", Severity.WARNING,
                              "symlink")
                    continue
                self.add(fmt, path, base)  # the loader rejects it with a diagnostic
            elif entry.is_dir(follow_symlinks=False):
                subdirs.append(path)
            else:
                self.add(fmt, path, base)
        for sub in subdirs:
            if nested and depth == 0:
                agent_md = sub / "agent.md"
                try:
                    agent_info = agent_md.lstat()
                except OSError:
                    agent_info = None
                if agent_info is not None:
                    self.found.append(Candidate(agent_md, fmt, self.name(agent_md), sub.name))
                    continue
            if recursive and depth < _MAX_DEPTH:
                self._scan(fmt, sub, base, recursive, nested, depth + 1)
            elif not recursive and any(p.suffix == ".md" for p in _quiet_listing(sub)):
                self.note(sub, f"subdirectories are not scanned for {fmt.value} agents; import "
                          "these files explicitly if they are agents")

    def add(self, fmt: AgentFormat, path: Path, base: Path) -> None:
        relative = path.relative_to(base).as_posix()
        location = relative[: -len(path.suffix)] if path.suffix else relative
        if fmt is AgentFormat.COPILOT and relative.endswith(".agent.md"):
            location = relative[: -len(".agent.md")]
        self.found.append(Candidate(path, fmt, self.name(path), location))

    def config(self, fmt: AgentFormat, anchor: Path, relative: str) -> None:
        """Add a config file holding an agent map (``opencode.json``, ``zuno.json``)."""
        path = anchor / relative
        if not self.safe_dir(anchor, str(Path(relative).parent)):
            return
        try:
            info = path.lstat()
        except OSError:
            return
        if stat.S_ISLNK(info.st_mode) or stat.S_ISREG(info.st_mode):
            self.found.append(Candidate(path, fmt, self.name(path), path.stem,
                                        skip_non_agents=False))


def _codex_layer(walk: _Walk, anchor: Path, relative: str = ".codex") -> None:
    """``<anchor>/.codex/config.toml`` and the role files it declares outside
    ``.codex/agents/`` (those inside are found there). A declared role whose
    ``config_file`` is missing is an error naming the role: Codex has no such role,
    and the user would never learn it from the role files alone."""
    layer = anchor / relative
    config = layer / "config.toml"
    if not walk.safe_dir(anchor, relative):
        return
    try:
        info = config.lstat()
    except OSError:
        return
    walk.found.append(Candidate(config, AgentFormat.CODEX, walk.name(config), "config",
                                skip_non_agents=False))
    if not stat.S_ISREG(info.st_mode):
        return  # the loader rejects it with the reason
    # The Codex adapter (and its TOML reader) only where a Codex config is found.
    from policies.loader.formats.codex import declared_roles, role_file  # noqa: PLC0415
    from policies.loader.formats.common import key_line  # noqa: PLC0415

    try:
        roles = declared_roles(decode_text(read_bounded(config)))
    except DefinitionRejected:
        return  # the config's own candidate reports why
    agents_dir = layer / "agents"
    text = decode_text(read_bounded(config))
    for name, config_file, declared in roles:
        field = f"agents.{name}.config_file"
        line = key_line(text, f"agents.{name}")
        target = role_file(config, config_file)
        if target is None:
            walk.problem(config, field, line, f"role {name!r}: config_file {config_file!r} "
                         "lies outside .codex/; corral reads role files only from there",
                         hint="move the role file next to config.toml (agents/...)")
            continue
        target = Path(os.path.normpath(target))
        try:
            info = target.lstat()
        except OSError:
            walk.problem(config, field, line, f"role {name!r} is declared with config_file "
                         f"{config_file!r}, which does not exist: there is no such role",
                         hint=f"create {config_file} (name, description, "
                         f"developer_instructions) or remove the [agents.{name}] table",
                         code="file_missing")
            continue
        if stat.S_ISDIR(info.st_mode):
            walk.problem(config, field, line, f"role {name!r}: config_file {config_file!r} "
                         "is a directory, not a role file")
        elif target.parent != agents_dir:  # those in agents/ are candidates already
            walk.found.append(Candidate(target, AgentFormat.CODEX, walk.name(target),
                                        target.stem, skip_non_agents=False,
                                        declared={**declared, "name": name}))


#: Directories never searched for nested ``.zuno`` layers: hidden ones (a layer is the
#: ``.zuno`` directory itself) and installed dependencies, whose files are not the project's.
_NOT_PROJECT = frozenset({"node_modules"})
#: How many directories the nested-layer search visits at most.
_MAX_ZUNO_DIRS = 4096


def _zuno_layer(walk: _Walk, anchor: Path, relative: str) -> None:
    """One zuno configuration layer: its ``zuno.json``, then its Markdown agents (the
    later wins when both define an agent: a file per agent is the more specific)."""
    walk.config(AgentFormat.ZUNO, anchor, f"{relative}/zuno.json")
    for name in ("agent", "agents"):
        walk.files(AgentFormat.ZUNO, anchor, f"{relative}/{name}", recursive=True)


def zuno_directories(walk: _Walk, root: Path, name: str = ".zuno") -> list[str]:
    """Every project ``.zuno`` directory under ``root``, relative to it: the root's own,
    then nested ones, shallower first, then by path (deeper layers win). Hidden
    directories, ``node_modules`` and symlinks are not searched; the search visits at
    most 4096 directories, 8 levels deep, and says so when it stops early."""
    found: list[str] = []
    queue: list[tuple[Path, int]] = [(root, 0)]
    visited = 0
    while queue:
        directory, depth = queue.pop(0)
        visited += 1
        if visited > _MAX_ZUNO_DIRS:  # a warning only where zuno is used at all
            walk.note(directory, f"stopped looking for nested .zuno directories after "
                      f"{_MAX_ZUNO_DIRS} directories",
                      Severity.WARNING if found else Severity.INFO, "too_many_dirs")
            break
        for entry in walk.entries(directory) if depth else _quiet_entries(directory):
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            if entry.name == name:
                found.append(path.relative_to(root).as_posix())
            elif not entry.name.startswith(".") and entry.name not in _NOT_PROJECT and \
                    depth < _MAX_DEPTH:
                queue.append((path, depth + 1))
    return sorted(found, key=lambda rel: (rel.count("/"), rel))


def project_zuno_dirs(root: Path) -> list[Path]:
    """Every project ``.zuno`` directory under ``root`` (see :func:`zuno_directories`)."""
    walk = _Walk(root, lambda p: p.relative_to(root).as_posix())
    return [root / rel for rel in zuno_directories(walk, root)]


def _quiet_entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda entry: entry.name)
    except OSError:
        return []


def _quiet_listing(path: Path) -> Iterator[Path]:
    try:
        yield from path.iterdir()
    except OSError:
        return


def project_candidates(root: Path, walk: _Walk | None = None) -> tuple[list[Candidate],
                                                                         list[Diagnostic]]:
    """Every project definition under ``root``, in workspace precedence order: each
    format's places of :data:`policies.places.PROJECT_PLACES`, in the table's order."""
    walk = walk or _Walk(root, lambda p: p.relative_to(root).as_posix())
    for fmt in WORKSPACE_ORDER:
        for place in _PLACES[fmt]:
            if place.layout == "agent_map":
                walk.config(fmt, root, place.path)
            elif place.layout == "codex_layer":
                _codex_layer(walk, root, place.path)
            elif place.layout == "zuno_layer":
                for layer in zuno_directories(walk, root, place.path):
                    _zuno_layer(walk, root, layer)
            else:
                walk.files(fmt, root, place.path, recursive=place.layout == "recursive",
                           nested_agent_md=place.layout == "nested")
    return walk.found, walk.notes


def personal_candidates(env: Environment) -> tuple[list[Candidate], list[Diagnostic]]:
    """Every personal definition, in personal precedence order."""
    walk = _Walk(env.home, env.display)
    home, xdg = env.home, env.xdg_config
    for fmt in PERSONAL_ORDER:
        if fmt is AgentFormat.CLAUDE:
            walk.files(fmt, home, ".claude/agents")
        elif fmt is AgentFormat.COPILOT:
            walk.files(fmt, home, ".copilot/agents")
        elif fmt is AgentFormat.CODEX:
            walk.files(fmt, home, ".codex/agents")
            _codex_layer(walk, home)
        elif fmt is AgentFormat.CURSOR:
            walk.files(fmt, home, ".cursor/agents")
        elif fmt is AgentFormat.GEMINI:
            walk.files(fmt, home, ".gemini/agents")
        elif fmt is AgentFormat.OPENCODE:
            for name in ("agent", "agents"):
                walk.files(fmt, xdg, f"opencode/{name}", recursive=True)
        elif fmt is AgentFormat.ANTIGRAVITY:
            walk.files(fmt, home, ".gemini/config/agents", nested_agent_md=True)
        elif fmt is AgentFormat.PI:
            walk.files(fmt, env.pi_dir, "agents")
        elif fmt is AgentFormat.ZUNO:
            _zuno_layer(walk, xdg, "zuno")
        elif fmt is AgentFormat.NGN:
            walk.files(fmt, xdg, "ngn/agents", nested_agent_md=True)
    return walk.found, walk.notes


def bundled_candidates() -> list[Candidate]:
    """The agents corral ships, pi files shown as ``corral:agents/NAME.md``."""
    from policies.agents import BUNDLED_DIR  # noqa: PLC0415 - only where they are read

    walk = _Walk(BUNDLED_DIR, lambda p: f"corral:agents/{p.name}")
    walk.files(AgentFormat.PI, BUNDLED_DIR.parent, BUNDLED_DIR.name)
    return walk.found


def bounded(candidates: list[Candidate], scope_name: str, display: str,
            ) -> tuple[list[Candidate], list[Diagnostic]]:
    """Apply the 256-files-per-scope bound; report what was left out."""
    if len(candidates) <= MAX_FILES_PER_SCOPE:
        return candidates, []
    dropped = len(candidates) - MAX_FILES_PER_SCOPE
    note = Diagnostic(
        file=display, line=1, field="file", severity=Severity.ERROR, code="too_many_files",
        reason=f"the {scope_name} scope has {len(candidates)} definition files; discovery reads "
        f"at most {MAX_FILES_PER_SCOPE} per scope, so the last {dropped} (by precedence and "
        f"path) were not loaded, starting with {candidates[MAX_FILES_PER_SCOPE].display}",
    )
    return candidates[:MAX_FILES_PER_SCOPE], [note]


#: How each format lays out an agent directory: recursive (OpenCode and zuno ids are paths),
#: ``<name>/agent.md`` directories (ngn, Antigravity), or flat files (every other format).
_RECURSIVE = frozenset({AgentFormat.OPENCODE, AgentFormat.ZUNO})
_NESTED = frozenset({AgentFormat.NGN, AgentFormat.ANTIGRAVITY})


def directory_candidates(fmt: AgentFormat, directory: Path, show: Callable[[Path], str],
                         ) -> tuple[list[Candidate], list[Diagnostic]]:
    """The definition files of one agent directory, read as ``fmt`` reads its own agent
    directory (an ``agent_imports`` entry whose path is a directory: corral's extension)."""
    walk = _Walk(directory, show)
    walk.files(fmt, directory.parent, directory.name, recursive=fmt in _RECURSIVE,
               nested_agent_md=fmt in _NESTED)
    return walk.found, walk.notes


__all__ += ["PERSONAL_ORDER", "WORKSPACE_ORDER", "Status", "bounded", "bundled_candidates",
            "directory_candidates",
            "project_zuno_dirs", "zuno_directories"]
