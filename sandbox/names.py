"""Names that need care: every spelling of ``.git``, and paths a reviewer must see.

:func:`is_git_alias` recognises ``.git`` under every spelling a filesystem may
fold to it (threats B1.5): any case (``.GIT``), NTFS trailing dots and spaces
(``.git.``), NTFS alternate streams (``.git::$INDEX_ALLOCATION``), the 8.3
short name (``GIT~1``), and HFS+ ignorable code points (``.g\\u200cit``). Writes to
such a name are refused by the file API and such paths are left out of every
diff. :func:`review_flags` marks changed paths that run code or steer agents
when the parent later opens the repository (threats B2.15, B3.19, B8.41).
"""

from __future__ import annotations

from pathlib import PurePosixPath

__all__ = ["has_git_alias", "is_git_alias", "review_flags"]

# Code points HFS+ ignores when comparing names (the list git's is_hfs_dotgit uses).
_HFS_IGNORABLE = frozenset(
    [0x200C, 0x200D, 0x200E, 0x200F, 0xFEFF, *range(0x202A, 0x202F), *range(0x206A, 0x2070)]
)

_AGENT_CONFIG_DIRS = frozenset({
    ".claude", ".cursor", ".codex", ".gemini", ".opencode", ".vscode", ".idea",
    ".devcontainer", ".agents", ".agent", ".zuno", ".pi", ".ngn", ".windsurf", ".continue",
})
_AGENT_CONFIG_FILES = frozenset({
    ".mcp.json", "agents.md", "claude.md", "gemini.md", ".cursorrules", ".windsurfrules",
    "copilot-instructions.md",
})
_CI_DIRS = (".github/workflows/", ".circleci/", ".buildkite/", ".gitlab/")
_CI_FILES = frozenset({
    ".gitlab-ci.yml", ".travis.yml", "jenkinsfile", "azure-pipelines.yml",
    "bitbucket-pipelines.yml", ".drone.yml",
})
_GIT_METADATA = frozenset({".gitattributes", ".gitmodules"})
_BUILD_FILES = frozenset({
    "makefile", "gnumakefile", "justfile", "package.json", "setup.py", "setup.cfg",
    "pyproject.toml", "conftest.py", "noxfile.py", "tox.ini", ".envrc",
    ".pre-commit-config.yaml", "build.gradle", "build.gradle.kts", "pom.xml", "cargo.toml",
    "build.rs", "cmakelists.txt", "rakefile", "gemfile", "dockerfile", "docker-compose.yml",
    ".npmrc", ".yarnrc", ".yarnrc.yml", "meson.build",
})
_BUILD_DIRS = frozenset({".husky", ".githooks"})


def is_git_alias(name: str) -> bool:
    """Whether one path component is ``.git`` under some filesystem's folding."""
    folded = "".join(ch for ch in name if ord(ch) not in _HFS_IGNORABLE).casefold()
    folded = folded.split(":", 1)[0].rstrip(" .")
    return folded in {".git", "git~1"}


def has_git_alias(path: str) -> bool:
    """Whether any component of a ``/``-separated relative path is a ``.git`` alias."""
    return any(is_git_alias(part) for part in path.split("/") if part)


def review_flags(path: str, *, old_mode: str | None, new_mode: str | None) -> tuple[str, ...]:
    """The review flags of one changed path (empty when nothing needs a second look)."""
    flags: list[str] = []
    parts = [part.casefold() for part in PurePosixPath(path).parts]
    name = parts[-1] if parts else ""
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
    if name in _BUILD_FILES or any(part in _BUILD_DIRS for part in parts):
        flags.append("build_script")
    return tuple(flags)
