"""The state dir never lies where a child writes: the placement rule, unit by unit.

corral's state dir holds every sandbox's private git state, the worktrees, the
captured diffs and the runs ledger. Inside a git working tree (HOME kept in git,
``.local/`` ignored), a workspace-write child could rewrite another run's
``diff.patch`` that ``corral apply`` later merges. :func:`check_state_dir`
refuses such a place, looking at the filesystem (a ``.git`` entry on the way up,
a git directory) rather than asking git, with and without symlinks resolved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sbx_support import make_repo

from policies.contract import SandboxMode
from sandbox.config import HostConfig
from sandbox.errors import SandboxConfigError
from sandbox.factory import open_sandbox
from sandbox.state import StateDirMisplaced, check_state_dir, default_state_root
from tests.backends import git


def refused(path: Path, **places: list[Path]) -> StateDirMisplaced:
    with pytest.raises(StateDirMisplaced) as caught:
        check_state_dir(path, **places)
    return caught.value


def test_a_state_dir_outside_every_repository_is_accepted(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    check_state_dir(tmp_path / "state")  # need not exist yet
    check_state_dir(tmp_path / "state" / "runs" / "x", repositories=[repo], workspaces=[repo])
    # A working tree inside the state dir (the worktrees corral makes) is fine.
    make_repo(tmp_path / "state" / "worktrees" / "corral-0")
    check_state_dir(tmp_path / "state")


@pytest.mark.parametrize("inside", ["", ".local/state/corral", "a/b/c/d/not/yet/made"])
def test_a_state_dir_in_a_working_tree_is_refused_at_any_depth(tmp_path: Path,
                                                                inside: str) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text(".local/\na/\n")  # whatever git says about it
    state = repo / inside if inside else repo
    error = refused(state)
    assert isinstance(error, SandboxConfigError) and error.exit_code == 2
    assert error.code == "state_dir_misplaced"
    assert error.context["state dir"] == str(state)
    assert error.context["inside"] == str(repo)
    assert str(state) in error.message and "working tree" in error.message
    assert error.hint is not None and "CORRAL_STATE_DIR" in error.hint


def test_a_symlink_into_a_repository_is_followed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "ignored").mkdir()
    link = tmp_path / "state-link"
    link.symlink_to(repo / "ignored")
    error = refused(link / "corral")
    assert error.context["inside"] == str(repo)
    assert error.context["resolved"] == str(repo / "ignored" / "corral")


def test_a_symlink_inside_a_repository_counts_too(tmp_path: Path) -> None:
    """A symlink in a working tree pointing out is one a child could swap for its own dir."""
    repo = make_repo(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "state").symlink_to(outside)
    assert refused(repo / "state" / "corral").context["inside"] == str(repo)


def test_a_gitdir_pointer_file_marks_a_working_tree(tmp_path: Path) -> None:
    """Linked worktrees and submodules have a ``.git`` file, not a directory."""
    repo = make_repo(tmp_path / "repo")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    assert (linked / ".git").is_file()
    assert refused(linked / "state").context["inside"] == str(linked)
    # A broken or foreign pointer still marks a tree a tool might treat as one.
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / ".git").write_text("gitdir: /nonexistent\n")
    refused(odd / "state")


def test_bare_repositories_and_git_dirs_are_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    error = refused(bare / "corral-state")
    assert error.context["inside"] == str(bare) and "git directory" in error.message
    check_state_dir(tmp_path / "next-to-bare")
    repo = make_repo(tmp_path / "repo")
    refused(repo / ".git" / "corral")


def test_the_repository_being_run_on_is_refused_even_without_git(tmp_path: Path) -> None:
    plain = tmp_path / "plain"  # not a repository, yet the place children work
    plain.mkdir()
    error = refused(plain / "state", repositories=[plain])
    assert "repository being run on" in error.message
    assert refused(plain, repositories=[plain]).context["inside"] == str(plain)


def test_a_writable_workspace_that_contains_the_state_dir_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "deep").mkdir(parents=True)
    error = refused(workspace / "deep" / "state", workspaces=[workspace])
    assert "workspace a child may write" in error.message
    link = tmp_path / "ws-link"
    link.symlink_to(workspace)
    refused(link / "state", workspaces=[workspace])
    refused(workspace / "state", workspaces=[link])


def test_one_function_names_the_state_dir(tmp_path: Path) -> None:
    home = str(tmp_path / "h")
    assert default_state_root({"HOME": home}) == Path(home) / ".local/state/corral"
    assert default_state_root({"HOME": home, "XDG_STATE_HOME": str(tmp_path / "x")}) == \
        tmp_path / "x" / "corral"
    # A relative XDG_STATE_HOME is ignored (XDG spec); CORRAL_STATE_DIR wins over both.
    assert default_state_root({"HOME": home, "XDG_STATE_HOME": "rel"}) == \
        Path(home) / ".local/state/corral"
    assert default_state_root({"HOME": home, "XDG_STATE_HOME": str(tmp_path / "x"),
                               "CORRAL_STATE_DIR": str(tmp_path / "c")}) == tmp_path / "c"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        assert default_state_root({"CORRAL_STATE_DIR": "rel/../s"}) == tmp_path / "s"


def test_open_sandbox_refuses_a_state_dir_in_the_repository_before_creating_anything(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("state/\n")
    with pytest.raises(StateDirMisplaced):
        open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.WORKTREE,
                     state_root=repo / "state")
    assert not (repo / "state").exists()
    # The same for a state dir in another working tree than the one run on.
    other = make_repo(tmp_path / "other")
    with pytest.raises(StateDirMisplaced):
        open_sandbox(HostConfig(), repo=repo, mode=SandboxMode.READ_ONLY,
                     state_root=other / "s")
    assert not (other / "s").exists()
