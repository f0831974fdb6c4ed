"""What `corral apply` makes a reviewer look at (review flags) and what it refuses outright
(git directories, gitdir pointers), judged from the patch alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.apply import inspect_patch
from sandbox.names import REVIEW_RULES, git_dir_signature, review_flags

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def new_file(path: str, body: str = "x\n", mode: str = "100644") -> str:
    lines = body.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n"
            + "".join(f"+{line}\n" for line in lines))


@pytest.mark.parametrize(("path", "flag"), [
    (".bashrc", "shell_startup"), ("home/.zshenv", "shell_startup"),
    (".profile", "shell_startup"), (".bash_profile", "shell_startup"),
    (".envrc", "runs_on_open"), (".direnv/lib.sh", "runs_on_open"),
    (".mise.toml", "runs_on_open"), (".tool-versions", "runs_on_open"),
    (".vscode/tasks.json", "runs_on_open"), (".vscode/settings.json", "runs_on_open"),
    (".vscode/launch.json", "runs_on_open"), (".idea/workspace.xml", "runs_on_open"),
    (".devcontainer/devcontainer.json", "runs_on_open"), ("a.code-workspace", "runs_on_open"),
    (".nvim.lua", "runs_on_open"), (".dir-locals.el", "runs_on_open"),
    ("lib/evil.pth", "interpreter_startup"), ("sitecustomize.py", "interpreter_startup"),
    ("src/usercustomize.py", "interpreter_startup"), (".Rprofile", "interpreter_startup"),
    (".netrc", "credentials"), (".pypirc", "credentials"), (".ssh/config", "credentials"),
    (".gnupg/gpg.conf", "credentials"), (".docker/config.json", "credentials"),
    (".config/git/config", "user_config"), (".config/fish/config.fish", "user_config"),
    ("Makefile", "build_script"), (".npmrc", "build_script"),
    ("node_modules/.bin/eslint", "build_script"), (".cargo/config.toml", "build_script"),
    ("sub/.cargo/config", "build_script"), ("rust-toolchain.toml", "build_script"),
    (".yarnrc.yml", "build_script"), (".pnpmfile.cjs", "build_script"),
    ("gradle/wrapper/gradle-wrapper.properties", "build_script"),
    (".gitattributes", "git_metadata"), (".gitmodules", "git_metadata"),
    (".gitignore", "git_metadata"), (".github/actions/x/action.yml", "ci_config"),
])
def test_files_that_run_code_when_a_tool_opens_the_folder_are_flagged(path: str,
                                                                      flag: str) -> None:
    assert flag in review_flags(path, old_mode=None, new_mode="100644")


@pytest.mark.parametrize("path", [".editorconfig", ".nvmrc", ".python-version", "src/app.py",
                                  "docs/config.md", "config/settings.yaml", "sub/.config/x",
                                  "docs/makefile-guide.md", "src/config.json",
                                  "src/app.config.json", "docs/github/workflows.md",
                                  "docs/claude/notes.md", "src/package.py", "Makefile.md",
                                  "notes/conftest.txt", "src/setup.pyc"])
def test_harmless_files_are_not_flagged(path: str) -> None:
    assert review_flags(path, old_mode=None, new_mode="100644") == ()


# Issue 16: what a reviewer must see, wherever it lies. Each path is checked at the top of
# the repository and nested (``pkg/sub/...``): tools read nested copies too (a monorepo
# package's .claude/settings.json hooks, its eslint.config.js, a nested conftest.py).
ISSUE_16 = [
    (".claude/settings.json", "agent_config"), (".claude/agents/a.md", "agent_config"),
    (".codex/config.toml", "agent_config"), (".cursor/mcp.json", "agent_config"),
    (".cursor/rules/r.mdc", "agent_config"), (".gemini/settings.json", "agent_config"),
    (".opencode/plugin/p.js", "agent_config"), (".vscode/mcp.json", "agent_config"),
    (".vscode/tasks.json", "runs_on_open"), (".idea/workspace.xml", "runs_on_open"),
    (".devcontainer/devcontainer.json", "runs_on_open"), (".mcp.json", "agent_config"),
    ("AGENTS.md", "agent_config"), ("CLAUDE.md", "agent_config"),
    (".github/workflows/ci.yml", "ci_config"), (".github/actions/a/action.yml", "ci_config"),
    (".github/CODEOWNERS", "ci_config"),
    ("eslint.config.js", "build_script"), ("vite.config.ts", "build_script"),
    ("vitest.config.mts", "build_script"), ("jest.config.cjs", "build_script"),
    ("webpack.config.js", "build_script"), ("rollup.config.mjs", "build_script"),
    ("next.config.js", "build_script"), ("tailwind.config.ts", "build_script"),
    ("prettier.config.cjs", "build_script"), ("x.config.cts", "build_script"),
    (".eslintrc.js", "build_script"), (".eslintrc.cjs", "build_script"),
    (".prettierrc.mjs", "build_script"), ("conftest.py", "build_script"),
    ("setup.py", "build_script"), ("noxfile.py", "build_script"), ("tox.ini", "build_script"),
    ("Makefile", "build_script"), ("GNUmakefile", "build_script"),
    ("rules.mk", "build_script"), ("justfile", "build_script"), ("Justfile", "build_script"),
    ("Taskfile.yml", "build_script"), ("package.json", "build_script"),
    ("pyproject.toml", "build_script"), ("setup.cfg", "build_script"),
    (".pre-commit-config.yaml", "build_script"), (".husky/pre-commit", "build_script"),
    (".git-hooks/pre-push", "build_script"), (".githooks/pre-push", "build_script"),
    ("Dockerfile", "build_script"), ("docker-compose.yml", "build_script"),
    ("docker-compose.dev.yaml", "build_script"), ("compose.yaml", "build_script"),
    (".npmrc", "build_script"), (".yarnrc", "build_script"), (".yarnrc.yml", "build_script"),
    ("sitecustomize.py", "interpreter_startup"), ("usercustomize.py", "interpreter_startup"),
    ("evil.pth", "interpreter_startup"), ("build.rs", "build_script"),
    ("Cargo.toml", "build_script"), (".envrc", "runs_on_open"),
]


@pytest.mark.parametrize("depth", ["", "pkg/sub/"])
@pytest.mark.parametrize(("path", "flag"), ISSUE_16)
def test_files_that_run_code_or_steer_agents_are_flagged_at_any_depth(path: str, flag: str,
                                                                      depth: str) -> None:
    assert flag in review_flags(depth + path, old_mode=None, new_mode="100644")


def _example(pattern: str) -> str:
    """A path the pattern must match: wildcards filled in, a directory given a file."""
    return pattern.lstrip("/").replace("*", "x") + ("f" if pattern.endswith("/") else "")


@pytest.mark.parametrize(("pattern", "flag"), [
    pytest.param(pattern, rule.flag, id=f"{rule.flag}:{pattern}")
    for rule in REVIEW_RULES for pattern in rule.patterns])
def test_every_pattern_of_the_table_flags_its_paths(pattern: str, flag: str) -> None:
    """Every row of the one table, at the top and nested (``/``-anchored rows: top only)."""
    path = _example(pattern)
    assert flag in review_flags(path, old_mode=None, new_mode="100644")
    assert flag in review_flags(path.upper(), old_mode=None, new_mode="100644")
    nested = review_flags(f"pkg/sub/{path}", old_mode=None, new_mode="100644")
    assert (flag in nested) is not pattern.startswith("/")


def test_the_readme_lists_the_table() -> None:
    """The security page's list of review flags is the code's table, row for row."""
    rows = ["| " + ", ".join(f"`{p}`" for p in rule.patterns) + f" | {rule.why} | `{rule.flag}` |"
            for rule in REVIEW_RULES]
    text = SECURITY.read_text(encoding="utf-8")
    start = text.index("| paths (any depth; `/` first: top only) | why a reviewer looks | flag |")
    listed = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    assert listed == rows


@pytest.mark.parametrize(("files", "dirs", "is_git_dir"), [
    ({"HEAD", "config"}, {"objects", "refs"}, True),
    ({"HEAD"}, {"objects", "refs"}, True),
    ({"config"}, {"refs"}, True),
    ({"head"}, {"OBJECTS"}, True),  # a case-folding filesystem
    ({"HEAD", "commondir"}, set(), True),
    ({"packed-refs"}, {"refs"}, True),
    ({"gitdir"}, {"objects"}, True),
    ({"HEAD"}, set(), False),
    ({"commondir"}, set(), False),
    ({"README.md", "config"}, {"src"}, False),
    (set(), {"objects", "refs"}, False),
])
def test_git_dir_signature_follows_git_discovery(files: set[str], dirs: set[str],
                                                 is_git_dir: bool) -> None:
    assert bool(git_dir_signature(files, dirs)) is is_git_dir


def test_a_patch_that_builds_a_git_directory_is_refused_without_the_flag() -> None:
    patch = (new_file("docs/r/HEAD", "ref: refs/heads/main") + new_file("docs/r/config", "[core]")
             + new_file("docs/r/refs/heads/.keep", "keep"))
    problems = inspect_patch(patch).problems
    assert any(p.startswith("docs/r: the patch makes it a git directory") for p in problems)
    assert inspect_patch(patch, allow_git_dirs=True).problems == []


@pytest.mark.parametrize("body", ["gitdir: /tmp/evil", "  GITDIR:../x"])
def test_a_file_starting_with_gitdir_is_refused_without_the_flag(body: str) -> None:
    problems = inspect_patch(new_file("notes/pointer", body + "\nmore")).problems
    assert any("starts with 'gitdir:'" in p for p in problems)
    assert inspect_patch(new_file("notes/pointer", "see gitdir: below")).problems == []
    changed = ("diff --git a/p b/p\nindex 1111111..2222222 100644\n--- a/p\n+++ b/p\n"
               "@@ -1,2 +1,2 @@\n-old\n+" + body + "\n keep\n")
    assert any("gitdir:" in p for p in inspect_patch(changed).problems)
    later = ("diff --git a/p b/p\nindex 1111111..2222222 100644\n--- a/p\n+++ b/p\n"
             "@@ -5,2 +5,2 @@\n-old\n+" + body + "\n keep\n")
    assert inspect_patch(later).problems == []  # not the first line: git never reads it
