"""Names that need care: every spelling of ``.git``, git directories, and paths a reviewer
must see.

:func:`is_git_alias` recognises ``.git`` under every spelling a filesystem may
fold to it (threats B1.5): any case (``.GIT``), NTFS trailing dots and spaces
(``.git.``), NTFS alternate streams (``.git::$INDEX_ALLOCATION``), the 8.3
short name (``GIT~1``), and HFS+ ignorable code points (``.g\\u200cit``). Writes to
such a name are refused by the file API and such paths are left out of every
diff.

:func:`git_dir_signature` judges the names one directory will hold: git's
discovery (``is_git_directory`` in ``setup.c``) treats any directory holding a
valid ``HEAD`` plus ``objects/`` and ``refs/`` (or a ``commondir`` file naming
them) as a repository, whatever the directory is called, and runs what its
``config`` names (``core.fsmonitor`` on every ``git status`` a prompt or an
IDE starts there). Conservatively, a directory is a git directory when it
holds one of ``HEAD``, ``config``, ``commondir``, ``gitdir``, ``packed-refs``
as a file next to ``objects/``, ``refs/`` or a ``commondir`` file (names
compared case-insensitively, as a case-folding filesystem would).

:func:`review_flags` marks changed paths that run code or steer agents when
the parent later opens the repository (threats B2.15, B3.19, B8.41); each
flag needs an explicit ``--yes`` before ``corral apply`` merges it. A new
symlink (``symlink``), a new executable bit (``executable``) and any mode
change (``mode_change``) are flagged from the modes; everything else comes from
one table, :data:`REVIEW_RULES` (pattern, flag, why), which the README's list
reproduces (a test holds them equal). Patterns are matched on the path's
components, case-insensitively, at any depth unless they start with ``/``:
``name/`` is a directory the path lies under, ``a/b`` a run of components the
path ends with, and ``*`` a wildcard within one component. Tools read nested
copies too: a monorepo package's ``.claude/settings.json`` (its hooks run
commands), its ``eslint.config.js``, a nested ``conftest.py``.

The table's first rows are derived from :data:`policies.places.PROJECT_PLACES`,
the places project discovery iterates (threats row 44): every place the loader
discovers a project's agents in is ``agent_config``; corral's own ``.corral/``
and the devcontainer it reads its environment from are ``corral_config`` (the
next ``--trust-project`` run executes their setup). A place added to the loader
is flagged without an edit here.

Deliberately not flagged: ``.editorconfig`` (formatting only),
``.nvmrc``/``.node-version``/``.python-version``/``.ruby-version`` (they pick
an installed or official release, never a program from the repository); lock
files (``package-lock.json``, ``poetry.lock``, ``uv.lock``...): data that pins
what a flagged manifest names, though a resolved URL a lock file alone changes
is not flagged.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import PurePosixPath

from policies.places import CORRAL, PROJECT_PLACES, ProjectPlace

__all__ = ["CHILD_READ_ONLY", "GIT_DIR_CONTAINERS", "GIT_DIR_FILES", "REVIEW_RULES", "ReviewRule",
           "git_dir_signature", "has_git_alias", "is_git_alias", "is_under", "review_flags"]

# Code points HFS+ ignores when comparing names (the list git's is_hfs_dotgit uses).
_HFS_IGNORABLE = frozenset(
    [0x200C, 0x200D, 0x200E, 0x200F, 0xFEFF, *range(0x202A, 0x202F), *range(0x206A, 0x2070)]
)

#: Files that make a directory a git directory next to one of GIT_DIR_CONTAINERS (casefolded).
GIT_DIR_FILES = frozenset({"head", "config", "commondir", "gitdir", "packed-refs"})
#: What git's discovery needs besides HEAD: object and ref stores, or a common dir.
GIT_DIR_CONTAINERS = frozenset({"objects", "refs", "commondir"})


@dataclass(frozen=True)
class ReviewRule:
    """One row of :data:`REVIEW_RULES`: the paths a flag marks, and why a reviewer looks."""

    flag: str
    why: str
    patterns: tuple[str, ...]
    #: Read-only to a workspace-write child (:data:`CHILD_READ_ONLY`): what it configures
    #: runs or steers the next time the project is opened, with no review in between.
    read_only: bool = False


_R = ReviewRule


def _place(place: ProjectPlace) -> str:
    """A project place as a review pattern (everything in corral's own ``.corral/``)."""
    if place.format == CORRAL and place.path.startswith(".corral/"):
        return ".corral/"
    return place.path + ("/" if place.kind == "dir" else "")


def _place_rules(places: tuple[ProjectPlace, ...]) -> tuple[ReviewRule, ...]:
    """The review rules of :data:`policies.places.PROJECT_PLACES`: every place corral's
    loader discovers agents in (``agent_config``), and corral's own (``corral_config``)."""
    return (
        _R("agent_config", "where corral's loader discovers a project's agents (every "
           "format's project places): the next --trust-project run loads them, and they "
           "choose an agent's prompt, tools and model",
           tuple(dict.fromkeys(_place(p) for p in places if p.format != CORRAL)), True),
        _R("corral_config", "corral's own project settings: the next --trust-project run "
           "executes their setup commands, and what setup writes lies under every child "
           "and check",
           tuple(dict.fromkeys(_place(p) for p in places if p.format == CORRAL)), True),
    )


#: What makes a changed path worth a second look before it is merged: the one table of
#: path review flags (see the module docstring for the pattern syntax); its first rows
#: come from the table of project places.
REVIEW_RULES: tuple[ReviewRule, ...] = (
    *_place_rules(PROJECT_PLACES),
    _R("agent_config", "harness settings and definitions: Claude Code hooks run commands, "
       "MCP server entries start programs, agents, rules and skills steer the agent",
       (".claude/", ".codex/", ".cursor/", ".gemini/", ".opencode/", ".windsurf/",
        ".continue/", ".agents/", ".agent/", ".zuno/", ".pi/", ".ngn/", ".vscode/",
        ".mcp.json", "opencode.json", "opencode.jsonc", ".aider.conf.yml"), True),
    _R("agent_config", "instructions a coding agent reads as its own",
       ("AGENTS.md", "AGENTS.override.md", "CLAUDE.md", "CLAUDE.local.md", "GEMINI.md",
        ".cursorrules", ".windsurfrules", "copilot-instructions.md")),
    _R("ci_config", "CI pipelines: they run with the repository's secrets (GitHub's "
       "workflows and actions; its CODEOWNERS decides who must review)",
       (".github/", ".gitlab/", ".gitea/", ".forgejo/", ".circleci/", ".buildkite/",
        ".gitlab-ci.yml", ".travis.yml", "Jenkinsfile", "azure-pipelines.yml",
        "bitbucket-pipelines.yml", ".drone.yml")),
    _R("git_metadata", "git and git-lfs read them: filters, diff and merge drivers, "
       "submodule and LFS URLs, files hidden from review",
       (".gitattributes", ".gitmodules", ".gitignore", ".gitconfig", ".git-credentials",
        ".mailmap", ".lfsconfig")),
    _R("build_script", "make, just, task runners and process managers (foreman, honcho) "
       "run their recipes",
       ("Makefile", "GNUmakefile", "*.mk", "justfile", ".justfile", "Taskfile.yml",
        "Taskfile.yaml", "Rakefile", "meson.build", "CMakeLists.txt", "*.cmake", "Procfile")),
    _R("build_script", "Python builds, installs and tests run them: setup scripts, build "
       "backends and tool hooks, pytest's conftest, nox and tox sessions",
       ("setup.py", "setup.cfg", "pyproject.toml", "conftest.py", "noxfile.py", "tox.ini",
        "pytest.ini")),
    _R("build_script", "JavaScript tools execute their config files when they start "
       "(eslint, vite, vitest, jest, webpack, rollup, next, tailwind, prettier, babel...: "
       "name.config.js and cosmiconfig's .namerc.js)",
       ("*.config.js", "*.config.cjs", "*.config.mjs", "*.config.ts", "*.config.mts",
        "*.config.cts", ".*rc.js", ".*rc.cjs", ".*rc.mjs", ".*rc.ts")),
    _R("build_script", "package managers run scripts, hooks and shells they name "
       "(npm scripts on install and test, yarnPath, pnpm hooks, bun preloads)",
       ("package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".yarn/", ".pnpmfile.cjs",
        "bunfig.toml", "node_modules/.bin/")),
    _R("build_script", "git hook managers install their hooks into git",
       (".pre-commit-config.yaml", ".husky/", ".githooks/", ".git-hooks/", "lefthook.yml",
        ".lefthook.yml")),
    _R("build_script", "containers are built and started from them",
       ("Dockerfile", "Containerfile", "docker-compose*.yml", "docker-compose*.yaml",
        "compose.yml", "compose.yaml")),
    _R("build_script", "Rust, JVM, .NET, Ruby, Nix and Bazel builds run them (build "
       "scripts, runners and wrappers, toolchain paths, shell hooks)",
       ("build.rs", "Cargo.toml", ".cargo/config", ".cargo/config.toml", "rust-toolchain",
        "rust-toolchain.toml", "build.gradle", "build.gradle.kts", "settings.gradle",
        "settings.gradle.kts", "gradle.properties", "gradlew", "gradle/wrapper/", "pom.xml",
        "mvnw", ".mvn/", "Directory.Build.props", "Directory.Build.targets", "Gemfile",
        "*.gemspec", "flake.nix", "shell.nix", ".bazelrc")),
    _R("build_script", "build files that are programs: the tool evaluates them on every "
       "run (SCons and waf as Python, Snakemake's rules and Python, Bazel's Starlark whose "
       "repository rules and genrules run commands, Tilt's Starlark with local(), "
       "Vagrantfile, Brewfile and Podfile as Ruby, cpanfile as Perl, Mix as Elixir, sbt's "
       "build as Scala, gulp and grunt files as JavaScript)",
       ("SConstruct", "SConscript", "wscript", "Snakefile", "*.smk", "BUILD", "BUILD.bazel",
        "WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel", "*.bzl", "Tiltfile", "Vagrantfile",
        "Brewfile", "Podfile", "cpanfile", "mix.exs", "*.sbt", "project/*.scala",
        "gulpfile.*", "Gruntfile.*")),
    _R("build_script", "configure and install scripts a build runs: autoconf's configure "
       "and the inputs autoreconf and configure make it and the Makefiles from, Perl's "
       "Makefile.PL and Build.PL (cpanm runs them to install), Ant's build.xml (its exec "
       "tasks run programs), Earthly's RUN steps (LOCALLY on the host)",
       ("configure", "configure.ac", "Makefile.am", "Makefile.in", "Makefile.PL", "Build.PL",
        "build.xml", "Earthfile")),
    _R("build_script", "package and environment managers run the scripts and tasks they "
       "name or build what they list: Composer scripts on install, pipenv, pixi and deno "
       "tasks, hatch's custom build hook and env scripts, devbox init hooks, pip "
       "requirement files (a URL, VCS or local path is built and its setup runs; "
       "--index-url picks the server)",
       ("composer.json", "Pipfile", "pixi.toml", "deno.json", "deno.jsonc", "hatch_build.py",
        "hatch.toml", "devbox.json", "requirements*.txt", "requirements/*.txt")),
    _R("build_script", "TypeScript tools load the modules it names: ts-node the require, "
       "compiler and transpiler of its ts-node section, an editor's TypeScript server the "
       "language-service plugins of compilerOptions.plugins (from node_modules)",
       ("tsconfig.json", "tsconfig.*.json")),
    _R("build_script", "the hooks this repository publishes: pre-commit runs their entries "
       "in every repository that uses it as a hook source",
       (".pre-commit-hooks.yaml",)),
    _R("shell_startup", "shells run them when the repository is a home directory or a "
       "dotfiles checkout",
       (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
        ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".login",
        ".kshrc", ".mkshrc")),
    _R("runs_on_open", "a tool acts on them when it merely opens or enters the folder: "
       "direnv, mise/asdf hooks, editor tasks and language servers, dev containers' "
       "postCreateCommand, vim and Emacs local config",
       (".envrc", ".direnv/", ".mise/", ".mise.toml", "mise.toml", ".mise.local.toml",
        "mise.local.toml", ".tool-versions", ".vscode/", ".idea/", ".zed/", ".helix/",
        ".fleet/", ".theia/", "*.code-workspace", "*.sublime-project", ".devcontainer/",
        ".devcontainer.json", ".exrc", ".nvimrc", ".nvim.lua", ".vimrc", ".lvimrc",
        ".dir-locals.el", ".dir-locals-2.el"), True),
    _R("interpreter_startup", "an interpreter or debugger runs them at start-up from the "
       "current or a site directory",
       ("*.pth", "sitecustomize.py", "usercustomize.py", ".pdbrc", ".Rprofile", ".irbrc",
        ".pryrc", ".gdbinit", ".lldbinit")),
    _R("credentials", "credential and key stores a tool reads when the repository is a "
       "home directory",
       (".netrc", "_netrc", ".pypirc", ".git-credentials", ".ssh/", ".gnupg/", ".aws/",
        ".kube/", ".docker/config.json")),
    _R("user_config", "a dotfiles layout: programs read ~/.config (git, fish, nvim...)",
       ("/.config/",)),
)


def _read_only(rules: tuple[ReviewRule, ...]) -> tuple[str, ...]:
    """The paths of the ``read_only`` rules, relative to the root and without a trailing
    slash, none under another; patterns with a wildcard (``*.code-workspace``) have no
    one path to bind and are left to the review flags."""
    paths = [pattern.strip("/") for rule in rules if rule.read_only
             for pattern in rule.patterns if not any(c in pattern for c in "*?[")]
    return tuple(sorted(path for path in dict.fromkeys(paths)
                        if not any(path.startswith(other + "/") for other in paths)))


#: What a workspace-write child may not write in the user's checkout (besides ``.git``),
#: derived from the ``read_only`` review rules (the loader's places, harness settings,
#: what runs when the folder is opened): the next run, the user's harness or editor reads
#: them as the project's own, and in workspace-write no review stands between the
#: child's write and that read. Existing ones are bound read-only over the checkout
#: (:meth:`sandbox.workspaces.model.Workspace.mounts`), file tools refuse them whether
#: they exist or not, and one a command creates is moved out of the checkout before the
#: diff (:mod:`sandbox.workspaces.held`).
CHILD_READ_ONLY: tuple[str, ...] = _read_only(REVIEW_RULES)


def _regex(pattern: str) -> str:
    """A pattern (casefolded) as a regex over a ``/``-joined path (see the module docstring)."""
    top, under = pattern.startswith("/"), pattern.endswith("/")
    parts = [re.escape(part).replace(r"\*", "[^/]*")
             for part in pattern.strip("/").split("/")]
    return ("" if top else "(?:.*/)?") + "/".join(parts) + ("/.+" if under else "")


def _compile(rules: tuple[ReviewRule, ...]) -> tuple[dict[str, tuple[str, ...]],
                                                     dict[str, tuple[str, ...]],
                                                     tuple[tuple[str, re.Pattern[str]], ...]]:
    """The table as lookups: file names, directory names (any depth), and one regex per flag
    for the rest (wildcards, runs of components, patterns anchored at the top)."""
    names: dict[str, list[str]] = {}
    dirs: dict[str, list[str]] = {}
    others: dict[str, list[str]] = {}
    for rule in rules:
        for pattern in rule.patterns:
            folded = pattern.casefold()
            if "/" not in folded.rstrip("/") and "*" not in folded:
                table = dirs if folded.endswith("/") else names
                table.setdefault(folded.rstrip("/"), []).append(rule.flag)
            else:
                others.setdefault(rule.flag, []).append(_regex(folded))
    return ({k: tuple(v) for k, v in names.items()}, {k: tuple(v) for k, v in dirs.items()},
            tuple((flag, re.compile("|".join(f"(?:{r})" for r in regexes), re.DOTALL))
                  for flag, regexes in others.items()))


_NAMES, _DIRS, _OTHERS = _compile(REVIEW_RULES)
_FLAG_ORDER = {flag: i for i, flag in enumerate(dict.fromkeys(
    ("symlink", "executable", "mode_change", *(rule.flag for rule in REVIEW_RULES))))}


def is_git_alias(name: str) -> bool:
    """Whether one path component is ``.git`` under some filesystem's folding."""
    folded = "".join(ch for ch in name if ord(ch) not in _HFS_IGNORABLE).casefold()
    folded = folded.split(":", 1)[0].rstrip(" .")
    return folded in {".git", "git~1"}


def has_git_alias(path: str) -> bool:
    """Whether any component of a ``/``-separated relative path is a ``.git`` alias."""
    return any(is_git_alias(part) for part in path.split("/") if part)


def git_dir_signature(files: set[str], dirs: set[str]) -> tuple[str, ...]:
    """The names that make a directory holding these ``files`` and ``dirs`` a git
    directory (see the module docstring), sorted; empty when it is not one."""
    folded_files = {name.casefold() for name in files}
    folded_dirs = {name.casefold() for name in dirs}
    markers = folded_files & GIT_DIR_FILES
    containers = (folded_dirs & {"objects", "refs"}) | (folded_files & {"commondir"})
    if not markers or not containers or markers | containers == {"commondir"}:
        return ()
    return tuple(sorted(markers | containers))


def review_flags(path: str, *, old_mode: str | None, new_mode: str | None) -> tuple[str, ...]:
    """The review flags of one changed path (empty when nothing needs a second look)."""
    flags: list[str] = []
    parts = [part.casefold() for part in PurePosixPath(path).parts]
    name = parts[-1] if parts else ""
    if new_mode == "120000":
        flags.append("symlink")
    if new_mode == "100755" and old_mode != "100755":
        flags.append("executable")
    if old_mode and new_mode and old_mode != new_mode:
        flags.append("mode_change")
    found = set(_NAMES.get(name, ()))
    for part in parts[:-1]:
        found.update(_DIRS.get(part, ()))
    joined = "/".join(parts)
    found.update(flag for flag, regex in _OTHERS if flag not in found
                 and regex.fullmatch(joined))
    flags += sorted(found - set(flags), key=_FLAG_ORDER.__getitem__)
    return tuple(flags)


def is_under(path: str, roots: Collection[str]) -> bool:
    """Whether the relative ``path`` is one of ``roots`` or lies inside one (its ``/``
    prefixes are looked up, so a set of roots costs one lookup per level)."""
    if path in roots:
        return True
    slash = path.rfind("/")
    while slash > 0:
        if path[:slash] in roots:
            return True
        slash = path.rfind("/", 0, slash)
    return False
