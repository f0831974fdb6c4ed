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
flag needs an explicit ``--yes`` before ``corral apply`` merges it:

``symlink`` / ``executable`` / ``mode_change``
    a new symlink, a new executable bit, any mode change.
``agent_config``
    files harnesses read as instructions or settings (``.claude/``,
    ``.cursor/``, ``.vscode/``, ``AGENTS.md``, ``.mcp.json``, ...).
``ci_config``
    CI pipelines (``.github/workflows/``, ``.github/actions/``,
    ``.gitlab-ci.yml``, ...): they run with the repository's secrets.
``git_metadata``
    ``.gitattributes`` (selects filters, diff and merge drivers, eol),
    ``.gitmodules`` (submodule URLs), ``.gitignore`` (hides files from
    review), ``.gitconfig``, ``.git-credentials``, ``.mailmap``.
``build_script``
    what a build, test or install runs: ``Makefile``, ``package.json``,
    ``setup.py``, ``pyproject.toml``, ``conftest.py``, ``tox.ini``,
    ``Cargo.toml``, ``build.rs``, ``.cargo/config(.toml)`` (runners, rustc
    wrappers), ``rust-toolchain(.toml)`` (a toolchain ``path``),
    ``.npmrc``/``.yarnrc(.yml)``/``.pnpmfile.cjs``/``.yarn/`` (script shell,
    ``yarnPath``, install hooks), ``node_modules/.bin/``, Gradle and Maven
    wrappers, ``Directory.Build.props``/``.targets``, ``.bazelrc``,
    ``Taskfile.yml``, pre-commit, husky and lefthook hooks.
``shell_startup``
    shell start-up files (``.bashrc``, ``.bash_profile``, ``.profile``,
    ``.zshrc``, ``.zshenv``, ...): they run when the repository is a home
    directory or a dotfiles checkout.
``runs_on_open``
    files a tool acts on when it merely opens or enters the folder: direnv
    (``.envrc``, ``.direnv/``), mise/asdf (``.mise.toml``, ``mise.toml``,
    ``.tool-versions``: hooks, env scripts, plugin installs), editors
    (``.vscode/`` tasks with ``runOn: folderOpen``, ``.idea/``, ``.zed/``,
    ``.helix/`` language servers, ``*.code-workspace``, vim ``.exrc``/
    ``.nvimrc``/``.nvim.lua``, Emacs ``.dir-locals.el``) and dev containers
    (``.devcontainer/``, ``.devcontainer.json``: ``postCreateCommand``).
``interpreter_startup``
    files an interpreter runs at start-up from the current or a site
    directory: ``*.pth``, ``sitecustomize.py``, ``usercustomize.py``,
    ``.Rprofile``, ``.irbrc``, ``.pryrc``, ``.gdbinit``, ``.lldbinit``.
``credentials``
    credential and key stores a tool reads when the repository is a home
    directory: ``.netrc``, ``.pypirc``, ``.ssh/``, ``.gnupg/``, ``.aws/``,
    ``.kube/``, ``.docker/config.json``.
``user_config``
    a ``.config/`` directory at the top of the repository (a dotfiles
    layout: ``.config/git/config``, ``.config/fish/``, ``.config/nvim/``).

Deliberately not flagged: ``.editorconfig`` (formatting only),
``.nvmrc``/``.node-version``/``.python-version``/``.ruby-version`` (they pick
an installed or official release, never a program from the repository).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import PurePosixPath

__all__ = ["GIT_DIR_CONTAINERS", "GIT_DIR_FILES", "git_dir_signature", "has_git_alias",
           "is_git_alias", "is_under", "review_flags"]

# Code points HFS+ ignores when comparing names (the list git's is_hfs_dotgit uses).
_HFS_IGNORABLE = frozenset(
    [0x200C, 0x200D, 0x200E, 0x200F, 0xFEFF, *range(0x202A, 0x202F), *range(0x206A, 0x2070)]
)

#: Files that make a directory a git directory next to one of GIT_DIR_CONTAINERS (casefolded).
GIT_DIR_FILES = frozenset({"head", "config", "commondir", "gitdir", "packed-refs"})
#: What git's discovery needs besides HEAD: object and ref stores, or a common dir.
GIT_DIR_CONTAINERS = frozenset({"objects", "refs", "commondir"})

