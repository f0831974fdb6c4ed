"""What `corral apply` makes a reviewer look at (review flags) and what it refuses outright
(git directories, gitdir pointers), judged from the patch alone."""

from __future__ import annotations

import pytest

from sandbox.names import git_dir_signature, review_flags


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
                                  "docs/config.md", "config/settings.yaml", "sub/.config/x"])
def test_harmless_files_are_not_flagged(path: str) -> None:
    assert review_flags(path, old_mode=None, new_mode="100644") == ()


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