_AGENT_CONFIG_DIRS = frozenset({
    ".claude", ".cursor", ".codex", ".gemini", ".opencode", ".vscode", ".idea",
    ".devcontainer", ".agents", ".agent", ".zuno", ".pi", ".ngn", ".windsurf", ".continue",
})
_AGENT_CONFIG_FILES = frozenset({
    ".mcp.json", "agents.md", "claude.md", "gemini.md", ".cursorrules", ".windsurfrules",
    "copilot-instructions.md",
})
_CI_DIRS = (".github/workflows/", ".github/actions/", ".circleci/", ".buildkite/", ".gitlab/")
_CI_FILES = frozenset({
    ".gitlab-ci.yml", ".travis.yml", "jenkinsfile", "azure-pipelines.yml",
    "bitbucket-pipelines.yml", ".drone.yml",
})
_GIT_METADATA = frozenset({
    ".gitattributes", ".gitmodules", ".gitignore", ".gitconfig", ".git-credentials", ".mailmap",
})
_BUILD_FILES = frozenset({
    "makefile", "gnumakefile", "justfile", "package.json", "setup.py", "setup.cfg",
    "pyproject.toml", "conftest.py", "noxfile.py", "tox.ini", "pytest.ini",
    ".pre-commit-config.yaml", "build.gradle", "build.gradle.kts", "settings.gradle",
    "settings.gradle.kts", "gradle.properties", "gradlew", "pom.xml", "mvnw", "cargo.toml",
    "build.rs", "rust-toolchain", "rust-toolchain.toml", "cmakelists.txt", "rakefile",
    "gemfile", "dockerfile", "docker-compose.yml", ".npmrc", ".yarnrc", ".yarnrc.yml",
    ".pnpmfile.cjs", "meson.build", "directory.build.props", "directory.build.targets",
    ".bazelrc", "taskfile.yml", "taskfile.yaml", "lefthook.yml", ".lefthook.yml",
})
_BUILD_DIRS = frozenset({".husky", ".githooks", ".mvn", ".yarn"})
_BUILD_PREFIXES = ("node_modules/.bin/", ".cargo/config", "gradle/wrapper/")
_SHELL_STARTUP = frozenset({
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
    ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".login", ".kshrc", ".mkshrc",
})
_RUNS_ON_OPEN_FILES = frozenset({
    ".envrc", ".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml",
    ".tool-versions", ".devcontainer.json", ".exrc", ".nvimrc", ".nvim.lua", ".vimrc",
    ".lvimrc", ".dir-locals.el", ".dir-locals-2.el",
})
_RUNS_ON_OPEN_DIRS = frozenset({
    ".direnv", ".mise", ".vscode", ".idea", ".devcontainer", ".zed", ".helix", ".fleet",
    ".theia",
})
_RUNS_ON_OPEN_SUFFIXES = (".code-workspace", ".sublime-project")
_INTERPRETER_STARTUP = frozenset({
    "sitecustomize.py", "usercustomize.py", ".rprofile", ".irbrc", ".pryrc", ".gdbinit",
    ".lldbinit",
})
_CREDENTIAL_FILES = frozenset({".netrc", "_netrc", ".pypirc", ".git-credentials"})
_CREDENTIAL_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".kube"})


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
    dirs = set(parts[:-1])
    lowered = "/".join(parts)
    if new_mode == "120000":
        flags.append("symlink")
    if new_mode == "100755" and old_mode != "100755":
        flags.append("executable")
    if old_mode and new_mode and old_mode != new_mode:
        flags.append("mode_change")
    if (parts and parts[0] in _AGENT_CONFIG_DIRS) or name in _AGENT_CONFIG_FILES:
        flags.append("agent_config")
    if name in _CI_FILES or any(lowered.startswith(prefix) for prefix in _CI_DIRS):
        flags.append("ci_config")
    if name in _GIT_METADATA:
        flags.append("git_metadata")
    if (name in _BUILD_FILES or dirs & _BUILD_DIRS
            or any(lowered.startswith(p) or f"/{p}" in lowered for p in _BUILD_PREFIXES)):
        flags.append("build_script")
    if name in _SHELL_STARTUP:
        flags.append("shell_startup")
    if (name in _RUNS_ON_OPEN_FILES or dirs & _RUNS_ON_OPEN_DIRS
            or name.endswith(_RUNS_ON_OPEN_SUFFIXES)):
        flags.append("runs_on_open")
    if name in _INTERPRETER_STARTUP or name.endswith(".pth"):
        flags.append("interpreter_startup")
    if (name in _CREDENTIAL_FILES or dirs & _CREDENTIAL_DIRS
            or lowered.endswith(".docker/config.json")):
        flags.append("credentials")
    if len(parts) > 1 and parts[0] == ".config":
        flags.append("user_config")
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
